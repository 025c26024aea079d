"""Log compaction, decided without I/O (Kafka's LogCleanerManager and LogCleaner).

How it works. A compacted log is cleaned in passes. Each pass:

1. picks the range to clean: from the first dirty offset (the `cleaner-offset-checkpoint`, or the
   log start) up to the first uncleanable offset, which is the active segment's base or the first
   segment with records newer than `min.compaction.lag.ms`, whichever comes first
   (`cleanable_range`). The active segment is never cleaned.
2. picks the log: the one whose dirty bytes are the largest share of its cleanable bytes, if that
   share reaches `min.cleanable.dirty.ratio`, or one whose oldest dirty record is older than
   `max.compaction.lag.ms` whatever its ratio (`choose_log_to_clean`).
3. reads the dirty range into an `OffsetMap`: each key's latest offset. The map is bounded
   (`log.cleaner.dedupe.buffer.size`); when it fills, this pass cleans up to there.
4. rewrites every segment below the first uncleanable offset, batch by batch
   (`filter_batch`): a record stays if no later record has its key; a tombstone (a null value)
   stays until its batch's delete horizon passes: the horizon (now + `delete.retention.ms`) is
   written into the batch the first time a pass keeps the tombstone (KIP-534), and a later pass
   drops it. Kept records keep their offsets: a rewritten batch has the original base offset and
   last offset delta, with holes where records were removed, so replicas and consumers see the
   same offsets; a fetch from a removed offset returns the next record.

The I/O around it (segment files, `.cleaned` / `.swap`, the checkpoint, the cleaner thread) is
in `cleaner.py`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from epochlog.protocol.compression import Compression, compress, decompress
from epochlog.protocol.records import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    BatchHeader,
    Record,
    _encode_record,
    batch_crc,
    decode_records,
    parse_batch_header,
    verify_batch,
)

MAX_LAG = 2**63 - 1
_HEADER = struct.Struct(">qiibIhiqqqhii")


@dataclass(frozen=True)
class CompactionConfig:
    """A topic's compaction settings (Kafka's topic-level names and defaults)."""

    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = MAX_LAG  # max.compaction.lag.ms
    delete_retention_ms: int = 86_400_000  # delete.retention.ms


@dataclass(frozen=True)
class SegmentSummary:
    """What the cleaner needs to know of a segment without reading it."""

    base_offset: int
    next_offset: int  # one past its last offset
    size_bytes: int
    first_timestamp_ms: int  # of its first batch (-1 if unknown)
    max_timestamp_ms: int  # the largest record timestamp in it (-1 if unknown)


@dataclass(frozen=True)
class CleanableRange:
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable_range(
    segments: Sequence[SegmentSummary],
    checkpoint: int | None,
    log_start_offset: int,
    config: CompactionConfig,
    now_ms: int,
) -> CleanableRange:
    """The range one pass may clean. `segments` are in offset order; the last is active."""
    first_dirty = log_start_offset if checkpoint is None else max(checkpoint, log_start_offset)
    first_uncleanable = segments[-1].base_offset if segments else first_dirty
    for segment in segments[:-1]:
        if segment.next_offset <= first_dirty:
            continue
        # min.compaction.lag.ms: a segment with records younger than the lag stays dirty.
        if config.min_compaction_lag_ms > 0 and (
            segment.max_timestamp_ms < 0
            or now_ms - segment.max_timestamp_ms < config.min_compaction_lag_ms
        ):
            first_uncleanable = min(first_uncleanable, segment.base_offset)
            break
    first_dirty = min(first_dirty, first_uncleanable)
    clean = sum(s.size_bytes for s in segments if s.next_offset <= first_dirty)
    dirty = sum(
        s.size_bytes
        for s in segments
        if s.base_offset >= first_dirty and s.next_offset <= first_uncleanable
    )
    return CleanableRange(first_dirty, first_uncleanable, clean, dirty)


def overdue_for_compaction(
    segments: Sequence[SegmentSummary],
    cleanable: CleanableRange,
    config: CompactionConfig,
    now_ms: int,
) -> bool:
    """max.compaction.lag.ms: the oldest dirty record has waited too long; clean whatever the
    ratio."""
    if config.max_compaction_lag_ms >= MAX_LAG:
        return False
    for segment in segments[:-1]:
        if (
            segment.base_offset >= cleanable.first_dirty
            and segment.next_offset > segment.base_offset
        ):
            first = segment.first_timestamp_ms
            return first >= 0 and now_ms - first > config.max_compaction_lag_ms
    return False


@dataclass(frozen=True)
class CleaningCandidate:
    name: str
    cleanable: CleanableRange
    overdue: bool
    min_ratio: float


def choose_log_to_clean(candidates: Iterable[CleaningCandidate]) -> CleaningCandidate | None:
    """Kafka's grabFilthiestCompactedLog: overdue logs first, then the highest dirty ratio that
    reaches its topic's min.cleanable.dirty.ratio; nothing to clean is None."""
    eligible = [
        c
        for c in candidates
        if c.cleanable.dirty_bytes > 0 and (c.overdue or c.cleanable.dirty_ratio >= c.min_ratio)
    ]
    if not eligible:
        return None
    return max(eligible, key=lambda c: (c.overdue, c.cleanable.dirty_ratio))


