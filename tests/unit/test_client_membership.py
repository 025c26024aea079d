"""The group membership state machine and its timers, driven by event sequences without I/O:
what each coordinator answer does to the state, the member id and the generation (Java's
AbstractCoordinator), and the errors a forbidden event raises."""

from __future__ import annotations

import pytest

from epochlog.client.membership import (
    TRANSITIONS,
    GroupMembership,
    HeartbeatTimers,
    InvalidMemberTransition,
    MemberEvent,
    MemberState,
    Reaction,
)
from epochlog.protocol.errors import ErrorCode as E

S = MemberState


def joined(member: GroupMembership, generation: int = 1, leader: str = "m-1") -> None:
    """Drive a member through a successful join and sync."""
    sent = member.join_sent()
    outcome = member.on_join_response(
        sent, E.NONE, member_id="m-1", generation_id=generation, protocol_name="range",
        leader_id=leader,
    )  # fmt: skip
    assert outcome.reaction is Reaction.PROCEED
    assert member.on_sync_response(member.generation, E.NONE).reaction is Reaction.PROCEED


def test_a_join_goes_unjoined_joining_syncing_stable() -> None:
    member = GroupMembership("g")
    assert member.state is S.UNJOINED and member.needs_join()
    sent = member.join_sent()
    assert member.state is S.JOINING and not member.heartbeats()
    member.on_join_response(
        sent, E.NONE, member_id="m-1", generation_id=4, protocol_name="range", leader_id="m-1"
    )
    assert member.state is S.SYNCING and member.is_leader and member.heartbeats()
    member.on_sync_response(member.generation, E.NONE)
    assert member.state is S.STABLE and not member.needs_join()
    assert (member.member_id, member.generation_id) == ("m-1", 4)


def test_member_id_required_adopts_the_given_id_and_rejoins_at_once() -> None:
    member = GroupMembership("g")
    sent = member.join_sent()
    outcome = member.on_join_response(sent, E.MEMBER_ID_REQUIRED, member_id="given")
    assert outcome.reaction is Reaction.REJOIN
    assert member.state is S.UNJOINED and member.member_id == "given"
    assert member.join_sent().member_id == "given"  # KIP-394: the second join carries it


@pytest.mark.parametrize(
    ("error", "reaction", "member_id", "generation"),
    [
        (E.UNKNOWN_MEMBER_ID, Reaction.REJOIN, "", -1),
        (E.ILLEGAL_GENERATION, Reaction.REJOIN, "m-1", -1),  # the id may still be good
        (E.REBALANCE_IN_PROGRESS, Reaction.REJOIN, "m-1", 1),
        (E.NOT_COORDINATOR, Reaction.FIND_COORDINATOR, "m-1", 1),
        (E.COORDINATOR_NOT_AVAILABLE, Reaction.FIND_COORDINATOR, "m-1", 1),
        (E.COORDINATOR_LOAD_IN_PROGRESS, Reaction.BACKOFF, "m-1", 1),
        (E.INCONSISTENT_GROUP_PROTOCOL, Reaction.FAIL, "m-1", 1),
    ],
)
def test_sync_errors_rejoin_and_reset_what_kafka_resets(error, reaction, member_id, generation):
    member = GroupMembership("g")
    sent = member.join_sent()
    member.on_join_response(sent, E.NONE, member_id="m-1", generation_id=1, leader_id="x")
    outcome = member.on_sync_response(member.generation, error)
    assert outcome.reaction is reaction and outcome.error is error
    assert member.state is S.UNJOINED and member.needs_join()
    assert (member.member_id, member.generation_id) == (member_id, generation)


def test_heartbeat_rebalance_in_progress_keeps_a_stable_member_stable_until_it_rejoins() -> None:
    member = GroupMembership("g")
    joined(member)
    outcome = member.on_heartbeat_response(member.generation, E.REBALANCE_IN_PROGRESS)
    assert outcome.reaction is Reaction.REJOIN
    assert member.state is S.STABLE and member.heartbeats() and member.needs_join()
    assert member.has_generation()  # its partitions are revoked, not lost
    member.join_sent()
    assert member.state is S.JOINING


