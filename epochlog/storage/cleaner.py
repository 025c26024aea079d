"""The log cleaner: compaction's I/O around the decisions of `compaction.py` (Kafka's LogCleaner
and LogCleanerManager).

How it works. The `LogManager` owns one `LogCleaner`; the broker starts it with a way to run a
function on the logs' owner (the event loop) and a way to read a partition's high watermark.
`log.cleaner.threads` worker threads each loop: pick a log, clean it, or sleep
`log.cleaner.backoff.ms` when there is nothing to clean. A pass over one log has three parts:

1. On the owner (quick, no I/O beyond a cached header read): snapshot every compacted log's
   segments (base, next offset, size, timestamps and the open file), compute each one's
   cleanable range from its `cleaner-offset-checkpoint` entry and high watermark, and choose the
   filthiest log (`compaction.choose_log_to_clean`); a log whose tombstones' delete horizon has
   passed is cleaned when no log is over its ratio, so tombstones go even on an idle topic.
2. In the worker thread: read the dirty range into an `OffsetMap`, walk the batch headers for each
   producer's last batch, then rewrite the segments below the pass's end, group by group: each
   group is written as `<base>.log.cleaned` with its `.index.cleaned` and `.timeindex.cleaned`
   (indexes rebuilt as batches are appended) and fsynced. Segment files are read with `pread`
   through the segment's open file; sealed segments are never written, so this needs no lock.
   The thread yields the interpreter between batches, so the event loop waits at most about one
   batch for it.
3. On the owner, per group: `PartitionLog.replace_segments` checks that the log was not
   truncated or changed meanwhile (else it deletes the cleaned files), renames them `.swap`
   (indexes first, the log last) and fsyncs the directory: the commit point, on the owner, so no
   truncation can slip between the check and the commit. It then renames the old files
   `.deleted`, the `.swap` files into place, and unlinks the `.deleted` ones (a reader's open
   file keeps working). After the last group the checkpoint moves to the pass's end and the log
   dir's `cleaner-offset-checkpoint` is rewritten (temp file, fsync, rename) by the worker.

Crash safety: a crash before a `.log.swap` exists leaves `.cleaned` files that the loader deletes;
after it, the loader finishes the swap (`log_loader.finish_swap`). A pass that fails (a damaged
batch, an I/O error) changes nothing; damage makes the log uncleanable until the broker restarts,
an I/O error takes its log dir offline as any other write would.

`epochlog.test.cleaner.step.delay.ms` (tests only) sleeps at each step, so that a test can kill a
broker in the middle of a pass.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from epochlog.protocol.compression import Compression, decompress
from epochlog.protocol.control_records import EndTxnMarker, read_marker
from epochlog.protocol.errors import CorruptRecordError
from epochlog.protocol.records import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    BatchHeader,
    parse_batch_header,
    verify_batch,
)
from epochlog.storage.checkpoint import OffsetCheckpointFile
from epochlog.storage.compaction import (
    CleanableRange,
    CleanedTransactions,
    CleaningCandidate,
    CompactionConfig,
    OffsetMap,
    SegmentSummary,
    add_batch_to_offset_map,
    choose_log_to_clean,
    cleanable_range,
    filter_batch,
    group_segments,
    overdue_for_compaction,
    producers_last_batches,
)
from epochlog.storage.config import LogConfig
from epochlog.storage.errors import CheckpointFormatError, LogDamageError
from epochlog.storage.files import SharedFile
from epochlog.storage.layout import (
    CLEANED_SUFFIX,
    CLEANER_OFFSET_CHECKPOINT,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    segment_file_name,
)
from epochlog.storage.log import PartitionLog
from epochlog.storage.segment import LogSegment
from epochlog.storage.txn_index import AbortedTxn

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
T = TypeVar("T")
OwnerRunner = Callable[[Callable[[], T]], T]

# Kafka's OffsetMap: a 16-byte hash and an 8-byte offset per entry, filled to 90%.
BYTES_PER_MAP_ENTRY = 24
MAP_LOAD_FACTOR = 0.9
HEADER_WALK_CHUNK = 64 * 1024
YIELD_EVERY_S = 0.001


@dataclass(frozen=True)
class CleanerConfig:
    """Kafka's log.cleaner.* broker keys."""

    enable: bool = True  # log.cleaner.enable
    threads: int = 1  # log.cleaner.threads
    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size (all threads)
    io_buffer_size: int = 512 * 1024  # log.cleaner.io.buffer.size
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms
    io_max_bytes_per_second: float = 1.7976931348623157e308  # log.cleaner.io.max.bytes.per.second
    step_delay_ms: int = 0  # epochlog.test.cleaner.step.delay.ms (tests only)

    @property
    def max_map_entries(self) -> int:
        """Keys one pass can hold: Kafka's sizing of the dedupe buffer, per thread."""
        per_thread = self.dedupe_buffer_size // max(self.threads, 1)
        return max(1, int(per_thread * MAP_LOAD_FACTOR) // BYTES_PER_MAP_ENTRY)


class Throttler:
    """Kafka's Throttler as the cleaner uses it: the bytes observed are checked at most every
    `check_interval_s`; when their rate since the last check is above `rate` the caller is
    told to sleep until it is not. Shared by the cleaner's threads (their sum is limited)."""

    def __init__(
        self,
        rate: float,
        check_interval_s: float = 0.3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.check_interval_s = check_interval_s
        self._clock = clock
        self._period_start = clock()
        self._observed = 0
        self._lock = threading.Lock()

    def observe(self, nbytes: int) -> float:
        """Count `nbytes`; the seconds the caller should sleep now (0.0: none)."""
        with self._lock:
            self._observed += nbytes
            now = self._clock()
            elapsed = now - self._period_start
            if elapsed <= self.check_interval_s:
                return 0.0
            delay = 0.0
            if self._observed / elapsed > self.rate:
                delay = max(0.0, self._observed / self.rate - elapsed)
            self._period_start, self._observed = now + delay, 0
            return delay


@dataclass
class PassStats:
    """What one pass over one log did."""

    log: str
    first_dirty: int = 0
    end: int = 0
    segments_in: int = 0
    segments_out: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_entries: int = 0
    seconds: float = 0.0
    swapped: bool = False


class CleanableLogs(Protocol):
    """What the cleaner needs of the log manager."""

    def all_logs(self) -> dict[TopicPartition, PartitionLog]: ...

    def dir_of(self, topic: str, partition: int) -> Path | None: ...

    def handle_io_error(self, log_dir: Path | None, error: OSError) -> None: ...

    @property
    def online_dirs(self) -> list[Path]: ...


@dataclass(frozen=True)
class _SegmentView:
    """A sealed segment as the owner saw it when the pass started."""

    segment: LogSegment
    file: SharedFile
    base_offset: int
    next_offset: int
    size: int
    index_bytes: int

    def summary(self) -> SegmentSummary:
        first = self.segment.first_batch_timestamp
        return SegmentSummary(
            self.base_offset,
            self.next_offset,
            self.size,
            -1 if first is None else first,
            self.segment.max_timestamp,
        )


@dataclass
class _Job:
    key: TopicPartition
    log: PartitionLog
    log_dir: Path
    config: LogConfig
    segments: list[_SegmentView]  # every segment, the active one last
    cleanable: CleanableRange
    truncations: int
    now_ms: int
    # The aborted transactions overlapping the cleanable range (its `.txnindex` entries).
    aborted: list[AbortedTxn] = field(default_factory=list)
    stats: PassStats = field(init=False)

    def __post_init__(self) -> None:
        self.stats = PassStats(f"{self.key[0]}-{self.key[1]}", self.cleanable.first_dirty)


def _direct(fn: Callable[[], T]) -> T:
    return fn()


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogCleaner:
    """Compacts the logs whose cleanup.policy has `compact`. Use `clean_once` directly (tests) or
    `start` worker threads (the broker)."""

    def __init__(
        self,
        logs: CleanableLogs,
        config: CleanerConfig | None = None,
        *,
        now_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        self._logs = logs
        self.config = config or CleanerConfig()
        self.now_ms = now_ms
        self._run_on_owner: OwnerRunner = _direct
        self._high_watermark_of: Callable[[TopicPartition], int | None] | None = None
        self._checkpoints: dict[TopicPartition, int] = {}
        self._horizons: dict[TopicPartition, int] = {}  # earliest delete horizon kept, per log
        self._in_progress: set[TopicPartition] = set()
        self._uncleanable: dict[TopicPartition, str] = {}
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.throttler = Throttler(self.config.io_max_bytes_per_second)
        self.passes: list[PassStats] = []  # the latest passes, newest last (for tests and logs)
        # Told each step of a pass ("offset-map-built", "cleaned-written", "swap-committed",
        # then the steps of PartitionLog.replace_segments); tests raise there to stop a pass.
        self.on_step: Callable[[str], None] | None = None

    # -------------------------------------------------------------------------- lifecycle

    def load_checkpoints(self) -> None:
        """Read `cleaner-offset-checkpoint` of every online log dir (before the logs load: it
        tells which logs were compacted)."""
        for log_dir in self._logs.online_dirs:
            try:
                self._checkpoints.update(
                    OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT).read()
                )
            except CheckpointFormatError as exc:
                logger.warning("%s; every compacted log there is cleaned from its start", exc)

    def start(
        self,
        run_on_owner: OwnerRunner | None = None,
        high_watermark_of: Callable[[TopicPartition], int | None] | None = None,
    ) -> None:
        """Start `log.cleaner.threads` workers (nothing when `log.cleaner.enable` is false).
        `run_on_owner(fn)` runs fn where the logs are owned and returns its result;
        `high_watermark_of(key)` is read there (None: the partition is not served yet)."""
        if run_on_owner is not None:
            self._run_on_owner = run_on_owner
        self._high_watermark_of = high_watermark_of
        if not self.config.enable or self._threads:
            return
        self._stop.clear()
        for number in range(self.config.threads):
            thread = threading.Thread(target=self._work, name=f"log-cleaner-{number}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def reconfigure(self, config: CleanerConfig) -> None:
        """Take new log.cleaner.* settings (a dynamic broker config change): read by the next
        pass; a new thread count or enable flag restarts the workers, as Kafka's cleaner does.
        Blocking when it restarts: call it off the owner's thread."""
        restart = (config.threads, config.enable) != (self.config.threads, self.config.enable)
        running = bool(self._threads)
        self.config = config
        self.throttler.rate = config.io_max_bytes_per_second
        if restart and running:
            self.shutdown()
            self.start(None, self._high_watermark_of)

    def shutdown(self) -> None:
        """Stop the workers (a pass in progress stops at its next step) and wait for them. Call
        it off the owner's thread: a worker may be waiting for the owner."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    @property
    def stopping(self) -> threading.Event:
        """Set once `shutdown` begins (an `OwnerRunner` stops waiting on it)."""
        return self._stop

    def forget(self, key: TopicPartition) -> None:
        """The log is gone (deleted): drop its checkpoint entry. On the owner."""
        self._checkpoints.pop(key, None)
        self._horizons.pop(key, None)
        self._uncleanable.pop(key, None)

    def is_cleaning(self, key: TopicPartition) -> bool:
        """A pass is rewriting this log's segments (a replica move waits for it to end)."""
        return key in self._in_progress

    def checkpoint_of(self, key: TopicPartition) -> int | None:
        return self._checkpoints.get(key)

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.clean_once()
            except _Stopped:
                return
            except Exception:
                logger.exception("log cleaner pass failed")
                cleaned = False
            if not cleaned:
                self._stop.wait(self.config.backoff_ms / 1000)

    def _owner(self, fn: Callable[[], T]) -> T:
        if self._stop.is_set() and self._threads:
            raise _Stopped
        return self._run_on_owner(fn)

    def _step(self, name: str) -> None:
        if self.on_step is not None:
            self.on_step(name)
        if self.config.step_delay_ms:
            if self._stop.wait(self.config.step_delay_ms / 1000) and self._threads:
                raise _Stopped
        elif self._stop.is_set() and self._threads:
            raise _Stopped

    # ----------------------------------------------------------------------------- a pass

    def clean_once(self) -> bool:
        """Choose one log and clean it; False when no log needed cleaning."""
        job = self._owner(self._plan)
        if job is None:
            return False
        try:
            self._clean(job)
        except (CorruptRecordError, LogDamageError) as exc:
            logger.error(
                "%s: the cleaner met damage and leaves the log alone: %s", job.stats.log, exc
            )
            problem = str(exc)
            self._owner(lambda: self._uncleanable.__setitem__(job.key, problem))
        except OSError as exc:
            logger.error("%s: the cleaner cannot write: %s", job.stats.log, exc)
            error = exc
            self._owner(lambda: self._logs.handle_io_error(job.log_dir, error))
        finally:
            self._owner(lambda: self._in_progress.discard(job.key))
        return True

    def _plan(self) -> _Job | None:
        """On the owner: snapshot the compacted logs and choose the one to clean."""
        now = self.now_ms()
        views: dict[str, tuple[TopicPartition, PartitionLog, list[_SegmentView], int]] = {}
        candidates: list[CleaningCandidate] = []
        expired_horizon: list[str] = []
        for key, log in self._logs.all_logs().items():
            config = log.config
            if not config.compact or key in self._in_progress or key in self._uncleanable:
                continue
            if log.lowest_truncation is not None:
                checkpoint = self._checkpoints.get(key)
                if checkpoint is not None and checkpoint > log.lowest_truncation:
                    self._checkpoints[key] = log.lowest_truncation
                log.lowest_truncation = None
            high_watermark: int | None = None
            if self._high_watermark_of is not None:
                high_watermark = self._high_watermark_of(key)
                if high_watermark is None:
                    continue
            segments = [
                _SegmentView(
                    s,
                    s.file,
                    s.base_offset,
                    s.next_offset,
                    s.size,
                    (len(s.offset_index) + len(s.time_index)) * 12,
                )
                for s in log.segments
            ]
            summaries = [view.summary() for view in segments]
            compaction = CompactionConfig(
                config.min_cleanable_dirty_ratio,
                config.min_compaction_lag_ms,
                config.max_compaction_lag_ms,
                config.delete_retention_ms,
            )
            cleanable = cleanable_range(
                summaries,
                self._checkpoints.get(key),
                log.log_start_offset,
                compaction,
                now,
                high_watermark,
            )
            name = f"{key[0]}-{key[1]}"
            views[name] = (key, log, segments, log.truncations)
            candidates.append(
                CleaningCandidate(
                    name,
                    cleanable,
                    overdue_for_compaction(summaries, cleanable, compaction, now),
                    config.min_cleanable_dirty_ratio,
                )
            )
            horizon = self._horizons.get(key)
            if horizon is not None and horizon <= now:
                expired_horizon.append(name)
        chosen = choose_log_to_clean(candidates)
        if chosen is None and expired_horizon:
            chosen = next(c for c in candidates if c.name == expired_horizon[0])
        if chosen is None:
            return None
        key, log, segments, truncations = views[chosen.name]
        log_dir = self._logs.dir_of(*key)
        if log_dir is None:
            return None
        self._in_progress.add(key)
        self._horizons.pop(key, None)
        aborted = log.collect_aborted_transactions(
            log.segments[0].base_offset, chosen.cleanable.first_uncleanable
        )
        return _Job(
            key, log, log_dir, log.config, segments, chosen.cleanable, truncations, now, aborted
        )

    def _clean(self, job: _Job) -> None:
        started = time.perf_counter()
        stats = job.stats
        first_dirty = job.cleanable.first_dirty
        first_uncleanable = job.cleanable.first_uncleanable
        offset_map = OffsetMap(self.config.max_map_entries)
        end = first_uncleanable
        last_batches: dict[int, int] = {}
        # Aborted records never enter the map: they must not supersede committed ones.
        txns = CleanedTransactions(t for t in job.aborted if t.last_offset >= first_dirty)
        for view in job.segments:
            filling = first_dirty < view.next_offset and view.base_offset < first_uncleanable
            if not filling:
                headers = read_headers(view.file, view.size, view.segment)
                last_batches.update(producers_last_batches(headers))
                continue
            stop = None
            for chunk, rel, header in self._batches(view):
                if header.producer_id >= 0 and not header.attributes & CONTROL_MASK:
                    last_batches[header.producer_id] = header.last_offset
                if stop is not None or header.base_offset < first_dirty:
                    continue
                if header.is_control:
                    txns.marker_removable(header, _marker(chunk, rel, header))
                    continue
                if header.producer_id >= 0 and txns.discard_data_batch(header):
                    continue
                payload = _payload(chunk, rel, header)
                stop = add_batch_to_offset_map(payload, header, offset_map, end)
                if stop is not None:
                    end = stop
                _yield_now_and_then()
        stats.map_entries = len(offset_map)
        stats.end = end
        self._step("offset-map-built")
        sealed = [view for view in job.segments[:-1] if view.base_offset < end]
        groups = group_segments(
            [view.summary() for view in sealed],
            job.config.segment_bytes,
            job.config.segment_index_bytes,
            [view.index_bytes for view in sealed],
        )
        min_horizon: int | None = None
        for group in groups:
            old = [sealed[i] for i in group]
            horizon = self._write_cleaned(job, old, offset_map, last_batches)
            if horizon is not None:
                min_horizon = horizon if min_horizon is None else min(min_horizon, horizon)
            self._step("cleaned-written")
            base = old[0].base_offset
            segments = [view.segment for view in old]
            swapped = self._owner(
                lambda segments=segments, base=base: self._replace(job, segments, base)
            )
            if swapped is None:
                stats.seconds = time.perf_counter() - started
                logger.info("%s: cleaning abandoned, the log changed meanwhile", stats.log)
                return
            stats.segments_in += len(old)
            stats.segments_out += 1
        stats.swapped = True
        stats.seconds = time.perf_counter() - started
        content = self._owner(lambda: self._finish(job, end, min_horizon))
        if content is not None:
            OffsetCheckpointFile(job.log_dir / CLEANER_OFFSET_CHECKPOINT).write(content)
        self._step("checkpointed")
        mb = stats.bytes_read / 1e6
        logger.info(
            "%s: cleaned offsets up to %d: %d segments into %d, %.1f MB read, %.1f MB written, "
            "%d of %d records kept, %d keys, %.2f s (%.1f MB/s)",
            stats.log,
            end,
            stats.segments_in,
            stats.segments_out,
            mb,
            stats.bytes_written / 1e6,
            stats.records_kept,
            stats.records_read,
            stats.map_entries,
            stats.seconds,
            mb / stats.seconds if stats.seconds else 0.0,
        )

    def _replace(self, job: _Job, old: list[LogSegment], base: int) -> LogSegment | None:
        return job.log.replace_segments(old, base, job.truncations, on_step=self.on_step)

    def _finish(
        self, job: _Job, end: int, min_horizon: int | None
    ) -> dict[TopicPartition, int] | None:
        """On the owner, after the swaps: move the checkpoint, and return the log dir's
        checkpoint content (None if the dir went offline)."""
        self._checkpoints[job.key] = end
        if min_horizon is not None:
            self._horizons[job.key] = min_horizon
        self.passes = [*self.passes[-99:], job.stats]
        if job.log_dir not in self._logs.online_dirs:
            return None
        logs = self._logs.all_logs()
        return {
            key: offset
            for key, offset in self._checkpoints.items()
            if key in logs and self._logs.dir_of(*key) == job.log_dir
        }

    def _write_cleaned(
        self,
        job: _Job,
        old: list[_SegmentView],
        offset_map: OffsetMap,
        last_batches: Mapping[int, int],
    ) -> int | None:
        """Write the cleaned copy of `old` as `<base>.log.cleaned` (+ indexes), fsynced. Returns
        the earliest delete horizon of the tombstones it kept (None: none)."""
        directory = job.log.directory
        base = old[0].base_offset
        _remove_files(directory, base, CLEANED_SUFFIX)
        _remove_files(directory, base, SWAP_SUFFIX)
        out = LogSegment.create(directory, base, job.config, job.now_ms, CLEANED_SUFFIX)
        stats = job.stats
        pending = bytearray()
        headers: list[BatchHeader] = []
        horizon: int | None = None
        retention = job.config.delete_retention_ms
        txns = CleanedTransactions(t for t in job.aborted if t.last_offset >= base)
        for view in old:
            for chunk, rel, header in self._batches(view):
                stats.bytes_read += header.size
                stats.records_read += header.records_count
                retain_empty = (
                    header.producer_id >= 0
                    and last_batches.get(header.producer_id) == header.last_offset
                )
                discard = removable = False
                if header.is_control:
                    removable = txns.marker_removable(header, _marker(chunk, rel, header))
                elif header.producer_id >= 0:
                    discard = txns.discard_data_batch(header)
                result = filter_batch(
                    chunk,
                    rel,
                    offset_map,
                    job.now_ms,
                    retention,
                    retain_empty=retain_empty,
                    discard_records=discard,
                    marker_removable=removable,
                )
                _yield_now_and_then()
                if result.data is None:
                    continue
                kept = parse_batch_header(result.data)
                if kept.attributes & DELETE_HORIZON_MASK and result.retained:
                    stamp = kept.base_timestamp
                    horizon = stamp if horizon is None else min(horizon, stamp)
                stats.records_kept += result.retained
                pending += result.data
                headers.append(kept)
                if len(pending) >= self.config.io_buffer_size:
                    out.append(pending, headers)
                    stats.bytes_written += len(pending)
                    self._throttle(len(pending))
                    pending = bytearray()
                    headers = []
        if headers:
            out.append(pending, headers)
            stats.bytes_written += len(pending)
        for txn in txns.kept_aborted:
            out.txn_index.append(txn)
        out.txn_index.flush()
        out.on_become_inactive()
        out.close(flush=False)
        return horizon

    def _batches(self, view: _SegmentView) -> Iterator[tuple[bytes, int, BatchHeader]]:
        """(chunk, position in chunk, header) of each batch of a sealed segment, reading
        `log.cleaner.io.buffer.size` at a time (a larger batch is read whole)."""
        for chunk, rel, header in read_batches(
            view.file, view.size, self.config.io_buffer_size, view.segment
        ):
            self._throttle(header.size)
            yield chunk, rel, header

    def _throttle(self, nbytes: int) -> None:
        """log.cleaner.io.max.bytes.per.second: sleep while the cleaner's I/O is over it."""
        delay = self.throttler.observe(nbytes)
        if delay and self._stop.wait(delay) and self._threads:
            raise _Stopped


_last_yield = [0.0]


def _yield_now_and_then() -> None:
    """Give the interpreter away (to the event loop) once a millisecond of work has passed, so
    that a request never waits for the cleaner longer than that, whatever the switch interval."""
    now = time.perf_counter()
    if now - _last_yield[0] >= YIELD_EVERY_S:
        time.sleep(0)
        _last_yield[0] = time.perf_counter()


class _Stopped(Exception):
    """The cleaner is shutting down; the pass in progress stops where it is."""


def read_batches(
    file: SharedFile, size: int, buffer_size: int, where: object
) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """Every batch of the first `size` bytes of a segment file, with its CRC checked."""
    position = 0
    while position < size:
        chunk = file.pread(min(buffer_size, size - position), position)
        rel = 0
        while len(chunk) - rel >= BATCH_HEADER_SIZE:
            header = parse_batch_header(chunk, rel)
            if header.size > len(chunk) - rel:
                break
            yield chunk, rel, header
            rel += header.size
        if rel == 0:
            if len(chunk) < BATCH_HEADER_SIZE:
                raise CorruptRecordError(f"{where}: a batch is torn at position {position}")
            header = parse_batch_header(chunk, 0)
            chunk = file.pread(header.size, position)
            if len(chunk) < header.size or position + header.size > size:
                raise CorruptRecordError(f"{where}: the batch at position {position} is torn")
            verify_batch(chunk, 0, header)
            yield chunk, 0, header
            rel = header.size
        position += rel


def read_headers(file: SharedFile, size: int, where: object) -> Iterator[BatchHeader]:
    """The batch headers of the first `size` bytes of a segment file, without reading the
    batches' bodies when they are large."""
    position = 0
    chunk = b""
    chunk_start = 0
    while position < size:
        rel = position - chunk_start
        if len(chunk) - rel < BATCH_HEADER_SIZE:
            chunk = file.pread(min(HEADER_WALK_CHUNK, size - position), position)
            chunk_start, rel = position, 0
            if len(chunk) < BATCH_HEADER_SIZE:
                raise CorruptRecordError(f"{where}: a batch is torn at position {position}")
        header = parse_batch_header(chunk, rel)
        yield header
        position += header.size


def _marker(chunk: bytes, rel: int, header: BatchHeader) -> EndTxnMarker | None:
    """The transaction marker of a control batch (None: empty, or another control type)."""
    if header.records_count == 0 or header.producer_id < 0:
        return None
    return read_marker(chunk, rel)


def _payload(chunk: bytes, rel: int, header: BatchHeader) -> bytes:
    verify_batch(chunk, rel, header)
    payload = chunk[rel + BATCH_HEADER_SIZE : rel + header.size]
    if header.compression is not Compression.NONE:
        payload = decompress(header.compression, payload)
    return payload


def _remove_files(directory: Path, base: int, suffix: str) -> None:
    for segment_suffix in SEGMENT_SUFFIXES:
        (directory / (segment_file_name(base, segment_suffix) + suffix)).unlink(missing_ok=True)


def run_on_loop(loop: object, stop: threading.Event | None = None) -> OwnerRunner:
    """An `OwnerRunner` for an asyncio loop: the function runs on the loop thread and the worker
    waits for its result (giving up if `stop` is set)."""

    def run(fn: Callable[[], T]) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def call() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the worker
                future.set_exception(exc)

        loop.call_soon_threadsafe(call)  # type: ignore[attr-defined]
        while True:
            try:
                return future.result(timeout=0.5)
            except concurrent.futures.TimeoutError:
                if stop is not None and stop.is_set() and future.cancel():
                    raise _Stopped from None

    return run