class OffsetMap:
    """Each key's latest offset in the dirty range, up to `max_entries` keys (Kafka sizes its
    map from log.cleaner.dedupe.buffer.size; here one entry per key)."""

    def __init__(self, max_entries: int) -> None:
        if max_entries <= 0:
            raise ValueError("an offset map needs room for at least one key")
        self.max_entries = max_entries
        self._latest: dict[bytes, int] = {}
        self.last_offset = -1  # the last offset put in the map

    def __len__(self) -> int:
        return len(self._latest)

    def put(self, key: bytes, offset: int) -> bool:
        """Record the key at `offset`; False (and nothing recorded) when the map is full."""
        if key not in self._latest and len(self._latest) >= self.max_entries:
            return False
        self._latest[key] = offset
        self.last_offset = max(self.last_offset, offset)
        return True

    def latest(self, key: bytes) -> int | None:
        return self._latest.get(key)


def record_retained(record: Record, offset_map: OffsetMap, tombstones_expired: bool) -> bool:
    """Kafka's shouldRetainRecord: keyless records go; a record superseded by a later one with
    the same key goes; a tombstone goes once its delete horizon has passed."""
    if record.key is None:
        return False
    latest = offset_map.latest(record.key)
    if latest is not None and record.offset < latest:
        return False
    return not (record.value is None and tombstones_expired)


@dataclass(frozen=True)
class FilteredBatch:
    data: bytes | None  # None: the batch is gone
    retained: int
    removed: int
    max_timestamp_ms: int


def filter_batch(
    buf: bytes | bytearray | memoryview,
    pos: int,
    offset_map: OffsetMap,
    now_ms: int,
    delete_retention_ms: int,
    *,
    retain_empty: bool = False,
) -> FilteredBatch:
    """The batch at `pos` with only the records that stay (see `record_retained`).

    A batch that keeps every record and needs no delete horizon is returned as it was. Control
    batches are kept as they are. `retain_empty` keeps an empty batch header when nothing is left
    (the last batch of a producer, so that its sequence state survives).
    """
    header = parse_batch_header(buf, pos)
    verify_batch(buf, pos, header)
    original = bytes(memoryview(buf)[pos : pos + header.size])
    if header.attributes & CONTROL_MASK:
        return FilteredBatch(original, header.records_count, 0, header.max_timestamp)
    payload = original[BATCH_HEADER_SIZE:]
    if header.compression is not Compression.NONE:
        payload = decompress(header.compression, payload)
    records = decode_records(payload, header)
    has_horizon = bool(header.attributes & DELETE_HORIZON_MASK)
    expired = has_horizon and now_ms >= header.base_timestamp
    kept = [r for r in records if record_retained(r, offset_map, expired)]
    has_tombstones = any(r.value is None for r in kept)
    needs_horizon = has_tombstones and not has_horizon
    if len(kept) == len(records) and not needs_horizon:
        return FilteredBatch(original, len(kept), 0, header.max_timestamp)
    removed = len(records) - len(kept)
    if not kept:
        if retain_empty:
            return FilteredBatch(_empty_batch(header), 0, removed, header.max_timestamp)
        return FilteredBatch(None, 0, removed, header.max_timestamp)
    horizon: int | None = None
    if has_tombstones:
        horizon = header.base_timestamp if has_horizon else now_ms + delete_retention_ms
    data = _rebuild_batch(header, kept, horizon)
    return FilteredBatch(data, len(kept), removed, max(r.timestamp for r in kept))


def _rebuild_batch(header: BatchHeader, records: list[Record], horizon: int | None) -> bytes:
    """A batch of `records` with the original base offset, last offset delta, producer fields
    and compression; the base timestamp is the delete horizon when there is one (KIP-534: record
    timestamps stay what they were, their deltas are taken from it)."""
    base_ts = horizon if horizon is not None else records[0].timestamp
    body = bytearray()
    for record in records:
        _encode_record(
            body,
            record.offset - header.base_offset,
            record.timestamp - base_ts,
            record.key,
            record.value,
            record.headers,
        )
    payload = bytes(body)
    if header.compression is not Compression.NONE:
        payload = compress(header.compression, payload)
    attributes = header.attributes & ~DELETE_HORIZON_MASK
    if horizon is not None:
        attributes |= DELETE_HORIZON_MASK
    return _pack(
        header, attributes, base_ts, max(r.timestamp for r in records), len(records), payload
    )


def _empty_batch(header: BatchHeader) -> bytes:
    attributes = header.attributes & ~0x07 & ~DELETE_HORIZON_MASK  # no compression, no horizon
    return _pack(header, attributes, header.base_timestamp, header.max_timestamp, 0, b"")


def _pack(
    header: BatchHeader,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    count: int,
    payload: bytes,
) -> bytes:
    batch = bytearray(BATCH_HEADER_SIZE)
    batch += payload
    _HEADER.pack_into(
        batch,
        0,
        header.base_offset,
        len(batch) - LOG_OVERHEAD,
        header.partition_leader_epoch,
        header.magic,
        0,
        attributes,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        count,
    )
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


def build_offset_map(
    batches: Iterable[tuple[BatchHeader, list[Record]]],
    offset_map: OffsetMap,
    stop_offset: int,
) -> int:
    """Fill the map from decoded batches below `stop_offset`; returns the offset the pass may
    clean up to (exclusive): `stop_offset`, or less when the map filled up."""
    for header, records in batches:
        if header.base_offset >= stop_offset:
            return stop_offset
        if header.attributes & CONTROL_MASK:
            continue
        for record in records:
            if record.offset >= stop_offset:
                return stop_offset
            if record.key is None:
                continue
            if not offset_map.put(record.key, record.offset):
                # Full: whatever this batch holds is cleaned next pass.
                return header.base_offset
    return stop_offset
