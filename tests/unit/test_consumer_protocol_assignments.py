"""Members' assignments as the admin client reads them from DescribeGroups: the consumer
protocol's Assignment from hand-built bytes and from kafka-python's independent codec (both
ways, every version), newer versions read with the highest known layout, bad bytes refused with
a DecodeError, and empty bytes (a member not yet synced) shown as no partitions."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment as KafkaPythonAssignment,
)

from epochlog.client.group_admin_protocol import read_describe_groups
from epochlog.client.metadata import TopicPartition
from epochlog.protocol import messages as m
from epochlog.protocol.consumer_protocol import Assignment, decode_assignment, encode_assignment
from epochlog.protocol.errors import DecodeError


def string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def int32s(*values: int) -> bytes:
    return struct.pack(">i", len(values)) + b"".join(struct.pack(">i", v) for v in values)


# v0: [AssignedPartitions: Topic, [Partitions]], UserData (nullable bytes)
ASSIGNMENT_V0 = (
    struct.pack(">h", 0)
    + struct.pack(">i", 2)
    + string("clicks")
    + int32s(0, 2)
    + string("views")
    + int32s(1)
    + struct.pack(">i", -1)  # null user data
)
PARTITIONS = (("clicks", 0), ("clicks", 2), ("views", 1))


def test_an_assignment_is_read_from_hand_built_bytes() -> None:
    assert decode_assignment(ASSIGNMENT_V0) == Assignment(PARTITIONS)


def test_a_newer_assignment_version_is_read_with_the_highest_known_layout() -> None:
    # Kafka: a version above the highest known is parsed with the current format; new versions
    # may only append fields, so what follows the known ones is ignored.
    newer = struct.pack(">h", 9) + ASSIGNMENT_V0[2:] + b"\x00\x07future fields"
    assert decode_assignment(newer) == Assignment(PARTITIONS)


@pytest.mark.parametrize(
    "data",
    [b"\x00", struct.pack(">h", -1) + ASSIGNMENT_V0[2:], ASSIGNMENT_V0[:9], ASSIGNMENT_V0[:-2]],
    ids=["too short for a version", "negative version", "truncated topic", "truncated user data"],
)
def test_bad_assignment_bytes_are_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError, match="ConsumerProtocolAssignment"):
        decode_assignment(data)


def test_kafka_python_reads_our_assignments_and_we_read_its() -> None:
    ours = encode_assignment(Assignment(PARTITIONS, b"user"))
    theirs = KafkaPythonAssignment.decode(ours)
    assert theirs.version == 3 and theirs.user_data == b"user"
    assert [(t.topic, list(t.partitions)) for t in theirs.assigned_partitions] == [
        ("clicks", [0, 2]),
        ("views", [1]),
    ]
    for version in range(4):
        encoded = KafkaPythonAssignment(version, [("t", [3, 1])], None).encode()
        assert decode_assignment(encoded) == Assignment((("t", 3), ("t", 1)))


def described(protocol_type: str, assignment: bytes) -> m.DescribeGroupsResponse:
    R = m.DescribeGroupsResponse
    member = R.DescribedGroupMember(
        member_id="m-1",
        client_id="app",
        client_host="/10.0.0.7",
        member_metadata=b"",
        member_assignment=assignment,
    )
    group = R.DescribedGroup(
        group_id="g",
        group_state="Stable" if assignment else "CompletingRebalance",
        protocol_type=protocol_type,
        protocol_data="range",
        members=[member],
    )
    return R(groups=[group])


def test_describe_shows_a_consumers_assignment_sorted_and_nothing_before_sync() -> None:
    reply = read_describe_groups(described("consumer", ASSIGNMENT_V0), None)
    assert reply["g"].value.members[0].assignment == [TopicPartition(*tp) for tp in PARTITIONS]
    not_synced = read_describe_groups(described("consumer", b""), None)
    assert not_synced["g"].value.members[0].assignment == []


def test_describe_leaves_other_protocols_assignments_as_bytes() -> None:
    reply = read_describe_groups(described("connect", b"\x00\x01whatever"), None)
    (member,) = reply["g"].value.members
    assert member.assignment == [] and member.assignment_bytes == b"\x00\x01whatever"
