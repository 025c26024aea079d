"""A consumer's membership in a classic group: the state machine and its timers, sans-I/O.

Theory of operation. Everything that decides what a group member does next lives in this file,
and nothing here sends a request or reads a clock: the I/O shell (`consumer_coordinator`) tells
`GroupMembership` what it sent and what came back, and gets back an `Outcome` saying what to do
next; `HeartbeatTimers` is told when things happened (`now` in milliseconds) and answers when
the next heartbeat is due and whether the session or the poll interval has run out. Kafka's Java
`AbstractCoordinator` and `Heartbeat` are the model, and librdkafka's cgrp agrees with them.

A member is in one of six states:

    UNJOINED  not a member of any generation; the next step is a JoinGroup
    JOINING   a JoinGroup is in flight (the coordinator holds it until the rebalance completes)
    SYNCING   joined a generation; a SyncGroup is in flight (the leader's carries the assignment)
    STABLE    has its assignment; heartbeats every heartbeat.interval.ms
    FENCED    another consumer took this member's group.instance.id (KIP-345): fatal
    CLOSED    closed

Events move a member along the table `TRANSITIONS`; an event the table does not list for the
current state raises `InvalidMemberTransition`, naming the group, the event and the state.
A STABLE member that must rejoin (REBALANCE_IN_PROGRESS in a heartbeat, a changed
subscription, partitions to hand over under the cooperative protocol) stays STABLE, and keeps
heartbeating, until its next JoinGroup goes out (`rejoin_needed`).

Every error a coordinator can answer maps to an `Outcome` by the tables `JOIN_OUTCOMES`,
`SYNC_OUTCOMES` and `HEARTBEAT_OUTCOMES`: proceed; rejoin at once (REBALANCE_IN_PROGRESS,
UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, MEMBER_ID_REQUIRED); rejoin after retry.backoff.ms
(COORDINATOR_LOAD_IN_PROGRESS); find the coordinator again (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, and any connection failure); fail (tell the application, then retry
after the backoff: INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, GROUP_MAX_SIZE_REACHED,
...); or fenced (FENCED_INSTANCE_ID, permanent). With an outcome comes what it resets:
UNKNOWN_MEMBER_ID forgets the member id and the generation (the partitions owned are then
*lost*, not revoked); ILLEGAL_GENERATION forgets only the generation (the member id may still be
valid, so the coordinator does not wait for the old one to time out); MEMBER_ID_REQUIRED
(KIP-394) adopts the id the coordinator handed out. As in Java, a reset applies only if the
member is still in the generation the request was sent in; an answer about an older generation
is ignored.

What the I/O shell's two tasks do next is decided here too: `next_group_step` (wait, find the
coordinator, join, fetch committed offsets) and `next_heartbeat` (wait, send, give the
coordinator up when the session ran out, leave when the poll interval did); `commit_refusal`
says why an OffsetCommit cannot carry the member's generation now.

Leaving: a dynamic member sends LeaveGroup on close and when it did not poll within
max.poll.interval.ms (it then rejoins at its next poll, with a new member id). A static member
(group.instance.id) never sends LeaveGroup: it is removed only when its session times out, so a
restart within session.timeout.ms keeps its partitions without a rebalance.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from epochlog.protocol.errors import ErrorCode

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    JOINING = "joining"
    SYNCING = "syncing"
    STABLE = "stable"
    FENCED = "fenced"
    CLOSED = "closed"


class MemberEvent(enum.Enum):
    JOIN_SENT = "join sent"  # a JoinGroup goes out
    JOINED = "joined"  # JoinGroup answered: member of a generation
    JOIN_FAILED = "join failed"  # JoinGroup answered with an error, or not answered
    SYNCED = "synced"  # SyncGroup answered with the assignment
    SYNC_FAILED = "sync failed"  # SyncGroup answered with an error, or not answered
    RESET = "reset"  # a heartbeat or commit said the generation or member id is gone
    LEFT = "left"  # LeaveGroup sent (or poll interval exceeded): out of the group
    FENCE = "fence"  # FENCED_INSTANCE_ID
    CLOSE = "close"


_S, _E = MemberState, MemberEvent
_LEAVING = {_E.RESET: _S.UNJOINED, _E.LEFT: _S.UNJOINED, _E.FENCE: _S.FENCED, _E.CLOSE: _S.CLOSED}
TRANSITIONS: dict[MemberState, dict[MemberEvent, MemberState]] = {
    _S.UNJOINED: {_E.JOIN_SENT: _S.JOINING, **_LEAVING},
    _S.JOINING: {_E.JOINED: _S.SYNCING, _E.JOIN_FAILED: _S.UNJOINED, **_LEAVING},
    _S.SYNCING: {_E.SYNCED: _S.STABLE, _E.SYNC_FAILED: _S.UNJOINED, **_LEAVING},
    _S.STABLE: {_E.JOIN_SENT: _S.JOINING, **_LEAVING},
    _S.FENCED: {_E.CLOSE: _S.CLOSED},
    _S.CLOSED: {},
}


class InvalidMemberTransition(Exception):
    def __init__(self, group_id: str, event: MemberEvent, state: MemberState) -> None:
        self.group_id, self.event, self.state = group_id, event, state
        super().__init__(
            f"group {group_id!r}: event {event.value} is not valid in state {state.value}"
        )


class Reaction(enum.Enum):
    PROCEED = "proceed"  # success: sync after a join, take the assignment after a sync
    REJOIN = "rejoin"  # send JoinGroup again at once
    BACKOFF = "backoff"  # send JoinGroup again after retry.backoff.ms
    FIND_COORDINATOR = "find coordinator"  # the coordinator moved or is gone
    FAIL = "fail"  # tell the application (its next poll raises), retry after the backoff
    FENCED = "fenced"  # fatal: another instance has our group.instance.id
    IGNORE = "ignore"  # an answer about an older generation, or harmless


class Reset(enum.Enum):
    NOTHING = "nothing"
    GENERATION = "generation"  # keep the member id
    MEMBER = "member"  # forget member id and generation


@dataclass(frozen=True, slots=True)
class Outcome:
    reaction: Reaction
    reset: Reset = Reset.NOTHING
    error: ErrorCode = ErrorCode.NONE


_E_ = ErrorCode
_COORDINATOR_GONE = Outcome(Reaction.FIND_COORDINATOR)
_COMMON: dict[ErrorCode, Outcome] = {
    _E_.COORDINATOR_NOT_AVAILABLE: _COORDINATOR_GONE,
    _E_.NOT_COORDINATOR: _COORDINATOR_GONE,
    _E_.COORDINATOR_LOAD_IN_PROGRESS: Outcome(Reaction.BACKOFF),
    _E_.FENCED_INSTANCE_ID: Outcome(Reaction.FENCED),
    _E_.UNKNOWN_MEMBER_ID: Outcome(Reaction.REJOIN, Reset.MEMBER),
    _E_.ILLEGAL_GENERATION: Outcome(Reaction.REJOIN, Reset.GENERATION),
    _E_.REBALANCE_IN_PROGRESS: Outcome(Reaction.REJOIN),
    _E_.INCONSISTENT_GROUP_PROTOCOL: Outcome(Reaction.FAIL),
    _E_.INVALID_SESSION_TIMEOUT: Outcome(Reaction.FAIL),
    _E_.INVALID_GROUP_ID: Outcome(Reaction.FAIL),
    _E_.GROUP_AUTHORIZATION_FAILED: Outcome(Reaction.FAIL),
    _E_.GROUP_MAX_SIZE_REACHED: Outcome(Reaction.FAIL),
    _E_.UNSUPPORTED_VERSION: Outcome(Reaction.FAIL),
}
JOIN_OUTCOMES: dict[ErrorCode, Outcome] = {
    **_COMMON,
    _E_.NONE: Outcome(Reaction.PROCEED),
    _E_.MEMBER_ID_REQUIRED: Outcome(Reaction.REJOIN),  # with the id the coordinator gave
}
SYNC_OUTCOMES: dict[ErrorCode, Outcome] = {**_COMMON, _E_.NONE: Outcome(Reaction.PROCEED)}
HEARTBEAT_OUTCOMES: dict[ErrorCode, Outcome] = {**_COMMON, _E_.NONE: Outcome(Reaction.PROCEED)}
_UNEXPECTED = Outcome(Reaction.FAIL)


@dataclass(frozen=True, slots=True)
class Generation:
    """What a request was sent under, to recognise answers about an older generation."""

    generation_id: int
    member_id: str


class GroupMembership:
    """One consumer's membership; see the module docstring."""

    def __init__(self, group_id: str, group_instance_id: str | None = None) -> None:
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.state = MemberState.UNJOINED
        self.member_id = UNKNOWN_MEMBER_ID
        self.generation_id = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.rejoin_needed = True
        self.rejoin_reason = "joining for the first time"
        self.last_error: ErrorCode = ErrorCode.NONE

    # ---------------------------------------------------------------- queries

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader_id == self.member_id

    @property
    def generation(self) -> Generation:
        return Generation(self.generation_id, self.member_id)

    def has_generation(self) -> bool:
        """In a generation: its partitions can be revoked (and committed) rather than lost."""
        return self.generation_id != NO_GENERATION and self.member_id != UNKNOWN_MEMBER_ID

    def needs_join(self) -> bool:
        return self.state is MemberState.UNJOINED or (
            self.state is MemberState.STABLE and self.rejoin_needed
        )

    def heartbeats(self) -> bool:
        """Heartbeats are sent while SYNCING and STABLE (the coordinator holds a JoinGroup
        without them)."""
        return self.state in (MemberState.SYNCING, MemberState.STABLE)

    def commit_refusal(self) -> ErrorCode | None:
        """Why an OffsetCommit cannot go out under this member's generation now (None: it can):
        REBALANCE_IN_PROGRESS while a rebalance runs or the generation is not yet stable,
        ILLEGAL_GENERATION when there is no generation at all."""
        if self.state is MemberState.STABLE and self.has_generation():
            return None
        if self.state in (MemberState.JOINING, MemberState.SYNCING) or self.has_generation():
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.ILLEGAL_GENERATION

    def should_leave(self) -> bool:
        """LeaveGroup is sent by dynamic members that are in the group (Java's maybeLeaveGroup)."""
        return (
            not self.is_static
            and self.state in (MemberState.JOINING, MemberState.SYNCING, MemberState.STABLE)
            and self.member_id != UNKNOWN_MEMBER_ID
        )

    # ---------------------------------------------------------------- transitions

    def _fire(self, event: MemberEvent) -> None:
        target = TRANSITIONS[self.state].get(event)
        if target is None:
            raise InvalidMemberTransition(self.group_id, event, self.state)
        self.state = target

    def request_rejoin(self, reason: str) -> None:
        self.rejoin_needed = True
        self.rejoin_reason = reason

    def join_sent(self) -> Generation:
        """A JoinGroup goes out; returns what it was sent under."""
        self._fire(MemberEvent.JOIN_SENT)
        return self.generation

    def on_join_response(
        self,
        sent: Generation,
        error: ErrorCode,
        *,
        member_id: str = "",
        generation_id: int = NO_GENERATION,
        protocol_name: str | None = None,
        leader_id: str = "",
    ) -> Outcome:
        outcome = JOIN_OUTCOMES.get(error, _UNEXPECTED)
        outcome = Outcome(outcome.reaction, outcome.reset, error)
        if self.state is not MemberState.JOINING:
            return Outcome(Reaction.IGNORE, error=error)  # closed or fenced meanwhile
        if outcome.reaction is Reaction.PROCEED:
            self._fire(MemberEvent.JOINED)
            self.member_id, self.generation_id = member_id, generation_id
            self.protocol_name, self.leader_id = protocol_name, leader_id
            self.last_error = ErrorCode.NONE
            return outcome
        if error is ErrorCode.MEMBER_ID_REQUIRED:
            self._fire(MemberEvent.JOIN_FAILED)
            self.member_id, self.generation_id = member_id, NO_GENERATION
            self.request_rejoin(f"rejoin with the member id the coordinator gave: {member_id}")
            return outcome
        return self._failed(MemberEvent.JOIN_FAILED, sent, outcome)

    def on_sync_response(self, sent: Generation, error: ErrorCode) -> Outcome:
        outcome = SYNC_OUTCOMES.get(error, _UNEXPECTED)
        outcome = Outcome(outcome.reaction, outcome.reset, error)
        if self.state is not MemberState.SYNCING or self.generation != sent:
            # a heartbeat reset the generation while the SyncGroup was out: rejoin
            return Outcome(Reaction.REJOIN, error=error)
        if outcome.reaction is Reaction.PROCEED:
            self._fire(MemberEvent.SYNCED)
            self.rejoin_needed = False
            self.rejoin_reason = ""
            return outcome
        return self._failed(MemberEvent.SYNC_FAILED, sent, outcome)

    def on_heartbeat_response(self, sent: Generation, error: ErrorCode) -> Outcome:
        outcome = HEARTBEAT_OUTCOMES.get(error, _UNEXPECTED)
        outcome = Outcome(outcome.reaction, outcome.reset, error)
        if outcome.reaction is Reaction.PROCEED:
            return outcome
        if outcome.reaction is Reaction.FIND_COORDINATOR:
            return outcome
        if error is ErrorCode.REBALANCE_IN_PROGRESS:
            if self.state is MemberState.STABLE:
                self.request_rejoin("the group is rebalancing")
                return outcome
            return Outcome(Reaction.IGNORE, error=error)  # already rejoining
        if outcome.reset is not Reset.NOTHING or outcome.reaction is Reaction.FENCED:
            if sent != self.generation or not self.heartbeats():
                return Outcome(Reaction.IGNORE, error=error)
            return self._failed(MemberEvent.RESET, sent, outcome)
        return outcome

    def on_request_failed(self, sent: Generation) -> Outcome:
        """A JoinGroup or SyncGroup got no answer (connection lost, timed out)."""
        if self.state is MemberState.JOINING:
            self._fire(MemberEvent.JOIN_FAILED)
        elif self.state is MemberState.SYNCING and self.generation == sent:
            self._fire(MemberEvent.SYNC_FAILED)
        return _COORDINATOR_GONE

    def on_commit_error(self, sent: Generation, error: ErrorCode) -> Outcome:
        """An OffsetCommit answered with a group error: Java resets the same way a heartbeat
        would (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), and rejoins."""
        outcome = HEARTBEAT_OUTCOMES.get(error, _UNEXPECTED)
        outcome = Outcome(outcome.reaction, outcome.reset, error)
        if error is ErrorCode.REBALANCE_IN_PROGRESS and self.state is MemberState.STABLE:
            self.request_rejoin("the group is rebalancing")
            return outcome
        if outcome.reset is Reset.NOTHING and outcome.reaction is not Reaction.FENCED:
            return outcome
        if sent != self.generation or self.state in (MemberState.FENCED, MemberState.CLOSED):
            return Outcome(Reaction.IGNORE, error=error)
        return self._failed(MemberEvent.RESET, sent, outcome)

    def _failed(self, event: MemberEvent, sent: Generation, outcome: Outcome) -> Outcome:
        self.last_error = outcome.error
        if outcome.reaction is Reaction.FENCED:
            self._fire(MemberEvent.FENCE)
            return outcome
        self._fire(event)
        if sent == self.generation:
            if outcome.reset is Reset.MEMBER:
                self.member_id = UNKNOWN_MEMBER_ID
                self.generation_id = NO_GENERATION
            elif outcome.reset is Reset.GENERATION:
                self.generation_id = NO_GENERATION
        self.request_rejoin(f"{outcome.error.name} from the coordinator")
        return outcome

    def left(self, reason: str) -> None:
        """Out of the group (LeaveGroup sent, or max.poll.interval.ms exceeded): generation and
        member id are forgotten (Java's resetGenerationOnLeaveGroup); rejoining starts afresh."""
        if self.state in (MemberState.FENCED, MemberState.CLOSED):
            return
        self._fire(MemberEvent.LEFT)
        self.member_id = UNKNOWN_MEMBER_ID
        self.generation_id = NO_GENERATION
        self.protocol_name = None
        self.leader_id = ""
        self.request_rejoin(reason)

    def close(self) -> None:
        if self.state is not MemberState.CLOSED:
            self._fire(MemberEvent.CLOSE)


