"""The consumer protocol's Subscription and Assignment bytes: hand-built golden bytes, Kafka's
reading rules (newer versions, trailing bytes), and two independent codecs reading ours and
writing what we read: kafka-python's JSON-driven one (its own copy of Kafka's JSON) and
aiokafka's hand-written v0 layout, which reads the start of every later version."""

from __future__ import annotations

import struct

import pytest
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from epochlog.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from epochlog.protocol.errors import DecodeError


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def string(s: str) -> bytes:
    return i16(len(s)) + s.encode()


SUBSCRIPTION = Subscription(
    topics=("b", "a"),
    owned_partitions=(("b", 2), ("a", 1), ("a", 0)),
    generation_id=7,
    rack_id="r1",
    user_data=b"ud",
)


def test_subscription_v3_is_kafkas_layout_with_topics_and_owned_partitions_sorted() -> None:
    expected = (
        i16(3)
        + i32(2) + string("a") + string("b")  # Topics, sorted as Java sorts them
        + i32(2) + b"ud"  # UserData
        + i32(2)  # OwnedPartitions, grouped by topic
        + string("a") + i32(2) + i32(0) + i32(1)
        + string("b") + i32(1) + i32(2)
        + i32(7)  # GenerationId
        + string("r1")  # RackId
    )  # fmt: skip
    assert encode_subscription(SUBSCRIPTION) == expected
    assert decode_subscription(expected) == Subscription(
        ("a", "b"), (("a", 0), ("a", 1), ("b", 2)), 7, "r1", b"ud"
    )


def test_assignment_v3_is_v0s_layout_with_a_version_prefix() -> None:
    assignment = Assignment((("a", 0), ("a", 1), ("b", 3)))
    expected = (
        i16(3) + i32(2)
        + string("a") + i32(2) + i32(0) + i32(1)
        + string("b") + i32(1) + i32(3)
        + i32(-1)  # null UserData
    )  # fmt: skip
    assert encode_assignment(assignment) == expected
    assert decode_assignment(expected) == assignment


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_each_subscription_version_keeps_the_fields_it_has(version: int) -> None:
    got = decode_subscription(encode_subscription(SUBSCRIPTION, version))
    assert got.topics == ("a", "b") and got.user_data == b"ud"
    assert got.owned_partitions == ((("a", 0), ("a", 1), ("b", 2)) if version >= 1 else ())
    assert got.generation_id == (7 if version >= 2 else -1)
    assert got.rack_id == ("r1" if version >= 3 else None)


def test_a_newer_version_is_read_with_the_highest_known_layout_and_extra_bytes_ignored() -> None:
    body = encode_subscription(SUBSCRIPTION)[2:] + b"fields of version 9"
    assert decode_subscription(i16(9) + body).rack_id == "r1"
    assignment = encode_assignment(Assignment((("a", 0),)))
    assert decode_assignment(i16(4) + assignment[2:] + b"\x00").partitions == (("a", 0),)


@pytest.mark.parametrize("data", [b"", b"\x00", i16(-1) + i32(0), i16(3) + i32(2) + string("a")])
def test_short_or_negative_versions_are_decode_errors(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_subscription(data)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_kafka_python_reads_our_subscription_field_by_field(version: int) -> None:
    theirs = KpSubscription.decode(encode_subscription(SUBSCRIPTION, version))
    assert theirs.version == version
    assert list(theirs.topics) == ["a", "b"] and theirs.user_data == b"ud"
    if version >= 1:
        owned = [(tp.topic, list(tp.partitions)) for tp in theirs.owned_partitions]
        assert owned == [("a", [0, 1]), ("b", [2])]
    if version >= 2:
        assert theirs.generation_id == 7
    if version >= 3:
        assert theirs.rack_id == "r1"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_we_read_kafka_pythons_subscription_and_assignment(version: int) -> None:
    fields = {"version": version, "topics": ["x", "y"], "user_data": None}
    if version >= 1:
        fields["owned_partitions"] = [KpSubscription.TopicPartition(topic="x", partitions=[3])]
    if version >= 2:
        fields["generation_id"] = 4
    if version >= 3:
        fields["rack_id"] = "rack"
    ours = decode_subscription(KpSubscription(**fields).encode())
    assert ours.topics == ("x", "y")
    assert ours.owned_partitions == ((("x", 3),) if version >= 1 else ())
    assert ours.generation_id == (4 if version >= 2 else -1)
    assignment = KpAssignment(
        version=version,
        assigned_partitions=[KpAssignment.TopicPartition(topic="x", partitions=[0, 2])],
        user_data=None,
    )
    assert decode_assignment(assignment.encode()).partitions == (("x", 0), ("x", 2))


def test_aiokafkas_v0_readers_read_the_start_of_our_v3() -> None:
    metadata = ConsumerProtocolMemberMetadata.decode(encode_subscription(SUBSCRIPTION))
    assert (metadata.version, list(metadata.subscription), metadata.user_data) == (
        3,
        ["a", "b"],
        b"ud",
    )
    assignment = ConsumerProtocolMemberAssignment.decode(
        encode_assignment(Assignment((("a", 0), ("b", 1))))
    )
    assert [(tp.topic, tp.partition) for tp in assignment.partitions()] == [("a", 0), ("b", 1)]
