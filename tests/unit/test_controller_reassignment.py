"""Partition reassignment decisions (KIP-455, Kafka's ZooKeeper controller), driven directly."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from epochlog.controller.context import BrokerInfo, ControllerContext, LeaderIsr, TopicPartition
from epochlog.controller.reassignment import (
    ReassignmentStep,
    Refusal,
    ReplicaAssignment,
    assignment_of,
    continue_reassignment,
    is_topic_being_reassigned,
    reassigning_partitions,
    start_reassignment,
    validate_reassignment,
)
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.zk.reassign_partitions import decode_reassign_partitions, encode_reassign_partitions
from epochlog.zk.znodes import ZNodeDecodeError

TP: TopicPartition = ("t", 0)


def context(brokers: tuple[int, ...] = (1, 2, 3, 4)) -> ControllerContext:
    ctx = ControllerContext(controller_id=1, epoch=5)
    for b in brokers:
        ctx.live_brokers[b] = BrokerInfo(b, "127.0.0.1", 9090 + b, 100 + b)
    ctx.add_topic("t", uuid.uuid4(), {0: (1, 2, 3), 1: (2, 3, 1)})
    ctx.states[TP] = LeaderIsr(1, 7, (1, 2, 3), 5, 3)
    ctx.states[("t", 1)] = LeaderIsr(2, 0, (2, 3, 1), 5, 0)
    return ctx


def apply(ctx: ControllerContext, step: ReassignmentStep) -> None:
    """What the shell does once ZooKeeper has taken the step's writes."""
    for tp, state in step.plan.updates.items():
        ctx.states[tp] = replace(state, partition_epoch=ctx.states[tp].partition_epoch + 1)
    ctx.assignments[step.tp] = step.assignment.replicas
    for recorded, value in (
        (ctx.adding_replicas, step.assignment.adding),
        (ctx.removing_replicas, step.assignment.removing),
    ):
        if value:
            recorded[step.tp] = value
        else:
            recorded.pop(step.tp, None)


def requests(ctx: ControllerContext, step: ReassignmentStep) -> dict[ApiKey, dict[int, object]]:
    built: dict[ApiKey, dict[int, object]] = {}
    for request in step.plan.batch.build(ctx):
        built.setdefault(request.api_key, {})[request.broker_id] = request.body
    return built


def start(ctx: ControllerContext, target: tuple[int, ...] | None) -> ReassignmentStep:
    new = validate_reassignment(ctx, TP, target)
    assert isinstance(new, ReplicaAssignment), new
    return start_reassignment(ctx, TP, new)


def test_replica_assignment_follows_kafkas_reassign_to() -> None:
    # Kafka's example: [1,2,3] to [3,4,2] is encoded as [3,4,2,1] while it runs
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([3, 4, 2])
    assert moving == ReplicaAssignment((3, 4, 2, 1), adding=(4,), removing=(1,))
    assert moving.origin == (3, 2, 1) and moving.target == (3, 4, 2)
    # a second reassignment starts again from the original replicas
    again = moving.reassign_to([5, 6])
    assert again == ReplicaAssignment((5, 6, 3, 2, 1), adding=(5, 6), removing=(3, 2, 1))
    assert not again.reassign_to(again.origin).is_being_reassigned


def test_start_records_the_union_bumps_the_epoch_and_starts_the_new_replica() -> None:
    ctx = context()
    step = start(ctx, (2, 3, 4))
    assert not step.complete  # the znode is written first: it is the only record of ORS
    assert step.assignment == ReplicaAssignment((2, 3, 4, 1), adding=(4,), removing=(1,))
    new_state = step.plan.updates[TP]
    assert (new_state.leader, new_state.leader_epoch, new_state.isr) == (1, 8, (1, 2, 3))
    assert not is_topic_being_reassigned(ctx, "t")
    apply(ctx, step)
    assert is_topic_being_reassigned(ctx, "t") and not is_topic_being_reassigned(ctx, "u")
    sent = requests(ctx, step)
    assert sorted(sent[ApiKey.LEADER_AND_ISR]) == [1, 2, 3, 4]
    state = sent[ApiKey.LEADER_AND_ISR][4].topic_states[0].partition_states[0]  # type: ignore[attr-defined]
    # arrays as the context holds them (tuples: the codec encodes any sequence)
    assert state.is_new and list(state.replicas) == [2, 3, 4, 1]
    assert (list(state.adding_replicas), list(state.removing_replicas)) == ([4], [1])
    assert ApiKey.STOP_REPLICA not in sent
    assert sorted(sent[ApiKey.UPDATE_METADATA]) == [1, 2, 3, 4]
    assert reassigning_partitions(ctx) == [TP]


