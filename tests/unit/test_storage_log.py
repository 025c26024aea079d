"""PartitionLog: appends, reads, lookups, truncation, rolls and retention on real files."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest

from epochlog.protocol.errors import CorruptRecordError, ErrorCode, InvalidRecordError
from epochlog.protocol.records import (
    CRC_OFFSET,
    RecordBatchBuilder,
    batch_crc,
    decode_batches,
    iter_batches,
)
from epochlog.storage import (
    FileSlice,
    LeaderEpochRegressionError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from epochlog.storage.checkpoint import (
    LeaderEpochCheckpointFile,
    deferred_checkpoints,
    write_deferred,
)

NOW = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=1500, index_interval_bytes=150)


def make_batch(count: int, first_ts: int = NOW, tag: str = "r", value_size: int = 20) -> bytes:
    """`count` records, timestamps first_ts, first_ts+1, ...; keys name the record."""
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(first_ts + i, f"{tag}{i}".encode(), b"v" * value_size)
    return builder.build()


def with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


def fill(log: PartitionLog, batches: int, records: int = 3, epoch: int = 0, ts: int = NOW) -> None:
    for i in range(batches):
        log.append_as_leader(make_batch(records, ts + i * 10, tag=f"b{i}-"), epoch, NOW)


def read_all(log: PartitionLog, start: int | None = None, max_offset: int | None = None):
    """Every record from `start` on, read the way a consumer does, one slice at a time."""
    offset = log.log_start_offset if start is None else start
    records = []
    for _ in range(10_000):
        data = log.read(offset, 700, max_offset).read_bytes()
        if not data:
            return records
        batches = decode_batches(data)
        records.extend(r for b in batches for r in b.records)
        offset = batches[-1].next_offset
    raise AssertionError("read_all did not finish")


@pytest.fixture
def log(tmp_path: Path):
    opened = PartitionLog.open(tmp_path / "orders-0", SMALL, now_ms=NOW)
    yield opened
    opened.close()


# ----------------------------------------------------------------------------- append/read


def test_appends_get_dense_offsets_and_read_back_across_segment_rolls(log):
    sizes = [1, 3, 7, 2, 5] * 8
    for i, count in enumerate(sizes):
        info = log.append_as_leader(make_batch(count, NOW + i, tag=f"b{i}-"), 0, NOW)
        assert info.record_count == count and info.batch_count == 1
    assert len(log.segments) > 3
    assert log.log_end_offset == sum(sizes)
    records = read_all(log)
    assert [r.offset for r in records] == list(range(sum(sizes)))
    expected_keys = [f"b{i}-{j}".encode() for i, c in enumerate(sizes) for j in range(c)]
    assert [r.key for r in records] == expected_keys
    for a, b in zip(log.segments, log.segments[1:], strict=False):
        assert a.next_offset == b.base_offset
        assert a.size <= SMALL.segment_bytes


def test_append_info_reports_offsets_and_max_timestamp(log):
    log.append_as_leader(make_batch(2), 0, NOW)
    info = log.append_as_leader(make_batch(4, first_ts=NOW + 100), 0, NOW)
    assert (info.first_offset, info.last_offset) == (2, 5)
    assert info.max_timestamp == NOW + 103
    assert info.offset_of_max_timestamp == 5
    assert info.log_append_time == -1 and info.log_start_offset == 0


def test_leader_append_stamps_offsets_and_epoch_and_keeps_the_crc_valid(log):
    log.append_as_leader(make_batch(3), 4, NOW)
    log.append_as_leader(make_batch(2), 7, NOW)
    data = log.read(0, 10_000).read_bytes()
    headers = [h for _, h in iter_batches(data, verify=True)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 4), (3, 7)]
    assert log.leader_epoch_cache.entries == [(4, 0), (7, 3)]
    stored = LeaderEpochCheckpointFile(log.directory / "leader-epoch-checkpoint").read()
    assert stored == [(4, 0), (7, 3)]


def test_log_append_time_topics_stamp_the_broker_time(tmp_path):
    config = LogConfig(message_timestamp_type="LogAppendTime")
    log = PartitionLog.open(tmp_path / "t-0", config)
    info = log.append_as_leader(make_batch(3, first_ts=5), 0, NOW)
    assert info.log_append_time == NOW and info.max_timestamp == NOW
    (batch,) = decode_batches(log.read(0, 10_000).read_bytes())  # verifies the CRC
    assert [r.timestamp for r in batch.records] == [NOW, NOW, NOW]
    log.close()


def test_a_multi_batch_append_is_stored_whole(log):
    info = log.append_as_leader(make_batch(2) + make_batch(3, tag="x"), 1, NOW)
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 4, 2)
    assert [r.offset for r in read_all(log)] == [0, 1, 2, 3, 4]


def test_read_at_every_offset_starts_with_the_batch_holding_it(log):
    fill(log, 30, records=4)
    for offset in range(log.log_end_offset):
        data = log.read(offset, 1).read_bytes()
        (batch,) = decode_batches(data)
        assert batch.base_offset <= offset < batch.next_offset


def test_read_returns_whole_batches_within_max_bytes(log):
    fill(log, 10)
    batch_size = len(make_batch(3, tag="b0-"))
    slice_ = log.read(0, batch_size * 2 + batch_size // 2)
    assert len(slice_) == batch_size * 2
    assert len(decode_batches(slice_.read_bytes())) == 2


def test_read_returns_one_oversized_batch_only_when_asked_to(log):
    fill(log, 3)
    assert len(decode_batches(log.read(0, 10).read_bytes())) == 1
    assert len(log.read(0, 10, min_one_batch=False)) == 0


def test_read_never_returns_a_batch_reaching_the_high_watermark(log):
    fill(log, 10, records=3)  # batches hold 0-2, 3-5, 6-8, ...
    assert [r.offset for r in read_all(log, max_offset=9)] == list(range(9))
    # A high watermark inside a batch keeps that whole batch back.
    assert [r.offset for r in read_all(log, max_offset=10)] == list(range(9))
    assert len(log.read(9, 10_000, max_offset_exclusive=9)) == 0
    assert len(log.read(3, 10_000, max_offset_exclusive=4)) == 0


def test_read_at_the_log_end_is_empty_and_beyond_it_is_out_of_range(log):
    fill(log, 2)
    assert log.read(6, 100) == FileSlice.empty()
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(7, 100)
    assert info.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_a_file_slice_can_be_sent_with_sendfile(log):
    fill(log, 5)
    slice_ = log.read(3, 10_000)
    left, right = socket.socketpair()
    with left, right:
        sent = os.sendfile(left.fileno(), slice_.fileno(), slice_.position, len(slice_))
        assert sent == len(slice_)
        received = b""
        while len(received) < sent:
            received += right.recv(65536)
    assert received == slice_.read_bytes()
    assert decode_batches(received)[0].base_offset == 3


# ------------------------------------------------------------------------ validation


def test_a_corrupt_batch_is_refused_whole_and_nothing_is_written(log):
    fill(log, 2)
    size_before = log.size_in_bytes
    bad = bytearray(make_batch(3))
    bad[-1] ^= 0x01
    with pytest.raises(CorruptRecordError) as info:
        log.append_as_leader(make_batch(2) + bytes(bad), 0, NOW)
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(make_batch(2)[:-5], 0, NOW)
    assert log.log_end_offset == 6 and log.size_in_bytes == size_before


def test_producer_rule_violations_are_invalid_record(log):
    control = bytearray(make_batch(1))
    struct.pack_into(">h", control, 21, 0x20)
    wrong_count = bytearray(make_batch(3))
    struct.pack_into(">i", wrong_count, 57, 2)
    no_sequence = bytearray(make_batch(1))
    struct.pack_into(">q", no_sequence, 43, 1234)  # a producer id without a base sequence
    for bad in (control, wrong_count, no_sequence):
        with pytest.raises(InvalidRecordError) as info:
            log.append_as_leader(with_crc(bad), 0, NOW)
        assert info.value.error_code == ErrorCode.INVALID_RECORD
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(b"", 0, NOW)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_size_limits_are_enforced(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=1000, max_message_bytes=300))
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(make_batch(1, value_size=400), 0, NOW)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(make_batch(1, value_size=1100), 0, NOW)
    assert log.log_end_offset == 0
    log.close()


def test_an_append_with_an_older_leader_epoch_is_refused(log):
    log.append_as_leader(make_batch(2), 5, NOW)
    log.roll(NOW)  # the check looks past an empty active segment
    with pytest.raises(LeaderEpochRegressionError) as info:
        log.append_as_leader(make_batch(2), 4, NOW)
    assert info.value.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert log.log_end_offset == 2 and log.leader_epoch_cache.entries == [(5, 0)]
    assert log.append_as_leader(make_batch(1), 5, NOW).first_offset == 2


# -------------------------------------------------------------------------- follower


def leader_copy(tmp_path: Path, epochs: list[int]) -> bytes:
    leader = PartitionLog.open(tmp_path / "leader-0")
    for i, epoch in enumerate(epochs):
        leader.append_as_leader(make_batch(2, tag=f"e{epoch}-{i}-"), epoch, NOW)
    data = leader.read(0, 1 << 20).read_bytes()
    leader.close()
    return data


def test_follower_appends_the_leaders_batches_as_they_are(tmp_path):
    data = leader_copy(tmp_path, [1, 1, 3, 3, 4])
    follower = PartitionLog.open(tmp_path / "orders-0")
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 9)
    assert follower.read(0, 1 << 20).read_bytes() == data
    assert follower.leader_epoch_cache.entries == [(1, 0), (3, 4), (4, 8)]
    assert follower.append_as_follower(b"").record_count == 0
    follower.close()


def test_follower_batches_whose_epoch_goes_down_are_refused(tmp_path):
    data = leader_copy(tmp_path, [3, 3])
    follower = PartitionLog.open(tmp_path / "orders-0")
    follower.append_as_leader(make_batch(1), 4, NOW)
    follower.truncate_to(0)
    follower.append_as_follower(data)
    assert follower.last_batch_epoch == 3
    stale = bytearray(leader_copy(tmp_path / "other", [2]))
    struct.pack_into(">q", stale, 0, 4)  # at the right offset, with epoch 2 after epoch 3
    with pytest.raises(LeaderEpochRegressionError):
        follower.append_as_follower(bytes(stale))
    assert follower.log_end_offset == 4
    follower.close()


def test_follower_append_must_continue_at_the_log_end(tmp_path):
    data = leader_copy(tmp_path, [1, 1, 1])
    follower = PartitionLog.open(tmp_path / "orders-0")
    follower.append_as_follower(data)
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)
    assert follower.log_end_offset == 6
    follower.close()


# ---------------------------------------------------------------------------- lookups


def test_offset_for_timestamp_finds_the_first_record_at_or_after_it(log):
    # Timestamps go up and down across batches; ListOffsets wants the first offset whose
    # record timestamp is >= the target.
    timestamps = [100, 300, 200, 500, 400, 700, 600]
    for i, ts in enumerate(timestamps * 5):
        log.append_as_leader(make_batch(3, first_ts=ts + i), 0, NOW)
    records = read_all(log)
    for target in range(0, 900, 7):
        found = log.offset_for_timestamp(target)
        expected = next((r for r in records if r.timestamp >= target), None)
        if expected is None:
            assert found is None
        else:
            assert (found.timestamp, found.offset) == (expected.timestamp, expected.offset)
            assert found.leader_epoch == 0


def test_offset_of_max_timestamp_is_the_first_record_with_it(log):
    log.append_as_leader(make_batch(3, first_ts=10), 0, NOW)
    log.append_as_leader(make_batch(3, first_ts=500), 2, NOW)  # 500, 501, 502
    log.append_as_leader(make_batch(3, first_ts=100), 2, NOW)
    fill(log, 20, epoch=3, ts=0)
    found = log.offset_of_max_timestamp()
    assert (found.timestamp, found.offset, found.leader_epoch) == (502, 5, 2)


def test_lookups_on_an_empty_log_find_nothing(log):
    assert log.offset_for_timestamp(0) is None
    assert log.offset_of_max_timestamp() is None


# ------------------------------------------------------------------------- truncation


def test_truncate_to_removes_the_tail_across_segments_and_appends_continue(log):
    fill(log, 40, records=3, epoch=1)
    log.append_as_leader(make_batch(3), 2, NOW)
    segments_before = len(log.segments)
    assert log.truncate_to(61) is True  # inside batch 60-62: that batch goes whole
    assert log.log_end_offset == 60
    assert len(log.segments) < segments_before
    assert [r.offset for r in read_all(log)] == list(range(60))
    assert log.leader_epoch_cache.entries == [(1, 0)]
    assert log.truncate_to(60) is False
    info = log.append_as_leader(make_batch(2, tag="new"), 3, NOW)
    assert info.first_offset == 60
    assert [r.key for r in read_all(log, start=60)] == [b"new0", b"new1"]
    assert log.end_offset_for_epoch(1) == (1, 60)


def test_truncate_to_a_segment_base_keeps_an_empty_active_segment(log):
    fill(log, 30)
    base = log.segments[2].base_offset
    log.truncate_to(base)
    assert log.log_end_offset == base
    assert log.active_segment.base_offset == base and log.active_segment.is_empty
    log.close()
    reopened = PartitionLog.open(log.directory, SMALL, had_clean_shutdown=True)
    assert reopened.log_end_offset == base
    assert len(read_all(reopened)) == base
    reopened.close()


def test_truncate_fully_and_start_at_moves_the_whole_log(log):
    fill(log, 30)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert len(log.segments) == 1 and log.leader_epoch_cache.entries == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.append_as_leader(make_batch(1), 5, NOW).first_offset == 1000
    assert sorted(p.name for p in log.directory.glob("*.log")) == ["00000000000000001000.log"]


# ------------------------------------------------------------------------------ rolls


def test_roll_by_age_uses_record_timestamps(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_ms=1000))
    log.append_as_leader(make_batch(1, first_ts=0), 0, NOW)
    log.append_as_leader(make_batch(1, first_ts=1000), 0, NOW)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch(1, first_ts=1001), 0, NOW)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_a_config_change_applies_to_the_next_append(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    log.append_as_leader(make_batch(3), 0, NOW)
    log.config = LogConfig(segment_bytes=200)
    log.append_as_leader(make_batch(3), 0, NOW)
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.close()


def test_roll_when_an_index_is_full(tmp_path):
    config = LogConfig(index_interval_bytes=0, segment_index_bytes=24)  # 2 time entries
    log = PartitionLog.open(tmp_path / "t-0", config)
    for i in range(10):
        log.append_as_leader(make_batch(1, first_ts=i), 0, NOW)
    assert len(log.segments) > 2
    assert all(len(s.time_index) <= 3 for s in log.segments)
    assert [r.offset for r in read_all(log)] == list(range(10))
    log.close()


def test_roll_fsyncs_and_advances_the_recovery_point(log):
    assert log.recovery_point == 0
    fill(log, 20)
    assert log.recovery_point == log.active_segment.base_offset > 0


def test_flush_interval_messages_forces_a_flush(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(flush_interval_messages=5))
    log.append_as_leader(make_batch(3), 0, NOW)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(3), 0, NOW)
    assert log.recovery_point == 6
    log.close()


# -------------------------------------------------------------------------- retention


def test_flush_ms_flushes_a_log_whose_unflushed_data_is_that_old(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(flush_ms=1000))
    fill(log, 2)
    assert log.recovery_point == 0
    assert not log.flush_if_due(log.last_flush_ms + 999)
    assert log.flush_if_due(log.last_flush_ms + 1000)
    assert log.recovery_point == log.log_end_offset == 6
    assert not log.flush_if_due(log.last_flush_ms + 10_000)  # nothing unflushed
    log.close()


def retention_log(tmp_path: Path, **config) -> PartitionLog:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=1500, **config))
    for i in range(40):
        log.append_as_leader(make_batch(3, first_ts=i * 1000, tag=f"b{i}-"), i // 10, NOW)
    return log


def test_retention_by_time_deletes_segments_older_than_retention_ms(tmp_path):
    log = retention_log(tmp_path, retention_ms=10_000)
    now = 40_000  # the last record is 39_002: segments whose newest record is < 30_000 go
    deleted = log.delete_old_segments(now, high_watermark=log.log_end_offset)
    assert deleted > 0
    first = log.segments[0]
    assert now - first.largest_timestamp <= 10_000
    assert log.log_start_offset == first.base_offset
    assert [r.offset for r in read_all(log)] == list(range(first.base_offset, 120))
    assert log.leader_epoch_cache.earliest_entry.start_offset == log.log_start_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.close()


def test_retention_never_deletes_past_the_high_watermark(tmp_path):
    log = retention_log(tmp_path, retention_ms=1)
    second_base = log.segments[1].base_offset
    assert log.delete_old_segments(10**9, high_watermark=second_base + 1) == 1
    assert log.log_start_offset == second_base
    log.close()


def test_retention_expiring_everything_rolls_and_keeps_an_empty_active_segment(tmp_path):
    log = retention_log(tmp_path, retention_ms=1)
    log.delete_old_segments(10**9, high_watermark=log.log_end_offset)
    assert len(log.segments) == 1 and log.active_segment.is_empty
    assert log.log_start_offset == log.log_end_offset == 120
    assert log.read(120, 100) == FileSlice.empty()
    assert log.append_as_leader(make_batch(1), 9, NOW).first_offset == 120
    log.close()


def test_retention_by_size_keeps_the_newest_segments_within_retention_bytes(tmp_path):
    log = retention_log(tmp_path, retention_ms=-1, retention_bytes=4000)
    sizes_before = [s.size for s in log.segments]
    log.delete_old_segments(NOW, high_watermark=log.log_end_offset)
    kept = [s.size for s in log.segments]
    assert len(kept) < len(sizes_before)
    assert kept == sizes_before[len(sizes_before) - len(kept) :]
    # At least retention.bytes stay, and dropping one more segment would go below it.
    assert sum(kept) >= 4000 and sum(kept[1:]) < 4000
    log.close()


def test_unlimited_retention_deletes_nothing(tmp_path):
    log = retention_log(tmp_path, retention_ms=-1, retention_bytes=-1)
    assert log.delete_old_segments(10**12, high_watermark=log.log_end_offset) == 0
    log.close()


def test_raising_the_log_start_offset_drops_segments_wholly_below_it(tmp_path):
    log = retention_log(tmp_path, retention_ms=-1)
    target = log.segments[2].base_offset + 1
    assert log.maybe_increment_log_start_offset(target, high_watermark=log.log_end_offset)
    assert log.delete_old_segments(NOW, high_watermark=log.log_end_offset) == 2
    assert log.log_start_offset == target
    # A read at the start offset returns the batch holding it whole; consumers skip the rest.
    (first_batch,) = decode_batches(log.read(target, 1).read_bytes())
    assert first_batch.base_offset < target < first_batch.next_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(log.log_end_offset, high_watermark=target + 1)
    log.close()


def test_a_slice_outlives_the_segment_retention_deletes(tmp_path):
    log = retention_log(tmp_path, retention_ms=1)
    slice_ = log.read(0, 10_000)
    expected = slice_.read_bytes()
    log.delete_old_segments(10**9, high_watermark=log.log_end_offset)
    assert not (log.directory / "00000000000000000000.log").exists()
    assert slice_.read_bytes() == expected
    assert decode_batches(expected)[0].base_offset == 0
    log.close()


def test_log_config_overrides_use_kafkas_topic_names():
    config = LogConfig().with_topic_overrides({"retention.ms": "-1", "segment.bytes": "4096"})
    assert (config.retention_ms, config.segment_bytes) == (-1, 4096)
    with pytest.raises(ValueError, match="unknown topic config 'retention.hours'"):
        LogConfig().with_topic_overrides({"retention.hours": "1"})
    with pytest.raises(ValueError, match="segment.bytes"):
        LogConfig().with_topic_overrides({"segment.bytes": "10"})


def _epoch_lines(directory: Path) -> list[str]:
    return (directory / "leader-epoch-checkpoint").read_text().split("\n")[2:-1]


def test_epoch_checkpoints_changed_in_a_deferral_are_written_later_in_order(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0")
    log.leader_epoch_cache.assign(1, 0)
    assert _epoch_lines(log.directory) == ["1 0"]
    with deferred_checkpoints() as deferred:
        log.leader_epoch_cache.assign(2, 0)
    assert deferred == {log.epoch_checkpoint}
    assert _epoch_lines(log.directory) == ["1 0"]  # not yet
    assert write_deferred(deferred) == 1
    assert _epoch_lines(log.directory) == ["2 0"]
    # A change made outside a deferral replaces a pending one: the deferred writer finds nothing.
    with deferred_checkpoints() as deferred:
        log.leader_epoch_cache.assign(3, 0)
    log.leader_epoch_cache.assign(4, 0)
    assert write_deferred(deferred) == 0
    assert _epoch_lines(log.directory) == ["4 0"]
    log.close()


def test_a_pending_epoch_checkpoint_is_written_before_the_recovery_point_moves(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "t-0")
    with deferred_checkpoints():
        log.leader_epoch_cache.assign(7, 0)
    builder = RecordBatchBuilder()
    builder.append(1, b"k", b"v")
    log.append_as_leader(builder.build(), 7, 1)
    log.flush()
    assert _epoch_lines(log.directory) == ["7 0"]
    with deferred_checkpoints():
        log.leader_epoch_cache.assign(8, 1)
    log.close()  # a clean close flushes, and the pending checkpoint with it
    assert _epoch_lines(log.directory) == ["7 0", "8 1"]


def test_a_prevalidated_batch_is_stamped_like_any_other_but_must_still_fit_a_segment(tmp_path):
    from epochlog.protocol.records import parse_batch_header

    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=1000))
    log.append_as_leader(make_batch(2), 3, NOW)
    batch = make_batch(3)
    info = log.append_as_leader(batch, 3, NOW, validated=parse_batch_header(batch))
    assert (info.first_offset, info.last_offset) == (2, 4)
    stored = decode_batches(log.read(0, 10_000).read_bytes())
    assert [(b.header.base_offset, b.header.partition_leader_epoch) for b in stored] == [
        (0, 3),
        (2, 3),
    ]
    big = make_batch(1, value_size=1100)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(big, 3, NOW, validated=parse_batch_header(big))
    assert log.log_end_offset == 5
    log.close()


def test_offset_for_timestamp_walks_a_compressed_batch_record_by_record(tmp_path):
    from epochlog.protocol.compression import Compression
    from epochlog.protocol.records import RecordBatchBuilder

    log = PartitionLog.open(tmp_path / "orders-0", SMALL, now_ms=NOW)
    try:
        builder = RecordBatchBuilder(compression=Compression.ZSTD)
        for i in range(50):
            builder.append(1000 + (i * 13) % 50, b"k", b"v" * 100)
        log.append_as_leader(builder.build(), 0, NOW)
        found = log.offset_for_timestamp(1045)
        # record i has 1000 + 13i mod 50: the first at or past 1045 is i = 15 (1045)
        assert (found.timestamp, found.offset) == (1045, 15)
    finally:
        log.close()


def test_offset_for_timestamp_over_a_stored_bomb_stops_at_the_bound(tmp_path):
    """A batch that expands past max_decompressed_bytes, stored by a follower append (which
    never looks at records), is searched within the bound and answered from its header."""
    import dataclasses
    import tracemalloc

    from epochlog.protocol.compression import Compression
    from epochlog.protocol.records import stamp_batch
    from epochlog.testing.bad_batches import BASE_TIMESTAMP, zip_bomb_batch

    config = dataclasses.replace(
        SMALL, segment_bytes=1 << 20, max_message_bytes=100_000, decompressed_max_multiple=10
    )
    log = PartitionLog.open(tmp_path / "orders-0", config, now_ms=NOW)
    try:
        bomb = bytearray(zip_bomb_batch(Compression.ZSTD, 256 << 20, record_size=1 << 16))
        stamp_batch(bomb, 0, 0, 0)
        log.append_as_follower(bytes(bomb))
        tracemalloc.start()
        try:
            found = log.offset_for_timestamp(BASE_TIMESTAMP + 4000)  # record 4000: 250 MiB in
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert (found.timestamp, found.offset) == (BASE_TIMESTAMP + 4095, 0)
        assert peak < 2 * config.max_decompressed_bytes
        # a record within the bound is still found exactly
        found = log.offset_for_timestamp(BASE_TIMESTAMP + 3)
        assert (found.timestamp, found.offset) == (BASE_TIMESTAMP + 3, 3)
    finally:
        log.close()
