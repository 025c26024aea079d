"""A leader never counts its own loop stall against its followers (issue 20, item 3): the
stall record (`loop_stalls.LoopStalls`) and the shrink rule that reads it (`isr_rules`)."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.broker.isr_rules import is_caught_up, out_of_sync_replicas
from epochlog.broker.loop_stalls import LoopStalls

LAG = 10_000


@dataclass
class Follower:
    broker_id: int
    log_end_offset: int
    last_caught_up_time_ms: int
    broker_epoch: int = -1


def stalls_with(*gaps: tuple[int, int]) -> LoopStalls:
    """A record whose probe ran every 50 ms except across each (start, end) gap."""
    record = LoopStalls(interval_ms=50, threshold_ms=50, started_ms=0)
    now = 0
    for start, end in gaps:
        while now + 50 <= start:
            now += 50
            record.observe(now)
        now = end
        record.observe(now)
    return record


def test_a_probe_woken_late_records_the_stall_and_its_maximum():
    record = LoopStalls(interval_ms=50, threshold_ms=50, started_ms=1_000)
    assert record.observe(1_050) == 0
    assert record.observe(1_130) == 0  # 30 ms late: scheduling noise
    assert record.observe(13_180) == 12_000
    assert record.max_ms == 12_000
    assert record.stalled_ms(0, 13_180) == 12_000
    assert record.stalled_ms(7_180, 13_180) == 6_000  # only the part inside the window


def test_a_stall_still_in_progress_counts_before_the_probe_wakes():
    record = LoopStalls(interval_ms=50, threshold_ms=50, started_ms=0)
    record.observe(50)
    # the check runs at 12,100 right after a 12 s block; the probe has not woken since 50
    assert record.stalled_ms(0, 12_100) == 12_000


def test_old_stalls_fall_out_of_the_record():
    record = LoopStalls(interval_ms=50, threshold_ms=50, horizon_ms=1_000, started_ms=0)
    record.observe(5_050)
    record.observe(5_100)
    record.observe(9_000)
    assert record.stalled_ms(0, 9_000) == 3_850  # the first stall (5 s) is past the horizon


def test_a_follower_is_not_shrunk_for_the_leaders_own_stall():
    # made leader at 0 (followers count as caught up then), loop blocked from 100 to 12,100
    record = stalls_with((100, 12_100))
    followers = {2: Follower(2, 0, last_caught_up_time_ms=0)}
    out = out_of_sync_replicas(
        isr=(1, 2),
        local_broker_id=1,
        followers=followers,
        leader_leo=5,
        now_ms=12_165,
        lag_time_max_ms=LAG,
        leader_stalls=record,
    )
    assert out == ()


def test_without_the_stall_record_the_same_follower_is_shrunk():
    followers = {2: Follower(2, 0, last_caught_up_time_ms=0)}
    out = out_of_sync_replicas(
        isr=(1, 2),
        local_broker_id=1,
        followers=followers,
        leader_leo=5,
        now_ms=12_165,
        lag_time_max_ms=LAG,
    )
    assert out == (2,)


def test_a_follower_that_lags_for_the_lag_time_of_running_time_is_shrunk():
    # the leader stalled 12 s, then ran 10.1 s more without hearing from the follower
    record = stalls_with((100, 12_100), (22_200, 22_200))
    followers = {2: Follower(2, 0, last_caught_up_time_ms=0)}
    out = out_of_sync_replicas(
        isr=(1, 2),
        local_broker_id=1,
        followers=followers,
        leader_leo=5,
        now_ms=22_200,
        lag_time_max_ms=LAG,
        leader_stalls=record,
    )
    assert out == (2,)


def test_a_follower_at_the_leaders_end_is_caught_up_whatever_the_time():
    assert is_caught_up(
        replica_leo=5, last_caught_up_time_ms=0, leader_leo=5, now_ms=10**9, lag_time_max_ms=LAG
    )
    assert not is_caught_up(
        replica_leo=4,
        last_caught_up_time_ms=0,
        leader_leo=5,
        now_ms=LAG + 2,
        lag_time_max_ms=LAG,
        leader_stalled_ms=1,
    )
