"""A classic consumer group: its members, generation and state, and the one table of transitions.

How it works. Kafka's classic group protocol moves a group through five states:

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup stored--> Stable
    Stable / CompletingRebalance --join, leave, expiry--> PreparingRebalance
    PreparingRebalance --nobody left--> Empty;   any state --deleted / unloaded--> Dead

`VALID_PREVIOUS_STATES` is that picture as data (Kafka's `ClassicGroupState` lists, for each
state, the states it may be entered from); `ClassicGroup.transition_to` is the only way a state
changes and refuses anything else with an error naming the group and both states. Everything in
this module is plain data: the coordinator shard (`shard.py`) decides, this module records.

A member is known by the member id the coordinator gave it (KIP-394: a client joining without one
is handed an id and asked to join again with it), and optionally by a static `group.instance.id`
(KIP-345) that survives restarts: a static member rejoining with a new member id takes over the
old one's place, and the old id is fenced (FENCED_INSTANCE_ID).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(_S),
}


class IllegalGroupTransitionError(Exception):
    def __init__(self, group_id: str, current: GroupState, target: GroupState) -> None:
        super().__init__(
            f"group {group_id!r} cannot move from {current.value} to {target.value} "
            f"(it may be entered only from "
            f"{', '.join(sorted(s.value for s in VALID_PREVIOUS_STATES[target]))})"
        )


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (assignor name, subscription metadata), preferred first
    assignment: bytes = b""
    # The request each member is waiting on, answered when the phase completes.
    awaiting_join: object | None = None
    awaiting_sync: object | None = None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def supports(self, protocol: str) -> bool:
        return any(name == protocol for name, _ in self.protocols)

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int  # -1 when unknown
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only from v1 commits that carried a retention


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # ids handed out, not joined yet
    state_timestamp_ms: int | None = None
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    # In PreparingRebalance: when the join phase ends at the latest (the rebalance timeout, or
    # the initial delay's for a group that was empty).
    join_deadline_ms: int | None = None
    initial_join_deadline_limit_ms: int | None = None
    last_member_joined_ms: int | None = None  # the latest join during the initial delay

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalGroupTransitionError(self.group_id, self.state, target)
        self.state = target
        self.state_timestamp_ms = now_ms

    def in_state(self, *states: GroupState) -> bool:
        return self.state in states

    # -- members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def add_member(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove_member(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member rejoined with a new member id: it takes the old one's place."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def all_members_joined(self) -> bool:
        """Every known member has a JoinGroup waiting and no handed-out id is still pending."""
        return not self.pending_members and all(
            m.awaiting_join is not None for m in self.members.values()
        )

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """A joining member must share the group's protocol type and at least one assignor with
        every current member (Kafka's supportsProtocols)."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & names)

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for its most preferred candidate; most votes wins,
        ties going to the candidate first in the first member's preference order."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name, _ in member.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(self.members.values()))
        order = [name for name, _ in first.protocols if name in candidates]
        return max(order, key=lambda name: (votes.get(name, 0), -order.index(name)))

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to, for the consumer protocol; None if unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics |= consumer_subscription_topics(member.metadata_for(self.protocol_name))
            except (KeyError, ValueError):
                return None
        return topics


def consumer_subscription_topics(metadata: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription (int16 version, then an array of strings)."""
    if len(metadata) < 6:
        raise ValueError("subscription metadata too short")
    count = int.from_bytes(metadata[2:6], "big", signed=True)
    pos, topics = 6, set()
    for _ in range(max(count, 0)):
        if pos + 2 > len(metadata):
            raise ValueError("subscription metadata truncated")
        length = int.from_bytes(metadata[pos : pos + 2], "big", signed=True)
        pos += 2
        if length < 0 or pos + length > len(metadata):
            raise ValueError("subscription topic truncated")
        topics.add(metadata[pos : pos + length].decode("utf-8"))
        pos += length
    return topics
