"""CreatePartitions and ElectLeaders, decided without I/O.

`new_partitions(...)` is Kafka's ZooKeeper-mode check and placement for CreatePartitions
(ZkAdminManager.createPartitions, AdminZkClient.createNewPartitionsAssignment): the count must
grow (INVALID_PARTITIONS), explicit assignments must name one replica list per new partition,
registered brokers only, no duplicates, and the topic's replication factor
(INVALID_REPLICA_ASSIGNMENT). Without assignments the new partitions are placed by the same
round robin as a new topic's (`assign_replicas`), starting at the broker that leads partition 0
by preference and continuing the partition numbering, as AdminUtils does. A refusal raises
`PartitionAdminError` naming Kafka's error and what was wrong.

`on_elect_leaders(...)` is the controller's answer to ElectLeaders (Kafka's
processReplicaLeaderElection): per partition, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION
(being deleted), ELECTION_NOT_NEEDED (preferred: the preferred replica leads already and is
live; unclean: a live leader exists), PREFERRED_LEADER_NOT_AVAILABLE (the preferred replica
is not live and in the ISR) or ELIGIBLE_LEADERS_NOT_AVAILABLE (unclean: no live replica at
all), else the plan that moves the leadership. An unclean election takes a live ISR member
first, then any live replica (the ISR becomes just that leader), whatever
`unclean.leader.election.enable` says: the operator asked for it.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from epochlog.controller.assignment import AssignmentError, assign_replicas
from epochlog.controller.context import ControllerContext, TopicPartition
from epochlog.controller.decisions import Plan
from epochlog.controller.election import offline_leader, preferred_leader
from epochlog.protocol.errors import ErrorCode


class PartitionAdminError(Exception):
    """A refused CreatePartitions topic: Kafka's error code and a message naming the cause."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


class ElectionType(enum.IntEnum):
    """ElectLeaders' ElectionType (KIP-460); v0 requests are PREFERRED."""

    PREFERRED = 0
    UNCLEAN = 1


def new_partitions(
    topic: str,
    existing: Mapping[int, Sequence[int]],
    count: int,
    assignments: Sequence[Sequence[int]] | None,
    brokers: Collection[int],
) -> dict[int, tuple[int, ...]]:
    """The replicas of each partition to add to `topic` (numbered from len(existing)).

    `existing` is the topic's current assignment (empty: the topic does not exist), `count` the
    requested total, `assignments` the explicit replica lists of the new partitions (None: place
    them), `brokers` the registered brokers."""
    if not existing:
        raise PartitionAdminError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist."
        )
    current = len(existing)
    if count < current:
        raise PartitionAdminError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {current} partitions, which is higher than the requested "
            f"{count}.",
        )
    if count == current:
        raise PartitionAdminError(
            ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
        )
    if 0 not in existing:
        raise PartitionAdminError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is "
            "missing.",
        )
    factor = len(existing[0])
    added = count - current
    if assignments is not None:
        return _checked_assignments(assignments, added, current, factor, brokers)
    ordered = sorted(brokers)
    preferred = existing[0][0]
    start = next((i for i, b in enumerate(ordered) if b >= preferred), 0)
    try:
        return assign_replicas(ordered, added, factor, start, start, first_partition=current)
    except AssignmentError as exc:
        raise PartitionAdminError(ErrorCode[exc.error], str(exc)) from None


def _checked_assignments(
    assignments: Sequence[Sequence[int]],
    added: int,
    first: int,
    factor: int,
    brokers: Collection[int],
) -> dict[int, tuple[int, ...]]:
    unknown = sorted({b for replicas in assignments for b in replicas} - set(brokers))
    if unknown:
        raise PartitionAdminError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
        )
    if len(assignments) != added:
        raise PartitionAdminError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Increasing the number of partitions by {added} but {len(assignments)} "
            "assignments provided.",
        )
    result = {first + i: tuple(replicas) for i, replicas in enumerate(assignments)}
    for partition, replicas in result.items():
        if not replicas:
            raise PartitionAdminError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Cannot have replication factor of 0 for partition id {partition}.",
            )
        if len(set(replicas)) != len(replicas):
            raise PartitionAdminError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {partition}.",
            )
    wrong = {p: len(r) for p, r in result.items() if len(r) != factor}
    if wrong:
        raise PartitionAdminError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Inconsistent replication factor between partitions, partition 0 has "
            f"{factor} while partitions [{', '.join(map(str, wrong))}] have replication "
            f"factors [{', '.join(map(str, wrong.values()))}], respectively.",
        )
    return result


@dataclass(frozen=True)
class ElectionOutcome:
    """One partition's ElectLeaders result."""

    error: ErrorCode
    message: str | None = None


def on_elect_leaders(
    ctx: ControllerContext,
    partitions: Iterable[TopicPartition] | None,
    election_type: ElectionType,
) -> tuple[Plan, dict[TopicPartition, ElectionOutcome]]:
    """The plan that elects what can be elected and every named partition's outcome; None
    means every partition of topics not being deleted."""
    if partitions is None:
        partitions = [tp for tp in ctx.all_partitions() if tp[0] not in ctx.topics_being_deleted]
    plan = Plan()
    outcomes: dict[TopicPartition, ElectionOutcome] = {}
    eligible = ctx.eligible_brokers()
    for tp in sorted(set(partitions)):
        if tp not in ctx.assignments:
            outcomes[tp] = ElectionOutcome(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
            )
            continue
        if tp[0] in ctx.topics_being_deleted:
            outcomes[tp] = ElectionOutcome(
                ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted"
            )
            continue
        replicas = ctx.replicas(tp)
        state = ctx.states.get(tp)
        live_leader = state is not None and ctx.is_live(state.leader)
        if election_type is ElectionType.PREFERRED:
            # A dead leader still named in the state (a failover that could elect nobody
            # keeps it) needs an election even if it is the preferred replica.
            if live_leader and state is not None and state.leader == replicas[0]:
                outcomes[tp] = ElectionOutcome(ErrorCode.ELECTION_NOT_NEEDED)
                continue
            election = None
            if state is not None:
                election = preferred_leader(replicas, state.isr, ctx.eligible_for(tp, eligible))
            if election is None:
                outcomes[tp] = ElectionOutcome(
                    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"Failed to elect leader for partition {tp[0]}-{tp[1]}: its preferred "
                    f"replica {replicas[0]} is not live and in the ISR "
                    f"{list(state.isr) if state else []}",
                )
                continue
        else:
            if live_leader:
                outcomes[tp] = ElectionOutcome(ErrorCode.ELECTION_NOT_NEEDED)
                continue
            election = None
            if state is not None:
                election = offline_leader(
                    replicas, state.isr, ctx.eligible_for(tp, eligible), unclean_allowed=True
                )
            if election is None:
                outcomes[tp] = ElectionOutcome(
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    f"Failed to elect leader for partition {tp[0]}-{tp[1]}: none of its "
                    f"replicas {list(replicas)} is live",
                )
                continue
        assert state is not None
        leader, isr = election
        plan.updates[tp] = state.with_leader(leader, isr, ctx.epoch)
        plan.note_election(tp, leader, state.isr)
        plan.batch.add_leader_and_isr([r for r in replicas if ctx.is_live(r)], tp)
        outcomes[tp] = ElectionOutcome(ErrorCode.NONE)
    return plan, outcomes
