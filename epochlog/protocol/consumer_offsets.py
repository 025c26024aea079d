"""Keys and values of `__consumer_offsets` records, byte for byte as Apache Kafka 3.9 writes them.

A record key is an int16 version followed by the key's fields at that version; the version is the
record's type: 0 and 1 are offset commits (OffsetCommitKey), 2 is a group's metadata
(GroupMetadataKey). A record value is an int16 version followed by the value's fields; a null
value is a tombstone (the offset or the group was deleted). Schemas are in
`messages/group_records.py`.

Versions written, as in Kafka 3.9 at any current metadata version (`GroupMetadataManager`
`offsetCommitKey`/`offsetCommitValue`/`groupMetadataValue` in core, and
`CoordinatorRecordHelpers` with `MetadataVersion.offsetCommitValueVersion` and
`groupMetadataValueVersion` in group-coordinator):

* OffsetCommitKey at version 1 (its highest), GroupMetadataKey at version 2;
* OffsetCommitValue at version 3, or version 1 when the commit has an expire timestamp (an
  OffsetCommit v2-v4 request with a RetentionTimeMs other than -1 expires at now + retention):
  only v1 carries expireTimestamp, and it has no leaderEpoch, which is then dropped;
* GroupMetadataValue at version 3, the highest non-flexible version ("until a tagged field is
  introduced", says Kafka); v4 is read, never written.

Reading follows Kafka too: a key of another type is not an error but an `UnknownRecordKey`, which
Kafka's loaders skip with a warning ("a left over from an aborted upgrade"); bytes after the
fields are ignored (Kafka's readers do not check for them); an unknown value version is an error.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from epochlog.protocol.codec import Message, decode_from, encode_into
from epochlog.protocol.errors import DecodeError
from epochlog.protocol.messages import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

NO_LEADER_EPOCH = -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH
NO_EXPIRE_TIMESTAMP = -1  # OffsetCommitRequest.DEFAULT_TIMESTAMP

_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class UnknownRecordKey:
    """A key whose type (its version prefix) is neither an offset commit nor group metadata."""

    record_type: int


RecordKey = OffsetCommitKey | GroupMetadataKey | UnknownRecordKey


def _version_prefixed(message: Message, version: int) -> bytes:
    """Kafka's `MessageUtil.toVersionPrefixedBytes`: int16 version, then the fields."""
    out = bytearray(_VERSION.pack(version))
    encode_into(message, version, out)
    return bytes(out)


def _read_version(what: str, data: bytes | bytearray | memoryview) -> int:
    if len(data) < _VERSION.size:
        raise DecodeError(what, None, None, f"{len(data)} bytes, too short for a version")
    (version,) = _VERSION.unpack_from(data, 0)
    return version


def _decode_at(cls: type[Message], version: int, data: bytes | bytearray | memoryview) -> Message:
    schema = cls.SCHEMA
    if version not in schema.valid:
        raise DecodeError(
            schema.name, version, None, f"unknown version (Kafka 3.9 knows {schema.valid})"
        )
    message, _ = decode_from(cls, data, version, _VERSION.size)
    return message


# ------------------------------------------------------------------------------ keys


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """The key of an offset commit (and of its tombstone)."""
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return _version_prefixed(key, OFFSET_COMMIT_KEY_VERSION)


def encode_group_metadata_key(group: str) -> bytes:
    """The key of a group's metadata record (and of its tombstone)."""
    return _version_prefixed(GroupMetadataKey(group=group), GROUP_METADATA_KEY_VERSION)


def decode_record_key(data: bytes | bytearray | memoryview) -> RecordKey:
    """The key of any `__consumer_offsets` record; `UnknownRecordKey` for types we do not read."""
    record_type = _read_version("__consumer_offsets record key", data)
    if record_type in OffsetCommitKey.SCHEMA.valid:
        return _decode_at(OffsetCommitKey, record_type, data)
    if record_type in GroupMetadataKey.SCHEMA.valid:
        return _decode_at(GroupMetadataKey, record_type, data)
    return UnknownRecordKey(record_type)


# ------------------------------------------------------------------------------ values


def offset_commit_value_version(expire_timestamp: int | None) -> int:
    """The version Kafka 3.9 writes: 1 when the commit expires at a set time, else 3."""
    if expire_timestamp is not None and expire_timestamp != NO_EXPIRE_TIMESTAMP:
        return OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    return OFFSET_COMMIT_VALUE_VERSION


def encode_offset_commit_value(
    offset: int,
    metadata: str,
    commit_timestamp: int,
    leader_epoch: int = NO_LEADER_EPOCH,
    expire_timestamp: int | None = None,
) -> bytes:
    """The value of an offset commit. `metadata` is the committed metadata, "" when the client
    sent null (Kafka's OffsetAndMetadata.NO_METADATA); `leader_epoch` -1 when unknown;
    `expire_timestamp` only for commits whose request carried a retention time."""
    version = offset_commit_value_version(expire_timestamp)
    value = OffsetCommitValue(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_timestamp,
        expire_timestamp=NO_EXPIRE_TIMESTAMP if expire_timestamp is None else expire_timestamp,
    )
    return _version_prefixed(value, version)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """The value of a group's metadata record, at the version Kafka 3.9 writes (3)."""
    return _version_prefixed(value, GROUP_METADATA_VALUE_VERSION)


def decode_offset_commit_value(
    data: bytes | bytearray | memoryview | None,
) -> OffsetCommitValue | None:
    """An offset commit's value at whatever version it was written; None for a tombstone."""
    if data is None:
        return None
    return _decode_at(OffsetCommitValue, _read_version("OffsetCommitValue", data), data)


def decode_group_metadata_value(
    data: bytes | bytearray | memoryview | None,
) -> GroupMetadataValue | None:
    """A group's metadata value at whatever version it was written; None for a tombstone."""
    if data is None:
        return None
    return _decode_at(GroupMetadataValue, _read_version("GroupMetadataValue", data), data)


def decode_record_value(
    key: RecordKey, data: bytes | bytearray | memoryview | None
) -> OffsetCommitValue | GroupMetadataValue | None:
    """The value that goes with `key` (None for a tombstone or a key of an unknown type)."""
    if isinstance(key, OffsetCommitKey):
        return decode_offset_commit_value(data)
    if isinstance(key, GroupMetadataKey):
        return decode_group_metadata_value(data)
    return None
