"""CreatePartitions' checks and placement, and ElectLeaders' outcomes, decided without I/O."""

from __future__ import annotations

import uuid

import pytest

from epochlog.controller.context import NO_LEADER, BrokerInfo, ControllerContext, LeaderIsr
from epochlog.controller.partition_admin import (
    ElectionOutcome,
    ElectionType,
    PartitionAdminError,
    new_partitions,
    on_elect_leaders,
)
from epochlog.protocol.errors import ErrorCode

EXISTING = {0: (2, 3, 1), 1: (3, 1, 2)}
BROKERS = {1, 2, 3}


def refusal(*args: object) -> PartitionAdminError:
    with pytest.raises(PartitionAdminError) as raised:
        new_partitions(*args)  # type: ignore[arg-type]
    return raised.value


def test_new_partitions_continue_the_round_robin_from_partition_zeros_preferred_broker() -> None:
    # AdminUtils: start at the first broker >= partition 0's first replica (2: index 1), the
    # shift fixed to the start (one more at partition 3 = n), numbering from the current count.
    assert new_partitions("t", EXISTING, 4, None, BROKERS) == {2: (1, 3, 2), 3: (2, 3, 1)}


def test_new_partitions_keep_the_topics_replication_factor() -> None:
    added = new_partitions("t", {0: (1, 2)}, 6, None, BROKERS)
    assert sorted(added) == [1, 2, 3, 4, 5]
    assert all(len(set(r)) == 2 for r in added.values())


def test_explicit_assignments_number_the_new_partitions() -> None:
    assert new_partitions("t", EXISTING, 3, [[1, 2, 3]], BROKERS) == {2: (1, 2, 3)}


@pytest.mark.parametrize(
    ("count", "assignments", "error", "words"),
    [
        (1, None, ErrorCode.INVALID_PARTITIONS, "currently has 2 partitions, which is higher"),
        (2, None, ErrorCode.INVALID_PARTITIONS, "already has 2 partitions"),
        (3, [[1, 2, 9]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica"),
        (4, [[1, 2, 3]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "by 2 but 1 assignments"),
        (3, [[]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "replication factor of 0"),
        (3, [[1, 1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate brokers"),
        (3, [[1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Inconsistent replication factor"),
    ],
)
def test_bad_counts_and_assignments_are_refused_with_kafkas_errors(
    count: int, assignments: list[list[int]] | None, error: ErrorCode, words: str
) -> None:
    refused = refusal("t", EXISTING, count, assignments, BROKERS)
    assert refused.error is error
    assert words in str(refused)


def test_unknown_topic_and_too_few_brokers() -> None:
    assert refusal("t", {}, 3, None, BROKERS).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    too_few = refusal("t", {0: (1, 2, 3)}, 2, None, {1, 2})
    assert too_few.error is ErrorCode.INVALID_REPLICATION_FACTOR


# ------------------------------------------------------------------------------ ElectLeaders


def context(live: tuple[int, ...] = (1, 2, 3)) -> ControllerContext:
    ctx = ControllerContext(controller_id=1, epoch=7)
    for b in live:
        ctx.live_brokers[b] = BrokerInfo(b, "127.0.0.1", 9090 + b, 100 + b)
    ctx.add_topic("t", uuid.uuid4(), {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    ctx.states[("t", 0)] = LeaderIsr(2, 4, (1, 2, 3), 7, 9)  # preferred 1 is in the ISR
    ctx.states[("t", 1)] = LeaderIsr(2, 1, (2, 3, 1), 7, 3)  # already preferred
    ctx.states[("t", 2)] = LeaderIsr(1, 2, (1,), 7, 5)  # preferred 3 left the ISR
    return ctx


def test_preferred_election_outcomes_per_partition() -> None:
    ctx = context()
    plan, outcomes = on_elect_leaders(
        ctx, [("t", 0), ("t", 1), ("t", 2), ("t", 9), ("u", 0)], ElectionType.PREFERRED
    )
    assert outcomes[("t", 0)] == ElectionOutcome(ErrorCode.NONE)
    assert outcomes[("t", 1)].error is ErrorCode.ELECTION_NOT_NEEDED
    assert outcomes[("t", 2)].error is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert outcomes[("t", 9)].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert outcomes[("u", 0)].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert list(plan.updates) == [("t", 0)]
    moved = plan.updates[("t", 0)]
    assert (moved.leader, moved.leader_epoch, moved.isr) == (1, 5, (1, 2, 3))
    assert set(plan.batch.leader_and_isr) == {1, 2, 3}


def test_preferred_election_of_a_topic_being_deleted_is_refused() -> None:
    ctx = context()
    ctx.topics_being_deleted.add("t")
    plan, outcomes = on_elect_leaders(ctx, [("t", 0)], ElectionType.PREFERRED)
    assert outcomes[("t", 0)].error is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert not plan.updates


def test_a_dead_preferred_leader_still_named_in_the_state_is_not_election_not_needed() -> None:
    ctx = context(live=(2, 3))
    ctx.states[("t", 0)] = LeaderIsr(1, 4, (1,), 7, 9)
    _, outcomes = on_elect_leaders(ctx, [("t", 0)], ElectionType.PREFERRED)
    assert outcomes[("t", 0)].error is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_election_takes_a_live_replica_outside_the_isr_only_when_leaderless() -> None:
    ctx = context(live=(2, 3))
    ctx.states[("t", 2)] = LeaderIsr(NO_LEADER, 3, (1,), 7, 5)  # last ISR member 1 is dead
    plan, outcomes = on_elect_leaders(ctx, None, ElectionType.UNCLEAN)
    assert outcomes[("t", 2)] == ElectionOutcome(ErrorCode.NONE)
    assert (plan.updates[("t", 2)].leader, plan.updates[("t", 2)].isr) == (3, (3,))
    assert plan.unclean_elections == {("t", 2)}
    assert outcomes[("t", 0)].error is ErrorCode.ELECTION_NOT_NEEDED  # leader 2 is live
    assert outcomes[("t", 1)].error is ErrorCode.ELECTION_NOT_NEEDED


def test_unclean_election_prefers_a_live_isr_member() -> None:
    ctx = context(live=(2, 3))
    ctx.states[("t", 0)] = LeaderIsr(1, 4, (1, 3), 7, 9)  # leader 1 dead, 3 still in the ISR
    plan, outcomes = on_elect_leaders(ctx, [("t", 0)], ElectionType.UNCLEAN)
    assert outcomes[("t", 0)].error is ErrorCode.NONE
    assert (plan.updates[("t", 0)].leader, plan.updates[("t", 0)].isr) == (3, (3,))
    assert plan.unclean_elections == set()  # 3 was in the ISR: a clean election


def test_unclean_election_without_any_live_replica() -> None:
    ctx = context(live=(2,))
    ctx.states[("t", 2)] = LeaderIsr(NO_LEADER, 3, (1,), 7, 5)
    ctx.assignments[("t", 2)] = (3, 1)
    plan, outcomes = on_elect_leaders(ctx, [("t", 2)], ElectionType.UNCLEAN)
    assert outcomes[("t", 2)].error is ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert not plan.updates


def test_a_broker_shutting_down_is_not_elected() -> None:
    ctx = context()
    ctx.shutting_down.add(1)
    _, outcomes = on_elect_leaders(ctx, [("t", 0)], ElectionType.PREFERRED)
    assert outcomes[("t", 0)].error is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
