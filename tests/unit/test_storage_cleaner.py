"""The log cleaner on real segment files (storage/cleaner.py, PartitionLog.replace_segments, the
loader's `.cleaned` / `.swap` recovery): offsets kept, removed offsets read as the next record,
tombstones dropped after delete.retention.ms on an injected clock, a crash at every step of a
swap recovered to a whole log, the checkpoint file, producers' last batches, retention."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from epochlog.protocol.compression import Compression
from epochlog.protocol.records import RecordBatchBuilder, decode_batches, parse_batch_header
from epochlog.storage import LogConfig, LogManager, PartitionLog
from epochlog.storage.cleaner import CleanerConfig, Throttler
from epochlog.storage.layout import CLEANER_OFFSET_CHECKPOINT

NOW = 1_700_000_000_000
DAY = 86_400_000
COMPACT = LogConfig(segment_bytes=2048, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(
    records: list[tuple[bytes | None, bytes | None]],
    ts: int = NOW,
    producer_id: int = -1,
    base_sequence: int = -1,
    compression: Compression = Compression.NONE,
) -> bytes:
    builder = RecordBatchBuilder(
        compression,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
    )
    for i, (key, value) in enumerate(records):
        builder.append(ts + i, key, value)
    return builder.build()


def started(directory: Path, clock: Clock, config: LogConfig = COMPACT) -> LogManager:
    manager = LogManager([directory], config, now_ms=clock, cleaner_config=CleanerConfig())
    manager.startup(1, "c1", now_ms=clock.now)
    return manager


def read_all(
    log: PartitionLog, start: int | None = None
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from `start` (the log start) to the end, read as a consumer would."""
    records = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read_bytes()
        if not data:
            break
        for decoded in decode_batches(data):
            for r in decoded.records:
                if r.offset >= offset:
                    records.append((r.offset, r.key, r.value))
            offset = decoded.next_offset
    return records


def fill(log: PartitionLog, updates: int, keys: int, per_batch: int = 5, **kw) -> dict:
    """Append `updates` values over `keys` keys; returns key -> (offset, value) of the last."""
    latest = {}
    n = 0
    while n < updates:
        records = []
        for _ in range(min(per_batch, updates - n)):
            key = f"k{n % keys}".encode()
            records.append((key, f"v{n}".encode()))
            n += 1
        info = log.append_as_leader(batch(records, **kw), 0, NOW)
        for i, (key, value) in enumerate(records):
            latest[key] = (info.first_offset + i, value)
    return latest


def live(records, latest) -> None:
    """The log holds exactly the latest value of each key, at its original offset."""
    got = {key: (offset, value) for offset, key, value in records}
    assert len(got) == len(records), "a key appears twice"
    assert got == latest


def test_a_pass_keeps_each_keys_last_value_at_its_offset_and_never_the_active_segment(tmp_path):
    clock = Clock()
    manager = started(tmp_path / "d", clock)
    log = manager.get_or_create_log("t", 0)
    latest = fill(log, 400, 20)
    active_before = (log.active_segment.base_offset, log.active_segment.size)
    assert len(log.segments) > 5
    assert manager.cleaner.clean_once()
    assert (log.active_segment.base_offset, log.active_segment.size) == active_before
    records = read_all(log)
    # Below the active segment only last values remain; the active segment is untouched.
    cleaned = [r for r in records if r[0] < active_before[0]]
    in_active = [r for r in records if r[0] >= active_before[0]]
    assert len(cleaned) <= 20
    assert in_active == [r for r in records if r[0] >= active_before[0]]
    for offset, key, value in cleaned:
        assert latest[key] == (offset, value) or any(r[1] == key for r in in_active)
    assert log.log_end_offset == 400
    stats = manager.cleaner.passes[-1]
    assert stats.records_read > stats.records_kept
    # The next pass groups the small cleaned segments into one (Kafka's groupSegmentsBySize).
    latest = fill(log, 400, 20)
    assert manager.cleaner.clean_once()
    stats = manager.cleaner.passes[-1]
    assert stats.segments_out < stats.segments_in
    records = read_all(log)
    manager.shutdown()
    # The whole log reloads as it was cleaned, after a clean shutdown and after a crash.
    for _ in range(2):
        reopened = started(tmp_path / "d", clock)
        assert read_all(reopened.get_log("t", 0)) == records
        reopened.shutdown()
        (tmp_path / "d" / ".kafka_cleanshutdown").unlink()


