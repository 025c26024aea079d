"""AlterPartition validation on the controller (KIP-903 in ZooKeeper mode), without I/O.

A leader asks to change a partition's ISR. The controller checks, in Kafka's order: that the
requesting broker is registered with the epoch it claims (else STALE_BROKER_EPOCH for the whole
request); then per partition that it knows the partition (UNKNOWN_TOPIC_ID /
UNKNOWN_TOPIC_OR_PARTITION), that the request is not from the future (NOT_CONTROLLER), not from an
earlier leadership (FENCED_LEADER_EPOCH), from the leader (INVALID_REQUEST), not based on an
older partition epoch (INVALID_UPDATE_VERSION; an identical request is answered with the current
state), and that the proposed ISR is well formed (INVALID_REQUEST). Finally KIP-903: every
proposed member must be live and not shutting down, and its broker epoch (sent by the leader
from the member's own Fetch requests) must equal the epoch the controller holds — a replica that
re-registered since, possibly with an empty disk, is INELIGIBLE_REPLICA. An epoch of -1 skips
the epoch comparison (a leader that does not know it), as in Kafka.

`kip903=False` is the pre-KIP-903 behaviour of Kafka's ZooKeeper controller (a test-only
switch): liveness and shutdown are checked, broker epochs are ignored.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from epochlog.controller.context import ControllerContext, LeaderIsr, TopicPartition
from epochlog.protocol.errors import ErrorCode

NO_EPOCH = -1


@dataclass(frozen=True)
class IsrProposal:
    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[tuple[int, int], ...]  # (broker id, broker epoch as the leader saw it)


@dataclass
class AlterPartitionDecision:
    top_error: ErrorCode = ErrorCode.NONE
    # per proposal: the new state to write, or an error with the state to answer with
    accepted: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    unchanged: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    errors: dict[tuple[uuid.UUID, int], ErrorCode] = field(default_factory=dict)


def decide_alter_partition(
    ctx: ControllerContext,
    broker_id: int,
    broker_epoch: int,
    proposals: Sequence[IsrProposal],
    *,
    kip903: bool = True,
    check_requester_epoch: bool = True,
) -> AlterPartitionDecision:
    decision = AlterPartitionDecision()
    requester = ctx.live_brokers.get(broker_id)
    if requester is None or (check_requester_epoch and broker_epoch != requester.epoch):
        decision.top_error = ErrorCode.STALE_BROKER_EPOCH
        return decision
    names = {topic_id: name for name, topic_id in ctx.topic_ids.items()}
    for proposal in proposals:
        key = (proposal.topic_id, proposal.partition)
        topic = names.get(proposal.topic_id)
        if topic is None:
            decision.errors[key] = ErrorCode.UNKNOWN_TOPIC_ID
            continue
        tp = (topic, proposal.partition)
        state = ctx.states.get(tp)
        if state is None or topic in ctx.topics_being_deleted:
            decision.errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        error = _check(ctx, tp, state, broker_id, proposal, kip903)
        if error is None:
            new_isr = tuple(b for b, _ in proposal.new_isr)
            if new_isr == state.isr:
                decision.unchanged[tp] = state  # idempotent: already the committed ISR
            else:
                decision.accepted[tp] = LeaderIsr(
                    state.leader, state.leader_epoch, new_isr, ctx.epoch, state.partition_epoch
                )
        else:
            decision.errors[key] = error
    return decision


def _check(
    ctx: ControllerContext,
    tp: TopicPartition,
    state: LeaderIsr,
    broker_id: int,
    proposal: IsrProposal,
    kip903: bool,
) -> ErrorCode | None:
    if (
        proposal.leader_epoch > state.leader_epoch
        or proposal.partition_epoch > state.partition_epoch
    ):
        return ErrorCode.NOT_CONTROLLER  # from a state this controller has not written
    if proposal.leader_epoch < state.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if broker_id != state.leader:
        return ErrorCode.INVALID_REQUEST
    new_isr = [b for b, _ in proposal.new_isr]
    if proposal.partition_epoch < state.partition_epoch:
        if tuple(new_isr) == state.isr:
            return None  # a retry of what was already committed
        return ErrorCode.INVALID_UPDATE_VERSION
    replicas = ctx.replicas(tp)
    if (
        len(set(new_isr)) != len(new_isr)
        or any(b not in replicas for b in new_isr)
        or broker_id not in new_isr
    ):
        return ErrorCode.INVALID_REQUEST
    for member, epoch in proposal.new_isr:
        if not ctx.is_eligible(member):
            return ErrorCode.INELIGIBLE_REPLICA
        if kip903 and epoch != NO_EPOCH and epoch != ctx.live_brokers[member].epoch:
            return ErrorCode.INELIGIBLE_REPLICA
    return None