def test_nothing_completes_until_every_target_replica_is_in_the_isr() -> None:
    ctx = context()
    apply(ctx, start(ctx, (2, 3, 4)))
    assert continue_reassignment(ctx, TP) is None
    ctx.states[TP] = replace(ctx.states[TP], isr=(1, 2, 3, 4))
    done = continue_reassignment(ctx, TP)
    assert done is not None and done.complete
    assert done.assignment == ReplicaAssignment((2, 3, 4))
    state = done.plan.updates[TP]
    # the leader (1) is not in the target: the first target replica in the ISR leads
    assert (state.leader, state.leader_epoch, state.isr) == (2, 9, (2, 3, 4))
    apply(ctx, done)
    sent = requests(ctx, done)
    assert sorted(sent[ApiKey.LEADER_AND_ISR]) == [2, 3, 4]
    assert list(sent[ApiKey.STOP_REPLICA]) == [1]
    stop = sent[ApiKey.STOP_REPLICA][1]
    assert stop.topic_states[0].partition_states[0].delete_partition  # type: ignore[attr-defined]
    assert reassigning_partitions(ctx) == []
    assert ctx.assignments[TP] == (2, 3, 4)


def test_a_leader_in_the_target_keeps_leading_at_a_new_epoch() -> None:
    ctx = context()
    apply(ctx, start(ctx, (1, 2, 4)))
    ctx.states[TP] = replace(ctx.states[TP], isr=(1, 2, 3, 4))
    done = continue_reassignment(ctx, TP)
    assert done is not None
    state = done.plan.updates[TP]
    assert (state.leader, state.isr) == (1, (1, 2, 4))
    assert state.leader_epoch == ctx.states[TP].leader_epoch + 1
    assert list(requests(ctx, done)[ApiKey.STOP_REPLICA]) == [3]


def test_completion_waits_when_no_target_replica_can_lead() -> None:
    ctx = context()
    apply(ctx, start(ctx, (2, 3, 4)))
    ctx.states[TP] = replace(ctx.states[TP], isr=(1, 2, 3, 4))
    for b in (2, 3, 4):
        ctx.live_brokers.pop(b)
    assert continue_reassignment(ctx, TP) is None
    ctx.live_brokers[3] = BrokerInfo(3, "127.0.0.1", 9093, 200)
    done = continue_reassignment(ctx, TP)
    assert done is not None and done.plan.updates[TP].leader == 3


def test_a_reassignment_already_satisfied_completes_at_once() -> None:
    ctx = context()
    step = start(ctx, (2, 3))  # only removing a replica: the target is in the ISR already
    assert step.complete and step.assignment == ReplicaAssignment((2, 3))
    assert step.plan.updates[TP].leader == 2
    apply(ctx, step)
    assert list(requests(ctx, step)[ApiKey.STOP_REPLICA]) == [1]


def test_cancel_reverts_to_the_original_replicas_and_deletes_the_added_one() -> None:
    ctx = context()
    apply(ctx, start(ctx, (2, 3, 4)))
    ctx.states[TP] = replace(ctx.states[TP], isr=(1, 2, 3))
    cancel = start(ctx, None)
    assert cancel.complete and cancel.assignment == ReplicaAssignment((2, 3, 1))
    state = cancel.plan.updates[TP]
    assert (state.leader, state.isr) == (1, (1, 2, 3))
    apply(ctx, cancel)
    sent = requests(ctx, cancel)
    assert list(sent[ApiKey.STOP_REPLICA]) == [4]
    assert sorted(sent[ApiKey.LEADER_AND_ISR]) == [1, 2, 3]
    assert reassigning_partitions(ctx) == []


