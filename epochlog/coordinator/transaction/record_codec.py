"""The shard's records as `__transaction_state` keys and values in Kafka's own formats
(`protocol/messages/transaction_records.py`), so Kafka's tooling reads what the coordinator
writes and the coordinator reads what Kafka wrote.

Values are written at version 1 (flexible), so the previous producer id survives a failover (a
retried KIP-360 InitProducerId is recognised by it); version 0 is read too. PrepareEpochFence is
never written (it is a pending state) and Dead is written as a tombstone.
"""

from __future__ import annotations

import struct

from epochlog.coordinator.transaction.records import TransactionRecord, TxnRecord, TxnTombstone
from epochlog.coordinator.transaction.state import TxnMetadata, TxnState
from epochlog.protocol.codec import decode_from, encode_into
from epochlog.protocol.errors import DecodeError
from epochlog.protocol.messages import TransactionLogKey, TransactionLogValue

KEY_VERSION = 0
VALUE_VERSION = 1
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


def decode_key(data: bytes) -> str:
    version = _read_version("TransactionLogKey", data)
    if version != KEY_VERSION:
        raise DecodeError("TransactionLogKey", version, None, "unknown version (Kafka knows 0)")
    key, _ = decode_from(TransactionLogKey, data, version, _VERSION.size)
    return str(key.transactional_id)


def encode_value(metadata: TxnMetadata, version: int = VALUE_VERSION) -> bytes:
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
        previous_producer_id=metadata.previous_producer_id,
        next_producer_id=metadata.next_producer_id,
        producer_epoch=metadata.producer_epoch,
        transaction_timeout_ms=metadata.timeout_ms,
        transaction_status=metadata.state.byte,
        transaction_partitions=[
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
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        timeout_ms=value.transaction_timeout_ms,
        state=TxnState.from_byte(value.transaction_status),
        partitions=frozenset(
            (p.topic, i) for p in value.transaction_partitions or () for i in p.partition_ids
        ),
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

    def decode(self, key: bytes, value: bytes | None) -> TransactionRecord:
        transactional_id = decode_key(key)
        if value is None:
            return TxnTombstone(transactional_id)
        return TxnRecord(decode_value(transactional_id, value))
