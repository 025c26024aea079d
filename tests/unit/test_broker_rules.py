"""The broker's sans-I/O rules: epoch checks on control requests (KIP-380, fact sheet 4a), the
leader's HW, leader-epoch fencing and the divergence check (4b/4c)."""

from __future__ import annotations

import uuid

import pytest

from epochlog.broker.control_rules import (
    LeaderAndIsrAction,
    check_control_request,
    is_broker_epoch_stale,
    leader_and_isr_verdict,
    stop_replica_verdict,
)
from epochlog.broker.partition_rules import (
    DivergingEpoch,
    check_current_leader_epoch,
    check_divergence,
    enough_replicas,
    follower_high_watermark,
    latest_offset_error,
    leader_high_watermark,
)
from epochlog.protocol.errors import ErrorCode

# ------------------------------------------------------------------ KIP-380 broker epoch


@pytest.mark.parametrize(
    ("request_epoch", "current", "stale"),
    [
        (-1, 100, False),  # an old controller that sends no epoch is never stale
        (99, 100, True),  # built for an earlier generation of this broker
        (100, 100, False),
        (101, 100, False),  # the controller may learn the new czxid first
        (5, -1, False),  # this broker has no epoch yet
    ],
)
def test_broker_epoch_is_stale_only_when_older_than_current(request_epoch, current, stale):
    assert is_broker_epoch_stale(request_epoch, current) is stale


def gate(**kw):
    args = dict(
        kip380_enabled=True,
        request_broker_epoch=100,
        current_broker_epoch=100,
        request_controller_epoch=3,
        latest_controller_epoch=3,
    )
    args.update(kw)
    return check_control_request(**args)


def test_control_request_with_stale_broker_epoch_is_refused():
    assert gate(request_broker_epoch=50) is ErrorCode.STALE_BROKER_EPOCH


def test_stale_broker_epoch_passes_when_kip380_is_switched_off():
    assert gate(request_broker_epoch=50, kip380_enabled=False) is ErrorCode.NONE


def test_control_request_from_older_controller_epoch_is_refused():
    assert gate(request_controller_epoch=2) is ErrorCode.STALE_CONTROLLER_EPOCH


def test_broker_epoch_is_checked_before_controller_epoch():
    assert gate(request_broker_epoch=50, request_controller_epoch=2) is ErrorCode.STALE_BROKER_EPOCH


def test_current_control_request_passes():
    assert gate() is ErrorCode.NONE
    assert gate(request_controller_epoch=4) is ErrorCode.NONE


# ------------------------------------------------------------ LeaderAndIsr per partition

TID = uuid.uuid4()


def verdict(**kw):
    args = dict(
        local_broker_id=1,
        local_leader_epoch=-1,
        local_topic_id=None,
        request_topic_id=TID,
        leader=1,
        leader_epoch=0,
        replicas=(1, 2),
    )
    args.update(kw)
    return leader_and_isr_verdict(**args)


def test_new_partition_led_by_this_broker_becomes_leader():
    v = verdict()
    assert (v.action, v.error) == (LeaderAndIsrAction.BECOME_LEADER, ErrorCode.NONE)


def test_newer_epoch_led_elsewhere_makes_this_broker_follower():
    v = verdict(leader=2, local_leader_epoch=3, leader_epoch=4)
    assert (v.action, v.error) == (LeaderAndIsrAction.BECOME_FOLLOWER, ErrorCode.NONE)


@pytest.mark.parametrize("epoch", [2, 3])
def test_older_or_equal_leader_epoch_is_ignored_as_stale(epoch):
    v = verdict(local_leader_epoch=3, leader_epoch=epoch, local_topic_id=TID)
    assert (v.action, v.error) == (LeaderAndIsrAction.SKIP, ErrorCode.STALE_CONTROLLER_EPOCH)


def test_equal_epoch_bringing_a_topic_id_is_accepted():
    v = verdict(local_leader_epoch=3, leader_epoch=3, local_topic_id=None)
    assert (v.action, v.error) == (LeaderAndIsrAction.ASSIGN_TOPIC_ID, ErrorCode.NONE)


def test_broker_not_among_replicas_answers_unknown_topic_or_partition():
    v = verdict(replicas=(2, 3), leader=2)
    assert v.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_different_topic_id_is_inconsistent():
    v = verdict(local_topic_id=uuid.uuid4(), local_leader_epoch=0, leader_epoch=1)
    assert v.error is ErrorCode.INCONSISTENT_TOPIC_ID


