"""A Partition on a real log (temp dir): roles, HW, acks, reads, divergence, ListOffsets."""

from __future__ import annotations

import pytest

from epochlog.broker.partition import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Partition,
    PartitionError,
    PartitionState,
)
from epochlog.broker.partition_rules import DivergingEpoch
from epochlog.broker.produce_validation import validate_partition_records
from epochlog.broker.producer_state import ProducerStateManager
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder, decode_batches
from epochlog.storage import LogConfig, PartitionLog

NOW = 1_700_000_000_000


def make_partition(tmp_path, local=1) -> Partition:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    return Partition("t", 0, local, log, ProducerStateManager("t-0"))


def state(leader=1, epoch=0, isr=(1,), replicas=(1,)):
    return PartitionState(leader=leader, leader_epoch=epoch, isr=isr, replicas=replicas)


def records(n=2, ts=NOW, pid=-1, seq=-1):
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)
    for i in range(n):
        b.append(ts + i, f"k{i}".encode(), f"v{i}".encode())
    return b.build()


def append(p: Partition, n=2, acks=1, min_isr=1, ts=NOW, pid=-1, seq=-1):
    raw = records(n, ts, pid, seq)
    header = validate_partition_records(raw, version=9, max_message_bytes=10**6, where="t-0")
    return p.append_records_as_leader(raw, header, acks, min_isr, NOW)


def test_sole_leader_hw_follows_the_log_end_offset(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(), NOW)
    result = append(p, 3)
    assert (result.first_offset, result.last_offset) == (0, 2)
    assert result.high_watermark_moved and p.high_watermark == 3


def test_becoming_leader_starts_the_epoch_at_the_log_end_offset(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(epoch=0), NOW)
    append(p, 3)
    p.make_leader(state(epoch=4), NOW)
    assert p.leader_epoch_start_offset == 3
    assert p.log.leader_epoch_cache.entries[-1] == (4, 3)


def test_hw_waits_for_isr_followers_and_moves_with_their_fetches(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(isr=(1, 2), replicas=(1, 2)), NOW)
    append(p, 4)
    assert p.high_watermark == 0  # follower 2's LEO is not known yet
    assert p.update_follower_fetch_state(2, 3, 0, 77, p.log_end_offset, NOW)
    assert p.high_watermark == 3
    assert p.remote_replicas[2].broker_epoch == 77  # kept for KIP-903
    p.update_follower_fetch_state(2, 4, 0, 77, p.log_end_offset, NOW)
    assert p.high_watermark == 4


def test_follower_outside_the_isr_does_not_hold_the_hw(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(isr=(1,), replicas=(1, 2)), NOW)
    append(p, 4)
    assert p.high_watermark == 4


def test_fetch_from_a_broker_that_is_not_a_replica_is_refused(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(), NOW)
    with pytest.raises(PartitionError) as info:
        p.update_follower_fetch_state(9, 0, 0, -1, 0, NOW)
    assert info.value.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_acks_all_below_min_isr_is_not_enough_replicas_and_appends_nothing(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(), NOW)
    with pytest.raises(PartitionError) as info:
        append(p, acks=-1, min_isr=2)
    assert info.value.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log_end_offset == 0
    append(p, acks=1, min_isr=2)  # acks=1 does not care
    assert p.log_end_offset == 2


def test_follower_refuses_appends(tmp_path):
    p = make_partition(tmp_path)
    p.make_follower(state(leader=2, replicas=(1, 2), isr=(1, 2)))
    with pytest.raises(PartitionError) as info:
        append(p)
    assert info.value.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_duplicate_batch_returns_the_original_offsets_and_appends_nothing(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(), NOW)
    first = append(p, 3, pid=5, seq=0)
    again = append(p, 3, pid=5, seq=0)
    assert again.duplicate and (again.first_offset, again.last_offset) == (0, 2)
    assert p.log_end_offset == 3
    with pytest.raises(PartitionError) as info:
        append(p, 1, pid=5, seq=7)
    assert info.value.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert first.first_offset == 0


def read(p, offset=0, **kw):
    args = dict(
        fetch_offset=offset,
        current_leader_epoch=-1,
        last_fetched_epoch=-1,
        max_bytes=10**6,
        min_one_batch=True,
        up_to_high_watermark=True,
    )
    args.update(kw)
    return p.read_records(**args)


def test_consumers_read_up_to_the_hw_and_followers_up_to_the_leo(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(isr=(1, 2), replicas=(1, 2)), NOW)
    append(p, 2)
    p.update_follower_fetch_state(2, 2, 0, -1, p.log_end_offset, NOW)
    append(p, 2)
    consumer = decode_batches(read(p).records.read_bytes())
    follower = decode_batches(read(p, up_to_high_watermark=False).records.read_bytes())
    assert [r.offset for b in consumer for r in b.records] == [0, 1]
    assert [r.offset for b in follower for r in b.records] == [0, 1, 2, 3]


def test_fetch_with_stale_or_future_leader_epoch_is_fenced(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(epoch=3), NOW)
    with pytest.raises(PartitionError) as info:
        read(p, current_leader_epoch=2)
    assert info.value.error_code is ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(PartitionError) as info:
        read(p, current_leader_epoch=4)
    assert info.value.error_code is ErrorCode.UNKNOWN_LEADER_EPOCH


def test_fetch_beyond_the_log_end_is_offset_out_of_range(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(), NOW)
    append(p, 2)
    with pytest.raises(Exception) as info:
        read(p, offset=5)
    assert info.value.error_code is ErrorCode.OFFSET_OUT_OF_RANGE


def test_follower_that_wrote_past_its_epoch_gets_a_diverging_epoch(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(epoch=0), NOW)
    append(p, 3)  # epoch 0: offsets 0-2
    p.make_leader(state(epoch=2), NOW)
    append(p, 2)  # epoch 2: offsets 3-4
    # The follower has epoch 1 up to offset 6, which this leader never had.
    result = read(p, offset=6, last_fetched_epoch=1, up_to_high_watermark=False)
    assert result.diverging_epoch == DivergingEpoch(0, 3)
    assert len(result.records) == 0
    # A follower in step with epoch 2 reads normally.
    assert read(p, offset=4, last_fetched_epoch=2).diverging_epoch is None


def test_list_offsets_latest_earliest_max_and_by_time(tmp_path):
    p = make_partition(tmp_path)
    p.make_leader(state(epoch=1), NOW)
    append(p, 2, ts=NOW)  # offsets 0, 1 at NOW, NOW+1
    append(p, 2, ts=NOW + 100)  # offsets 2, 3 at NOW+100, NOW+101
    append(p, 1, ts=NOW + 50)  # offset 4 at NOW+50

    def lookup(ts, is_client=True):
        return p.fetch_offset_for_timestamp(
            ts, current_leader_epoch=-1, is_client=is_client, fetch_only_from_leader=True, version=8
        )

    assert lookup(LATEST_TIMESTAMP).offset == 5
    assert lookup(EARLIEST_TIMESTAMP).offset == 0
    found = lookup(MAX_TIMESTAMP)
    assert (found.timestamp, found.offset) == (NOW + 101, 3)
    assert lookup(NOW + 60).offset == 2
    assert lookup(NOW + 1000) is None