class HeartbeatTimers:
    """Kafka's Heartbeat: when the next heartbeat is due, and whether the session or the poll
    interval ran out. Times in milliseconds, given by the caller."""

    def __init__(
        self,
        session_timeout_ms: float,
        heartbeat_interval_ms: float,
        max_poll_interval_ms: float,
        retry_backoff_ms: float,
        now: float,
    ) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.next_heartbeat_ms = now + heartbeat_interval_ms
        self.session_deadline_ms = now + session_timeout_ms
        self.poll_deadline_ms = now + max_poll_interval_ms

    def reset_timeouts(self, now: float) -> None:
        """A join succeeded: every timer starts again."""
        self.next_heartbeat_ms = now + self.heartbeat_interval_ms
        self.session_deadline_ms = now + self.session_timeout_ms
        self.poll_deadline_ms = now + self.max_poll_interval_ms

    def sent(self, now: float) -> None:
        self.next_heartbeat_ms = now + self.heartbeat_interval_ms

    def received(self, now: float) -> None:
        self.session_deadline_ms = now + self.session_timeout_ms

    def failed(self, now: float) -> None:
        """The heartbeat failed (not a group error): try again after the backoff."""
        self.next_heartbeat_ms = now + self.retry_backoff_ms

    def polled(self, now: float) -> None:
        self.poll_deadline_ms = now + self.max_poll_interval_ms

    def answered(self, reaction: Reaction, now: float) -> None:
        """A heartbeat was answered: an answer the member acts on by proceeding, rejoining or
        ignoring it shows the session is alive; any other is tried again after the backoff."""
        if reaction in (Reaction.PROCEED, Reaction.REJOIN, Reaction.IGNORE):
            self.received(now)
        else:
            self.failed(now)

    def time_to_next_heartbeat(self, now: float) -> float:
        return max(0.0, self.next_heartbeat_ms - now)

    def should_heartbeat(self, now: float) -> bool:
        return now >= self.next_heartbeat_ms

    def session_expired(self, now: float) -> bool:
        return now >= self.session_deadline_ms

    def poll_expired(self, now: float) -> bool:
        return now >= self.poll_deadline_ms


