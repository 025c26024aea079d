"""The controller's decisions, driven directly: no ZooKeeper, no sockets."""

from __future__ import annotations

import uuid

import pytest

from epochlog.controller.assignment import AssignmentError, assign_replicas
from epochlog.controller.broker_change import classify_brokers
from epochlog.controller.context import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    BrokerInfo,
    ControllerContext,
    LeaderIsr,
)
from epochlog.controller.decisions import (
    bounced_isr_members,
    dead_isr_followers,
    imbalanced_partitions,
    on_broker_failure,
    on_broker_startup,
    on_controlled_shutdown,
    on_controller_failover,
    on_new_partitions,
    on_preferred_election,
    on_topic_deletion,
    on_unclean_election_enabled,
    remaining_leaderships,
)
from epochlog.controller.election import (
    controlled_shutdown_leader,
    isr_without,
    offline_leader,
    preferred_leader,
)
from epochlog.protocol.api import ApiKey


def broker(i: int, epoch: int) -> BrokerInfo:
    return BrokerInfo(i, "127.0.0.1", 9090 + i, epoch)


def context(brokers=(1, 2, 3), epoch=5) -> ControllerContext:
    ctx = ControllerContext(controller_id=1, epoch=epoch)
    for b in brokers:
        ctx.live_brokers[b] = broker(b, 100 + b)
    return ctx


def with_topic(ctx: ControllerContext, name="t", assignment=None) -> ControllerContext:
    assignment = assignment or {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}
    ctx.add_topic(name, uuid.uuid4(), assignment)
    for p, replicas in assignment.items():
        ctx.states[(name, p)] = LeaderIsr(replicas[0], 0, tuple(replicas), ctx.epoch, 0)
    return ctx


def commit(ctx: ControllerContext, plan) -> None:
    """What the shell does after ZooKeeper accepted the writes."""
    for tp, state in plan.creates.items():
        ctx.states[tp] = LeaderIsr(
            state.leader, state.leader_epoch, state.isr, state.controller_epoch, 0
        )
    for tp, state in plan.updates.items():
        ctx.states[tp] = LeaderIsr(
            state.leader,
            state.leader_epoch,
            state.isr,
            state.controller_epoch,
            ctx.states[tp].partition_epoch + 1,
        )


def requests_by_broker(ctx, plan):
    out = {}
    for request in plan.batch.build(ctx):
        out.setdefault(request.broker_id, {})[request.api_key] = request
    return out


# -- KIP-380 broker change classification


def test_classification_finds_new_dead_and_bounced_brokers() -> None:
    change = classify_brokers({1: 10, 2: 20, 3: 30}, {1: 10, 2: 25, 4: 40})
    assert change.new == (4,)
    assert change.dead == (3,)
    assert change.bounced == (2,)


def test_without_kip380_a_fast_bounce_goes_unnoticed() -> None:
    change = classify_brokers({1: 10, 2: 20}, {1: 10, 2: 25}, detect_bounces=False)
    assert change.empty


# -- assignment and elections


