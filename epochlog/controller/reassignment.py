"""Partition reassignment (KIP-455) as Kafka's ZooKeeper controller does it, decided without I/O.

Names are Kafka's (KafkaController.onPartitionReassignment): RS is a partition's replica set as
`/brokers/topics/<t>` records it, ORS the original set, TRS the target, AR the replicas being
added (TRS - ORS), RR those being removed (ORS - TRS). While a reassignment runs the znode holds
RS = TRS + ORS (target first, Kafka's order) with "adding_replicas" AR and "removing_replicas"
RR, so any controller can read it back, finish it or cancel it (ORS = RS - AR).

How a reassignment goes:

- Start (phase U + A): `validate_reassignment` checks the request and gives the new
  `ReplicaAssignment`; `start_reassignment` returns a step whose znode write comes first (the
  only durable record of ORS), then a partition state with the leader epoch bumped, sent as
  LeaderAndIsr to every live replica of RS (the new ones with is_new), so the new replicas
  create their logs and fetch. Replicas that an earlier reassignment was adding and the new one
  no longer wants are stopped and deleted (Kafka's U3), and leave the ISR.
- Progress: each accepted AlterPartition that grows the ISR asks `continue_reassignment`.
- Complete (phase B), once every target replica is in the ISR: the leader stays if it is in TRS
  and online, else the first online TRS member in the ISR leads (Kafka's
  ReassignPartitionLeaderElectionStrategy); the ISR keeps only TRS members; the leader epoch
  goes up; LeaderAndIsr to TRS, StopReplica with delete to the rest; the znode then gets RS =
  TRS with empty AR and RR (written last, after the state, so that a controller that dies in
  between still finds ORS and finishes the job).
- Cancel (null target): the reassignment to ORS, which is complete at once when ORS is in the
  ISR: the added replicas are stopped and deleted.

Each step is a `ReassignmentStep`: the assignment the znode (and the context) gets for the
partition, whether it is written before or after the state, and a `Plan` of the state to write
and the requests to send. `controller/reassignment_events.py` performs them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from epochlog.controller.context import ControllerContext, LeaderIsr, TopicPartition
from epochlog.controller.decisions import Plan
from epochlog.controller.election import isr_without
from epochlog.protocol.errors import ErrorCode


@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's replicas as /brokers/topics/<t> records them (Kafka's ReplicaAssignment)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS: the replicas after it."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The assignment while moving from ORS to `target`: RS = target + ORS, in that order."""
        origin = self.origin
        full = tuple(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )


@dataclass(frozen=True)
class Refusal:
    """Why a partition's reassignment request is refused (Kafka's error and message)."""

    error: ErrorCode
    message: str


@dataclass
class ReassignmentStep:
    tp: TopicPartition
    assignment: ReplicaAssignment  # what the znode and the context hold for tp after the step
    complete: bool  # phase B: the znode is written after the state; else before it
    plan: Plan = field(default_factory=Plan)


def assignment_of(ctx: ControllerContext, tp: TopicPartition) -> ReplicaAssignment:
    return ReplicaAssignment(
        ctx.assignments[tp],
        ctx.adding_replicas.get(tp, ()),
        ctx.removing_replicas.get(tp, ()),
    )


def reassigning_partitions(ctx: ControllerContext) -> list[TopicPartition]:
    """Partitions with a reassignment in progress (Kafka's partitionsBeingReassigned)."""
    return sorted(
        tp
        for tp in set(ctx.adding_replicas) | set(ctx.removing_replicas)
        if tp in ctx.assignments and assignment_of(ctx, tp).is_being_reassigned
    )


def is_topic_being_reassigned(ctx: ControllerContext, topic: str) -> bool:
    """Whether a partition of `topic` is being reassigned: Kafka refuses CreatePartitions for
    such a topic with REASSIGNMENT_IN_PROGRESS (its rewrite of the topic znode would lose the
    reassignment's "adding_replicas" and "removing_replicas")."""
    return any(tp[0] == topic for tp in reassigning_partitions(ctx))


