"""Partition assignors the group leader runs: range, roundrobin, cooperative-sticky. Pure functions.

Each assignor takes the partition count of every topic some member subscribes to and each
member's `MemberSubscription`, and returns each member's partitions, sorted. They are Kafka's, so
that an epochlog leader and a Java or librdkafka leader hand out the same kind of assignment:

- `range` (Kafka's RangeAssignor): per topic, the members subscribed to it in order (static
  members first by group.instance.id, then the others by member id) each get a contiguous range;
  the first `partitions % members` get one more. Eager only.
- `roundrobin` (RoundRobinAssignor): all partitions, sorted by topic and partition, dealt in turn
  to the members in member-id order, skipping members not subscribed to the topic. Eager only.
- `cooperative-sticky` (CooperativeStickyAssignor, KIP-429): a member keeps the partitions it
  owns, as far as balance allows; the rest go to the least loaded subscribed member; then
  partitions move from the most to the least loaded member until no two members that could share
  a partition differ by more than one. With equal subscriptions that is exact balance, and a
  second rebalance moves nothing the first one kept; with unequal ones it is a heuristic that may
  move a kept partition again (through the same revoke-first hand-over). Ownership claims are
  checked as Kafka checks them: a partition of a topic the member no longer subscribes to, or
  that no longer exists, is not owned; two members claiming it in the same generation both lose
  it; in different generations the higher generation keeps it. Finally, because a partition may
  not change hands within one rebalance under the cooperative protocol, a partition given to a
  member that does not list it while another member does is left out of the new owner's
  assignment: the owner sees it missing, revokes it and rejoins, and the second rebalance hands
  it over (Java's computePartitionsTransferringOwnership).

`rebalance_protocol(names)` is the protocol a consumer configured with those assignors follows:
COOPERATIVE only if every one of them supports it (Java's ConsumerCoordinator rule), else EAGER.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from epochlog.client.metadata import TopicPartition

NO_GENERATION = -1


class RebalanceProtocol(enum.Enum):
    EAGER = "eager"  # revoke everything before joining
    COOPERATIVE = "cooperative"  # keep what stays; revoke only what moves (KIP-429)


@dataclass(frozen=True)
class MemberSubscription:
    """One member as the leader sees it in the JoinGroup response."""

    member_id: str
    topics: frozenset[str]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = NO_GENERATION
    group_instance_id: str | None = None
    rack_id: str | None = None


Assignor = Callable[
    [Mapping[str, int], Mapping[str, MemberSubscription]], dict[str, list[TopicPartition]]
]


def _member_order(member: MemberSubscription) -> tuple[int, str]:
    """Kafka's MemberInfo order: static members first by instance id, then by member id."""
    if member.group_instance_id is not None:
        return (0, member.group_instance_id)
    return (1, member.member_id)


def _empty(members: Mapping[str, MemberSubscription]) -> dict[str, list[TopicPartition]]:
    return {member_id: [] for member_id in members}


def range_assign(
    partitions_per_topic: Mapping[str, int], members: Mapping[str, MemberSubscription]
) -> dict[str, list[TopicPartition]]:
    """Kafka's RangeAssignor (without its rack-aware variant)."""
    result = _empty(members)
    for topic in sorted(partitions_per_topic):
        count = partitions_per_topic[topic]
        subscribed = sorted((m for m in members.values() if topic in m.topics), key=_member_order)
        if not subscribed or count <= 0:
            continue
        quota, extra = divmod(count, len(subscribed))
        start = 0
        for i, member in enumerate(subscribed):
            length = quota + (1 if i < extra else 0)
            result[member.member_id].extend(
                TopicPartition(topic, p) for p in range(start, start + length)
            )
            start += length
    return {m: sorted(tps) for m, tps in result.items()}


def roundrobin_assign(
    partitions_per_topic: Mapping[str, int], members: Mapping[str, MemberSubscription]
) -> dict[str, list[TopicPartition]]:
    """Kafka's RoundRobinAssignor."""
    result = _empty(members)
    order = sorted(members.values(), key=_member_order)
    if not order:
        return result
    turn = 0
    for topic in sorted(partitions_per_topic):
        for p in range(partitions_per_topic[topic]):
            for _ in range(len(order)):
                member = order[turn % len(order)]
                turn += 1
                if topic in member.topics:
                    result[member.member_id].append(TopicPartition(topic, p))
                    break
    return result


def valid_owned_partitions(
    partitions_per_topic: Mapping[str, int], members: Mapping[str, MemberSubscription]
) -> dict[str, set[TopicPartition]]:
    """Each member's ownership claims that stand (Kafka's AbstractStickyAssignor rules)."""
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    owner_of: dict[TopicPartition, str] = {}
    contested: set[TopicPartition] = set()
    for member in sorted(members.values(), key=lambda m: m.member_id):
        for tp in member.owned_partitions:
            exists = 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0)
            if not exists or tp.topic not in member.topics or tp in contested:
                continue
            other = owner_of.get(tp)
            if other is None:
                owner_of[tp] = member.member_id
                owned[member.member_id].add(tp)
                continue
            other_generation = members[other].generation_id
            if member.generation_id == other_generation:
                contested.add(tp)  # nobody can be trusted with it
                owned[other].discard(tp)
                del owner_of[tp]
            elif member.generation_id > other_generation:
                owned[other].discard(tp)
                owner_of[tp] = member.member_id
                owned[member.member_id].add(tp)
    return owned


