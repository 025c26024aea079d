"""AlterPartition validation (KIP-903 in ZooKeeper mode), every branch, without ZooKeeper."""

from __future__ import annotations

import uuid

import pytest

from epochlog.controller.alter_partition import IsrProposal, decide_alter_partition
from epochlog.controller.context import BrokerInfo, ControllerContext, LeaderIsr
from epochlog.protocol.errors import ErrorCode

TOPIC_ID = uuid.UUID(int=7)
EPOCHS = {1: 101, 2: 102, 3: 103}


def context() -> ControllerContext:
    ctx = ControllerContext(controller_id=1, epoch=4)
    for b, e in EPOCHS.items():
        ctx.live_brokers[b] = BrokerInfo(b, "127.0.0.1", 9000 + b, e)
    ctx.add_topic("t", TOPIC_ID, {0: (1, 2, 3)})
    ctx.states[("t", 0)] = LeaderIsr(1, 5, (1,), 4, 9)  # leader 1, epoch 5, partition epoch 9
    return ctx


def proposal(isr=((1, 101), (2, 102)), leader_epoch=5, partition_epoch=9, topic_id=TOPIC_ID):
    return IsrProposal(topic_id, 0, leader_epoch, partition_epoch, tuple(isr))


def decide(ctx, p, broker=1, broker_epoch=101, **kw):
    return decide_alter_partition(ctx, broker, broker_epoch, [p], **kw)


def test_a_caught_up_follower_with_the_current_epoch_joins() -> None:
    decision = decide(context(), proposal())
    assert decision.top_error == ErrorCode.NONE
    new = decision.accepted[("t", 0)]
    assert (new.leader, new.leader_epoch, new.isr) == (1, 5, (1, 2))


def test_a_requester_with_a_stale_epoch_is_refused_as_a_whole() -> None:
    assert decide(context(), proposal(), broker_epoch=100).top_error == ErrorCode.STALE_BROKER_EPOCH
    assert decide(context(), proposal(), broker=9).top_error == ErrorCode.STALE_BROKER_EPOCH


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"topic_id": uuid.UUID(int=8)}, ErrorCode.UNKNOWN_TOPIC_ID),
        ({"leader_epoch": 6}, ErrorCode.NOT_CONTROLLER),
        ({"partition_epoch": 10}, ErrorCode.NOT_CONTROLLER),
        ({"leader_epoch": 4}, ErrorCode.FENCED_LEADER_EPOCH),
        ({"partition_epoch": 8}, ErrorCode.INVALID_UPDATE_VERSION),
        ({"isr": ((1, 101), (1, 101))}, ErrorCode.INVALID_REQUEST),
        ({"isr": ((2, 102),)}, ErrorCode.INVALID_REQUEST),  # drops the leader
        ({"isr": ((1, 101), (4, 104))}, ErrorCode.INVALID_REQUEST),  # not a replica
    ],
)
def test_malformed_or_stale_proposals_get_kafkas_errors(kwargs, error) -> None:
    p = proposal(**kwargs)
    decision = decide(context(), p)
    assert decision.errors[(p.topic_id, 0)] == error
    assert not decision.accepted


def test_only_the_leader_may_propose() -> None:
    decision = decide(context(), proposal(), broker=2, broker_epoch=102)
    assert decision.errors[(TOPIC_ID, 0)] == ErrorCode.INVALID_REQUEST


def test_a_retry_of_the_committed_isr_is_answered_with_the_current_state() -> None:
    ctx = context()
    ctx.states[("t", 0)] = LeaderIsr(1, 5, (1, 2), 4, 10)
    decision = decide(ctx, proposal(partition_epoch=9))
    assert decision.unchanged[("t", 0)].partition_epoch == 10
    assert not decision.errors


def test_a_dead_or_shutting_down_member_is_ineligible() -> None:
    ctx = context()
    del ctx.live_brokers[2]
    assert decide(ctx, proposal()).errors[(TOPIC_ID, 0)] == ErrorCode.INELIGIBLE_REPLICA
    ctx = context()
    ctx.shutting_down.add(2)
    assert decide(ctx, proposal()).errors[(TOPIC_ID, 0)] == ErrorCode.INELIGIBLE_REPLICA


def test_kip903_a_member_that_re_registered_since_its_fetch_is_ineligible() -> None:
    ctx = context()
    ctx.live_brokers[2] = BrokerInfo(2, "127.0.0.1", 9002, 202)  # bounced: new generation
    p = proposal(isr=((1, 101), (2, 102)))  # the leader saw epoch 102 in B's fetches
    assert decide(ctx, p).errors[(TOPIC_ID, 0)] == ErrorCode.INELIGIBLE_REPLICA
    # without KIP-903 (Kafka's ZooKeeper controller) the stale member gets in
    assert decide(ctx, p, kip903=False).accepted[("t", 0)].isr == (1, 2)


def test_an_unknown_epoch_skips_the_epoch_check() -> None:
    ctx = context()
    ctx.live_brokers[2] = BrokerInfo(2, "127.0.0.1", 9002, 202)
    assert decide(ctx, proposal(isr=((1, -1), (2, -1)))).accepted[("t", 0)].isr == (1, 2)