def test_a_fetch_from_a_removed_offset_gets_the_next_record(tmp_path):
    clock = Clock()
    manager = started(tmp_path / "d", clock)
    log = manager.get_or_create_log("t", 0)
    for i in range(30):
        log.append_as_leader(batch([(b"same", f"v{i}".encode())] * 3), 0, NOW)
    log.append_as_leader(batch([(b"other", b"x")] * 60), 0, NOW)  # roll past the old ones
    log.roll()
    log.append_as_leader(batch([(b"tail", b"t")]), 0, NOW)
    manager.cleaner.clean_once()
    survivors = [offset for offset, _, _ in read_all(log)]
    assert survivors[0] > 0
    for removed in (0, 1, 17, survivors[0] - 1):
        data = log.read(removed, 1 << 20).read_bytes()
        first = next(r for b in decode_batches(data) for r in b.records if r.offset >= removed)
        assert first.offset == survivors[0]
    manager.shutdown()


def test_tombstones_stay_for_delete_retention_ms_then_go(tmp_path):
    clock = Clock()
    config = LogConfig(
        segment_bytes=2048,
        cleanup_policy="compact",
        min_cleanable_dirty_ratio=0.0,
        delete_retention_ms=DAY,
    )
    manager = started(tmp_path / "d", clock, config)
    log = manager.get_or_create_log("t", 0, config=config)
    fill(log, 100, 10)
    log.append_as_leader(batch([(b"k3", None), (b"k4", None)]), 0, NOW)
    log.roll()
    log.append_as_leader(batch([(b"tail", b"x")]), 0, NOW)
    manager.cleaner.clean_once()
    keys = {key: value for _, key, value in read_all(log)}
    assert keys[b"k3"] is None and keys[b"k4"] is None  # kept, with a delete horizon
    clock.now += DAY - 1
    manager.cleaner.clean_once()
    assert {key for _, key, _ in read_all(log)} >= {b"k3", b"k4"}
    clock.now += 1
    # No new dirty data: the expired horizon alone makes the log worth a pass.
    assert manager.cleaner.clean_once()
    keys = {key for _, key, _ in read_all(log)}
    assert b"k3" not in keys and b"k4" not in keys and b"k5" in keys
    manager.shutdown()


def test_the_cleaner_offset_checkpoint_is_kafkas_file_and_bounds_the_next_pass(tmp_path):
    clock = Clock()
    config = LogConfig(segment_bytes=2048, cleanup_policy="compact")  # ratio 0.5
    manager = started(tmp_path / "d", clock, config)
    log = manager.get_or_create_log("t", 0, config=config)
    fill(log, 300, 10)
    assert manager.cleaner.clean_once()
    end = manager.cleaner.checkpoint_of(("t", 0))
    assert end == log.active_segment.base_offset
    text = (tmp_path / "d" / CLEANER_OFFSET_CHECKPOINT).read_text()
    assert text == f"0\n1\nt 0 {end}\n"
    assert not manager.cleaner.clean_once()  # nothing dirty: below min.cleanable.dirty.ratio
    manager.shutdown()
    again = started(tmp_path / "d", clock, config)
    assert again.cleaner.checkpoint_of(("t", 0)) == end
    again.shutdown()


def test_the_dirty_ratio_and_min_compaction_lag_hold_a_log_back(tmp_path):
    clock = Clock()
    config = LogConfig(
        segment_bytes=2048,
        cleanup_policy="compact",
        min_cleanable_dirty_ratio=0.0,
        min_compaction_lag_ms=60_000,
    )
    manager = started(tmp_path / "d", clock, config)
    log = manager.get_or_create_log("t", 0, config=config)
    fill(log, 200, 10, ts=NOW)
    assert not manager.cleaner.clean_once()  # every record is younger than the lag
    clock.now += 60_000 + 200
    assert manager.cleaner.clean_once()
    manager.shutdown()