def cooperative_sticky_assign(
    partitions_per_topic: Mapping[str, int], members: Mapping[str, MemberSubscription]
) -> dict[str, list[TopicPartition]]:
    """Kafka's CooperativeStickyAssignor: sticky and balanced, and never handing a partition from
    one member to another within one rebalance (see the module docstring)."""
    owned = valid_owned_partitions(partitions_per_topic, members)
    target = sticky_balanced_assign(partitions_per_topic, members, owned)
    # Java's computePartitionsTransferringOwnership: a partition given to a member that does not
    # list it, while another member lists it as owned (valid claim or not), is held back; that
    # owner revokes it first.
    listed_by: dict[TopicPartition, set[str]] = {}
    for m in members.values():
        for tp in m.owned_partitions:
            listed_by.setdefault(tp, set()).add(m.member_id)
    return {
        member_id: sorted(tp for tp in tps if member_id in listed_by.get(tp, {member_id}))
        for member_id, tps in target.items()
    }


def sticky_balanced_assign(
    partitions_per_topic: Mapping[str, int],
    members: Mapping[str, MemberSubscription],
    owned: Mapping[str, set[TopicPartition]],
) -> dict[str, set[TopicPartition]]:
    """The balanced assignment that moves the fewest owned partitions (before the cooperative
    hold-back): keep, fill the least loaded, then even out."""
    if not members:
        return {}
    order = sorted(members.values(), key=_member_order)
    rank = {m.member_id: i for i, m in enumerate(order)}
    eligible: dict[str, list[str]] = {
        topic: [m.member_id for m in order if topic in m.topics] for topic in partitions_per_topic
    }
    everything = [
        TopicPartition(t, p)
        for t in sorted(partitions_per_topic)
        for p in range(partitions_per_topic[t])
    ]
    result: dict[str, set[TopicPartition]] = {m: set(owned.get(m, ())) for m in members}
    if _all_subscriptions_equal(order):
        # The common case, done as Kafka's constrainedAssign does it: every member ends with
        # `low` or `low + 1` partitions, and an owner keeps as many of its own as that allows.
        total = sum(partitions_per_topic[t] for t in order[0].topics if t in partitions_per_topic)
        low, extra = divmod(total, len(order))
        # Keep at most `low` owned each, plus one more for at most `extra` members, preferring
        # members that already own more (fewer moves).
        by_owned = sorted(order, key=lambda m: (-len(result[m.member_id]), rank[m.member_id]))
        for m in by_owned:
            quota = low + (1 if extra > 0 and len(result[m.member_id]) > low else 0)
            if quota > low:
                extra -= 1
            keep = sorted(result[m.member_id])[:quota]
            result[m.member_id] = set(keep)
    assigned = {tp for tps in result.values() for tp in tps}

    # Ties go to the member with fewer partitions it could take (Java sorts by that too): a
    # member with other options should not take what only another member can have.
    potential = {m.member_id: sum(partitions_per_topic.get(t, 0) for t in m.topics) for m in order}

    def load(member_id: str) -> tuple[int, int, int]:
        return (len(result[member_id]), potential[member_id], rank[member_id])

    for tp in everything:
        if tp in assigned:
            continue
        candidates = eligible.get(tp.topic, [])
        if candidates:
            chosen = min(candidates, key=load)
            result[chosen].add(tp)
            assigned.add(tp)
    # Even out: move from the most to the least loaded member able to take the partition.
    while True:
        moved = False
        for giver in sorted(result, key=lambda m: (-len(result[m]), rank[m])):
            # partitions the giver did not own move first: keep the owned ones where they are
            kept = owned.get(giver, set())
            for tp in sorted(result[giver], key=lambda tp: (tp in kept, tp)):
                takers = [m for m in eligible[tp.topic] if len(result[m]) + 1 < len(result[giver])]
                if takers:
                    taker = min(takers, key=load)
                    result[giver].discard(tp)
                    result[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return result


def _all_subscriptions_equal(order: list[MemberSubscription]) -> bool:
    return all(m.topics == order[0].topics for m in order)


@dataclass(frozen=True)
class AssignorInfo:
    name: str
    assign: Assignor
    protocols: tuple[RebalanceProtocol, ...] = field(default=(RebalanceProtocol.EAGER,))


ASSIGNORS: dict[str, AssignorInfo] = {
    info.name: info
    for info in (
        AssignorInfo("range", range_assign),
        AssignorInfo("roundrobin", roundrobin_assign),
        AssignorInfo(
            "cooperative-sticky",
            cooperative_sticky_assign,
            (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER),
        ),
    )
}

# Kafka's class names for the same assignors, accepted in partition.assignment.strategy.
JAVA_CLASS_NAMES: dict[str, str] = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def rebalance_protocol(names: Iterable[str]) -> RebalanceProtocol:
    """The protocol every configured assignor supports, preferring COOPERATIVE."""
    common = set(RebalanceProtocol)
    for name in names:
        common &= set(ASSIGNORS[name].protocols)
    return (
        RebalanceProtocol.COOPERATIVE
        if RebalanceProtocol.COOPERATIVE in common
        else (RebalanceProtocol.EAGER)
    )
