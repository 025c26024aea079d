"""The leader's ISR rules and the follower's truncation rules, as pure functions."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from epochlog.broker import follower_rules as fr
from epochlog.broker import isr_rules as ir
from epochlog.broker import isr_state
from epochlog.broker.isr_rules import ExpandVerdict
from epochlog.broker.isr_state import AlterOutcome, IsrChangeKind
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder
from epochlog.storage.epoch_cache import LeaderEpochCache

NOW = 1_000_000


def verdict(**overrides):
    args = dict(
        replica_id=2,
        replicas=(1, 2, 3),
        committed_isr=(1,),
        change_in_flight=False,
        alive=True,
        kip903_enabled=True,
        fetch_epoch=502,
        cached_epoch=502,
        follower_leo=10,
        high_watermark=10,
        leader_epoch_start_offset=5,
    )
    args.update(overrides)
    return ir.expansion_verdict(**args)


# ------------------------------------------------------------------------------- expansion


def test_a_caught_up_live_follower_with_the_controllers_epoch_may_join():
    assert verdict() is ExpandVerdict.EXPAND


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"change_in_flight": True}, ExpandVerdict.CHANGE_IN_FLIGHT),
        ({"committed_isr": (1, 2)}, ExpandVerdict.ALREADY_IN_ISR),
        ({"replica_id": 9}, ExpandVerdict.NOT_A_REPLICA),
        ({"alive": False}, ExpandVerdict.NOT_ALIVE),
        ({"fetch_epoch": 501}, ExpandVerdict.STALE_FETCH_EPOCH),  # fetched before a bounce
        ({"fetch_epoch": -1}, ExpandVerdict.STALE_FETCH_EPOCH),  # Fetch < 15: no epoch at all
        ({"cached_epoch": 777}, ExpandVerdict.STALE_FETCH_EPOCH),  # controller saw a bounce
        ({"follower_leo": 9}, ExpandVerdict.NOT_CAUGHT_UP),  # below the HW
        ({"follower_leo": 12, "leader_epoch_start_offset": 13}, ExpandVerdict.NOT_CAUGHT_UP),
        ({"leader_epoch_start_offset": -1}, ExpandVerdict.NOT_CAUGHT_UP),
    ],
)
def test_expansion_is_refused(overrides, expected):
    assert verdict(**overrides) is expected


def test_without_kip903_the_epochs_are_not_compared_but_liveness_is():
    assert verdict(kip903_enabled=False, fetch_epoch=1, cached_epoch=2) is ExpandVerdict.EXPAND
    assert verdict(kip903_enabled=False, alive=False) is ExpandVerdict.NOT_ALIVE


def test_new_isr_with_epochs_names_the_leaders_and_the_fetch_epochs():
    args = dict(
        proposed_isr=(1, 2, 3),
        local_broker_id=1,
        local_broker_epoch=501,
        fetch_epochs={2: 502},
    )
    assert ir.isr_with_epochs(**args, kip903_enabled=True) == [(1, 501), (2, 502), (3, -1)]
    assert ir.isr_with_epochs(**args, kip903_enabled=False) == [(1, -1), (2, -1), (3, -1)]


# ----------------------------------------------------------------------------------- shrink


@dataclass
class Follower:
    broker_id: int
    log_end_offset: int
    last_caught_up_time_ms: int
    broker_epoch: int = -1


def test_members_that_lag_longer_than_the_lag_time_are_out_of_sync():
    followers = {
        2: Follower(2, 50, NOW - 1000),  # caught up within the lag time
        3: Follower(3, 40, NOW - 1001),  # lagging too long
        4: Follower(4, 100, NOW - 99999),  # at the leader's LEO: never out of sync
    }
    out = ir.out_of_sync_replicas(
        isr=(1, 2, 3, 4, 5),
        local_broker_id=1,
        followers=followers,
        leader_leo=100,
        now_ms=NOW,
        lag_time_max_ms=1000,
    )
    assert out == (3, 5)  # 5: a member the leader knows nothing of
    assert ir.shrunk_isr((1, 2, 3, 4, 5), out) == (1, 2, 4)


def test_pending_changes_and_the_maximal_isr():
    expand = isr_state.PendingIsrChange(IsrChangeKind.EXPAND, (1,), (1, 2), 0, 3)
    shrink = isr_state.PendingIsrChange(IsrChangeKind.SHRINK, (1, 2), (1,), 0, 3)
    assert isr_state.maximal_isr((1,), expand) == (1, 2)  # the new member counts at once
    assert isr_state.maximal_isr((1, 2), shrink) == (1, 2)  # the removed one until committed
    assert isr_state.maximal_isr((1, 2), None) == (1, 2)


# ----------------------------------------------------------------------------- HW and acks


def test_hw_is_the_smallest_leo_of_the_holding_replicas_and_never_goes_back():
    hw = dict(current_hw=5, leader_leo=20, committed_isr_size=2, replication_factor=3)
    assert ir.leader_hw(**hw, min_insync_replicas=1, holding_leos=[12, 15]) == 12
    assert ir.leader_hw(**hw, min_insync_replicas=1, holding_leos=[]) == 20
    assert ir.leader_hw(**hw, min_insync_replicas=1, holding_leos=[3]) == 5
    assert ir.leader_hw(**hw, min_insync_replicas=1, holding_leos=[-1]) == 5


def test_hw_is_frozen_while_the_isr_is_below_the_effective_min_isr():
    args = dict(current_hw=5, leader_leo=20, holding_leos=[])
    frozen = ir.leader_hw(**args, committed_isr_size=1, replication_factor=3, min_insync_replicas=2)
    assert frozen == 5
    # min.insync.replicas above the replication factor is capped by it.
    single = ir.leader_hw(**args, committed_isr_size=1, replication_factor=1, min_insync_replicas=2)
    assert single == 20


def test_a_waiting_produce_completes_or_fails_on_the_maximal_isr():
    status = ir.delayed_produce_status
    assert (
        status(high_watermark=9, required_offset=10, maximal_isr_size=2, min_insync_replicas=2)
        is None
    )
    ok = status(high_watermark=10, required_offset=10, maximal_isr_size=2, min_insync_replicas=2)
    assert ok is ErrorCode.NONE
    for hw in (9, 10):
        shrunk = status(
            high_watermark=hw, required_offset=10, maximal_isr_size=1, min_insync_replicas=2
        )
        assert shrunk is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


# ------------------------------------------------------------------------- AlterPartition


@pytest.mark.parametrize(
    "error, outcome",
    [
        (ErrorCode.NONE, AlterOutcome.COMMIT),
        (ErrorCode.INELIGIBLE_REPLICA, AlterOutcome.REVERT),
        (ErrorCode.OPERATION_NOT_ATTEMPTED, AlterOutcome.REVERT),
        (ErrorCode.FENCED_LEADER_EPOCH, AlterOutcome.WAIT),
        (ErrorCode.INVALID_UPDATE_VERSION, AlterOutcome.WAIT),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, AlterOutcome.WAIT),
        (ErrorCode.UNKNOWN_TOPIC_ID, AlterOutcome.WAIT),
        (ErrorCode.NEW_LEADER_ELECTED, AlterOutcome.WAIT),
        (ErrorCode.INVALID_REQUEST, AlterOutcome.WAIT),
        (ErrorCode.NOT_CONTROLLER, AlterOutcome.RETRY),
        (ErrorCode.UNKNOWN_SERVER_ERROR, AlterOutcome.RETRY),
    ],
)
def test_alter_partition_answers(error, outcome):
    assert isr_state.alter_partition_outcome(error) is outcome


def test_an_answer_applies_only_to_the_change_still_pending_at_the_same_epochs():
    sent = isr_state.PendingIsrChange(IsrChangeKind.EXPAND, (1,), (1, 2), 4, 7)
    base = dict(
        sent=sent,
        current_pending=sent,
        is_leader=True,
        current_leader_epoch=4,
        current_partition_epoch=7,
    )
    assert isr_state.answer_applies(**base)
    assert isr_state.answer_applies(**base, answer_leader_epoch=4, answer_partition_epoch=8)
    other = isr_state.PendingIsrChange(IsrChangeKind.EXPAND, (1,), (1, 2), 4, 7)
    assert not isr_state.answer_applies(**{**base, "current_pending": other})
    assert not isr_state.answer_applies(**{**base, "current_pending": None})  # LeaderAndIsr came
    assert not isr_state.answer_applies(**{**base, "is_leader": False})
    assert not isr_state.answer_applies(**{**base, "current_leader_epoch": 5})
    assert not isr_state.answer_applies(**base, answer_leader_epoch=3)
    assert not isr_state.answer_applies(**base, answer_partition_epoch=6)


# ------------------------------------------------------------------------ truncation


def epoch_end(entries, leo):
    """A follower's end_offset_for_epoch over (epoch, start) entries: its epoch cache."""
    cache = LeaderEpochCache(entries)
    return lambda epoch: cache.end_offset_for(epoch, leo)


