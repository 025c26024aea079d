"""The consumer protocol's assignment and subscription, read as Kafka's ConsumerProtocol reads them:
hand-built bytes, kafka-python's independent codec both ways, newer versions read with the
highest known layout, and bad bytes refused with a DecodeError."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment as KafkaPythonAssignment,
)
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolSubscription as KafkaPythonSubscription,
)

from epochlog.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
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


def test_an_assignment_is_read_from_hand_built_bytes() -> None:
    assert decode_assignment(ASSIGNMENT_V0) == Assignment({"clicks": (0, 2), "views": (1,)})
    assert decode_assignment(ASSIGNMENT_V0).topic_partitions() == [
        ("clicks", 0),
        ("clicks", 2),
        ("views", 1),
    ]


def test_a_newer_assignment_version_is_read_with_the_highest_known_layout() -> None:
    # Kafka: a version above the highest known is parsed with the current format; new versions
    # may only append fields, so what follows the known ones is ignored.
    newer = struct.pack(">h", 9) + ASSIGNMENT_V0[2:] + b"\x00\x07future fields"
    assert decode_assignment(newer) == Assignment({"clicks": (0, 2), "views": (1,)})


def test_an_empty_assignment_is_no_partitions() -> None:
    # DescribeGroups shows members between JoinGroup and SyncGroup with empty assignment bytes.
    assert decode_assignment(b"") == Assignment({})
    assert decode_assignment(None) == Assignment({})


@pytest.mark.parametrize(
    "data",
    [b"\x00", struct.pack(">h", -1) + ASSIGNMENT_V0[2:], ASSIGNMENT_V0[:9], ASSIGNMENT_V0[:-2]],
    ids=["too short for a version", "negative version", "truncated topic", "truncated user data"],
)
def test_bad_assignment_bytes_are_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError, match="ConsumerProtocolAssignment"):
        decode_assignment(data)


def test_kafka_python_reads_our_assignment_and_we_read_its() -> None:
    ours = encode_assignment({"views": [1], "clicks": [2, 0]}, b"user")
    theirs = KafkaPythonAssignment.decode(ours)
    assert theirs.version == 3
    assert sorted((t.topic, list(t.partitions)) for t in theirs.assigned_partitions) == [
        ("clicks", [0, 2]),
        ("views", [1]),
    ]
    assert theirs.user_data == b"user"
    for version in range(4):
        encoded = KafkaPythonAssignment(version, [("t", [3, 1])], None).encode()
        assert decode_assignment(encoded) == Assignment({"t": (1, 3)})


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_subscription_round_trips_at_every_version(version: int) -> None:
    full = Subscription(("a", "b"), b"u", {"a": (0, 1)}, generation_id=7, rack_id="rack-1")
    expected = Subscription(
        full.topics,
        full.user_data,
        full.owned_partitions if version >= 1 else None,
        full.generation_id if version >= 2 else -1,
        full.rack_id if version >= 3 else None,
    )
    assert decode_subscription(encode_subscription(expected, version)) == expected


def test_kafka_python_subscriptions_are_read() -> None:
    encoded = KafkaPythonSubscription(1, ["a", "b"], b"", [("a", [0])]).encode()
    assert decode_subscription(encoded) == Subscription(("a", "b"), b"", {"a": (0,)})
