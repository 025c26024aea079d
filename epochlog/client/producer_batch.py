"""`ProducerBatch`: the records of one partition, sent (and retried) as one v2 record batch.

Kafka's ProducerBatch. It is the unit the accumulator queues, the sender sends and the retry
decisions act on. While open it grows through its `ProducerBatchBuilder` (`append`, or
`try_append_plain`, the producer's flat fast path for records without headers); `close` builds
its bytes once. `stamp` patches producer id, epoch and base sequence (and the transactional bit)
into the built header and fixes the CRC, so a retry under a new producer id needs no rebuild;
`split` cuts a batch the broker refused as too large into two halves. It also carries the
bookkeeping the others need: one handle (future) and timestamp per record, attempts, when a
retry may go, and the sequence generation idempotence recognises it by.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from epochlog.client.batch_builder import VARINT_SIZES as _SIZES
from epochlog.client.batch_builder import VARINT_TABLE as _TABLE
from epochlog.client.batch_builder import VARINTS as _VARINTS
from epochlog.client.batch_builder import ProducerBatchBuilder
from epochlog.client.metadata import TopicPartition
from epochlog.protocol.compression import Compression
from epochlog.protocol.records import (
    BATCH_HEADER_SIZE,
    NO_SEQUENCE,
    Header,
    decode_batch,
    stamp_producer,
)
from epochlog.protocol.varint import encode_varint

_BATCH_ORDER = itertools.count()
_NULL = b"\x01"  # varint -1: a null key or value
_EMPTY = b""


class ProducerBatch:
    """Records for one partition, sent (and retried) as one v2 record batch."""

    def __init__(self, tp: TopicPartition, compression: Compression, created_ms: float) -> None:
        self.tp = tp
        self.created_ms = created_ms
        # where its records stand among its partition's: batches are created in record order,
        # and a split's halves sort between their parent's neighbours ((n,) < (n, 0) < (n, 1))
        self.order: tuple[int, ...] = (next(_BATCH_ORDER),)
        self.builder: ProducerBatchBuilder | None = ProducerBatchBuilder(compression)
        self.data: bytes | None = None  # the built batch, once closed
        self.appendable = True  # False once closed, expired or aborted
        self.handles: list[Any] = []  # one per record, in offset order
        self.timestamps: list[int] = []
        self.attempts = 0
        self.retry_at_ms = 0.0
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = NO_SEQUENCE
        self.sequence_generation = -1  # which producer id the sequence belongs to (idempotence)
        self.transactional = False  # stamped with the transactional attribute bit

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.tp}, {self.record_count} records, seq {self.base_sequence}, "
            f"attempt {self.attempts})"
        )

    @property
    def record_count(self) -> int:
        return len(self.handles)

    @property
    def size(self) -> int:
        """Bytes on the wire once built; the uncompressed estimate while open."""
        if self.data is not None:
            return len(self.data)
        assert self.builder is not None
        return self.builder.estimated_size

    @property
    def is_closed(self) -> bool:
        return self.data is not None

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.record_count - 1) & 0x7FFFFFFF

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header | tuple[str, bytes | None]],
        handle: Any,
    ) -> None:
        assert self.builder is not None, "append to a closed batch"
        self.builder.append(timestamp, key, value, headers)
        self.handles.append(handle)
        self.timestamps.append(timestamp)

    def try_append_plain(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        handle: Any,
        batch_size: int,
    ) -> int:
        """The producer's fast path: append a record without headers to this open, non-empty
        batch if it fits within `batch_size` by the accumulator's bound (26 bytes plus key and
        value, as `RecordAccumulator.append` decides). Returns the bytes added, negated when
        the batch has now reached `batch_size` (the caller closes it); 0 when the record did
        not fit and nothing changed.

        The bytes are those of `RecordBatchBuilder.append` (a unit test compares them), written
        with one join and the record's length computed from a table of varint sizes; it is the
        hottest code of the producer, hence flat."""
        builder = self.builder
        records = builder._records  # type: ignore[union-attr]
        before = len(records)
        if key is None:
            key_v, key = _NULL, _EMPTY
            k, n = 0, 1
        else:
            k = len(key)
            key_v = _VARINTS[k] if k < _TABLE else encode_varint(k)
            n = len(key_v) + k
        if value is None:
            value_v, value = _NULL, _EMPTY
            v = 0
            n += 1
        else:
            v = len(value)
            value_v = _VARINTS[v] if v < _TABLE else encode_varint(v)
            n += len(value_v) + v
        if BATCH_HEADER_SIZE + 26 + before + k + v > batch_size:
            return 0
        delta = builder._count  # type: ignore[union-attr]
        ts_delta = timestamp - builder._base_timestamp  # type: ignore[union-attr,operator]
        if 0 <= ts_delta < _TABLE and delta < _TABLE:
            ts_v, delta_v = _VARINTS[ts_delta], _VARINTS[delta]
            n += 2 + _SIZES[ts_delta] + _SIZES[delta]  # + attributes and header-count bytes
        else:
            ts_v, delta_v = encode_varint(ts_delta), encode_varint(delta)
            n += 2 + len(ts_v) + len(delta_v)
        records += _EMPTY.join(
            (
                _VARINTS[n] if n < _TABLE else encode_varint(n),
                b"\x00",
                ts_v,
                delta_v,
                key_v,
                key,
                value_v,
                value,
                b"\x00",
            )
        )
        builder._count = delta + 1  # type: ignore[union-attr]
        if timestamp > builder._max_timestamp:  # type: ignore[union-attr]
            builder._max_timestamp = timestamp  # type: ignore[union-attr]
        self.handles.append(handle)
        self.timestamps.append(timestamp)
        after = len(records)
        return before - after if BATCH_HEADER_SIZE + after >= batch_size else after - before

    def close(self) -> None:
        self.appendable = False
        if self.data is None:
            assert self.builder is not None
            self.data = self.builder.build()
            self.builder = None

    def stamp(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Write producer id, epoch and base sequence (and the transactional bit, for a
        transactional batch) into the built batch; fix its CRC."""
        self.close()
        assert self.data is not None
        self.data = stamp_producer(
            self.data, producer_id, producer_epoch, base_sequence, self.transactional
        )
        self.producer_id, self.producer_epoch, self.base_sequence = (
            producer_id,
            producer_epoch,
            base_sequence,
        )

    def split(self) -> list[ProducerBatch]:
        """The records of this (closed) batch as two batches, each half of them, unsent and
        without a sequence: what the producer retries when the broker finds a batch too large
        (MESSAGE_TOO_LARGE), so one oversized record fails alone and the others still go."""
        self.close()
        assert self.data is not None and self.record_count > 1
        decoded = decode_batch(self.data)
        compression, records = decoded.header.compression, decoded.records
        middle = len(records) // 2
        halves = []
        for lo, hi in ((0, middle), (middle, len(records))):
            half = ProducerBatch(self.tp, compression, self.created_ms)
            for i in range(lo, hi):
                r = records[i]
                half.append(
                    r.timestamp,
                    r.key,
                    r.value,
                    [(h.key, h.value) for h in r.headers],
                    self.handles[i],
                )
            half.attempts = self.attempts
            half.order = self.order + (len(halves),)
            half.close()
            halves.append(half)
        return halves
