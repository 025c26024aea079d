"""One segment of a partition log: a `.log` file of record batches and its two indexes.

The segment appends whole batches whose offsets are already assigned, densely from its base
offset, and keeps what the log needs in memory: its size, the next offset, the largest timestamp
and the offset that carried it, the leader epoch of its last batch. Every `index.interval.bytes`
it records (batch last offset, batch position) in the offset index and (largest timestamp so far,
its offset) in the time index, as Kafka does.

Finding an offset means an index lookup and then a walk over batch headers with `pread`, reading
a chunk at a time; nothing is decoded. Reads return `FileSlice`s of whole batches. Only a search
by timestamp looks inside one batch, the one whose max timestamp reaches the target: its records
are walked one at a time, never decompressed whole (`protocol.record_validation`).

Loading takes one of two paths. `load()` trusts the data: it sanity-checks both indexes, checks
that the last offset-index entry points at a batch with that last offset, and walks the headers
after it to find the end; any doubt makes it return False. `recover()` trusts nothing: it reads
every batch from position 0, checks framing, CRC, increasing offsets and non-decreasing leader
epochs, cuts the file at the first batch that fails, and rebuilds both indexes on the way.

Offsets are dense (each batch starts where the previous one ended) unless the log is compacted:
compaction leaves holes where whole batches went (and a follower copies them), so there
`recover(dense=False)` only asks that offsets increase. A batch's offsets sit outside its CRC, so
a flipped base offset is then caught by the batch after it: an offset that goes backwards right
after a hole means the hole was the damage, and the cut is made at the batch that opened it.
A walk always advances by a whole batch (at least 61 bytes) and stops at the end of the file, so
no corrupt length can make it loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import crc32c

from epochlog.protocol.errors import CorruptRecordError
from epochlog.protocol.record_validation import RecordsError, find_record_at_or_after
from epochlog.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    BatchHeader,
    parse_batch_header,
    verify_batch,
)
from epochlog.storage.config import INT32_MAX, LogConfig
from epochlog.storage.errors import CorruptIndexError, LogDamageError, StorageError
from epochlog.storage.files import FileSlice, SharedFile
from epochlog.storage.index import OffsetIndex, TimeIndex
from epochlog.storage.layout import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file_name,
)
from epochlog.storage.txn_index import TransactionIndex

logger = logging.getLogger(__name__)

# Header walks need little; recovery reads more per call to keep syscalls few.
WALK_CHUNK = 16 * 1024
RECOVERY_CHUNK = 1024 * 1024
# Batches larger than this are CRC-checked piece by piece instead of read whole.
STREAMING_VERIFY_THRESHOLD = 8 * 1024 * 1024
NO_TIMESTAMP = -1


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer: the record's timestamp, its offset and its batch's leader epoch."""

    timestamp: int
    offset: int
    leader_epoch: int | None


class SegmentRecovery(NamedTuple):
    truncated_bytes: int
    # (epoch, first offset) for each leader epoch seen, in order, as the epoch cache wants them.
    epoch_starts: list[tuple[int, int]]
    # Why the scan stopped early, or None when the whole file was valid.
    problem: str | None


