"""The log of one partition: a directory of segments with increasing offsets, and its epochs.

`PartitionLog` owns `<log.dir>/<topic>-<partition>/`: segments sorted by base offset (the last one
is active and takes appends), the log start offset (first offset still readable), the log end
offset (next offset to assign), the recovery point (offsets below it are fsynced), and the leader
epoch cache with its `leader-epoch-checkpoint` file. Each segment's `.txnindex` lists the aborted
transactions whose markers it holds (`append_aborted_txn`, `collect_aborted_transactions`); the
`.snapshot` files hold producer state, written through the owner's `producer_snapshot_writer`
at each roll and clean close, and cut with the log.

Appends take raw record batches and never decode records. A leader append checks every batch
(framing and CRC, then Kafka's producer rules), and only when all pass stamps consecutive offsets
and the leader epoch into the headers in place and writes the bytes, so a bad batch changes
nothing. A follower append takes the leader's offsets and epochs as they are, but must continue
at or past the log end offset (a compacted leader log has holes where whole batches went).
Before an append that would overflow the active segment (size, age, index capacity), the log
rolls: the old segment is sealed and fsynced and the recovery point moves to the new segment's
base offset.

Reads return a `FileSlice` of whole batches from a single segment, never a batch that reaches
`max_offset_exclusive` (the broker passes the high watermark). Retention deletes whole segments
from the front, by age (largest timestamp), by total size (only with cleanup.policy `delete`),
or below a raised log start offset, never past the high watermark. Nothing here is thread-safe:
one event loop owns a log. The log cleaner reads sealed segments from its own thread (their
files are only appended to while active) and hands its result back to the owner, which swaps
it in with `replace_segments`.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from epochlog.metrics.process_stats import STATS
from epochlog.protocol.errors import CorruptRecordError, InvalidRecordError
from epochlog.protocol.records import (
    BatchHeader,
    iter_batches,
    parse_batch_header,
    set_log_append_time,
    stamp_batch,
)
from epochlog.storage.checkpoint import (
    DeferrableEpochCheckpoint,
    LeaderEpochCheckpointFile,
    PartitionMetadataFile,
)
from epochlog.storage.config import LogConfig
from epochlog.storage.epoch_cache import EpochEntry, LeaderEpochCache
from epochlog.storage.errors import (
    CheckpointFormatError,
    InconsistentTopicIdError,
    LeaderEpochRegressionError,
    LogDamageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from epochlog.storage.files import FileSlice, fsync_dir
from epochlog.storage.layout import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    PARTITION_METADATA,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    parse_log_dir_name,
    segment_file_name,
)
from epochlog.storage.log_loader import load_segments
from epochlog.storage.producer_snapshot import ProducerSnapshotEntry, ProducerSnapshots
from epochlog.storage.segment import LogSegment, TimestampAndOffset
from epochlog.storage.txn_index import AbortedTxn

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What an append did, for the Produce response and the replica manager."""

    first_offset: int  # -1 for an empty follower append
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    batch_count: int
    record_count: int
    size_in_bytes: int
    # The appended batches' headers as written (offsets and epochs final), so that a caller
    # tracking them (producer state) does not parse the batches again.
    headers: tuple[BatchHeader, ...] = ()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionLog:
    """One partition's segmented log. Use `PartitionLog.open`."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        log_start_offset: int,
        epoch_cache: LeaderEpochCache,
        epoch_checkpoint: DeferrableEpochCheckpoint,
    ) -> None:
        self.directory = directory
        self.topic, self.partition = parse_log_dir_name(directory.name)
        self._segments = segments
        self._config = config
        self._bases = [segment.base_offset for segment in segments]
        self.log_start_offset = log_start_offset
        self.recovery_point = self.log_end_offset
        self.last_flush_ms = _now_ms()  # for flush.ms
        self.leader_epoch_cache = epoch_cache
        self.epoch_checkpoint = epoch_checkpoint
        self._metadata_file = PartitionMetadataFile(directory / PARTITION_METADATA)
        self._topic_id: uuid.UUID | None = None
        self._closed = False
        # Counts truncations and damage cuts, so the cleaner can tell that segments it read may
        # have changed; and the lowest offset truncated to since the cleaner last looked.
        self.truncations = 0
        self.lowest_truncation: int | None = None
        # Whether a hole in the offsets is damage (False once the log is or was compacted).
        self.dense_offsets = not config.compact
        self.producer_snapshots = ProducerSnapshots(directory)
        # Set by the log's owner (the partition): writes its producer state as a snapshot at the
        # given offset. Called when a segment rolls and when the log closes cleanly.
        self.producer_snapshot_writer: Callable[[int], None] | None = None

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = False,
        topic_id: uuid.UUID | None = None,
        now_ms: int | None = None,
        dense_offsets: bool | None = None,
    ) -> PartitionLog:
        """Open (creating if needed) the partition dir and load it.

        With `had_clean_shutdown` False every segment holding offsets >= `recovery_point` is
        verified batch by batch and cut at the first torn or corrupt batch (see log_loader).
        `dense_offsets` (by default: the log is not compacted) makes a hole in the offsets
        damage; a compacted log has holes where the cleaner removed batches.
        """
        config = config or LogConfig()
        now = _now_ms() if now_ms is None else now_ms
        directory = Path(directory)
        parse_log_dir_name(directory.name)
        directory.mkdir(parents=True, exist_ok=True)
        checkpoint = LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT)
        trusted = True
        try:
            entries: list[EpochEntry] = checkpoint.read()
            if not entries and checkpoint.is_empty_file():
                # Written checkpoints have two header lines; an empty file is a rename that reached
                # the disk before its data (a crash inside a durable batch): not to be trusted.
                raise CheckpointFormatError(checkpoint.path, None, "the file is empty")
        except CheckpointFormatError as exc:
            logger.warning("%s; rebuilding the leader epoch cache from the log", exc)
            entries, trusted = [], False
        deferrable = DeferrableEpochCheckpoint(checkpoint)
        cache = LeaderEpochCache(entries, on_change=deferrable.on_change)
        loaded = load_segments(
            directory,
            config,
            cache,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
            epoch_cache_trusted=trusted,
            now_ms=now,
            dense_offsets=not config.compact if dense_offsets is None else dense_offsets,
        )
        log = cls(directory, config, loaded.segments, loaded.log_start_offset, cache, deferrable)
        log.dense_offsets = not config.compact if dense_offsets is None else dense_offsets
        log._topic_id = log._metadata_file.read()
        if topic_id is not None:
            log.assign_topic_id(topic_id)
        return log

    # ------------------------------------------------------------------------------ state

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """A topic config change applies from the next append (index sizes from the next roll)."""
        self._config = config
        if config.compact:
            self.dense_offsets = False
        for segment in self._segments:
            segment.config = config

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    @property
    def last_batch_epoch(self) -> int:
        """The partition leader epoch of the last batch in the log, -1 when there is none."""
        active = self._segments[-1]
        if not active.is_empty:  # nearly always: asked on every leader append
            return active.last_epoch
        for segment in reversed(self._segments):
            if not segment.is_empty:
                return segment.last_epoch
        return -1

    @property
    def topic_id(self) -> uuid.UUID | None:
        return self._topic_id

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """Record the topic id in partition.metadata; a different recorded id is an error."""
        if self._topic_id is None:
            self._metadata_file.write(topic_id)
            self._topic_id = topic_id
        elif self._topic_id != topic_id:
            raise InconsistentTopicIdError(
                f"{self.topic}-{self.partition}: partition.metadata has topic id "
                f"{self._topic_id}, not {topic_id}"
            )

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch / DivergingEpoch; (-1, -1) if unknown."""
        return self.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)

    # ---------------------------------------------------------------------------- appends

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        now_ms: int,
        validated: BatchHeader | None = None,
    ) -> AppendInfo:
        """Validate, assign offsets from the log end offset, stamp `leader_epoch`, append.

        Raises CorruptRecordError (CORRUPT_MESSAGE) for a torn or CRC-failing batch,
        InvalidRecordError (INVALID_RECORD) for batches a producer may not send, and
        RecordTooLargeError / RecordBatchTooLargeError for sizes; nothing is written then.
        `validated` is the header of `records` when they are exactly one batch that the caller
        has already checked as a producer's (CRC, size, producer rules: the produce path's
        `validate_partition_records`); the checks are then not repeated.
        """
        buf = bytearray(records)
        if validated is None:
            headers = self._checked_batches(buf)
            if not headers:
                raise InvalidRecordError(f"{self._name}: produce request with no record batch")
            for position, header in headers:
                self._validate_producer_batch(position, header)
        else:
            self._check_segment_fits(len(buf))
            headers = [(0, validated)]
        last_epoch = self.last_batch_epoch
        if leader_epoch < last_epoch:
            raise LeaderEpochRegressionError(
                f"{self._name}: leader append with epoch {leader_epoch}, the log already holds "
                f"epoch {last_epoch}"
            )
        log_append_time = now_ms if self.config.log_append_time else -1
        offset = self.log_end_offset
        stamped: list[BatchHeader] = []
        for position, header in headers:
            stamp_batch(buf, position, offset, leader_epoch)
            if log_append_time >= 0:
                set_log_append_time(buf, position, header.size, log_append_time)
                stamped.append(parse_batch_header(buf, position))
            else:
                stamped.append(  # header with its new offset and epoch, without _replace
                    BatchHeader._make((offset, header[1], leader_epoch, *header[3:]))
                )
            offset += header.last_offset_delta + 1
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, stamped[0].base_offset)
        return self._append(buf, stamped, now_ms, log_append_time)

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, now_ms: int | None = None
    ) -> AppendInfo:
        """Append batches that carry the leader's offsets and epochs; they must continue at the
        log end offset. Empty input is a no-op."""
        headers = self._checked_batches(records)
        if not headers:
            end = self.log_end_offset
            return AppendInfo(-1, end - 1, -1, -1, -1, self.log_start_offset, 0, 0, 0)
        expected = self.log_end_offset
        epoch_floor = self.last_batch_epoch
        for position, header in headers:
            if header.partition_leader_epoch < epoch_floor:
                raise LeaderEpochRegressionError(
                    f"{self._name}: follower batch at offset {header.base_offset} has leader "
                    f"epoch {header.partition_leader_epoch}, below the log's {epoch_floor}"
                )
            epoch_floor = header.partition_leader_epoch
            if header.base_offset < expected:
                raise UnexpectedAppendOffsetError(
                    f"{self._name}: follower batch at byte {position} starts at offset "
                    f"{header.base_offset}, the log continues at {expected}"
                )
            if header.last_offset_delta < 0:
                raise InvalidRecordError(
                    f"{self._name}: batch at offset {header.base_offset} has last offset delta "
                    f"{header.last_offset_delta}"
                )
            expected = header.next_offset
        for _, header in headers:
            epoch = header.partition_leader_epoch
            if epoch >= 0:
                self.leader_epoch_cache.assign(epoch, header.base_offset)
        return self._append(
            records, [header for _, header in headers], _now_ms() if now_ms is None else now_ms, -1
        )

    def _checked_batches(
        self, records: bytes | bytearray | memoryview
    ) -> list[tuple[int, BatchHeader]]:
        try:
            headers = list(iter_batches(records, verify=True))
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{self._name}: {exc}") from None
        self._check_segment_fits(len(records))
        return headers

    def _check_segment_fits(self, total: int) -> None:
        if total > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"{self._name}: append of {total} bytes exceeds segment.bytes "
                f"{self.config.segment_bytes}"
            )

    def _validate_producer_batch(self, position: int, header: BatchHeader) -> None:
        # Kafka's LogValidator rules for batches from clients.
        where = f"{self._name}: batch at byte {position}"
        if header.size > self.config.max_message_bytes:
            raise RecordTooLargeError(
                f"{where} is {header.size} bytes, max.message.bytes is "
                f"{self.config.max_message_bytes}"
            )
        if header.is_control:
            raise InvalidRecordError(f"{where} is a control batch; producers may not send them")
        if header.records_count < 1:
            raise InvalidRecordError(f"{where} has {header.records_count} records")
        if header.records_count != header.last_offset_delta + 1:
            raise InvalidRecordError(
                f"{where} has {header.records_count} records but last offset delta "
                f"{header.last_offset_delta}"
            )
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise InvalidRecordError(
                f"{where} has producer id {header.producer_id} but no base sequence"
            )

    def _append(
        self,
        records: bytes | bytearray | memoryview,
        headers: list[BatchHeader],
        now_ms: int,
        log_append_time: int,
    ) -> AppendInfo:
        first, last = headers[0], headers[-1]
        max_header = first if len(headers) == 1 else max(headers, key=lambda h: h.max_timestamp)
        max_timestamp = max_header.max_timestamp
        if self.active_segment.should_roll(len(records), max_timestamp, last.last_offset, now_ms):
            self.roll(now_ms)
        self.active_segment.append(records, headers)
        record_count = last.next_offset - first.base_offset
        if self.log_end_offset - self.recovery_point >= self.config.flush_interval_messages:
            self.flush()
        return AppendInfo(
            first_offset=first.base_offset,
            last_offset=last.last_offset,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=max_header.last_offset,
            log_append_time=log_append_time,
            log_start_offset=self.log_start_offset,
            batch_count=len(headers),
            record_count=record_count,
            size_in_bytes=len(records),
            headers=tuple(headers),
        )

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset; seal and fsync the old one."""
        now = _now_ms() if now_ms is None else now_ms
        old = self.active_segment
        if old.is_empty:
            # Nothing to seal: an empty active segment already starts at the log end offset.
            return old
        old.on_become_inactive()
        self.epoch_checkpoint.write_pending()  # before the recovery point passes its epochs
        segment = LogSegment.create(self.directory, self.log_end_offset, self.config, now)
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        self.recovery_point = max(self.recovery_point, segment.base_offset)
        self._write_producer_snapshot(segment.base_offset)
        return segment

    def _write_producer_snapshot(self, offset: int) -> None:
        if self.producer_snapshot_writer is None:
            return
        try:
            self.producer_snapshot_writer(offset)
        except OSError as exc:  # a snapshot only saves a replay: the log stays usable
            logger.warning(
                "%s: cannot write the producer snapshot at %d: %s", self._name, offset, exc
            )

    # ------------------------------------------------------------- aborted transactions

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Index an aborted transaction in the segment holding its marker."""
        index = max(bisect.bisect_right(self._bases, txn.last_offset) - 1, 0)
        self._segments[index].txn_index.append(txn)

    def collect_aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound) (Kafka's
        `collectAbortedTransactions`): from the segment holding `start_offset` on, every entry
        whose marker is at or after it and whose first offset is below the bound."""
        found: list[AbortedTxn] = []
        for segment in self._segments_from(start_offset):
            found.extend(segment.txn_index.collect(start_offset, upper_bound))
        return found

    def all_aborted_transactions(self) -> list[AbortedTxn]:
        return [txn for segment in self._segments for txn in segment.txn_index.entries]

    def drop_aborted_transactions_from(self, offset: int) -> None:
        """Forget the indexed aborts whose marker is at or after `offset` (a replay from there
        indexes them again)."""
        for segment in self._segments:
            if segment.txn_index.is_corrupt:
                segment.txn_index.reset()
            else:
                segment.txn_index.truncate_to(offset)

    def first_corrupt_txn_index(self) -> LogSegment | None:
        """The first segment whose `.txnindex` did not parse when it was opened."""
        return next((s for s in self._segments if s.txn_index.is_corrupt), None)

    def usable_producer_snapshot(self) -> tuple[int, list[ProducerSnapshotEntry]] | None:
        """The producer snapshot a replay may start from: the latest one between the first
        segment's base and the log end that parses, provided every `.txnindex` parsed and no
        segment wholly below it was written after it. A segment changed behind the snapshot's back
        (the cleaner swapped it in, or someone edited it while the broker was down) means a
        replay from the start, which is also the walk that finds damage there (issue 14)."""
        if self.first_corrupt_txn_index() is not None:
            return None
        found = self.producer_snapshots.latest(self._segments[0].base_offset, self.log_end_offset)
        if found is None:
            return None
        offset = found[0]
        try:
            written = self.producer_snapshots.path(offset).stat().st_mtime_ns
            for segment in self._segments:
                if segment.next_offset > offset:
                    break  # replayed from the snapshot on (appends after it change its mtime)
                if segment.log_path.stat().st_mtime_ns > written:
                    logger.info(
                        "%s: %s changed after the producer snapshot at %d; replaying the log",
                        self._name,
                        segment.log_path.name,
                        offset,
                    )
                    return None
        except FileNotFoundError:
            return None
        return found

    # ------------------------------------------------------------------------------ reads

    def _check_offset(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self._name}: offset {offset} is outside the log's range "
                f"[{self.log_start_offset}, {self.log_end_offset}]"
            )

    def _segments_from(self, offset: int) -> Iterator[LogSegment]:
        index = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        yield from self._segments[index:]

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset_exclusive: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice:
        """Whole batches starting with the one that holds `fetch_offset`.

        At most `max_bytes`, except that with `min_one_batch` the first batch comes whole even
        when larger (as Kafka does, so a consumer can always make progress). No batch whose last
        offset is >= `max_offset_exclusive`. Raises OffsetOutOfRangeError when `fetch_offset` is
        below the log start offset or above the log end offset.
        """
        end = self._segments[-1].next_offset
        if fetch_offset == end and fetch_offset >= self.log_start_offset:
            # A caught-up reader, the common case of a replica fetch over thousands of
            # partitions: nothing to look up.
            return FileSlice.empty()
        self._check_offset(fetch_offset)
        if max_offset_exclusive is not None and fetch_offset >= max_offset_exclusive:
            return FileSlice.empty()
        for segment in self._segments_from(fetch_offset):
            found = segment.read(fetch_offset, max_bytes, max_offset_exclusive, min_one_batch)
            if found is not None:
                return found
        return FileSlice.empty()

    def read_for_copy(self, offset: int, max_bytes: int) -> FileSlice:
        """Whole batches from the one holding `offset` (or the next one), whatever the log start
        offset: a replica moved to another log dir copies every batch its segments hold, so
        the copy has the same batches and no hole the original has not."""
        if offset >= self.log_end_offset:
            return FileSlice.empty()
        for segment in self._segments_from(offset):
            found = segment.read(offset, max_bytes, None, True)
            if found is not None:
                return found
        return FileSlice.empty()

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets by time: the first record at or after the log start offset whose
        timestamp is >= `timestamp`, or None when there is none."""
        for segment in self._segments_from(self.log_start_offset):
            if segment.max_timestamp < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    def offset_of_max_timestamp(self) -> TimestampAndOffset | None:
        """ListOffsets -3: the first record with the largest timestamp in the log, or None."""
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.max_timestamp >= 0 and (
                best is None or segment.max_timestamp > best.max_timestamp
            ):
                best = segment
        return best.record_with_max_timestamp() if best is not None else None

    def epoch_for_offset(self, offset: int) -> int | None:
        return self.leader_epoch_cache.epoch_for_offset(offset)

    # ----------------------------------------------------------------------------- damage

    def iter_headers(self) -> Iterator[BatchHeader]:
        """Every batch header of the log, in order, without CRC checks. Raises LogDamageError at
        the first header that does not parse or a batch torn by the end of its segment."""
        for segment in self._segments:
            for _, header in segment.iter_batches():
                yield header

    def recover_from_damage(self, damage: LogDamageError) -> int:
        """Cut the log at the damage a walk found: the segment holding it is recovered as after
        a crash (every batch verified, CRC included, cut at the first bad one, indexes rebuilt)
        and every later segment is deleted, since its offsets no longer continue the log. The
        leader epoch cache is re-derived for the recovered segment and cut at the new end.
        Returns the bytes removed (0 when the segment turns out sound and nothing went)."""
        try:
            index = self._bases.index(damage.segment_base)
        except ValueError:
            return 0  # the segment is gone already (retention, truncation)
        segment = self._segments[index]
        self._note_truncation(segment.base_offset)
        previous_epoch = -1
        for earlier in reversed(self._segments[:index]):
            if not earlier.is_empty:
                previous_epoch = earlier.last_epoch
                break
        self.epoch_checkpoint.write_pending()
        self.leader_epoch_cache.truncate_from_end(segment.base_offset)
        result = segment.recover(previous_epoch, self.dense_offsets)
        for epoch, start in result.epoch_starts:
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or epoch > latest:
                self.leader_epoch_cache.assign(epoch, start)
        removed = result.truncated_bytes
        if removed:
            for later in self._segments[index + 1 :]:
                removed += later.size
                logger.warning("%s: deleting %s after the damage", self._name, later.log_path.name)
                later.delete()
            del self._segments[index + 1 :]
            del self._bases[index + 1 :]
        end = self.log_end_offset
        self.leader_epoch_cache.truncate_from_end(end)
        self.recovery_point = min(self.recovery_point, end)
        self.log_start_offset = min(self.log_start_offset, end)
        self.producer_snapshots.delete_above(end)
        logger.warning(
            "%s: damaged log cut at offset %d (%d bytes removed): %s",
            self._name,
            end,
            removed,
            damage,
        )
        return removed

    # ------------------------------------------------------------------------- truncation

    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: remove everything at and after `offset` (a batch holding it goes
        whole). True if anything was removed."""
        if offset < 0:
            raise ValueError(f"{self._name}: cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            return False
        self._note_truncation(offset)
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._segments.pop().delete()
            self._bases.pop()
        self.active_segment.truncate_to(offset)
        self.active_segment.flush()
        self.producer_snapshots.delete_above(offset)
        end = self.log_end_offset
        self.leader_epoch_cache.truncate_from_end(end)
        self.log_start_offset = min(self.log_start_offset, end)
        self.recovery_point = min(self.recovery_point, end)
        return True

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        """Delete every segment and restart empty at `offset` (a follower whose log is entirely
        behind the leader's start, or diverged below it)."""
        now = _now_ms() if now_ms is None else now_ms
        self._note_truncation(0)
        for segment in self._segments:
            segment.delete()
        segment = LogSegment.create(self.directory, offset, self.config, now)
        self._segments = [segment]
        self._bases = [offset]
        self.leader_epoch_cache.clear()
        self.log_start_offset = offset
        self.recovery_point = offset
        self.producer_snapshots.delete_above(-1)

    def _note_truncation(self, offset: int) -> None:
        self.truncations += 1
        if self.lowest_truncation is None or offset < self.lowest_truncation:
            self.lowest_truncation = offset

    # -------------------------------------------------------------------------- retention

    def maybe_increment_log_start_offset(self, offset: int, high_watermark: int) -> bool:
        """Raise the log start offset (a follower copying its leader's, or DeleteRecords);
        never past the high watermark. Segments wholly below it go at the next cleanup."""
        if offset <= self.log_start_offset:
            return False
        if offset > high_watermark:
            raise OffsetOutOfRangeError(
                f"{self._name}: cannot move the log start offset to {offset}, "
                f"above the high watermark {high_watermark}"
            )
        self._set_log_start_offset(offset)
        return True

    def _set_log_start_offset(self, offset: int) -> None:
        self.log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)

    def delete_old_segments(self, now_ms: int, high_watermark: int) -> int:
        """Apply retention.ms, retention.bytes and the log start offset; return segments deleted.

        A segment is deletable only when all of it is below the high watermark. An active segment
        that qualifies is first rolled (so the log keeps an empty active segment at its end), as
        Kafka does; otherwise an idle topic would keep expired data forever.
        """
        deleted = 0
        retention_ms = self.config.retention_ms if self.config.delete else -1
        if retention_ms >= 0:
            deleted += self._delete_while(
                lambda segment, _next: now_ms - segment.largest_timestamp > retention_ms,
                high_watermark,
                now_ms,
            )
        retention_bytes = self.config.retention_bytes if self.config.delete else -1
        if retention_bytes >= 0:
            excess = [self.size_in_bytes - retention_bytes]

            def over_size(segment: LogSegment, _next: LogSegment | None) -> bool:
                if excess[0] - segment.size < 0:
                    return False
                excess[0] -= segment.size
                return True

            deleted += self._delete_while(over_size, high_watermark, now_ms)
        deleted += self._delete_while(
            lambda _segment, following: (
                following is not None and following.base_offset <= self.log_start_offset
            ),
            high_watermark,
            now_ms,
        )
        return deleted

    def delete_segments_below_log_start(self, high_watermark: int, now_ms: int) -> int:
        """Delete the segments wholly below the log start offset (DeleteRecords moved it);
        returns how many went. The rest of retention waits for its interval."""
        return self._delete_while(
            lambda _segment, following: (
                following is not None and following.base_offset <= self.log_start_offset
            ),
            high_watermark,
            now_ms,
        )

    def _delete_while(
        self,
        predicate: Callable[[LogSegment, LogSegment | None], bool],
        high_watermark: int,
        now_ms: int,
    ) -> int:
        """Delete segments from the front while `predicate(segment, next segment)` holds."""
        deletable: list[LogSegment] = []
        for i, segment in enumerate(self._segments):
            following = self._segments[i + 1] if i + 1 < len(self._segments) else None
            upper_bound = following.base_offset if following is not None else self.log_end_offset
            if following is None and segment.is_empty:
                break
            if high_watermark < upper_bound or not predicate(segment, following):
                break
            deletable.append(segment)
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            self.roll(now_ms)
        for segment in deletable:
            self._segments.remove(segment)
            self._bases.remove(segment.base_offset)
            logger.info("%s: retention deletes segment %s", self._name, segment.log_path.name)
            segment.delete()
        first_base = self._segments[0].base_offset
        if first_base > self.log_start_offset:
            self._set_log_start_offset(first_base)
        self.producer_snapshots.delete_below(first_base)
        return len(deletable)

    # ------------------------------------------------------------------------ compaction

    def replace_segments(
        self,
        old: Sequence[LogSegment],
        cleaned_base: int,
        truncations: int,
        now_ms: int | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> LogSegment | None:
        """Swap the cleaned segment `<cleaned_base>.log.cleaned` (and its indexes, all fsynced)
        in for `old`, a run of sealed segments starting at `cleaned_base`; on the log's owner.

        As Kafka's replaceSegments: the `.cleaned` files are renamed `.swap`, the log file last,
        and the directory fsynced (the commit point); then the old segments' files are renamed
        `.deleted`, the `.swap` files renamed into place and the `.deleted` files unlinked. A
        reader holding an old segment's file keeps reading it (see files.py). The loader finishes
        a swap that a crash interrupted after the commit (`log_loader.finish_swap`) and deletes
        the `.cleaned` files of one interrupted before. If the log was truncated since the
        cleaner read it (`truncations` differs), or `old` is no longer a run of its sealed
        segments, nothing changes, the cleaned files are deleted, and None is returned. `on_step`
        is told each step (crash tests stop there)."""
        step = on_step or (lambda _name: None)
        first = next((i for i, s in enumerate(self._segments) if s is old[0]), None)
        if (
            self._closed
            or truncations != self.truncations
            or first is None
            or first + len(old) >= len(self._segments)
            or any(a is not b for a, b in zip(self._segments[first:], old, strict=False))
            or old[0].base_offset != cleaned_base
        ):
            logger.info(
                "%s: the log changed while it was cleaned; dropping the cleaned copy", self._name
            )
            for suffix in SEGMENT_SUFFIXES:
                name = segment_file_name(cleaned_base, suffix)
                (self.directory / (name + CLEANED_SUFFIX)).unlink(missing_ok=True)
            return None
        names = [segment_file_name(cleaned_base, s) for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)]
        # The cleaner writes the cleaned segment's aborts (those whose data it kept, see
        # compaction.CleanedTransactions) only when there are some.
        txn_name = segment_file_name(cleaned_base, TXN_INDEX_SUFFIX)
        if (self.directory / (txn_name + CLEANED_SUFFIX)).exists():
            names.append(txn_name)
        names.append(segment_file_name(cleaned_base, LOG_SUFFIX))  # the log file last
        for name in names:
            os.replace(
                self.directory / (name + CLEANED_SUFFIX), self.directory / (name + SWAP_SUFFIX)
            )
        fsync_dir(self.directory)
        step("swap-committed")
        doomed: list[Path] = []
        for segment in old:
            segment.discard()
            for path in segment.file_paths():
                target = path.with_name(path.name + DELETED_SUFFIX)
                with contextlib.suppress(FileNotFoundError):
                    os.rename(path, target)
                    doomed.append(target)
        step("renamed-old-to-deleted")
        for name in names:
            os.replace(self.directory / (name + SWAP_SUFFIX), self.directory / name)
            if name.endswith(TIME_INDEX_SUFFIX):
                step("renamed-indexes")
        step("renamed-swap")
        now = _now_ms() if now_ms is None else now_ms
        segment = LogSegment.open(self.directory, cleaned_base, self.config, now)
        if not segment.load():
            segment.recover(dense=False)
        self._segments[first : first + len(old)] = [segment]
        self._bases[first : first + len(old)] = [cleaned_base]
        for path in doomed:
            path.unlink(missing_ok=True)
        step("deleted-old")
        return segment

    # ------------------------------------------------------------------------- lifecycle

    def flush(self) -> None:
        """fsync every segment with unflushed data; the recovery point becomes the end."""
        started = time.perf_counter()
        self.epoch_checkpoint.write_pending()  # before the recovery point passes its epochs
        for segment in self._segments:
            segment.flush()
        self.recovery_point = self.log_end_offset
        self.last_flush_ms = _now_ms()
        STATS.record_log_flush((time.perf_counter() - started) * 1000)  # LogFlushRateAndTimeMs

    def flush_if_due(self, now_ms: int) -> bool:
        """flush.ms: flush if there is unflushed data and the last flush is that old."""
        if self.recovery_point >= self.log_end_offset:
            return False
        if now_ms - self.last_flush_ms < self.config.flush_ms:
            return False
        self.flush()
        return True

    def close(self, flush: bool = True) -> None:
        """Flush (unless the log is about to be deleted) and close every segment."""
        if self._closed:
            return
        if flush:
            self.flush()
            self._write_producer_snapshot(self.log_end_offset)
        for segment in self._segments:
            segment.close(flush=flush)
        self._closed = True

    @property
    def _name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self._name}, start={self.log_start_offset}, "
            f"end={self.log_end_offset}, segments={len(self._segments)})"
        )
