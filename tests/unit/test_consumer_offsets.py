"""`__consumer_offsets` record keys and values: Kafka 3.9's bytes, the versions it writes, and
how it reads (tombstones, unknown record types, unknown value versions).

Expected bytes are built by hand from Kafka's group-coordinator JSON (OffsetCommitKey,
OffsetCommitValue, GroupMetadataKey, GroupMetadataValue; branch 3.9) with an int16 version
prefix, as `MessageUtil.toVersionPrefixedBytes` writes them. The offset-commit values reuse the
fixture of Kafka's own `OffsetMessageFormatterTest` (tools, branch 3.9): offset 100, leader epoch
10, metadata "metadata", commit timestamp 1234, and the fields that test expects per version.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.protocol.codec import Message
from epochlog.protocol.consumer_offsets import (
    UnknownRecordKey,
    decode_group_metadata_value,
    decode_offset_commit_value,
    decode_record_key,
    decode_record_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    offset_commit_value_version,
)
from epochlog.protocol.errors import DecodeError
from epochlog.protocol.messages import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from tests.kafka_wire import NO_TAGS, array, bytes_, cstring, i16, i32, i64, string
from tests.schema_strategies import message_strategy

Member = GroupMetadataValue.MemberMetadata

# -- keys ----------------------------------------------------------------------------------------


def test_offset_commit_key_is_written_at_version_1() -> None:
    key = encode_offset_commit_key("group-id", "foo", 1)
    assert key == i16(1) + string("group-id") + string("foo") + i32(1)
    assert decode_record_key(key) == OffsetCommitKey(group="group-id", topic="foo", partition=1)


def test_offset_commit_key_version_0_reads_the_same() -> None:
    key = i16(0) + string("group-id") + string("foo") + i32(1)
    assert decode_record_key(key) == OffsetCommitKey(group="group-id", topic="foo", partition=1)


def test_group_metadata_key_is_written_at_version_2() -> None:
    key = encode_group_metadata_key("group-id")
    assert key == i16(2) + string("group-id")
    assert decode_record_key(key) == GroupMetadataKey(group="group-id")


@pytest.mark.parametrize("record_type", [3, 8, 10, -1])
def test_other_record_types_are_unknown_not_errors(record_type: int) -> None:
    # 3-8 are KIP-848 consumer-group records; Kafka's loaders skip unknown types with a warning
    assert decode_record_key(i16(record_type) + b"\x00\x01x") == UnknownRecordKey(record_type)
    assert decode_record_value(UnknownRecordKey(record_type), b"\x00\x00") is None


def test_bytes_after_a_key_are_ignored_as_kafka_does() -> None:
    key = encode_group_metadata_key("g") + b"\x00\x00"
    assert decode_record_key(key) == GroupMetadataKey(group="g")


@pytest.mark.parametrize("data", [b"", b"\x00", i16(1) + string("g"), i16(2) + b"\x00\x05ab"])
def test_truncated_keys_raise_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_record_key(data)


# -- offset commit values ------------------------------------------------------------------------

# Kafka's OffsetMessageFormatterTest fixture, and the fields it prints per value version
KAFKA_FIXTURE = {"offset": 100, "leader_epoch": 10, "metadata": "metadata", "commit_ts": 1234}
OFFSET_COMMIT_VALUE_BYTES = {
    0: i16(0) + i64(100) + string("metadata") + i64(1234),
    1: i16(1) + i64(100) + string("metadata") + i64(1234) + i64(-1),
    2: i16(2) + i64(100) + string("metadata") + i64(1234),
    3: i16(3) + i64(100) + i32(10) + string("metadata") + i64(1234),
    4: i16(4) + i64(100) + i32(10) + cstring("metadata") + i64(1234) + NO_TAGS,
}


@pytest.mark.parametrize("version", sorted(OFFSET_COMMIT_VALUE_BYTES))
def test_offset_commit_value_every_version_reads_as_kafka_formats_it(version: int) -> None:
    value = decode_offset_commit_value(OFFSET_COMMIT_VALUE_BYTES[version])
    assert value is not None
    assert (value.offset, value.metadata, value.commit_timestamp) == (100, "metadata", 1234)
    assert value.leader_epoch == (10 if version >= 3 else -1)
    assert value.expire_timestamp == -1


def test_offset_commit_value_is_written_at_version_3() -> None:
    value = encode_offset_commit_value(
        offset=100, metadata="metadata", commit_timestamp=1234, leader_epoch=10
    )
    assert value == OFFSET_COMMIT_VALUE_BYTES[3]


def test_offset_commit_value_without_leader_epoch_writes_minus_one() -> None:
    value = encode_offset_commit_value(offset=5, metadata="", commit_timestamp=7)
    assert value == i16(3) + i64(5) + i32(-1) + string("") + i64(7)


def test_offset_commit_value_with_an_expire_timestamp_is_version_1() -> None:
    value = encode_offset_commit_value(
        offset=100, metadata="metadata", commit_timestamp=1234, leader_epoch=10, expire_timestamp=9
    )
    # v1 has no leaderEpoch (ignorable, dropped) and is the only version with expireTimestamp
    assert value == i16(1) + i64(100) + string("metadata") + i64(1234) + i64(9)
    decoded = decode_offset_commit_value(value)
    assert decoded is not None
    assert (decoded.expire_timestamp, decoded.leader_epoch) == (9, -1)


def test_offset_commit_value_version_selection() -> None:
    assert offset_commit_value_version(None) == 3
    assert offset_commit_value_version(-1) == 3  # OffsetCommitRequest.DEFAULT_TIMESTAMP
    assert offset_commit_value_version(1_700_000_000_000) == 1


def test_unknown_offset_commit_value_version_is_an_error() -> None:
    with pytest.raises(DecodeError, match="OffsetCommitValue v5"):
        decode_offset_commit_value(i16(5) + OFFSET_COMMIT_VALUE_BYTES[4][2:])


def test_tombstones_decode_to_none() -> None:
    assert decode_offset_commit_value(None) is None
    assert decode_group_metadata_value(None) is None
    key = decode_record_key(encode_offset_commit_key("g", "t", 0))
    assert decode_record_value(key, None) is None


# -- group metadata values -----------------------------------------------------------------------


def stable_group() -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type="consumer",
        generation=1,
        protocol="range",
        leader="member-1",
        current_state_timestamp=1_700_000_000_000,
        members=[
            Member(
                member_id="member-1",
                group_instance_id=None,
                client_id="client",
                client_host="/127.0.0.1",
                rebalance_timeout=300000,
                session_timeout=45000,
                subscription=b"\x00\x01",
                assignment=b"\x00\x02",
            )
        ],
    )


def test_group_metadata_value_is_written_at_version_3() -> None:
    member = (
        string("member-1")
        + string(None)  # groupInstanceId (v3+)
        + string("client")
        + string("/127.0.0.1")
        + i32(300000)  # rebalanceTimeout (v1+)
        + i32(45000)
        + bytes_(b"\x00\x01")
        + bytes_(b"\x00\x02")
    )
    expected = (
        i16(3)
        + string("consumer")
        + i32(1)
        + string("range")
        + string("member-1")
        + i64(1_700_000_000_000)  # currentStateTimestamp (v2+)
        + array([member])
    )
    value = encode_group_metadata_value(stable_group())
    assert value == expected
    assert decode_group_metadata_value(value) == stable_group()


def test_empty_group_metadata_as_kafka_writes_it() -> None:
    # CoordinatorRecordHelpers.newEmptyGroupMetadataRecord: protocol and leader null, no members
    empty = GroupMetadataValue(
        protocol_type="", generation=0, protocol=None, leader=None, current_state_timestamp=5
    )
    expected = i16(3) + string("") + i32(0) + string(None) + string(None) + i64(5) + array([])
    assert encode_group_metadata_value(empty) == expected


def test_group_metadata_value_version_0_has_no_rebalance_timeout_or_state_timestamp() -> None:
    member = string("m") + string("c") + string("/h") + i32(10000) + bytes_(b"s") + bytes_(b"a")
    data = i16(0) + string("consumer") + i32(2) + string("range") + string("m") + array([member])
    value = decode_group_metadata_value(data)
    assert value is not None
    assert value.current_state_timestamp == -1
    [m] = value.members
    assert (m.member_id, m.session_timeout, m.rebalance_timeout) == ("m", 10000, -1)
    assert m.group_instance_id is None


def test_group_metadata_value_version_4_is_flexible() -> None:
    data = (
        i16(4) + cstring("consumer") + i32(2) + cstring(None) + cstring(None) + i64(-1) + b"\x01"
    ) + NO_TAGS
    value = decode_group_metadata_value(data)
    assert value == GroupMetadataValue(
        protocol_type="consumer", generation=2, protocol=None, leader=None, members=[]
    )


def test_record_value_follows_the_key_type() -> None:
    key = decode_record_key(encode_group_metadata_key("g"))
    value = decode_record_value(key, encode_group_metadata_value(stable_group()))
    assert value == stable_group()
    key = decode_record_key(encode_offset_commit_key("g", "t", 0))
    assert decode_record_value(key, OFFSET_COMMIT_VALUE_BYTES[3]) == OffsetCommitValue(
        offset=100, leader_epoch=10, metadata="metadata", commit_timestamp=1234
    )


# -- every version round-trips -------------------------------------------------------------------

RECORD_CASES = [
    pytest.param(cls, version, id=f"{cls.SCHEMA.name}-v{version}")
    for cls in (OffsetCommitKey, OffsetCommitValue, GroupMetadataKey, GroupMetadataValue)
    for version in cls.SCHEMA.valid
]


@pytest.mark.parametrize(("cls", "version"), RECORD_CASES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_record_schemas_round_trip(cls: type[Message], version: int, data: st.DataObject) -> None:
    obj = data.draw(message_strategy(cls, version))
    encoded = obj.encode(version)
    assert cls.decode(encoded, version) == obj
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError):
            cls.decode(encoded[:cut], version)


def test_record_schemas_are_data_without_api_keys() -> None:
    for cls in (OffsetCommitKey, OffsetCommitValue, GroupMetadataKey, GroupMetadataValue):
        assert cls.SCHEMA.kind == "data" and cls.SCHEMA.api_key is None