def test_heartbeat_errors_about_an_older_generation_are_ignored() -> None:
    member = GroupMembership("g")
    joined(member, generation=1)
    old = member.generation
    member.request_rejoin("test")
    sent = member.join_sent()
    member.on_join_response(sent, E.NONE, member_id="m-1", generation_id=2, leader_id="x")
    outcome = member.on_heartbeat_response(old, E.ILLEGAL_GENERATION)
    assert outcome.reaction is Reaction.IGNORE
    assert member.state is S.SYNCING and member.generation_id == 2


def test_heartbeat_unknown_member_resets_and_the_partitions_are_then_lost() -> None:
    member = GroupMembership("g")
    joined(member)
    outcome = member.on_heartbeat_response(member.generation, E.UNKNOWN_MEMBER_ID)
    assert outcome.reaction is Reaction.REJOIN
    assert member.state is S.UNJOINED and not member.has_generation()


def test_a_fenced_static_member_is_done_and_the_error_names_group_event_and_state() -> None:
    member = GroupMembership("g", group_instance_id="i-1")
    joined(member)
    outcome = member.on_heartbeat_response(member.generation, E.FENCED_INSTANCE_ID)
    assert outcome.reaction is Reaction.FENCED and member.state is S.FENCED
    assert not member.needs_join()
    with pytest.raises(InvalidMemberTransition) as info:
        member.join_sent()
    assert str(info.value) == "group 'g': event join sent is not valid in state fenced"
    member.close()
    assert member.state is S.CLOSED


def test_a_join_fenced_in_join_group_is_fatal_too() -> None:
    member = GroupMembership("g", group_instance_id="i-1")
    sent = member.join_sent()
    assert member.on_join_response(sent, E.FENCED_INSTANCE_ID).reaction is Reaction.FENCED
    assert member.state is S.FENCED


def test_a_sync_answer_after_a_heartbeat_reset_means_rejoin() -> None:
    member = GroupMembership("g")
    sent = member.join_sent()
    member.on_join_response(sent, E.NONE, member_id="m-1", generation_id=1, leader_id="x")
    sync_sent = member.generation
    member.on_heartbeat_response(sync_sent, E.UNKNOWN_MEMBER_ID)  # reset meanwhile
    assert member.on_sync_response(sync_sent, E.NONE).reaction is Reaction.REJOIN
    assert member.state is S.UNJOINED


def test_leaving_forgets_the_member_and_only_dynamic_members_send_leave_group() -> None:
    dynamic, static = GroupMembership("g"), GroupMembership("g", group_instance_id="i")
    for member in (dynamic, static):
        joined(member)
    assert dynamic.should_leave() and not static.should_leave()
    dynamic.left("poll interval exceeded")
    assert dynamic.state is S.UNJOINED and dynamic.member_id == "" and dynamic.needs_join()
    assert not dynamic.should_leave()


def test_unknown_events_are_refused_by_the_table() -> None:
    member = GroupMembership("g")
    with pytest.raises(InvalidMemberTransition):
        member._fire(MemberEvent.SYNCED)
    for state, events in TRANSITIONS.items():
        if state is not S.CLOSED:
            assert events[MemberEvent.CLOSE] is S.CLOSED  # every live state can close


def test_commit_errors_reset_like_heartbeats() -> None:
    member = GroupMembership("g")
    joined(member)
    assert member.on_commit_error(member.generation, E.ILLEGAL_GENERATION).reaction is (
        Reaction.REJOIN
    )
    assert member.state is S.UNJOINED and member.member_id == "m-1"


def test_heartbeat_timers_follow_kafkas_heartbeat() -> None:
    timers = HeartbeatTimers(
        session_timeout_ms=10_000,
        heartbeat_interval_ms=3_000,
        max_poll_interval_ms=60_000,
        retry_backoff_ms=100,
        now=0,
    )
    assert not timers.should_heartbeat(2_999) and timers.should_heartbeat(3_000)
    timers.sent(3_000)
    assert timers.time_to_next_heartbeat(3_500) == 2_500
    timers.failed(3_600)
    assert timers.should_heartbeat(3_700)  # a failed heartbeat is retried after the backoff
    assert timers.session_expired(10_000)
    timers.received(9_000)
    assert not timers.session_expired(18_999) and timers.session_expired(19_000)
    assert timers.poll_expired(60_000)
    timers.polled(59_000)
    assert not timers.poll_expired(60_000)
    timers.reset_timeouts(100_000)
    assert not timers.poll_expired(159_999) and not timers.session_expired(109_999)
