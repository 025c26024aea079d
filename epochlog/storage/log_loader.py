"""Opening a partition dir: find the segments, check or recover them, settle the log's offsets.

After a clean shutdown every segment is trusted: `LogSegment.load` sanity-checks its indexes and
finds its end, and only a segment that fails that is recovered. After an unclean shutdown every
segment holding offsets at or after the recovery point (the offset up to which the log was last
fsynced) is recovered: each batch is read and CRC-checked, offsets must continue densely from the
previous batch and leader epochs must not go down. The first batch that fails ends the log: the
segment is cut there and every later segment is deleted, because everything after the first bad
byte is untrusted. Segments that do not continue their predecessor's offsets are treated the same
way. Missing or damaged indexes are rebuilt by the same recovery.

The leader epoch cache is then made to agree with the data: entries for the recovered range are
re-derived from the batches' leader epochs, entries at or past the new log end offset are dropped,
and entries before the log start offset are folded into it. If the checkpoint file itself is
unreadable, the cache is rebuilt from every batch header of the log.

Leftovers of interrupted operations (`*.tmp`, `*.deleted`, index files without a `.log`) are
removed first. So is an interrupted clean, as Kafka's LogLoader does it: `.cleaned` files are a
cleaned segment that was never committed and are deleted (the old segments are intact); a
`<base>.log.swap` is a committed one, so the swap is finished: its index files are dropped and
rebuilt, its batches are verified to find the offsets it covers, every old `.log` whose base
offset lies in that range is deleted and the `.swap` files are renamed into place.

Offsets are dense from one segment to the next, except in a compacted log (`dense_offsets`
False), where compaction leaves holes; even there they may never go back: a segment starting
below the end of the previous one ends the log there.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from epochlog.storage.config import LogConfig
from epochlog.storage.epoch_cache import LeaderEpochCache
from epochlog.storage.files import fsync_dir
from epochlog.storage.layout import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    TMP_SUFFIX,
    TXN_INDEX_SUFFIX,
    parse_segment_file_name,
    segment_file_name,
)
from epochlog.storage.segment import LogSegment

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class LoadedSegments:
    segments: list[LogSegment]
    log_start_offset: int
    # Bytes cut from torn or corrupt tails, plus whole segments dropped after them.
    truncated_bytes: int
    recovered_segments: int


def remove_leftovers(
    directory: Path, config: LogConfig | None = None, now_ms: int = 0
) -> list[int]:
    """Delete files left by interrupted operations, finish interrupted swaps; return the base
    offsets of `.log` files."""
    bases: set[int] = set()
    index_files: list[tuple[int, Path]] = []
    swaps: list[int] = []
    txn_swaps: list[Path] = []
    for entry in os.scandir(directory):
        if not entry.is_file():
            continue
        path = Path(entry.path)
        if entry.name.endswith(TMP_SUFFIX) or entry.name.endswith(DELETED_SUFFIX):
            path.unlink(missing_ok=True)
            continue
        if entry.name.endswith(CLEANED_SUFFIX):
            logger.info("%s: removing a cleaned segment that was never swapped in", path)
            path.unlink(missing_ok=True)
            continue
        if entry.name.endswith(SWAP_SUFFIX):
            swapped = parse_segment_file_name(entry.name[: -len(SWAP_SUFFIX)])
            if swapped is not None and swapped[1] == LOG_SUFFIX:
                swaps.append(swapped[0])
            elif swapped is not None and swapped[1] == TXN_INDEX_SUFFIX:
                txn_swaps.append(path)  # moved into place with its log: not rebuilt from it
            else:
                path.unlink(missing_ok=True)  # an index of a swap: rebuilt with it
            continue
        parsed = parse_segment_file_name(entry.name)
        if parsed is None:
            continue
        base, suffix = parsed
        if suffix == LOG_SUFFIX:
            bases.add(base)
        else:
            index_files.append((base, path))
    for base in sorted(swaps):
        bases -= set(finish_swap(directory, base, sorted(bases), config or LogConfig(), now_ms))
        bases.add(base)
    for path in txn_swaps:
        path.unlink(missing_ok=True)  # left by a swap never committed (no `.log.swap`)
    for base, path in index_files:
        if base not in bases:
            logger.info("%s: removing index without a log file", path)
            path.unlink(missing_ok=True)
    return sorted(bases)


def finish_swap(
    directory: Path, base: int, log_bases: list[int], config: LogConfig, now_ms: int
) -> list[int]:
    """Finish the swap of `<base>.log.swap`: verify it (indexes rebuilt), delete the old segments
    it replaces (base offsets in [base, its next offset)), rename it into place. Returns the base
    offsets of the old segments removed."""
    for suffix in SEGMENT_SUFFIXES[1:]:
        if suffix != TXN_INDEX_SUFFIX:
            (directory / (segment_file_name(base, suffix) + SWAP_SUFFIX)).unlink(missing_ok=True)
    swap = LogSegment.open(directory, base, config, now_ms, SWAP_SUFFIX)
    swap.recover(dense=False)
    end = max(swap.next_offset, base + 1)  # an empty swap still replaces the segment at its base
    swap.close(flush=True)
    replaced = [b for b in log_bases if base <= b < end]
    logger.warning(
        "%s: finishing an interrupted swap of a cleaned segment at offset %d, replacing the "
        "segments at %s",
        directory,
        base,
        replaced,
    )
    for old in replaced:
        if old == base:
            continue  # the rename below replaces it
        for suffix in SEGMENT_SUFFIXES:
            (directory / segment_file_name(old, suffix)).unlink(missing_ok=True)
    for suffix in SEGMENT_SUFFIXES:
        source = directory / (segment_file_name(base, suffix) + SWAP_SUFFIX)
        target = directory / segment_file_name(base, suffix)
        if source.exists():
            os.replace(source, target)
        elif suffix != TXN_INDEX_SUFFIX:  # a txnindex already in place is the swap's own
            target.unlink(missing_ok=True)
    fsync_dir(directory)
    return replaced


def load_segments(
    directory: Path,
    config: LogConfig,
    epoch_cache: LeaderEpochCache,
    *,
    recovery_point: int,
    log_start_offset: int,
    had_clean_shutdown: bool,
    epoch_cache_trusted: bool,
    now_ms: int,
    dense_offsets: bool = True,
) -> LoadedSegments:
    bases = remove_leftovers(directory, config, now_ms)
    segments = [LogSegment.open(directory, base, config, now_ms) for base in bases]

    # Unclean: recover the segment holding the recovery point and everything after it.
    first_to_recover = len(segments)
    if not had_clean_shutdown:
        first_to_recover = 0
        for i in range(len(segments) - 1):
            if segments[i + 1].base_offset <= recovery_point:
                first_to_recover = i + 1
        if first_to_recover < len(segments) and epoch_cache_trusted:
            # The scan re-derives every epoch boundary of the recovered range.
            epoch_cache.truncate_from_end(segments[first_to_recover].base_offset)

    kept: list[LogSegment] = []
    truncated = 0
    recovered = 0
    previous_epoch = -1
    for i, segment in enumerate(segments):
        if (
            kept
            and not dense_offsets
            and segment.base_offset < kept[-1].next_offset
            and kept[-1].hole_at_end is not None
        ):
            # The previous segment's last batch jumped past where this one starts: its base
            # offset (outside the CRC) is the damage; the log ends before it.
            previous = kept[-1]
            logger.warning(
                "%s: the last batch of segment %d claims offset %d, past the next segment's %d; "
                "cutting it",
                directory,
                previous.base_offset,
                previous.hole_at_end,
                segment.base_offset,
            )
            truncated += previous.truncate_to(previous.hole_at_end)
            previous.hole_at_end = None
            previous.flush()
            truncated += _drop(segments[i:])
            break
        if kept and (
            segment.base_offset != kept[-1].next_offset
            if dense_offsets
            else segment.base_offset < max(kept[-1].next_offset, kept[-1].base_offset + 1)
        ):
            logger.warning(
                "%s: segment starts at offset %d but the log has reached %d; dropping it and "
                "everything after it",
                directory,
                segment.base_offset,
                kept[-1].next_offset,
            )
            truncated += _drop(segments[i:])
            break
        if i >= first_to_recover or not segment.load():
            result = segment.recover(previous_epoch, dense_offsets)
            recovered += 1
            if epoch_cache_trusted:
                for epoch, start in result.epoch_starts:
                    latest = epoch_cache.latest_epoch
                    if latest is None or epoch > latest:
                        epoch_cache.assign(epoch, start)
            if result.truncated_bytes:
                kept.append(segment)
                truncated += result.truncated_bytes + _drop(segments[i + 1 :])
                break
        kept.append(segment)
        if not segment.is_empty:
            previous_epoch = segment.last_epoch

    if not kept:
        kept.append(LogSegment.create(directory, log_start_offset, config, now_ms))
    log_end_offset = kept[-1].next_offset
    log_start_offset = max(log_start_offset, kept[0].base_offset)
    if log_end_offset < log_start_offset:
        # The checkpointed start is past what survived: start over empty at that offset, as
        # Kafka does, rather than serve offsets below the log start.
        logger.warning(
            "%s: log end offset %d is below the log start offset %d; emptying the log",
            directory,
            log_end_offset,
            log_start_offset,
        )
        truncated += _drop(kept)
        kept = [LogSegment.create(directory, log_start_offset, config, now_ms)]
        log_end_offset = log_start_offset

    if not epoch_cache_trusted:
        rebuild_epoch_cache(kept, epoch_cache)
    epoch_cache.truncate_from_end(log_end_offset)
    epoch_cache.truncate_from_start(log_start_offset)
    for segment in kept[:-1]:
        segment.on_become_inactive()
    return LoadedSegments(kept, log_start_offset, truncated, recovered)


def rebuild_epoch_cache(segments: list[LogSegment], epoch_cache: LeaderEpochCache) -> None:
    """Derive every entry from the batch headers (when the checkpoint cannot be read)."""
    epoch_cache.clear()
    for segment in segments:
        for _, header in segment.iter_batches():
            epoch = header.partition_leader_epoch
            latest = epoch_cache.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                epoch_cache.assign(epoch, header.base_offset)


def _drop(segments: list[LogSegment]) -> int:
    dropped = 0
    for segment in segments:
        dropped += segment.size
        logger.warning("deleting segment %s (%d bytes)", segment.log_path, segment.size)
        segment.delete()
    return dropped