class LogSegment:
    """A `<base>.log` file with its `<base>.index` and `<base>.timeindex`."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        file_suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        # "" for a segment of the log; `.cleaned` / `.swap` while the cleaner builds one.
        self.file_suffix = file_suffix
        self.log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        self._file: SharedFile | None = SharedFile(self.log_path)
        self.size = self._file.size()
        self.offset_index = OffsetIndex(
            directory / (segment_file_name(base_offset, INDEX_SUFFIX) + file_suffix),
            base_offset,
            config.segment_index_bytes,
        )
        self.time_index = TimeIndex(
            directory / (segment_file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix),
            base_offset,
            config.segment_index_bytes,
        )
        self.txn_index = TransactionIndex(
            directory / (segment_file_name(base_offset, TXN_INDEX_SUFFIX) + file_suffix)
        )
        self.created_ms = now_ms
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.last_epoch = -1
        self._bytes_since_last_index_entry = 0
        self._first_batch_timestamp: int | None = None
        self._dirty = False
        # After `recover()`: the base offset of the last batch when it opened a hole in the
        # offsets (None otherwise), for the loader to judge against the next segment.
        self.hole_at_end: int | None = None

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        file_suffix: str = "",
    ) -> LogSegment:
        """A new empty segment. An empty `.log` left at this offset is reused; a non-empty one is
        refused, since rolling onto existing data would duplicate offsets."""
        log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        if log_path.exists() and log_path.stat().st_size > 0:
            raise StorageError(f"cannot create segment {log_path}: the file exists and has data")
        segment = cls(directory, base_offset, config, now_ms, file_suffix)
        segment.offset_index.reset()
        segment.time_index.reset()
        return segment

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        file_suffix: str = "",
    ) -> LogSegment:
        """An existing segment, not yet checked: call `load()` and, if it fails, `recover()`."""
        return cls(directory, base_offset, config, now_ms, file_suffix)

    def file_paths(self) -> tuple[Path, Path, Path, Path]:
        """The `.log`, `.index`, `.timeindex` and `.txnindex` paths (with the segment's file
        suffix); the last exists only when the segment holds an abort marker."""
        return (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path)

    # ------------------------------------------------------------------------- properties

    @property
    def file(self) -> SharedFile:
        if self._file is None:
            raise StorageError(f"segment {self.log_path} is closed")
        return self._file

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1

    @property
    def largest_timestamp(self) -> int:
        """What time retention compares: the largest record timestamp, or the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    @property
    def first_batch_timestamp(self) -> int | None:
        if self.size == 0:
            return None
        if self._first_batch_timestamp is None:
            header = self._parse_header(self.file.pread(BATCH_HEADER_SIZE, 0), 0, 0)
            self._first_batch_timestamp = header.max_timestamp
        return self._first_batch_timestamp

    def should_roll(
        self, append_size: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        """Kafka's LogSegment.shouldRoll for an append of `append_size` bytes."""
        if self.size > self.config.segment_bytes - append_size:
            return True
        if self.size > 0 and self.time_waited_for_roll(now_ms, max_timestamp) > (
            self.config.segment_ms
        ):
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return last_offset - self.base_offset > INT32_MAX

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Age of the segment: by record time when its first batch has a timestamp, as Kafka."""
        first = self.first_batch_timestamp
        if first is not None and first >= 0:
            return message_timestamp - first
        return now_ms - self.created_ms

    # ------------------------------------------------------------------------------ writes

    def append(
        self, records: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]
    ) -> None:
        """Append whole batches; `headers` describe them with their final offsets."""
        if not headers:
            return
        if headers[0].base_offset < self.next_offset:
            raise StorageError(
                f"segment {self.log_path}: append at offset {headers[0].base_offset}, "
                f"the segment continues at {self.next_offset}"
            )
        position = self.size
        self.file.pwrite(records, position)
        for header in headers:
            self._track_batch(position, header)
            position += header.size
        self.size = position
        self._dirty = True

    def _track_batch(self, position: int, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if position == 0:
            self._first_batch_timestamp = header.max_timestamp
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += header.size
        self.next_offset = header.next_offset
        self.last_epoch = header.partition_leader_epoch

    def _reset_state(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.last_epoch = -1
        self._bytes_since_last_index_entry = 0
        self._first_batch_timestamp = None

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset` (a batch holding `offset` goes
        whole); returns the bytes removed."""
        found = self.find_position(offset)
        if found is None:
            return 0
        position, header = found
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        removed = self.size - position
        self.file.truncate(position)
        self.size = position
        self._dirty = True
        self._load_tail()
        self._bytes_since_last_index_entry = 0
        return removed

    def on_become_inactive(self) -> None:
        """The segment stops being the active one: record its final largest timestamp (so a
        reload sees it without a scan), flush, and give back the index descriptors."""
        if self.offset_of_max_timestamp >= self.base_offset:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
            self._dirty = True
        self.flush()
        self.offset_index.close()
        self.time_index.close()

    def flush(self) -> None:
        if self._dirty and self._file is not None:
            self._file.fsync()
            self.offset_index.flush()
            self.time_index.flush()
            self._dirty = False
        self.txn_index.flush()

    def close(self, flush: bool = True) -> None:
        """Flush (unless the segment is about to be deleted) and let go of the files; slices
        already handed out keep theirs open."""
        if self._file is None:
            return
        if flush:
            self.on_become_inactive()
        self.offset_index.close()
        self.time_index.close()
        self._file = None

    def discard(self) -> None:
        """Let go of the files without writing or deleting anything (the cleaner renamed them
        away); slices already handed out keep reading theirs."""
        self.offset_index.discard()
        self.time_index.discard()
        self._file = None

    def delete(self) -> None:
        """Remove the files. An in-flight sendfile keeps reading the unlinked `.log`."""
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log_path)
        self._file = None

    # ------------------------------------------------------------------------------- reads

    def find_position(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`, or None."""
        if offset >= self.next_offset:
            return None
        entry = self.offset_index.lookup(offset)
        start = entry[1] if entry is not None else 0
        for position, header in self._batches(start):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset_exclusive: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice | None:
        """Whole batches from the one holding `start_offset`: at most `max_bytes` of them (but at
        least the first when `min_one_batch`), none whose last offset reaches
        `max_offset_exclusive`. None when `start_offset` is past this segment."""
        found = self.find_position(start_offset)
        if found is None:
            return None
        start, first = found
        if max_offset_exclusive is not None and first.last_offset >= max_offset_exclusive:
            return FileSlice.empty()
        if max_offset_exclusive is None or max_offset_exclusive >= self.next_offset:
            limit = self.size
        else:
            boundary = self.find_position(max_offset_exclusive)
            limit = boundary[0] if boundary is not None else self.size
        end = min(limit, start + max_bytes)
        if min_one_batch:
            end = max(end, start + first.size)
        if end < limit:
            end = self._batch_boundary_at_or_before(start, end)
        if end <= start:
            return FileSlice.empty()
        return FileSlice(self.file, start, end - start)

    def _batch_boundary_at_or_before(self, start: int, position: int) -> int:
        """The end of the last whole batch that ends at or before `position`, walking from
        `start` (itself a batch boundary) or from a nearer indexed batch."""
        indexed = self.offset_index.floor_position(position)
        walk_from = indexed if indexed is not None and indexed > start else start
        boundary = walk_from
        for batch_position, header in self._batches(walk_from):
            if batch_position + header.size > position:
                break
            boundary = batch_position + header.size
        return boundary

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return self.file.pread(header.size, position)

    def iter_batches(self, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the batches from `start`, headers only, no CRC check."""
        return self._batches(start)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record at or after `starting_offset` whose timestamp is >= `timestamp`."""
        start = 0
        entry = self.time_index.last_entry_before(timestamp)
        if entry is not None:
            indexed = self.offset_index.lookup(entry[1])
            start = indexed[1] if indexed is not None else 0
        if starting_offset > self.base_offset:
            indexed = self.offset_index.lookup(starting_offset)
            if indexed is not None:
                start = max(start, indexed[1])
        for position, header in self._batches(start):
            if header.last_offset < starting_offset or header.max_timestamp < timestamp:
                continue
            return self._first_record_at_or_after(position, header, timestamp, starting_offset)
        return None

    def record_with_max_timestamp(self) -> TimestampAndOffset | None:
        """The first record carrying the segment's largest timestamp (ListOffsets -3)."""
        if self.offset_of_max_timestamp < self.base_offset:
            return None
        found = self.find_position(self.offset_of_max_timestamp)
        if found is None or found[1].max_timestamp != self.max_timestamp:
            # Cannot happen while the bookkeeping is right; a scan is the honest fallback.
            found = next(
                ((p, h) for p, h in self._batches(0) if h.max_timestamp == self.max_timestamp),
                None,
            )
            if found is None:
                return None
        position, header = found
        return self._first_record_at_or_after(position, header, self.max_timestamp, -1)

    def _first_record_at_or_after(
        self, position: int, header: BatchHeader, timestamp: int, starting_offset: int
    ) -> TimestampAndOffset:
        """The first record of the batch at `position` (whose max timestamp is >= `timestamp`)
        at or past both `timestamp` and `starting_offset`. Its records are walked one at a time,
        a compressed batch decompressed as a stream that stops at that record and at the log's
        max_decompressed_bytes; a batch bigger than that bound is not read at all."""
        epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None
        bound = self.config.max_decompressed_bytes
        if not header.is_log_append_time:
            problem: str | None = None
            if header.size > bound:
                problem = f"it takes {header.size} bytes, more than the {bound} a read may hold"
            else:
                try:
                    found = find_record_at_or_after(
                        self.read_batch(position, header),
                        header,
                        timestamp,
                        starting_offset,
                        max_decompressed_bytes=bound,
                    )
                except RecordsError as exc:
                    problem = str(exc)
                else:
                    if found is not None:
                        return TimestampAndOffset(found.timestamp, found.offset, epoch)
            if problem is not None:
                # Written before produce validation walked records, or by an older broker: the
                # CRC held, so answer at batch level, as for LogAppendTime.
                logger.warning(
                    "%s: batch at %d (offsets %d-%d) not searched record by record: %s",
                    self.log_path,
                    position,
                    header.base_offset,
                    header.last_offset,
                    problem,
                )
        # LogAppendTime: every record carries the batch's timestamp.
        return TimestampAndOffset(
            header.max_timestamp, max(header.base_offset, starting_offset), epoch
        )

    # ------------------------------------------------------------------------- load/recover

    def load(self) -> bool:
        """Trust the files: check the indexes and find the end of the data. False means the
        segment needs `recover()` (an index missing or damaged, or a torn last batch)."""
        if not (self.offset_index.existed and self.time_index.existed):
            logger.info("%s: index files missing, rebuilding", self.log_path)
            return False
        try:
            self.offset_index.sanity_check(self.size)
            self._load_tail()
            self.time_index.sanity_check(self.last_offset)
        except (CorruptIndexError, CorruptRecordError, LogDamageError) as exc:
            logger.warning("%s: %s; recovering the segment", self.log_path, exc)
            return False
        return True

    def _load_tail(self) -> None:
        """Restore the in-memory state from the indexes and the batches after the last entry."""
        self._reset_state()
        entry = self.offset_index.last_entry
        start = entry[1] if entry is not None else 0
        time_entry = self.time_index.last_entry
        if time_entry is not None:
            self.max_timestamp, self.offset_of_max_timestamp = time_entry
        expected_last_offset = entry[0] if entry is not None else None
        for _, header in self._batches(start):
            if expected_last_offset is not None:
                if header.last_offset != expected_last_offset:
                    raise CorruptIndexError(
                        f"index entry {entry} points at a batch ending at {header.last_offset}"
                    )
                expected_last_offset = None
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            self.next_offset = header.next_offset
            self.last_epoch = header.partition_leader_epoch
        self._bytes_since_last_index_entry = self.size - start

    def recover(self, previous_epoch: int = -1, dense: bool = True) -> SegmentRecovery:
        """Verify every batch, cut the file at the first bad one, rebuild both indexes.

        `previous_epoch` is the leader epoch of the previous segment's last batch: epochs never
        go down along a log, and the epoch field is not covered by the CRC. With `dense` each
        batch must start where the previous one ended; otherwise (a compacted log) offsets need
        only increase.
        """
        result, hole_at = self._recover_scan(previous_epoch, None, dense)
        if hole_at is not None:
            # The batch that opened a hole was followed by one going backwards: its base offset
            # is the damage. Scan again, ending the segment before it.
            result, _ = self._recover_scan(previous_epoch, hole_at, dense)
        self.txn_index.truncate_to(self.next_offset)  # aborts whose marker was cut go with it
        return result

    def _recover_scan(
        self, previous_epoch: int, limit: int | None, dense: bool
    ) -> tuple[SegmentRecovery, int | None]:
        """One recovery scan, ending at `limit` (a position) when given. Returns the recovery and,
        when the scan stopped at an offset going backwards right after a hole, the position of
        the batch that opened the hole."""
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_state()
        self.size = self.file.size()
        valid_end = 0
        epoch_floor = previous_epoch
        epoch_starts: list[tuple[int, int]] = []
        problem: str | None = None
        hole_position: int | None = None  # the last batch, when it opened a hole
        last_base = -1
        suspect: int | None = None
        try:
            for position, header in self._batches(0, verify=True):
                if limit is not None and position >= limit:
                    problem = (
                        f"batch at position {position} follows an offset that jumped forward and "
                        "then went back (a damaged base offset)"
                    )
                    break
                if header.base_offset < self.next_offset and hole_position is not None:
                    suspect = hole_position
                self._check_recovered_batch(position, header, epoch_floor, dense)
                hole_position = position if header.base_offset > self.next_offset else None
                epoch = header.partition_leader_epoch
                if epoch >= 0 and (not epoch_starts or epoch > epoch_starts[-1][0]):
                    epoch_starts.append((epoch, header.base_offset))
                epoch_floor = epoch
                self._track_batch(position, header)
                valid_end = position + header.size
                last_base = header.base_offset
        except (CorruptRecordError, LogDamageError) as exc:
            problem = str(exc)
            if suspect is not None:
                return SegmentRecovery(0, [], problem), suspect
        # Whether the last batch opened a hole: the next segment's base offset judges it.
        self.hole_at_end = last_base if hole_position is not None else None
        truncated = self.size - valid_end
        if truncated:
            logger.warning(
                "%s: cutting %d bytes at position %d: %s",
                self.log_path,
                truncated,
                valid_end,
                problem,
            )
            self.file.truncate(valid_end)
            self.size = valid_end
        if self.offset_of_max_timestamp >= self.base_offset:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
        self._dirty = True
        self.flush()
        return SegmentRecovery(truncated, epoch_starts, problem), None

    def _check_recovered_batch(
        self, position: int, header: BatchHeader, epoch_floor: int, dense: bool
    ) -> None:
        # Offsets and the leader epoch sit outside the CRC; these checks catch them flipped.
        where = f"{self.log_path}: batch at position {position}"
        if header.base_offset < self.next_offset or (
            dense and header.base_offset != self.next_offset
        ):
            wanted = f"{self.next_offset}" if dense else f"{self.next_offset} or more"
            raise CorruptRecordError(
                f"{where} has base offset {header.base_offset}, {wanted} was expected"
            )
        if header.last_offset_delta < 0 or header.last_offset - self.base_offset > INT32_MAX:
            raise CorruptRecordError(f"{where} has last offset delta {header.last_offset_delta}")
        if header.partition_leader_epoch < epoch_floor:
            raise CorruptRecordError(
                f"{where} has leader epoch {header.partition_leader_epoch}, below the "
                f"previous batch's {epoch_floor}"
            )

    # ------------------------------------------------------------------------- batch walks

    def _damage(self, position: int, problem: object) -> LogDamageError:
        return LogDamageError(
            f"{self.log_path}, position {position}: {problem}", self.base_offset, position
        )

    def _parse_header(self, buf: bytes, offset_in_buf: int, position: int) -> BatchHeader:
        try:
            return parse_batch_header(buf, offset_in_buf)
        except CorruptRecordError as exc:
            raise self._damage(position, exc) from None

    def _batches(self, start: int, verify: bool = False) -> Iterator[tuple[int, BatchHeader]]:
        """Walk batches from `start`, reading a chunk at a time. Raises LogDamageError at a
        batch that is torn, malformed or (with `verify`) fails its CRC."""
        end = self.size
        chunk = RECOVERY_CHUNK if verify else WALK_CHUNK
        buf = b""
        buf_start = start
        position = start
        while position < end:
            rel = position - buf_start
            if len(buf) - rel < BATCH_HEADER_SIZE:
                buf = self.file.pread(min(chunk, end - position), position)
                buf_start, rel = position, 0
            header = self._parse_header(buf, rel, position)
            if header.size > end - position:
                raise self._damage(
                    position,
                    f"batch of {header.size} bytes is torn, {end - position} bytes remain in "
                    "the segment",
                )
            if verify:
                if header.size > STREAMING_VERIFY_THRESHOLD:
                    self._verify_streaming(position, header)
                else:
                    if len(buf) - rel < header.size:
                        buf = self.file.pread(max(chunk, header.size), position)
                        buf_start, rel = position, 0
                    try:
                        verify_batch(buf, rel, header)
                    except CorruptRecordError as exc:
                        raise self._damage(position, exc) from None
            yield position, header
            position += header.size

    def _verify_streaming(self, position: int, header: BatchHeader) -> None:
        crc = 0
        cursor = position + ATTRIBUTES_OFFSET
        stop = position + header.size
        while cursor < stop:
            piece = self.file.pread(min(RECOVERY_CHUNK, stop - cursor), cursor)
            if not piece:
                raise self._damage(position, "batch is torn")
            crc = crc32c.crc32c(piece, crc)
            cursor += len(piece)
        if crc != header.crc:
            raise self._damage(
                position,
                f"batch at base offset {header.base_offset} fails its CRC: stored "
                f"{header.crc:#010x}, computed {crc:#010x}",
            )
