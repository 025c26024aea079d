"""The shard's records as `__transaction_state` keys and values in Kafka's own formats
(`protocol/messages/transaction_records.py`), so Kafka's tooling reads what the coordinator
writes and the coordinator reads what Kafka wrote.

Values are written at version 0, as Kafka does until `transaction.version` 1 (Kafka 4's KIP-890
part 2, which ZooKeeper mode never enables) makes them flexible; version 1 is read too, with its
tagged previous and next producer ids. As in Kafka, an Empty id's partitions are written as null,
PrepareEpochFence is never written (it is a pending state), an expired id is a tombstone, and a
key of a version Kafka does not know is skipped with a warning, not an error.
"""

from __future__ import annotations

import logging
import struct

from epochlog.coordinator.transaction.records import TransactionRecord, TxnRecord, TxnTombstone
from epochlog.coordinator.transaction.state import TxnMetadata, TxnState
from epochlog.protocol.codec import decode_from, encode_into
from epochlog.protocol.errors import DecodeError
from epochlog.protocol.messages import TransactionLogKey, TransactionLogValue

KEY_VERSION = 0
VALUE_VERSION = 0
log = logging.getLogger(__name__)
_VERSION = struct.Struct(">h")


def _read_version(what: str, data: bytes) -> int:
    if len(data) < _VERSION.size:
        raise DecodeError(what, None, None, f"{len(data)} bytes, too short for a version")
    (version,) = _VERSION.unpack_from(data, 0)
    return version


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(_VERSION.pack(KEY_VERSION))
    encode_into(TransactionLogKey(transactional_id=transactional_id), KEY_VERSION, out)
    return bytes(out)


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key version Kafka does not know (it skips those)."""
    version = _read_version("TransactionLogKey", data)
    if version != KEY_VERSION:
        return None
    key, _ = decode_from(TransactionLogKey, data, version, _VERSION.size)
    return str(key.transactional_id)


def encode_value(metadata: TxnMetadata, version: int = VALUE_VERSION) -> bytes:
    if metadata.state is TxnState.EMPTY and metadata.partitions:
        raise ValueError(
            f"transactional id {metadata.transactional_id!r}: an Empty transaction has no "
            f"partitions, yet {sorted(metadata.partitions)} were given"
        )
    if metadata.state in (TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
        raise ValueError(
            f"transactional id {metadata.transactional_id!r}: state "
            f"{metadata.state.kafka_name} is never written to __transaction_state"
        )
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(partition)
    value = TransactionLogValue(
        producer_id=metadata.producer_id,
        # tagged fields of v1 only: v0 drops them, as Kafka's v0 records do
        previous_producer_id=metadata.previous_producer_id if version >= 1 else -1,
        next_producer_id=metadata.next_producer_id if version >= 1 else -1,
        producer_epoch=metadata.producer_epoch,
        transaction_timeout_ms=metadata.timeout_ms,
        transaction_status=metadata.state.byte,
        transaction_partitions=None
        if metadata.state is TxnState.EMPTY
        else [
            TransactionLogValue.PartitionsSchema(topic=t, partition_ids=ps)
            for t, ps in by_topic.items()
        ],
        transaction_last_update_timestamp_ms=metadata.last_update_ms,
        transaction_start_timestamp_ms=metadata.start_ms,
    )
    out = bytearray(_VERSION.pack(version))
    encode_into(value, version, out)
    return bytes(out)


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    version = _read_version("TransactionLogValue", data)
    if version not in TransactionLogValue.SCHEMA.valid:
        raise DecodeError("TransactionLogValue", version, None, "unknown version (Kafka knows 0-1)")
    value, _ = decode_from(TransactionLogValue, data, version, _VERSION.size)
    state = TxnState.from_byte(value.transaction_status)
    listed = () if state is TxnState.EMPTY else value.transaction_partitions or ()
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        timeout_ms=value.transaction_timeout_ms,
        state=state,
        partitions=frozenset((p.topic, i) for p in listed for i in p.partition_ids),
        last_update_ms=value.transaction_last_update_timestamp_ms,
        start_ms=value.transaction_start_timestamp_ms,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
    )


class TransactionStateCodec:
    def encode(self, record: TransactionRecord) -> tuple[bytes, bytes | None]:
        if isinstance(record, TxnRecord):
            key = encode_key(record.metadata.transactional_id)
            return key, encode_value(record.metadata)
        if isinstance(record, TxnTombstone):
            return encode_key(record.transactional_id), None
        raise TypeError(f"not a transaction coordinator record: {record!r}")

    def decode(self, key: bytes, value: bytes | None) -> TransactionRecord | None:
        """The record, or None for a key Kafka's loader skips."""
        transactional_id = decode_key(key)
        if transactional_id is None:
            log.warning("__transaction_state: skipping a record with key version %r", key[:2].hex())
            return None
        if value is None:
            return TxnTombstone(transactional_id)
        return TxnRecord(decode_value(transactional_id, value))
