"""What a group member's two tasks do next (the group task: find the coordinator, join, fetch
committed offsets, wait; the heartbeat task: send, wait, give up the coordinator, leave), when a
commit may carry its generation, and the group requests each version carries: decided without
I/O."""

from __future__ import annotations

import pytest

from epochlog.client.group_requests import (
    heartbeat_request,
    join_group_request,
    leave_group_request,
    static_join_supported,
    sync_group_request,
)
from epochlog.client.membership import (
    GroupMembership,
    GroupStep,
    HeartbeatStep,
    HeartbeatTimers,
    MemberState,
    Reaction,
    next_group_step,
    next_heartbeat,
)
from epochlog.protocol.consumer_protocol import PROTOCOL_TYPE
from epochlog.protocol.errors import ErrorCode as E


def stable(member: GroupMembership, generation: int = 1) -> GroupMembership:
    sent = member.join_sent()
    member.on_join_response(
        sent, E.NONE, member_id="m-1", generation_id=generation, protocol_name="range",
        leader_id="m-1",
    )  # fmt: skip
    member.on_sync_response(member.generation, E.NONE)
    assert member.state is MemberState.STABLE
    return member


def step(
    member: GroupMembership, now: float = 1000, **overrides: object
) -> tuple[GroupStep, float]:
    args: dict[str, object] = {
        "failed": False,
        "subscribed": True,
        "waiting_for_poll": False,
        "subscription_changed": False,
        "awaiting_committed": False,
        "coordinator_known": True,
        "find_backoff_until_ms": 0.0,
        "join_backoff_until_ms": 0.0,
    }
    args.update(overrides)
    decision = next_group_step(member, now, **args)  # type: ignore[arg-type]
    return decision.step, decision.wait_ms


# ---------------------------------------------------------------- the group task


def test_an_unjoined_subscribed_member_finds_its_coordinator_then_joins() -> None:
    member = GroupMembership("g")
    assert step(member, coordinator_known=False) == (GroupStep.FIND_COORDINATOR, 0)
    assert step(member) == (GroupStep.JOIN, 0)


def test_backoffs_are_waited_out_with_the_time_left() -> None:
    member = GroupMembership("g")
    assert step(member, 1000, coordinator_known=False, find_backoff_until_ms=1100) == (
        GroupStep.WAIT,
        100,
    )
    assert step(member, 1000, join_backoff_until_ms=1250) == (GroupStep.WAIT, 250)


def test_a_failed_closed_or_poll_timed_out_member_does_nothing_until_woken() -> None:
    member = GroupMembership("g")
    assert step(member, failed=True)[0] is GroupStep.IDLE
    assert step(member, waiting_for_poll=True)[0] is GroupStep.IDLE
    member.close()
    assert step(member)[0] is GroupStep.IDLE


def test_a_stable_member_rejoins_when_its_subscription_changed_since_the_join() -> None:
    member = stable(GroupMembership("g"))
    assert step(member)[0] is GroupStep.IDLE
    assert step(member, subscription_changed=True)[0] is GroupStep.JOIN
    assert member.rejoin_reason == "the subscription changed since the last join"


def test_committed_offsets_are_fetched_for_assigned_partitions_outside_a_group() -> None:
    member = GroupMembership("g")
    assert step(member, subscribed=False)[0] is GroupStep.IDLE
    assert step(member, subscribed=False, awaiting_committed=True)[0] is GroupStep.FETCH_COMMITTED
    assert step(member, subscribed=False, awaiting_committed=True, coordinator_known=False)[0] is (
        GroupStep.FIND_COORDINATOR
    )


# ---------------------------------------------------------------- the heartbeat task


def timers(now: float = 0) -> HeartbeatTimers:
    return HeartbeatTimers(
        session_timeout_ms=10_000,
        heartbeat_interval_ms=3_000,
        max_poll_interval_ms=60_000,
        retry_backoff_ms=100,
        now=now,
    )


def test_no_heartbeat_outside_syncing_and_stable() -> None:
    assert next_heartbeat(GroupMembership("g"), timers(), 5_000).step is HeartbeatStep.IDLE


