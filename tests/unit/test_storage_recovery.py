"""Recovery after an unclean shutdown: torn tails, flipped bits, lost or garbage indexes.

Each test builds a real log, damages its files the way a crash or a bad disk would, reopens it
without the clean-shutdown promise, and checks that exactly the whole, valid batches before the
damage survive (compared record by record), nothing after, that indexes are rebuilt, and that the
log takes new appends at the right offset.
"""

from __future__ import annotations

import gc
import os
import random
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlog.protocol.records import RecordBatchBuilder, decode_batch, decode_batches, iter_batches
from epochlog.storage import LogConfig, PartitionLog

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=150)


@dataclass(frozen=True)
class StoredBatch:
    segment: Path  # the .log file
    position: int
    data: bytes

    @property
    def end(self) -> int:
        return self.position + len(self.data)


def make_batch(count: int, ts: int, tag: str, value_size: int = 30) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(ts + i, f"{tag}-{i}".encode(), bytes([i % 251]) * value_size)
    return builder.build()


def build_log(
    directory: Path,
    counts: list[int],
    config: LogConfig = CONFIG,
    epochs: list[int] | None = None,
    value_size: int = 30,
) -> list[StoredBatch]:
    """Append one batch per count, close the log, return the batches as stored on disk."""
    log = PartitionLog.open(directory, config, now_ms=NOW)
    for i, count in enumerate(counts):
        epoch = epochs[i] if epochs is not None else i // 4
        log.append_as_leader(make_batch(count, NOW + i * 10, f"b{i}", value_size), epoch, NOW)
    log.close()
    return stored_batches(directory)


def stored_batches(directory: Path) -> list[StoredBatch]:
    result = []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        for position, header in iter_batches(data, verify=True):
            result.append(StoredBatch(path, position, data[position : position + header.size]))
    return result


def reopen(directory: Path, recovery_point: int = 0, config: LogConfig = CONFIG) -> PartitionLog:
    return PartitionLog.open(
        directory, config, recovery_point=recovery_point, had_clean_shutdown=False, now_ms=NOW
    )


def all_records(log: PartitionLog):
    offset, records = log.log_start_offset, []
    while offset < log.log_end_offset:
        batches = decode_batches(log.read(offset, 1 << 20).read_bytes())
        assert batches, f"no batch readable at {offset} below the log end {log.log_end_offset}"
        records.extend(r for b in batches for r in b.records)
        offset = batches[-1].next_offset
    return [(r.offset, r.timestamp, r.key, r.value) for r in records]


def records_of(batches: list[StoredBatch]):
    return [
        (r.offset, r.timestamp, r.key, r.value)
        for b in batches
        for r in decode_batch(b.data).records
    ]


def assert_log_holds_exactly(log: PartitionLog, survivors: list[StoredBatch]) -> None:
    expected_end = decode_batch(survivors[-1].data).next_offset if survivors else 0
    assert log.log_end_offset == expected_end
    assert all_records(log) == records_of(survivors)
    # Every offset is found through the rebuilt indexes.
    for offset in range(0, log.log_end_offset, 3):
        (batch,) = decode_batches(log.read(offset, 1).read_bytes())
        assert batch.base_offset <= offset < batch.next_offset
    segment_files = {b.segment for b in survivors}
    for path in log.directory.glob("*.log"):
        assert path in segment_files or path == log.active_segment.log_path


def assert_log_takes_appends(log: PartitionLog) -> None:
    end = log.log_end_offset
    info = log.append_as_leader(make_batch(2, NOW, "after"), 99, NOW)
    assert info.first_offset == end
    directory = log.directory
    log.close()
    clean = PartitionLog.open(directory, CONFIG, had_clean_shutdown=True)
    assert clean.log_end_offset == end + 2
    assert all_records(clean)[-2:] == [
        (end, NOW, b"after-0", b"\x00" * 30),
        (end + 1, NOW + 1, b"after-1", b"\x01" * 30),
    ]
    clean.close()


def cut(path: Path, size: int) -> None:
    with open(path, "r+b") as file:
        file.truncate(size)


def flip(path: Path, position: int, mask: int = 0x10) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        byte = file.read(1)[0]
        file.seek(position)
        file.write(bytes([byte ^ mask]))


# ----------------------------------------------------------------------------- torn tails

COUNTS = [3, 1, 5, 2, 4, 1, 6, 3, 2, 2, 5, 1, 3, 4, 2, 2, 1, 3]