def test_a_producers_last_batch_is_kept_empty_so_its_sequence_survives(tmp_path):
    clock = Clock()
    manager = started(tmp_path / "d", clock)
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(
        batch([(b"a", b"1"), (b"b", b"1")], producer_id=7, base_sequence=0), 0, NOW
    )
    for i in range(30):  # supersede a and b, without a producer id
        log.append_as_leader(batch([(b"a", b"%d" % i), (b"b", b"%d" % i)]), 0, NOW)
    log.roll()
    log.append_as_leader(batch([(b"tail", b"x")]), 0, NOW)
    manager.cleaner.clean_once()
    headers = list(log.iter_headers())
    producer = [h for h in headers if h.producer_id == 7]
    assert len(producer) == 1
    assert (producer[0].records_count, producer[0].base_offset, producer[0].last_sequence) == (
        0,
        0,
        1,
    )
    manager.shutdown()


def test_compact_alone_ignores_retention_and_compact_delete_applies_it(tmp_path):
    clock = Clock()
    manager = started(tmp_path / "d", clock)
    for policy, survives in (("compact", True), ("compact,delete", False)):
        config = LogConfig(segment_bytes=2048, cleanup_policy=policy, retention_ms=1000)
        log = manager.get_or_create_log(policy.replace(",", "-"), 0, config=config)
        fill(log, 100, 100, ts=NOW - 10_000)
        deleted = log.delete_old_segments(NOW, high_watermark=log.log_end_offset)
        assert (deleted == 0) is survives
    manager.shutdown()


def test_a_reader_holding_an_old_segment_keeps_reading_it_after_the_swap(tmp_path):
    clock = Clock()
    manager = started(tmp_path / "d", clock)
    log = manager.get_or_create_log("t", 0)
    fill(log, 300, 5)
    held = log.read(0, 1 << 20)
    before = held.read_bytes()
    manager.cleaner.clean_once()
    assert read_all(log)[0][0] > 0  # offset 0 is gone from the log
    assert held.read_bytes() == before  # but the slice still reads the unlinked file
    manager.shutdown()


def test_a_truncation_during_a_pass_drops_the_cleaned_copy(tmp_path):
    clock = Clock()
    manager = started(tmp_path / "d", clock)
    log = manager.get_or_create_log("t", 0)
    fill(log, 300, 5)
    before = read_all(log)
    end = log.log_end_offset

    def truncate(step: str) -> None:
        if step == "cleaned-written":
            log.truncate_to(end - 1)

    manager.cleaner.on_step = truncate
    manager.cleaner.clean_once()
    assert read_all(log) == [r for r in before if r[0] < log.log_end_offset] != before
    assert not [p for p in log.directory.iterdir() if p.suffix in (".cleaned", ".swap")]
    manager.shutdown()


CRASH_STEPS = [
    "offset-map-built",
    "cleaned-written",
    "swap-committed",
    "renamed-old-to-deleted",
    "renamed-indexes",
    "renamed-swap",
    "deleted-old",
]


class Crash(Exception):
    pass


@pytest.mark.parametrize("step", CRASH_STEPS)
def test_a_crash_at_each_step_of_a_pass_recovers_to_a_whole_log(tmp_path, step):
    clock = Clock()
    manager = started(tmp_path / "d", clock)
    log = manager.get_or_create_log("t", 0)
    latest = fill(log, 300, 7, compression=Compression.LZ4)
    log.roll()
    before = read_all(log)
    committed = CRASH_STEPS.index(step) >= CRASH_STEPS.index("swap-committed")

    def crash(name: str) -> None:
        if name == step:
            raise Crash(name)

    manager.cleaner.on_step = crash
    with pytest.raises(Crash):
        manager.cleaner.clean_once()
    # The process dies here: nothing is closed or flushed, the lock goes with it.
    os.close(manager._locks.pop(manager.log_dirs[0]))
    reopened = started(tmp_path / "d", clock)
    after = read_all(reopened.get_log("t", 0))
    names = [p.name for p in (tmp_path / "d" / "t-0").iterdir()]
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
    if committed:
        # The swapped group holds each key's latest value; old segments of the group past the
        # cleaned copy's last offset may stay, uncleaned, until the next pass (as in Kafka).
        assert set(after) <= set(before)
        assert [r[0] for r in after] == sorted({r[0] for r in after})
        assert {key: (offset, value) for offset, key, value in after} == latest
    else:
        assert after == before
    # Either way the log takes appends and cleans again.
    reopened.get_log("t", 0).append_as_leader(batch([(b"k1", b"new")]), 0, NOW)
    reopened.get_log("t", 0).roll()
    assert reopened.cleaner.clean_once()
    latest[b"k1"] = (reopened.get_log("t", 0).log_end_offset - 1, b"new")
    live(read_all(reopened.get_log("t", 0)), latest)
    reopened.shutdown()