# ------------------------------------------------------------------ what the two tasks do next


class HeartbeatStep(enum.Enum):
    IDLE = "idle"  # not SYNCING or STABLE: no heartbeat until woken
    SESSION_EXPIRED = "session expired"  # none got through in session.timeout.ms: coordinator lost
    POLL_EXPIRED = "poll expired"  # no poll() in max.poll.interval.ms: leave the group
    WAIT = "wait"  # the next heartbeat (or deadline) is wait_ms away
    SEND = "send"


@dataclass(frozen=True, slots=True)
class HeartbeatDecision:
    step: HeartbeatStep
    wait_ms: float = 0.0


def next_heartbeat(
    member: GroupMembership, timers: HeartbeatTimers, now: float
) -> HeartbeatDecision:
    """What the heartbeat task does now, for a member whose coordinator is known."""
    if not member.heartbeats():
        return HeartbeatDecision(HeartbeatStep.IDLE)
    if timers.session_expired(now):
        return HeartbeatDecision(HeartbeatStep.SESSION_EXPIRED)
    if timers.poll_expired(now) and member.state is MemberState.STABLE:
        return HeartbeatDecision(HeartbeatStep.POLL_EXPIRED)
    if not timers.should_heartbeat(now):
        wait_ms = min(
            timers.time_to_next_heartbeat(now),
            timers.poll_deadline_ms - now,
            timers.session_deadline_ms - now,
        )
        return HeartbeatDecision(HeartbeatStep.WAIT, wait_ms)
    return HeartbeatDecision(HeartbeatStep.SEND)


