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

Never above the high watermark either: a segment holding uncommitted records may still be
truncated by a follower, so it waits (`cleanable_range`'s `high_watermark`). The segments below
the pass's end are rewritten in groups that fit one segment (`group_segments`, Kafka's
groupSegmentsBySize); each group becomes one cleaned segment named by its first base offset.
A producer's last batch is kept even when emptied (`retain_empty`), so that the producer state
rebuilt from batch headers still knows the producer's sequence.

Transactions (Kafka's `CleanedTransactionMetadata` and `shouldDiscardBatch`). The cleaner only
ever sees decided transactions: its range ends at the last stable offset (the broker hands it
min(HW, first unstable offset)). `CleanedTransactions` walks the batches in offset order with the
aborted transactions of the range (from the `.txnindex`): a transactional batch of an aborted
transaction is discarded whole (its keys never enter the offset map, so an aborted record never
supersedes a committed one); a marker may go once no batch of its transaction was seen in this
pass, i.e. once every data batch of it is gone. Like a tombstone, such a marker is first kept
with a delete horizon (now + `delete.retention.ms`, in its base timestamp, KIP-534) and dropped
by a pass after the horizon, so a consumer that read the data before the cleaning still sees the
marker. An ABORT marker kept because its data was still there is indexed in the cleaned
segment's `.txnindex`; one whose data is gone needs no entry.

Kept records are copied as their bytes (`scan_records` finds each record's span, key and whether
it is a tombstone; `filter_batch` joins the spans that stay and re-frames the batch with a new
count and CRC): their offset and timestamp deltas stay valid because the base offset and base
timestamp do not change. Only a batch that gets a delete horizon is re-encoded, since its base
timestamp becomes the horizon.

The I/O around it (segment files, `.cleaned` / `.swap`, the checkpoint, the cleaner thread) is
in `cleaner.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from epochlog.protocol.compression import Compression, compress, decompress
from epochlog.protocol.control_records import EndTxnMarker
from epochlog.protocol.errors import CorruptRecordError
from epochlog.protocol.records import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    BatchHeader,
    Record,
    _encode_record,
    assemble_batch,
    decode_records,
    parse_batch_header,
    verify_batch,
)
from epochlog.protocol.varint import decode_varint
from epochlog.storage.txn_index import AbortedTxn

MAX_LAG = 2**63 - 1
INT32_MAX = 2**31 - 1


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
    high_watermark: int | None = None,
) -> CleanableRange:
    """The range one pass may clean. `segments` are in offset order; the last is active. A
    segment reaching past `high_watermark` (when known) is not cleanable, nor any after it."""
    first_dirty = log_start_offset if checkpoint is None else max(checkpoint, log_start_offset)
    first_uncleanable = segments[-1].base_offset if segments else first_dirty
    for segment in segments[:-1]:
        if high_watermark is not None and segment.next_offset > high_watermark:
            first_uncleanable = min(first_uncleanable, segment.base_offset)
            break
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


# A record as the cleaner sees it: (start, end) of its bytes in the batch body, its offset and
# timestamp deltas, its key (None when keyless) and whether it is a tombstone (null value).
RecordSpan = tuple[int, int, int, int, "bytes | None", bool]

_ZIGZAG_1 = [(b >> 1) ^ -(b & 1) for b in range(128)]


def scan_records(payload: bytes, count: int, where: str = "batch") -> list[RecordSpan]:
    """The records of a (decompressed) batch body, without copying values or decoding headers.
    Raises CorruptRecordError when the body does not hold `count` whole records.

    Varints of one and two bytes (every length, delta and key size of a 100 B record) are
    decoded inline: this loop is most of a cleaner pass's CPU."""
    zz = _ZIGZAG_1
    varint = decode_varint
    spans: list[RecordSpan] = []
    append = spans.append
    end = len(payload)
    pos = 0
    try:
        for _ in range(count):
            start = pos
            b = payload[pos]
            if b < 128:
                length = zz[b]
                pos += 1
            else:
                b2 = payload[pos + 1]
                if b2 < 128:
                    raw = (b & 0x7F) | (b2 << 7)
                    length = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    length, pos = varint(payload, pos)
            record_end = pos + length
            if length <= 0 or record_end > end:
                raise CorruptRecordError(
                    f"{where}: record {len(spans)} has length {length}, {end - pos} bytes remain"
                )
            b = payload[pos + 1]  # after the attributes byte: the timestamp delta
            if b < 128:
                ts_delta = zz[b]
                pos += 2
            else:
                b2 = payload[pos + 2]
                if b2 < 128:
                    raw = (b & 0x7F) | (b2 << 7)
                    ts_delta = (raw >> 1) ^ -(raw & 1)
                    pos += 3
                else:
                    ts_delta, pos = varint(payload, pos + 1)
            b = payload[pos]
            if b < 128:
                offset_delta = zz[b]
                pos += 1
            else:
                b2 = payload[pos + 1]
                if b2 < 128:
                    raw = (b & 0x7F) | (b2 << 7)
                    offset_delta = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    offset_delta, pos = varint(payload, pos)
            b = payload[pos]
            if b < 128:
                n = zz[b]
                pos += 1
            else:
                n, pos = varint(payload, pos)
            if n >= 0:
                key: bytes | None = payload[pos : pos + n]
                pos += n
            else:
                key = None
            # A value length of -1 (the zig-zag varint 0x01) is a tombstone.
            append((start, record_end, offset_delta, ts_delta, key, payload[pos] == 1))
            pos = record_end
    except IndexError:
        raise CorruptRecordError(f"{where}: record {len(spans)} runs past its batch") from None
    if pos != end:
        raise CorruptRecordError(f"{where}: {end - pos} bytes follow its {count} records")
    return spans


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
    verify: bool = True,
    discard_records: bool = False,
    marker_removable: bool = False,
) -> FilteredBatch:
    """The batch at `pos` with only the records that stay (see `record_retained`).

    A batch that keeps every record and needs no delete horizon is returned as it was. Control
    batches are kept as they are unless `marker_removable` (see `CleanedTransactions`): then one
    without a delete horizon gets one, and one past its horizon goes. `discard_records` (a batch
    of an aborted transaction) removes every record. `retain_empty` keeps an empty batch header
    when nothing is left (the last batch of a producer, so that its sequence state survives).
    With `verify` the CRC is checked first (CorruptRecordError).
    """
    header = parse_batch_header(buf, pos)
    if verify:
        verify_batch(buf, pos, header)
    view = memoryview(buf)
    if header.attributes & CONTROL_MASK:
        return _filter_control_batch(
            view, pos, header, now_ms, delete_retention_ms, marker_removable
        )
    if discard_records:
        if retain_empty:
            return FilteredBatch(
                _empty_batch(header), 0, header.records_count, header.max_timestamp
            )
        return FilteredBatch(None, 0, header.records_count, header.max_timestamp)
    payload = bytes(view[pos + BATCH_HEADER_SIZE : pos + header.size])
    if header.compression is not Compression.NONE:
        payload = decompress(header.compression, payload)
    spans = scan_records(payload, header.records_count, f"batch at offset {header.base_offset}")
    has_horizon = bool(header.attributes & DELETE_HORIZON_MASK)
    expired = has_horizon and now_ms >= header.base_timestamp
    latest = offset_map._latest.get
    base = header.base_offset
    kept: list[RecordSpan] = []
    tombstones = False
    for span in spans:
        key = span[4]
        if key is None:
            continue
        found = latest(key)
        if found is not None and base + span[2] < found:
            continue
        if span[5]:
            if expired:
                continue
            tombstones = True
        kept.append(span)
    needs_horizon = tombstones and not has_horizon
    if len(kept) == len(spans) and not needs_horizon:
        original = bytes(view[pos : pos + header.size])
        return FilteredBatch(original, len(kept), 0, header.max_timestamp)
    removed = len(spans) - len(kept)
    if not kept:
        if retain_empty:
            return FilteredBatch(_empty_batch(header), 0, removed, header.max_timestamp)
        return FilteredBatch(None, 0, removed, header.max_timestamp)
    if needs_horizon:
        data = _rebuild_with_horizon(header, payload, kept, now_ms + delete_retention_ms)
        return FilteredBatch(data, len(kept), removed, parse_batch_header(data).max_timestamp)
    body = b"".join([payload[span[0] : span[1]] for span in kept])
    if header.compression is not Compression.NONE:
        body = compress(header.compression, body)
    attributes = header.attributes
    if not tombstones:
        attributes &= ~DELETE_HORIZON_MASK  # the horizon's base timestamp stays a valid base
    if header.is_log_append_time:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + max(span[3] for span in kept)
    data = _pack(header, attributes, header.base_timestamp, max_timestamp, len(kept), body)
    return FilteredBatch(data, len(kept), removed, max_timestamp)


def _filter_control_batch(
    view: memoryview,
    pos: int,
    header: BatchHeader,
    now_ms: int,
    delete_retention_ms: int,
    removable: bool,
) -> FilteredBatch:
    original = bytes(view[pos : pos + header.size])
    kept = FilteredBatch(original, header.records_count, 0, header.max_timestamp)
    if not removable:
        return kept
    if header.attributes & DELETE_HORIZON_MASK:
        if now_ms >= header.base_timestamp:
            return FilteredBatch(None, 0, header.records_count, header.max_timestamp)
        return kept
    if header.records_count == 0:
        return FilteredBatch(None, 0, 0, header.max_timestamp)  # an emptied marker: nothing to see
    payload = original[BATCH_HEADER_SIZE:]
    if header.compression is not Compression.NONE:
        payload = decompress(header.compression, payload)
    spans = scan_records(payload, header.records_count, f"batch at offset {header.base_offset}")
    data = _rebuild_with_horizon(header, payload, spans, now_ms + delete_retention_ms)
    return FilteredBatch(data, len(spans), 0, parse_batch_header(data).max_timestamp)


@dataclass
class _AbortedInPass:
    txn: AbortedTxn
    last_seen_batch: int | None = None  # last offset of the last batch of it this pass saw


class CleanedTransactions:
    """What a cleaning pass knows of transactions, fed every batch of its range in offset order
    (Kafka's CleanedTransactionMetadata). `aborted` are the aborted transactions overlapping the
    range (`PartitionLog.collect_aborted_transactions`)."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda txn: txn.first_offset)
        self._next = 0
        self._aborted: dict[int, _AbortedInPass] = {}  # producer id -> its aborted txn, begun
        self._committed: set[int] = set()  # producers with a batch of an undecided-here txn
        # ABORT markers kept because data of their transaction was still there, in marker
        # order: the cleaned segment's `.txnindex`.
        self.kept_aborted: list[AbortedTxn] = []

    def _begin_up_to(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            txn = self._pending[self._next]
            self._aborted[txn.producer_id] = _AbortedInPass(txn)
            self._next += 1

    def discard_data_batch(self, header: BatchHeader) -> bool:
        """Whether this data batch belongs to an aborted transaction (its records all go)."""
        self._begin_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._aborted.get(header.producer_id)
        if aborted is not None:
            aborted.last_seen_batch = header.last_offset
            return True
        self._committed.add(header.producer_id)
        return False

    def marker_removable(self, header: BatchHeader, marker: EndTxnMarker | None) -> bool:
        """Whether this control batch may go (after its delete horizon): no batch of its
        transaction was seen in this pass. `marker` is its decoded record (None: not a
        transaction marker, or an empty batch)."""
        self._begin_up_to(header.last_offset)
        if header.records_count == 0:
            return True  # already emptied by an earlier pass
        if marker is None:
            return False
        if not marker.is_commit:
            aborted = self._aborted.pop(header.producer_id, None)
            if aborted is not None and aborted.last_seen_batch is not None:
                self.kept_aborted.append(aborted.txn)
                return False
            return True
        if header.producer_id in self._committed:
            self._committed.discard(header.producer_id)
            return False
        return True


def _rebuild_with_horizon(
    header: BatchHeader, payload: bytes, kept: list[RecordSpan], horizon: int
) -> bytes:
    """The kept records re-encoded with the delete horizon as the base timestamp (KIP-534:
    record timestamps stay what they were, their deltas are taken from the horizon)."""
    wanted = {header.base_offset + span[2] for span in kept}
    records = [r for r in decode_records(payload, header) if r.offset in wanted]
    body = bytearray()
    for record in records:
        _encode_record(
            body,
            record.offset - header.base_offset,
            record.timestamp - horizon,
            record.key,
            record.value,
            record.headers,
        )
    data = bytes(body)
    if header.compression is not Compression.NONE:
        data = compress(header.compression, data)
    attributes = header.attributes | DELETE_HORIZON_MASK
    max_timestamp = max(r.timestamp for r in records)
    return _pack(header, attributes, horizon, max_timestamp, len(records), data)


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
    return assemble_batch(
        header._replace(
            attributes=attributes,
            base_timestamp=base_timestamp,
            max_timestamp=max_timestamp,
            records_count=count,
        ),
        payload,
    )


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


def add_batch_to_offset_map(
    payload: bytes, header: BatchHeader, offset_map: OffsetMap, stop_offset: int
) -> int | None:
    """Put the keys of one batch (its decompressed body) into the map. None when the whole batch
    went in; otherwise the offset the pass must stop at (exclusive): `stop_offset` when the
    batch reaches it, or the batch's base offset when the map filled up inside it."""
    if header.base_offset >= stop_offset:
        return stop_offset
    if header.attributes & CONTROL_MASK:
        return None
    base = header.base_offset
    latest = offset_map._latest
    room = offset_map.max_entries
    for span in scan_records(payload, header.records_count, f"batch at offset {base}"):
        key = span[4]
        if key is None:
            continue
        offset = base + span[2]
        if offset >= stop_offset:
            return stop_offset
        if key not in latest and len(latest) >= room:
            return base  # full: whatever this batch holds is cleaned next pass
        latest[key] = offset
        if offset > offset_map.last_offset:
            offset_map.last_offset = offset
    return None


def group_segments(
    segments: Sequence[SegmentSummary],
    max_bytes: int,
    max_index_bytes: int,
    index_bytes: Sequence[int] | None = None,
) -> list[list[int]]:
    """Kafka's groupSegmentsBySize: consecutive segments (their indexes in `segments`) that the
    cleaner rewrites into one segment, each group's total size at most `max_bytes`, its offsets
    within an int32 of its base and its index entries within `max_index_bytes` (a group always
    holds at least one segment)."""
    groups: list[list[int]] = []
    i = 0
    while i < len(segments):
        group = [i]
        size = segments[i].size_bytes
        index_size = index_bytes[i] if index_bytes is not None else 0
        base = segments[i].base_offset
        i += 1
        while i < len(segments):
            candidate = segments[i]
            more_index = index_bytes[i] if index_bytes is not None else 0
            if (
                size + candidate.size_bytes > max_bytes
                or index_size + more_index > max_index_bytes
                or candidate.next_offset - 1 - base > INT32_MAX
            ):
                break
            group.append(i)
            size += candidate.size_bytes
            index_size += more_index
            i += 1
        groups.append(group)
    return groups


def producers_last_batches(headers: Iterable[BatchHeader]) -> dict[int, int]:
    """Producer id -> the last offset of its last batch, from batch headers in log order: the
    batches `filter_batch` must keep even when emptied (`retain_empty`)."""
    last: dict[int, int] = {}
    for header in headers:
        if header.producer_id >= 0 and not header.attributes & CONTROL_MASK:
            last[header.producer_id] = header.last_offset
    return last