def truncation(leader_epoch, leader_end, entries, leo, fetch_offset=None):
    return fr.offset_truncation_state(
        leader_epoch=leader_epoch,
        leader_end_offset=leader_end,
        local_epoch_end=epoch_end(entries, leo),
        log_end_offset=leo,
        fetch_offset=leo if fetch_offset is None else fetch_offset,
    )


def test_follower_knowing_the_leaders_epoch_truncates_to_the_smaller_end():
    # Follower: epochs 0 @0, 1 @20, LEO 30. Leader: epoch 1 ends at 25.
    assert truncation(1, 25, [(0, 0), (1, 20)], 30) == fr.OffsetTruncationState(25, True)
    # Leader's epoch 0 ends at 40 but ours at 20: keep only what both have.
    assert truncation(0, 40, [(0, 0), (1, 20)], 30) == fr.OffsetTruncationState(20, True)
    # Never past the local log end.
    assert truncation(1, 50, [(0, 0), (1, 20)], 30) == fr.OffsetTruncationState(30, True)


def test_follower_without_the_leaders_epoch_truncates_and_asks_again():
    # Follower: 0 @0, 2 @10, 3 @20, LEO 30. Leader answers epoch 1 (which we never had) @15.
    first = truncation(1, 15, [(0, 0), (2, 10), (3, 20)], 30)
    assert first == fr.OffsetTruncationState(10, False)  # end of our epoch 0
    # Repeat with the cut log (epoch 0 only, LEO 10): the leader's epoch 0 ends at 8.
    second = truncation(0, 8, [(0, 0)], 10)
    assert second == fr.OffsetTruncationState(8, True)