class GroupStep(enum.Enum):
    IDLE = "idle"  # nothing to do until woken
    WAIT = "wait"  # a backoff runs: look again in wait_ms
    FIND_COORDINATOR = "find coordinator"
    JOIN = "join"  # JoinGroup and SyncGroup (after the revocations, once per rebalance)
    FETCH_COMMITTED = "fetch committed"  # OffsetFetch for partitions waiting for their start


@dataclass(frozen=True, slots=True)
class GroupStepDecision:
    step: GroupStep
    wait_ms: float = 0.0


def next_group_step(
    member: GroupMembership,
    now: float,
    *,
    failed: bool,
    subscribed: bool,
    waiting_for_poll: bool,
    subscription_changed: bool,
    awaiting_committed: bool,
    coordinator_known: bool,
    find_backoff_until_ms: float,
    join_backoff_until_ms: float,
) -> GroupStepDecision:
    """What the group task does now. `failed`: a fatal error waits for the application;
    `waiting_for_poll`: the member left on max.poll.interval.ms and rejoins at the next poll;
    `subscription_changed`: the topics differ from those of the last JoinGroup, which a STABLE
    member rejoins for (asked every time, as Java's rejoinNeededOrPending, so a change that
    arrived while a rebalance was completing is not forgotten)."""
    if failed or member.state is MemberState.CLOSED:
        return GroupStepDecision(GroupStep.IDLE)
    if subscribed and waiting_for_poll:
        return GroupStepDecision(GroupStep.IDLE)
    if member.state is MemberState.STABLE and subscription_changed:
        member.request_rejoin("the subscription changed since the last join")
    joining = subscribed and member.needs_join()
    if not joining and not awaiting_committed:
        return GroupStepDecision(GroupStep.IDLE)
    if not coordinator_known:
        if now < find_backoff_until_ms:
            return GroupStepDecision(GroupStep.WAIT, find_backoff_until_ms - now)
        return GroupStepDecision(GroupStep.FIND_COORDINATOR)
    if joining:
        if now < join_backoff_until_ms:
            return GroupStepDecision(GroupStep.WAIT, join_backoff_until_ms - now)
        return GroupStepDecision(GroupStep.JOIN)
    return GroupStepDecision(GroupStep.FETCH_COMMITTED)