def test_a_heartbeat_waits_for_its_interval_then_goes_out() -> None:
    member, clock = stable(GroupMembership("g")), timers()
    decision = next_heartbeat(member, clock, 1_000)
    assert (decision.step, decision.wait_ms) == (HeartbeatStep.WAIT, 2_000)
    assert next_heartbeat(member, clock, 3_000).step is HeartbeatStep.SEND


def test_the_session_runs_out_before_the_poll_interval_is_looked_at() -> None:
    member, clock = stable(GroupMembership("g")), timers()
    assert next_heartbeat(member, clock, 10_000).step is HeartbeatStep.SESSION_EXPIRED
    clock.received(55_000)
    assert next_heartbeat(member, clock, 60_000).step is HeartbeatStep.POLL_EXPIRED


def test_the_poll_interval_only_makes_a_stable_member_leave() -> None:
    member, clock = GroupMembership("g"), timers()
    sent = member.join_sent()
    member.on_join_response(sent, E.NONE, member_id="m", generation_id=1, leader_id="x")
    assert member.state is MemberState.SYNCING
    clock.received(59_000)
    assert next_heartbeat(member, clock, 60_000).step is HeartbeatStep.SEND


@pytest.mark.parametrize(
    ("reaction", "alive"),
    [
        (Reaction.PROCEED, True),
        (Reaction.REJOIN, True),
        (Reaction.IGNORE, True),
        (Reaction.FIND_COORDINATOR, False),
        (Reaction.BACKOFF, False),
        (Reaction.FENCED, False),
    ],
)
def test_an_answer_keeps_the_session_alive_unless_it_says_to_look_elsewhere(
    reaction: Reaction, alive: bool
) -> None:
    clock = timers()
    clock.answered(reaction, 5_000)
    assert clock.session_deadline_ms == (15_000 if alive else 10_000)
    assert clock.next_heartbeat_ms == (3_000 if alive else 5_100)


# ---------------------------------------------------------------- commits


def test_a_commit_carries_the_generation_only_when_stable() -> None:
    member = GroupMembership("g")
    assert member.commit_refusal() is E.ILLEGAL_GENERATION
    member.join_sent()
    assert member.commit_refusal() is E.REBALANCE_IN_PROGRESS
    assert stable(GroupMembership("g")).commit_refusal() is None


def test_a_stable_member_that_lost_its_generation_cannot_commit() -> None:
    member = stable(GroupMembership("g"))
    member.on_heartbeat_response(member.generation, E.ILLEGAL_GENERATION)
    assert member.state is MemberState.UNJOINED
    assert member.commit_refusal() is E.ILLEGAL_GENERATION


# ---------------------------------------------------------------- requests by version


def test_join_group_carries_the_instance_id_from_v5_and_the_reason_from_v8() -> None:
    args = ("g", "m", "i", 10_000, 60_000, [("range", b"x"), ("roundrobin", b"y")], "r" * 300)
    old, new = join_group_request(4, *args), join_group_request(8, *args)
    assert old.group_instance_id is None and old.reason is None
    assert new.group_instance_id == "i" and new.reason == "r" * 255
    assert [p.name for p in new.protocols] == ["range", "roundrobin"]
    assert new.protocol_type == PROTOCOL_TYPE
    assert not static_join_supported(4) and static_join_supported(5)


def test_sync_group_carries_protocol_type_and_name_from_v5() -> None:
    old = sync_group_request(4, "g", 3, "m", "i", "range", {"m": b"a"})
    new = sync_group_request(5, "g", 3, "m", "i", "range", {"m": b"a"})
    assert old.group_instance_id == "i" and old.protocol_name is None
    assert (new.protocol_type, new.protocol_name) == (PROTOCOL_TYPE, "range")
    assert [(a.member_id, a.assignment) for a in new.assignments] == [("m", b"a")]
    assert sync_group_request(2, "g", 3, "m", "i", "range", {}).group_instance_id is None


def test_heartbeat_and_leave_group_by_version() -> None:
    assert heartbeat_request(2, "g", 1, "m", "i").group_instance_id is None
    assert heartbeat_request(3, "g", 1, "m", "i").group_instance_id == "i"
    assert leave_group_request(2, "g", "m", "bye").member_id == "m"
    (member,) = leave_group_request(3, "g", "m", "bye").members
    assert (member.member_id, member.reason) == ("m", None)
    (member,) = leave_group_request(5, "g", "m", "x" * 300).members
    assert member.reason == "x" * 255
