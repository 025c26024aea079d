"""Transaction markers: the control batches that end a producer's transaction in a partition.

Kafka's format (`ControlRecordType`, `EndTransactionMarker`): a control batch (attributes
control + transactional) holds one record whose key is version (int16, 0) and type (int16:
0 ABORT, 1 COMMIT) and whose value is version (int16, 0) and the coordinator epoch (int32).
The batch carries the producer id and epoch of the transaction it ends and no sequence.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from epochlog.protocol.errors import CorruptRecordError
from epochlog.protocol.records import (
    NO_SEQUENCE,
    BatchHeader,
    Compression,
    RecordBatchBuilder,
    decode_batch,
)

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    control_type: ControlType
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type is ControlType.COMMIT


def build_marker_batch(
    producer_id: int,
    producer_epoch: int,
    marker: EndTxnMarker,
    timestamp: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The control batch (offset 0; the log stamps the real one) for `marker`."""
    builder = RecordBatchBuilder(
        Compression.NONE,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )
    builder.append(
        timestamp,
        _KEY.pack(CONTROL_KEY_VERSION, int(marker.control_type)),
        _VALUE.pack(MARKER_VALUE_VERSION, marker.coordinator_epoch),
    )
    return builder.build()


def read_marker(buf: bytes | bytearray | memoryview, pos: int = 0) -> EndTxnMarker | None:
    """The end-transaction marker of the control batch at `pos`; None for another control type
    (Kafka also has LEADER_CHANGE and snapshot records, which end no transaction)."""
    batch = decode_batch(buf, pos)
    if not batch.records:
        raise CorruptRecordError(f"control batch at offset {batch.base_offset} has no record")
    record = batch.records[0]
    return marker_of(batch.header, record.key, record.value)


def marker_of(header: BatchHeader, key: bytes | None, value: bytes | None) -> EndTxnMarker | None:
    where = f"control batch at offset {header.base_offset}"
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"{where}: control record key of {len(key or b'')} bytes")
    _version, control_type = _KEY.unpack_from(key)
    if control_type not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError(f"{where}: end-transaction marker value is too short")
    _value_version, coordinator_epoch = _VALUE.unpack_from(value)
    return EndTxnMarker(ControlType(control_type), coordinator_epoch)