def test_a_new_reassignment_replaces_the_running_one_and_stops_what_it_drops() -> None:
    ctx = context()
    apply(ctx, start(ctx, (2, 3, 4)))
    ctx.states[TP] = replace(ctx.states[TP], isr=(1, 2, 3, 4))  # 4 joined, not complete yet
    ctx.live_brokers[5] = BrokerInfo(5, "127.0.0.1", 9095, 105)
    ctx.states[TP] = replace(ctx.states[TP], isr=(1, 2, 4))
    step = start(ctx, (2, 3, 5))
    assert not step.complete
    assert step.assignment == ReplicaAssignment((2, 3, 5, 1), adding=(5,), removing=(1,))
    assert step.plan.updates[TP].isr == (1, 2)  # 4 leaves the ISR: it is being deleted
    apply(ctx, step)
    sent = requests(ctx, step)
    assert list(sent[ApiKey.STOP_REPLICA]) == [4]
    assert sorted(sent[ApiKey.LEADER_AND_ISR]) == [1, 2, 3, 5]


def test_requests_are_refused_with_kafkas_errors_and_change_nothing() -> None:
    ctx = context()
    before = (dict(ctx.assignments), dict(ctx.states))

    def refusal(tp: TopicPartition, target: tuple[int, ...] | None) -> ErrorCode:
        verdict = validate_reassignment(ctx, tp, target)
        assert isinstance(verdict, Refusal), verdict
        assert verdict.message
        return verdict.error

    assert refusal(("nope", 0), (1, 2)) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert refusal(("t", 9), (1, 2)) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert refusal(("t", 9), (1, 9)) is ErrorCode.INVALID_REPLICA_ASSIGNMENT  # Kafka's order
    assert refusal(("nope", 0), None) is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert refusal(TP, None) is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert refusal(TP, ()) is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert refusal(TP, (2, 2, 3)) is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert refusal(TP, (2, -1)) is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert refusal(TP, (2, 3, 9)) is ErrorCode.INVALID_REPLICA_ASSIGNMENT  # 9 is not alive
    ctx.topics_being_deleted.add("t")
    assert refusal(TP, (2, 3, 4)) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    ctx.adding_replicas[TP], ctx.removing_replicas[TP] = (4,), (1,)
    assert refusal(TP, None) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    del ctx.adding_replicas[TP], ctx.removing_replicas[TP]
    assert (dict(ctx.assignments), dict(ctx.states)) == before


def test_a_reassignment_read_back_from_the_znode_is_resumed() -> None:
    # what a new controller loads: RS with AR and RR, and an ISR that caught up meanwhile
    ctx = context()
    ctx.assignments[TP] = (2, 3, 4, 1)
    ctx.adding_replicas[TP] = (4,)
    ctx.removing_replicas[TP] = (1,)
    assert assignment_of(ctx, TP).origin == (2, 3, 1)
    assert reassigning_partitions(ctx) == [TP]
    ctx.states[TP] = replace(ctx.states[TP], isr=(1, 2, 3, 4))
    done = continue_reassignment(ctx, TP)
    assert done is not None and done.assignment.replicas == (2, 3, 4)
    # and a completion cut short after its state write (leader moved, ISR shrunk) finishes
    ctx.states[TP] = replace(ctx.states[TP], leader=2, isr=(2, 3, 4))
    again = continue_reassignment(ctx, TP)
    assert again is not None and again.plan.updates[TP].leader == 2
    apply(ctx, again)
    assert list(requests(ctx, again)[ApiKey.STOP_REPLICA]) == [1]


def test_the_admin_reassign_partitions_znode_in_kafkas_format() -> None:
    data = encode_reassign_partitions({("t", 1): [4, 2], ("t", 0): [2, 3, 4]})
    assert data == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3,4]},'
        b'{"topic":"t","partition":1,"replicas":[4,2]}]}'
    )
    assert decode_reassign_partitions(data) == {("t", 0): (2, 3, 4), ("t", 1): (4, 2)}
    for bad in (b"", b"[]", b'{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}'):
        with pytest.raises(ZNodeDecodeError, match="/admin/reassign_partitions"):
            decode_reassign_partitions(bad)