@pytest.mark.parametrize(
    ("local", "requested", "error"),
    [
        (None, 0, ErrorCode.NONE),  # not hosted: nothing to fence
        (5, -2, ErrorCode.NONE),  # deletion sentinel overrides
        (5, -1, ErrorCode.NONE),  # no epoch: skip the check
        (5, 5, ErrorCode.NONE),
        (5, 6, ErrorCode.NONE),
        (5, 4, ErrorCode.FENCED_LEADER_EPOCH),
    ],
)
def test_stop_replica_leader_epoch_rules(local, requested, error):
    assert stop_replica_verdict(local_leader_epoch=local, request_leader_epoch=requested) is error


# ------------------------------------------------------------------ high watermark


def test_hw_is_leo_when_the_isr_is_just_the_leader():
    assert leader_high_watermark(0, 10, []) == 10


def test_hw_is_the_smallest_leo_in_the_isr():
    assert leader_high_watermark(0, 10, [7, 9]) == 7


def test_hw_never_goes_down():
    assert leader_high_watermark(8, 10, [7]) == 8


def test_follower_with_unknown_leo_holds_the_hw():
    assert leader_high_watermark(4, 10, [-1]) == 4


def test_follower_hw_is_capped_by_its_own_leo():
    assert follower_high_watermark(10, 6) == 6
    assert follower_high_watermark(5, 6) == 5


def test_acks_all_needs_min_insync_replicas():
    assert enough_replicas(2, 2)
    assert not enough_replicas(1, 2)


# --------------------------------------------------------------- leader epoch fencing


@pytest.mark.parametrize(
    ("requested", "local", "error"),
    [
        (-1, 5, ErrorCode.NONE),
        (5, 5, ErrorCode.NONE),
        (4, 5, ErrorCode.FENCED_LEADER_EPOCH),
        (6, 5, ErrorCode.UNKNOWN_LEADER_EPOCH),
    ],
)
def test_current_leader_epoch_fencing(requested, local, error):
    assert check_current_leader_epoch(requested, local) is error


# ------------------------------------------------------------------------ divergence


def divergence(last_fetched_epoch, fetch_offset, epoch_end, log_start=0):
    return check_divergence(
        last_fetched_epoch=last_fetched_epoch,
        fetch_offset=fetch_offset,
        epoch_end=epoch_end,
        log_start_offset=log_start,
    )


def test_no_last_fetched_epoch_means_no_divergence_check():
    assert divergence(-1, 100, (-1, -1)) is None


def test_fetcher_consistent_with_the_leader_reads_normally():
    # leader: epoch 3 ends at 50 (epoch 4 starts there); follower at 40 with last epoch 3
    assert divergence(3, 40, (3, 50)) is None
    assert divergence(3, 50, (3, 50)) is None


def test_fetcher_past_the_end_of_its_epoch_diverged():
    # follower wrote offsets up to 60 in epoch 3, the leader's epoch 3 ended at 50
    assert divergence(3, 60, (3, 50)) == DivergingEpoch(3, 50)


def test_fetcher_epoch_unknown_to_the_leader_truncates_to_the_previous_epoch_end():
    # follower's last epoch 4 never existed on the leader: floor epoch 3 ends at 50
    assert divergence(4, 60, (3, 50)) == DivergingEpoch(3, 50)


def test_undefined_epoch_end_is_offset_out_of_range():
    assert divergence(7, 60, (-1, -1)) is ErrorCode.OFFSET_OUT_OF_RANGE


def test_fetch_below_log_start_is_offset_out_of_range():
    assert divergence(3, 5, (3, 50), log_start=10) is ErrorCode.OFFSET_OUT_OF_RANGE


def test_latest_offset_unknown_while_new_leader_hw_lags_its_epoch_start():
    args = dict(is_client=True, high_watermark=5, leader_epoch_start_offset=8)
    assert latest_offset_error(version=5, **args) is ErrorCode.OFFSET_NOT_AVAILABLE
    assert latest_offset_error(version=4, **args) is ErrorCode.LEADER_NOT_AVAILABLE
    assert latest_offset_error(version=5, **{**args, "is_client": False}) is ErrorCode.NONE
    assert latest_offset_error(version=5, **{**args, "high_watermark": 8}) is ErrorCode.NONE