def test_truncation_fallbacks():
    assert truncation(3, -1, [(0, 0)], 30, fetch_offset=12) == fr.OffsetTruncationState(12, True)
    assert truncation(-1, 17, [(0, 0)], 30) == fr.OffsetTruncationState(17, True)
    # An epoch newer than all of ours: the follower cannot place it; take the leader's offset.
    assert truncation(9, 17, [(0, 0), (2, 5)], 30) == fr.OffsetTruncationState(17, True)


def test_offset_out_of_range_actions():
    act = fr.out_of_range_action
    assert act(local_leo=50, leader_leo=40, leader_start=None) == (fr.OutOfRangeAction.TRUNCATE, 40)
    assert act(local_leo=50, leader_leo=60, leader_start=None)[0] is (
        fr.OutOfRangeAction.NEED_LEADER_START
    )
    assert act(local_leo=50, leader_leo=90, leader_start=70) == (fr.OutOfRangeAction.RESTART, 70)
    assert act(local_leo=50, leader_leo=90, leader_start=20) == (fr.OutOfRangeAction.CONTINUE, 50)


def test_a_new_follower_starts_at_its_log_end_with_its_latest_epoch():
    args = dict(topic="t", partition=0, leader_epoch=7, log_end_offset=30, high_watermark=20)
    state = fr.initial_fetch_state(**args, latest_epoch=5)
    assert (state.fetch_offset, state.last_fetched_epoch, state.phase) == (
        30,
        5,
        fr.FetchPhase.FETCHING,
    )
    assert state.current_leader_epoch == 7
    # No epoch in the log: nothing can be checked, so truncate to the HW first.
    state = fr.initial_fetch_state(**args, latest_epoch=None)
    assert (state.fetch_offset, state.last_fetched_epoch, state.phase) == (
        20,
        -1,
        fr.FetchPhase.TRUNCATING,
    )
    empty = dict(args, log_end_offset=0, high_watermark=0)
    assert fr.initial_fetch_state(**empty, latest_epoch=None).phase is fr.FetchPhase.FETCHING


def test_fetch_state_back_off_and_failure():
    state = fr.PartitionFetchState("t", 0, 0, -1, 0)
    assert state.is_ready(NOW)
    state.delay(NOW, 50)
    assert not state.is_ready(NOW + 49) and state.is_ready(NOW + 50)
    state.phase = fr.FetchPhase.FAILED
    assert not state.is_ready(NOW + 10**6)


def test_a_partial_trailing_batch_is_dropped():
    builder = RecordBatchBuilder()
    builder.append(1, b"k", b"v")
    one = builder.build()
    two = one + one
    assert fr.whole_batches_length(two) == len(two)
    assert fr.whole_batches_length(two[:-3]) == len(one)
    assert fr.whole_batches_length(two[:10]) == 0
    assert fr.whole_batches_length(b"") == 0