def validate_reassignment(
    ctx: ControllerContext, tp: TopicPartition, target: Sequence[int] | None
) -> ReplicaAssignment | Refusal:
    """The assignment a request for `tp` asks for (`target` None: cancel), or why not. The
    checks run in Kafka's order (processApiPartitionReassignment): the replica list, then
    whether there is a reassignment to cancel, then whether the partition exists."""
    topic, partition = tp
    name = f"{topic}-{partition}"
    known = tp in ctx.assignments
    current = assignment_of(ctx, tp) if known else ReplicaAssignment(())
    if target is None:
        if not current.is_being_reassigned:
            return Refusal(
                ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                f"no reassignment of {name} is in progress to cancel",
            )
        new = current.reassign_to(current.origin)
    else:
        replicas = list(target)
        if not replicas:
            return Refusal(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"{name}: empty replica list in partition reassignment",
            )
        if len(set(replicas)) != len(replicas):
            return Refusal(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"{name}: duplicate broker ids in replica list {replicas}",
            )
        if any(r < 0 for r in replicas):
            return Refusal(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"{name}: invalid broker id in replica list {replicas}",
            )
        new = current.reassign_to(replicas)
        dead = [r for r in new.adding if not ctx.is_live(r)]
        if dead:
            return Refusal(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"{name}: replica list {replicas} has brokers that are not alive: {dead} "
                f"(live brokers: {sorted(ctx.live_brokers)})",
            )
    if not known or topic in ctx.topics_being_deleted:
        return Refusal(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name} does not exist")
    return new


def start_reassignment(
    ctx: ControllerContext, tp: TopicPartition, new: ReplicaAssignment
) -> ReassignmentStep:
    """Begin (or replace, or cancel) `tp`'s reassignment with `new` from `validate_reassignment`:
    phase B at once when it is already complete, else phase U + A."""
    current = assignment_of(ctx, tp)
    # Replicas an earlier reassignment was adding that this one does not want (Kafka's U3).
    unneeded = [r for r in current.replicas if r not in new.replicas]
    state = ctx.states.get(tp)
    if state is not None and _is_complete(new, state):
        completion = _complete(ctx, tp, new, state, stopped=[*unneeded, *new.removing])
        if completion is not None:
            return completion
    step = ReassignmentStep(tp, new, complete=False)
    if state is None:  # no state yet (no live replica ever): only the znode changes
        return step
    isr = isr_without(state.isr, set(unneeded)) if set(unneeded) & set(state.isr) else state.isr
    leader = state.leader
    if leader in unneeded:
        leader = _reassigned_leader(ctx, tp, new.replicas, isr) or state.leader
    step.plan.updates[tp] = state.with_leader(leader, isr, ctx.epoch)
    step.plan.batch.add_leader_and_isr(_live(ctx, new.origin), tp)
    step.plan.batch.add_leader_and_isr(_live(ctx, new.adding), tp, is_new=True)
    for replica in _live(ctx, unneeded):
        step.plan.batch.add_stop_replica(replica, tp, delete=True)
    return step


def continue_reassignment(ctx: ControllerContext, tp: TopicPartition) -> ReassignmentStep | None:
    """After `tp`'s ISR changed (or a new controller loaded it): the completion, if every
    target replica is now in the ISR and one of them can lead; else None."""
    if tp not in ctx.assignments:
        return None
    current = assignment_of(ctx, tp)
    state = ctx.states.get(tp)
    if not current.is_being_reassigned or state is None or not _is_complete(current, state):
        return None
    return _complete(ctx, tp, current, state, stopped=list(current.removing))


def continue_reassignments(
    ctx: ControllerContext, partitions: Iterable[TopicPartition]
) -> list[ReassignmentStep]:
    steps = []
    for tp in sorted(set(partitions)):
        step = continue_reassignment(ctx, tp)
        if step is not None:
            steps.append(step)
    return steps


def _is_complete(assignment: ReplicaAssignment, state: LeaderIsr) -> bool:
    return not assignment.is_being_reassigned or set(assignment.target) <= set(state.isr)


def _complete(
    ctx: ControllerContext,
    tp: TopicPartition,
    assignment: ReplicaAssignment,
    state: LeaderIsr,
    stopped: Sequence[int],
) -> ReassignmentStep | None:
    target = assignment.target
    leader: int | None = state.leader
    if leader not in target or leader not in ctx.eligible_for(tp):
        leader = _reassigned_leader(ctx, tp, target, state.isr)
    if leader is None:
        return None  # no target replica can lead yet: wait for the next ISR change
    step = ReassignmentStep(tp, ReplicaAssignment(target), complete=True)
    isr = tuple(r for r in state.isr if r in target)
    step.plan.updates[tp] = state.with_leader(leader, isr, ctx.epoch)
    step.plan.batch.add_leader_and_isr(_live(ctx, target), tp)
    for replica in _live(ctx, dict.fromkeys(r for r in stopped if r not in target)):
        step.plan.batch.add_stop_replica(replica, tp, delete=True)
    return step


def _reassigned_leader(
    ctx: ControllerContext, tp: TopicPartition, replicas: Sequence[int], isr: Sequence[int]
) -> int | None:
    """The first of `replicas` that is online and in the ISR (ReassignPartitionLeaderElection)."""
    eligible = ctx.eligible_for(tp)
    return next((r for r in replicas if r in eligible and r in isr), None)


def _live(ctx: ControllerContext, replicas: Iterable[int]) -> list[int]:
    return [r for r in replicas if ctx.is_live(r)]