def test_every_cut_point_inside_a_batch_keeps_exactly_the_batches_before_it(tmp_path):
    stored = build_log(tmp_path / "seed-0", COUNTS)
    last_segment = stored[-1].segment
    in_last = [b for b in stored if b.segment == last_segment]
    victim = in_last[len(in_last) // 2]
    size = len(victim.data)
    for i, cut_at in enumerate([0, 1, 8, 11, 12, 16, 17, 21, 40, 60, 61, 62, size - 1, size]):
        directory = tmp_path / f"cut-{i}"
        build_log(directory, COUNTS)
        cut(directory / last_segment.name, victim.position + cut_at)
        log = reopen(directory)
        whole = [
            b for b in stored if b.segment != last_segment or b.end <= victim.position + cut_at
        ]
        survivors = [StoredBatch(directory / b.segment.name, b.position, b.data) for b in whole]
        assert_log_holds_exactly(log, survivors)
        assert_log_takes_appends(log)


def test_a_cut_in_an_early_segment_drops_every_later_segment(tmp_path):
    stored = build_log(tmp_path / "t-0", COUNTS)
    segments = sorted({b.segment for b in stored})
    assert len(segments) >= 3
    victim = [b for b in stored if b.segment == segments[1]][1]
    cut(victim.segment, victim.position + 30)
    log = reopen(tmp_path / "t-0")
    assert_log_holds_exactly(
        log,
        [
            b
            for b in stored
            if b.segment == segments[0] or (b.segment == segments[1] and b.end <= victim.position)
        ],
    )
    assert sorted(log.directory.glob("*.log")) == segments[:2]
    assert sorted(p.name for p in log.directory.glob("*index")) == sorted(
        s.with_suffix(suffix).name for s in segments[:2] for suffix in (".index", ".timeindex")
    )
    assert_log_takes_appends(log)


def test_garbage_after_the_last_batch_of_an_early_segment_distrusts_all_later_ones(tmp_path):
    # Offsets would still line up, but nothing after the first bad byte is trusted.
    stored = build_log(tmp_path / "t-0", COUNTS)
    first_segment = stored[0].segment
    with open(first_segment, "ab") as file:
        file.write(b"\x00" * 100)
    log = reopen(tmp_path / "t-0")
    assert_log_holds_exactly(log, [b for b in stored if b.segment == first_segment])
    assert sorted(log.directory.glob("*.log")) == [first_segment]
    log.close()


def test_a_zero_filled_tail_is_cut_off(tmp_path):
    stored = build_log(tmp_path / "t-0", COUNTS)
    with open(stored[-1].segment, "ab") as file:
        file.write(bytes(4096))  # a crash after the file grew but before the data landed
    log = reopen(tmp_path / "t-0")
    assert_log_holds_exactly(log, stored)
    assert log.active_segment.size == stored[-1].end
    assert_log_takes_appends(log)


def test_a_segment_of_pure_garbage_is_emptied_without_looping(tmp_path):
    stored = build_log(tmp_path / "t-0", COUNTS)
    last = stored[-1].segment
    last.write_bytes(random.Random(7).randbytes(5000))
    log = reopen(tmp_path / "t-0")
    assert_log_holds_exactly(log, [b for b in stored if b.segment != last])
    assert log.active_segment.log_path == last and log.active_segment.is_empty
    assert_log_takes_appends(log)


def test_a_log_abandoned_without_close_recovers_too(tmp_path):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, CONFIG, now_ms=NOW)
    for i, count in enumerate(COUNTS):
        log.append_as_leader(make_batch(count, NOW + i * 10, f"b{i}"), i // 4, NOW)
    del log
    gc.collect()
    stored = stored_batches(directory)
    cut(stored[-1].segment, stored[-1].position + 70)
    recovered = reopen(directory)
    assert_log_holds_exactly(recovered, stored[:-1])
    assert_log_takes_appends(recovered)


# ------------------------------------------------------------------------------ bit flips

# Byte offsets inside a batch: records payload, attributes, lastOffsetDelta, maxTimestamp,
# recordsCount, the CRC itself, magic, and the high and low bytes of batchLength.
FLIP_POSITIONS = [-1, -20, 70, 22, 26, 40, 60, 17, 20, 16, 8, 11]


def test_a_flipped_bit_in_a_middle_batch_ends_the_log_before_that_batch(tmp_path):
    stored = build_log(tmp_path / "seed-0", COUNTS)
    victim_index = len(stored) // 2
    for i, where in enumerate(FLIP_POSITIONS):
        directory = tmp_path / f"flip-{i}"
        build_log(directory, COUNTS)
        victim = stored[victim_index]
        position = victim.position + (where if where >= 0 else len(victim.data) + where)
        flip(directory / victim.segment.name, position)
        log = reopen(directory)
        survivors = [
            StoredBatch(directory / b.segment.name, b.position, b.data)
            for b in stored[:victim_index]
        ]
        assert_log_holds_exactly(log, survivors)
        assert_log_takes_appends(log)


def test_a_flipped_base_offset_outside_the_crc_is_caught_by_the_offset_sequence(tmp_path):
    stored = build_log(tmp_path / "t-0", COUNTS)
    victim = stored[len(stored) // 2]
    flip(victim.segment, victim.position + 7, 0x04)  # base offset +-4: CRC still matches
    log = reopen(tmp_path / "t-0")
    assert_log_holds_exactly(log, stored[: len(stored) // 2])


def test_a_leader_epoch_that_goes_down_is_caught_though_outside_the_crc(tmp_path):
    epochs = [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 7, 7]
    stored = build_log(tmp_path / "t-0", COUNTS, epochs=epochs)
    victim_index = 9
    victim = stored[victim_index]
    with open(victim.segment, "r+b") as file:
        file.seek(victim.position + 12)
        file.write(struct.pack(">i", 2))  # epoch 5 -> 2, below the previous batch's 5
    log = reopen(tmp_path / "t-0")
    assert_log_holds_exactly(log, stored[:victim_index])
    first_offset_of_epoch: dict[int, int] = {}
    for batch in stored[:victim_index]:
        header = decode_batch(batch.data).header
        first_offset_of_epoch.setdefault(header.partition_leader_epoch, header.base_offset)
    assert log.leader_epoch_cache.entries == sorted(first_offset_of_epoch.items())
    assert log.latest_epoch == 5


def test_epochs_of_cut_batches_leave_the_epoch_cache(tmp_path):
    epochs = [0] * 6 + [3] * 6 + [8] * 6
    stored = build_log(tmp_path / "t-0", COUNTS, epochs=epochs)
    victim = stored[8]  # an epoch-3 batch
    cut(victim.segment, victim.position + 5)
    for later in {b.segment for b in stored[9:]} - {victim.segment}:
        later.unlink()
    log = reopen(tmp_path / "t-0")
    assert log.leader_epoch_cache.entries == [(0, 0), (3, decode_batch(stored[6].data).base_offset)]
    assert log.end_offset_for_epoch(8) == (-1, -1)
    assert log.end_offset_for_epoch(3) == (3, log.log_end_offset)


# ---------------------------------------------------------------------------------- indexes


def index_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*index"))}


def test_deleted_indexes_are_rebuilt_identically(tmp_path):
    directory = tmp_path / "t-0"
    stored = build_log(directory, COUNTS * 3)
    original = index_files(directory)
    assert any(len(data) > 8 for name, data in original.items() if name.endswith(".index"))
    for name in original:
        (directory / name).unlink()
    # Even after a clean shutdown and with the recovery point at the end, a missing index
    # sends its segment through recovery.
    log = PartitionLog.open(directory, CONFIG, recovery_point=10**9, had_clean_shutdown=True)
    assert index_files(directory) == original
    assert_log_holds_exactly(log, stored)
    assert_log_takes_appends(log)


def test_garbage_index_files_are_detected_and_rebuilt(tmp_path):
    directory = tmp_path / "t-0"
    stored = build_log(directory, COUNTS * 3)
    original = index_files(directory)
    rng = random.Random(3)
    names = sorted(original)
    (directory / names[0]).write_bytes(rng.randbytes(13))  # not whole entries
    (directory / names[1]).write_bytes(rng.randbytes(120))  # whole entries, random
    (directory / names[2]).write_bytes(b"")  # emptied: allowed, just slower
    (directory / names[3]).write_bytes(original[names[3]][:-5])
    log = PartitionLog.open(directory, CONFIG, recovery_point=10**9, had_clean_shutdown=True)
    rebuilt = index_files(directory)
    for name in (names[0], names[1], names[3]):
        assert rebuilt[name] == original[name]
    assert_log_holds_exactly(log, stored)


def test_an_ascending_index_pointing_at_the_wrong_batches_is_rebuilt(tmp_path):
    directory = tmp_path / "t-0"
    stored = build_log(directory, COUNTS * 3)
    original = index_files(directory)
    name = next(n for n, d in original.items() if n.endswith(".index") and len(d) >= 16)
    plausible = b"".join(struct.pack(">ii", i + 1, 100 * (i + 1)) for i in range(3))
    (directory / name).write_bytes(plausible)
    log = PartitionLog.open(directory, CONFIG, recovery_point=10**9, had_clean_shutdown=True)
    assert index_files(directory)[name] == original[name]
    assert_log_holds_exactly(log, stored)


def test_an_unreadable_leader_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path):
    directory = tmp_path / "t-0"
    build_log(directory, COUNTS)
    checkpoint = directory / "leader-epoch-checkpoint"
    original = checkpoint.read_text()
    checkpoint.write_text("0\n3\nnot an entry\n")
    log = PartitionLog.open(directory, CONFIG, had_clean_shutdown=True)
    assert checkpoint.read_text() == original
    assert [e.epoch for e in log.leader_epoch_cache.entries] == [0, 1, 2, 3, 4]
    log.close()


def test_an_empty_leader_epoch_checkpoint_is_rebuilt_not_trusted_as_no_epochs(tmp_path):
    # What a crash inside a durable batch can leave: the rename durable, the data not.
    directory = tmp_path / "t-0"
    build_log(directory, COUNTS)
    checkpoint = directory / "leader-epoch-checkpoint"
    original = checkpoint.read_text()
    checkpoint.write_bytes(b"")
    log = PartitionLog.open(directory, CONFIG, had_clean_shutdown=True)
    assert [e.epoch for e in log.leader_epoch_cache.entries] == [0, 1, 2, 3, 4]
    assert checkpoint.read_text() == original
    log.close()


def test_segments_below_the_recovery_point_are_trusted_not_rescanned(tmp_path):
    directory = tmp_path / "t-0"
    stored = build_log(directory, COUNTS)
    first = stored[0]
    flip(first.segment, first.position + len(first.data) - 1)
    last_base = int(stored[-1].segment.stem)
    log = reopen(directory, recovery_point=last_base)
    assert log.log_end_offset == decode_batch(stored[-1].data).next_offset
    log.close()
    # From 0, the same damage ends the log at offset 0.
    assert reopen(directory, recovery_point=0).log_end_offset == 0


def test_a_torn_tail_behind_a_clean_shutdown_marker_is_still_cut(tmp_path):
    directory = tmp_path / "t-0"
    stored = build_log(directory, COUNTS)
    cut(stored[-1].segment, stored[-1].position + 20)
    log = PartitionLog.open(directory, CONFIG, had_clean_shutdown=True)
    assert_log_holds_exactly(log, stored[:-1])
    assert_log_takes_appends(log)


def test_leftover_files_of_interrupted_operations_are_removed(tmp_path):
    directory = tmp_path / "t-0"
    stored = build_log(directory, COUNTS)
    (directory / "00000000000000099999.index").write_bytes(b"")
    (directory / "00000000000000000000.log.deleted").write_bytes(b"x")
    (directory / "leader-epoch-checkpoint.tmp").write_text("junk")
    log = reopen(directory)
    names = {p.name for p in directory.iterdir()}
    assert "00000000000000099999.index" not in names
    assert not any(n.endswith((".deleted", ".tmp")) for n in names)
    assert_log_holds_exactly(log, stored)
    log.close()


# ------------------------------------------------------------------------------ hypothesis


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    counts=st.lists(st.integers(1, 6), min_size=1, max_size=25),
    value_size=st.integers(0, 120),
    segment_bytes=st.integers(1000, 4000),  # the largest batch is ~900
    cut_fraction=st.floats(0, 1),
)
def test_random_appends_and_a_random_cut_keep_exactly_the_batches_wholly_before_it(
    counts, value_size, segment_bytes, cut_fraction
):
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=100)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        stored = build_log(directory, counts, config, value_size=value_size)
        segments = sorted({b.segment for b in stored})
        total = sum(os.path.getsize(s) for s in segments)
        # Pick the global byte at which the disk "lost" everything after.
        target = int(cut_fraction * total)
        for segment in segments:
            size = os.path.getsize(segment)
            if target < size:
                cut(segment, target)
                victim = segment
                break
            target -= size
        else:
            victim = None
        survivors = []
        for batch in stored:
            if victim is not None and batch.segment > victim:
                break
            if batch.segment == victim and batch.end > target:
                break
            survivors.append(batch)
        log = reopen(directory, config=config)
        assert log.log_end_offset == (
            decode_batch(survivors[-1].data).next_offset if survivors else 0
        )
        assert all_records(log) == records_of(survivors)
        later = [s for s in segments if victim is not None and s > victim]
        assert not any(s.exists() for s in later)
        info = log.append_as_leader(make_batch(1, NOW, "x"), 50, NOW)
        assert info.first_offset == log.log_end_offset - 1
        log.close()