def test_a_follower_copies_a_compacted_log_with_its_holes_and_recovers_it(tmp_path):
    clock = Clock()
    manager = started(tmp_path / "d", clock)
    leader = manager.get_or_create_log("t", 0)
    latest = {}
    for i in range(300):  # every third record has a key of its own, the rest update one key
        key = b"u%d" % i if i % 3 == 0 else b"hot"
        info = leader.append_as_leader(batch([(key, b"v%d" % i)]), 0, NOW)
        latest[key] = (info.first_offset, b"v%d" % i)
    leader.roll()
    manager.cleaner.clean_once()
    follower = manager.get_or_create_log("t", 1)
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, 700).read_bytes()
        if not data:
            break
        follower.append_as_follower(data)
    assert follower.log_end_offset == leader.log_end_offset == 300
    assert read_all(follower) == read_all(leader)
    live(read_all(follower), latest)
    os.close(manager._locks.pop(manager.log_dirs[0]))  # crash: every segment is recovered
    reopened = started(tmp_path / "d", clock)
    assert read_all(reopened.get_log("t", 1)) == read_all(reopened.get_log("t", 0))
    headers = list(reopened.get_log("t", 1).iter_headers())
    pairs = zip(headers, headers[1:], strict=False)
    assert any(b.base_offset > a.next_offset for a, b in pairs)  # holes
    reopened.shutdown()


def test_batches_emptied_by_the_cleaner_leave_offsets_increasing(tmp_path):
    clock = Clock()
    manager = started(tmp_path / "d", clock)
    log = manager.get_or_create_log("t", 0)
    fill(log, 500, 3, per_batch=1)
    log.roll()
    manager.cleaner.clean_once()
    headers = list(log.iter_headers())
    assert all(b.base_offset > a.last_offset for a, b in zip(headers, headers[1:], strict=False))
    assert [parse_batch_header(log.read(h.base_offset, 100).read_bytes()) for h in headers[:1]]
    manager.shutdown()


def test_the_throttler_holds_io_to_its_rate_as_kafkas_does():
    seconds = [0.0]
    throttler = Throttler(1000.0, check_interval_s=0.3, clock=lambda: seconds[0])
    assert throttler.observe(5000) == 0.0  # no check before the interval has passed
    seconds[0] = 0.5
    delay = throttler.observe(0)  # 5,000 bytes in 0.5 s against 1,000/s: 4.5 s more
    assert delay == pytest.approx(4.5)
    seconds[0] = 0.5 + delay + 1.0
    assert throttler.observe(500) == 0.0  # 500 bytes in the next second: within the rate


def test_a_pass_reads_and_writes_through_the_throttler(tmp_path):
    class Counting(Throttler):
        def __init__(self) -> None:
            super().__init__(1e300)
            self.observed = 0

        def observe(self, nbytes: int) -> float:
            self.observed += nbytes
            return 0.0

    clock = Clock()
    manager = started(tmp_path / "d", clock)
    log = manager.get_or_create_log("t", 0)
    fill(log, 400, 20)
    counting = manager.cleaner.throttler = Counting()
    assert manager.cleaner.clean_once()
    stats = manager.cleaner.passes[-1]
    assert counting.observed >= stats.bytes_read > 0  # the map's read, the copy's read and write
    manager.shutdown()