def test_assignment_spreads_leaders_and_followers_evenly() -> None:
    result = assign_replicas([1, 2, 3], partitions=6, replication_factor=2)
    leaders = [replicas[0] for replicas in result.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    for replicas in result.values():
        assert len(set(replicas)) == 2
    followers = [replicas[1] for replicas in result.values()]
    assert sorted(followers) == [1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize(
    ("partitions", "rf", "error"),
    [
        (0, 1, "INVALID_PARTITIONS"),
        (3, 4, "INVALID_REPLICATION_FACTOR"),
        (3, 0, "INVALID_REPLICATION_FACTOR"),
    ],
)
def test_impossible_assignments_name_kafkas_error(partitions, rf, error) -> None:
    with pytest.raises(AssignmentError) as info:
        assign_replicas([1, 2, 3], partitions, rf)
    assert info.value.error == error


def test_elections_follow_kafkas_algorithms() -> None:
    assert offline_leader([1, 2, 3], [2, 3], live={1, 2, 3}, unclean_allowed=False) == (2, (2, 3))
    assert offline_leader([1, 2, 3], [3], live={1, 2}, unclean_allowed=False) is None
    assert offline_leader([1, 2, 3], [3], live={1, 2}, unclean_allowed=True) == (1, (1,))
    assert controlled_shutdown_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == (2, (2, 3))
    assert preferred_leader([1, 2, 3], [2, 3, 1], {1, 2, 3}) == (1, (2, 3, 1))
    assert preferred_leader([1, 2, 3], [2, 3], {1, 2, 3}) is None
    assert isr_without([1, 2], {1}) == (2,)
    assert isr_without([2], {2}) == (2,)  # the last ISR member stays


# -- events


def test_new_partitions_are_led_by_the_first_live_replica() -> None:
    ctx = context(brokers=(2, 3))
    ctx.add_topic("t", uuid.uuid4(), {0: (1, 2, 3), 1: (3, 1, 2)})
    plan = on_new_partitions(ctx, ctx.partitions_of("t"))
    assert plan.creates[("t", 0)].leader == 2
    assert plan.creates[("t", 0)].isr == (2, 3)
    assert plan.creates[("t", 1)].leader == 3
    commit(ctx, plan)
    requests = requests_by_broker(ctx, plan)
    leader_and_isr = requests[2][ApiKey.LEADER_AND_ISR]
    assert leader_and_isr.broker_epoch == 102  # the destination's epoch
    states = leader_and_isr.body.topic_states[0].partition_states
    assert {s.partition_index for s in states} == {0, 1}
    assert all(s.is_new for s in states)
    assert set(requests) == {2, 3}
    assert ApiKey.UPDATE_METADATA in requests[3]


def test_leader_failure_moves_leadership_within_the_isr() -> None:
    ctx = with_topic(context())
    del ctx.live_brokers[1]
    plan = on_broker_failure(ctx, [1])
    new = plan.updates[("t", 0)]
    assert (new.leader, new.leader_epoch, new.isr) == (2, 1, (2, 3))
    follower_change = plan.updates[("t", 1)]  # broker 1 followed partition 1
    assert (follower_change.leader, follower_change.isr) == (2, (2, 3))
    commit(ctx, plan)
    requests = requests_by_broker(ctx, plan)
    assert set(requests) == {2, 3}


def test_the_last_isr_member_stays_when_it_fails_and_leads_again_on_return() -> None:
    ctx = with_topic(context(), assignment={0: (1, 2)})
    ctx.states[("t", 0)] = LeaderIsr(1, 3, (1,), 5, 7)
    del ctx.live_brokers[1]
    plan = on_broker_failure(ctx, [1])
    state = plan.updates[("t", 0)]
    assert state.leader == NO_LEADER
    assert state.isr == (1,)  # not emptied: broker 1 holds the data
    commit(ctx, plan)
    ctx.live_brokers[1] = broker(1, 500)
    plan = on_broker_startup(ctx, [1])
    assert plan.updates[("t", 0)].leader == 1


def test_unclean_election_only_when_enabled() -> None:
    ctx = with_topic(context(), assignment={0: (1, 2)})
    ctx.states[("t", 0)] = LeaderIsr(1, 3, (1,), 5, 7)
    del ctx.live_brokers[1]
    clean_plan = on_broker_failure(ctx, [1])
    assert clean_plan.updates[("t", 0)].leader == NO_LEADER
    assert clean_plan.unclean_elections == set()
    plan = on_broker_failure(ctx, [1], unclean=lambda topic: True)
    unclean = plan.updates[("t", 0)]
    assert (unclean.leader, unclean.isr) == (2, (2,))
    assert plan.unclean_elections == {("t", 0)}  # UncleanLeaderElectionsPerSec counts it


def test_an_election_within_the_isr_is_not_counted_as_unclean() -> None:
    ctx = with_topic(context())
    del ctx.live_brokers[1]
    plan = on_broker_failure(ctx, [1], unclean=lambda topic: True)
    assert plan.updates[("t", 0)].leader == 2
    assert plan.unclean_elections == set()


def test_enabling_unclean_election_elects_offline_partitions_and_counts_them() -> None:
    ctx = with_topic(context(), assignment={0: (1, 2), 1: (2, 3)})
    ctx.states[("t", 0)] = LeaderIsr(NO_LEADER, 3, (1,), 5, 7)  # its last ISR member is dead
    del ctx.live_brokers[1]
    plan = on_unclean_election_enabled(ctx, lambda topic: True)
    assert plan.updates[("t", 0)].leader == 2
    assert plan.unclean_elections == {("t", 0)}


def test_startup_sends_one_full_leader_and_isr_with_every_hosted_partition() -> None:
    ctx = with_topic(context())
    ctx.live_brokers[2] = broker(2, 999)  # bounced: new epoch already recorded
    plan = on_broker_startup(ctx, [2])
    requests = requests_by_broker(ctx, plan)
    leader_and_isr = requests[2][ApiKey.LEADER_AND_ISR]
    assert leader_and_isr.broker_epoch == 999
    assert leader_and_isr.body.type == 2  # full
    partitions = {s.partition_index for s in leader_and_isr.body.topic_states[0].partition_states}
    assert partitions == {0, 1, 2}
    # existing brokers learn the new broker list with the bounced broker's new epoch
    epochs = {b.id: b.broker_epoch for b in requests[1][ApiKey.UPDATE_METADATA].body.live_brokers}
    assert epochs == {1: 101, 2: 999, 3: 103}


def test_controlled_shutdown_moves_leadership_and_stops_followers() -> None:
    ctx = with_topic(context())
    ctx.shutting_down.add(1)
    plan = on_controlled_shutdown(ctx, 1)
    assert plan.updates[("t", 0)].leader == 2
    assert 1 not in plan.updates[("t", 0)].isr
    assert 1 not in plan.updates[("t", 1)].isr
    commit(ctx, plan)
    assert remaining_leaderships(ctx, 1) == []
    requests = requests_by_broker(ctx, plan)
    stop = requests[1][ApiKey.STOP_REPLICA].body
    assert not any(p.delete_partition for p in stop.topic_states[0].partition_states)
    assert {p.partition_index for p in stop.topic_states[0].partition_states} == {1, 2}


def test_topic_deletion_stops_and_deletes_every_replica() -> None:
    ctx = with_topic(context())
    ctx.topics_being_deleted.add("t")
    plan = on_topic_deletion(ctx, ["t"])
    requests = requests_by_broker(ctx, plan)
    for b in (1, 2, 3):
        stop = requests[b][ApiKey.STOP_REPLICA].body
        states = stop.topic_states[0].partition_states
        assert all(p.delete_partition and p.leader_epoch == -2 for p in states)
        assert requests[b][ApiKey.STOP_REPLICA].build(1).delete_partitions  # v1-2 layout
        metadata = requests[b][ApiKey.UPDATE_METADATA].body
        leaders = {p.leader for p in metadata.topic_states[0].partition_states}
        assert leaders == {LEADER_DURING_DELETE}


def test_preferred_election_moves_leaders_home() -> None:
    ctx = with_topic(context())
    ctx.states[("t", 0)] = LeaderIsr(2, 4, (1, 2, 3), 5, 3)
    plan = on_preferred_election(ctx)
    assert list(plan.updates) == [("t", 0)]
    assert plan.updates[("t", 0)].leader == 1
    assert plan.updates[("t", 0)].leader_epoch == 5


def test_imbalance_moves_partitions_only_past_the_threshold() -> None:
    ctx = with_topic(context(), assignment={p: (1, 2, 3) for p in range(4)})
    ctx.states[("t", 0)] = LeaderIsr(2, 1, (1, 2, 3), 5, 1)  # 1 of 4 elsewhere: 25 %
    assert imbalanced_partitions(ctx, threshold_percent=30) == []
    assert imbalanced_partitions(ctx, threshold_percent=10) == [("t", 0)]
    ctx.shutting_down.add(1)  # a preferred leader that cannot lead is left alone
    assert imbalanced_partitions(ctx, threshold_percent=10) == []


# -- KIP-380 across a controller failover: bounces no controller saw


def written_state(ctx: ControllerContext, tp, leader: int, isr: tuple[int, ...]) -> None:
    """A state as the previous controller wrote it: ISR members with their epochs then."""
    ctx.states[tp] = ctx.with_isr_epochs(LeaderIsr(leader, 0, isr, ctx.epoch, 3))


def test_states_are_written_with_the_isr_members_epochs_and_a_dead_member_keeps_its_own():
    ctx = with_topic(context())
    state = ctx.with_isr_epochs(LeaderIsr(1, 0, (1, 2), 5, 0))
    assert state.isr_epochs == ((1, 101), (2, 102))
    ctx.live_brokers.pop(2)
    assert ctx.with_isr_epochs(state).isr_epochs == ((1, 101), (2, 102))


def test_a_new_controller_moves_leadership_off_a_leader_that_registered_again():
    ctx = with_topic(context(), assignment={0: (1, 2, 3)})
    written_state(ctx, ("t", 0), 1, (1, 2, 3))
    ctx.live_brokers[1] = broker(1, 900)  # it restarted before any controller looked
    assert bounced_isr_members(ctx) == {("t", 0): {1}}
    plan = on_controller_failover(ctx)
    new = plan.updates[("t", 0)]
    assert (new.leader, new.isr, new.leader_epoch) == (2, (2, 3), 1)
    commit(ctx, plan)
    requests = requests_by_broker(ctx, plan)
    assert ApiKey.LEADER_AND_ISR in requests[1]  # it learns it follows, at the new epoch


def test_a_bounced_follower_leaves_the_isr_and_the_leader_keeps_leading_at_a_new_epoch():
    ctx = with_topic(context(), assignment={0: (1, 2, 3)})
    written_state(ctx, ("t", 0), 1, (1, 2, 3))
    ctx.live_brokers[3] = broker(3, 900)
    new = on_controller_failover(ctx).updates[("t", 0)]
    assert (new.leader, new.isr, new.leader_epoch) == (1, (1, 2), 1)


def test_a_bounced_last_isr_member_leads_again_only_at_a_new_leader_epoch():
    ctx = with_topic(context(), assignment={0: (1, 2, 3)})
    written_state(ctx, ("t", 0), 1, (1,))
    ctx.live_brokers[1] = broker(1, 900)
    new = on_controller_failover(ctx).updates[("t", 0)]
    assert (new.leader, new.isr, new.leader_epoch) == (1, (1,), 1)


def test_no_bounce_no_change_and_states_without_epochs_are_left_alone():
    ctx = with_topic(context(), assignment={0: (1, 2, 3), 1: (2, 3, 1)})
    written_state(ctx, ("t", 0), 1, (1, 2, 3))  # epochs recorded, nobody bounced
    ctx.states[("t", 1)] = LeaderIsr(2, 0, (2, 3, 1), ctx.epoch, 3)  # written by Kafka's tools
    ctx.live_brokers[2] = broker(2, 900)
    assert bounced_isr_members(ctx) == {("t", 0): {2}}
    plan = on_controller_failover(ctx)
    assert set(plan.updates) == {("t", 0)}


def test_without_the_check_a_new_controller_keeps_a_bounced_leader_at_the_same_epoch():
    ctx = with_topic(context(), assignment={0: (1, 2, 3)})
    written_state(ctx, ("t", 0), 1, (1, 2, 3))
    ctx.live_brokers[1] = broker(1, 900)
    plan = on_controller_failover(ctx, bounced={})
    assert plan.updates == {}  # the damage: leader 1 stays at leader epoch 0


def test_a_new_controller_takes_followers_on_dead_brokers_out_of_the_isr():
    # Broker 3 died with the old controller: nobody took it out of the ISR.
    ctx = with_topic(context(brokers=(1, 2)), assignment={0: (1, 2, 3), 1: (3, 1, 2)})
    written_state(ctx, ("t", 0), 1, (1, 2, 3))
    ctx.states[("t", 1)] = LeaderIsr(3, 4, (3, 1, 2), ctx.epoch, 3, ())
    assert dead_isr_followers(ctx) == {("t", 0): {3}}  # t-1 elects instead: no live leader
    plan = on_controller_failover(ctx, bounced={})
    first = plan.updates[("t", 0)]
    assert (first.leader, first.isr, first.leader_epoch) == (1, (1, 2), 1)
    second = plan.updates[("t", 1)]
    assert (second.leader, second.isr) == (1, (1, 2))
