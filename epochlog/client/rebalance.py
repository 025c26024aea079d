"""What a consumer gives up and takes in a rebalance of a classic group: sans-I/O.

`consumer_coordinator` asks these functions and then does what they say (commits, rebalance
callbacks, the new assignment); nothing here sends a request or calls back into the application.

- Before a JoinGroup (`release_before_join`): a member that lost its generation *loses* every
  partition it owns (someone else may have them already: no commit, on_lost). Otherwise the eager
  protocol revokes everything, the cooperative one (KIP-429) only the partitions of topics no
  longer subscribed.
- On leaving (`release_on_leave`): a member in a stable generation revokes what it owns; any
  other loses it.
- After a SyncGroup (`assignment_change`): what is new is assigned; under the cooperative protocol
  what is no longer assigned is revoked, and the member rejoins so that a second rebalance can
  hand it over. Topics assigned but not subscribed (explicit subscriptions only: a pattern may
  have matched them before we saw them) also make the member rejoin.
- The leader's part (`member_subscriptions`, `encoded_assignments`): every member's Subscription
  read from the JoinGroup response (an unreadable one counts as subscribing to nothing, as Java
  does), and every member's Assignment written for the SyncGroup.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any

from epochlog.client.assignors import MemberSubscription, RebalanceProtocol
from epochlog.client.metadata import TopicPartition
from epochlog.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from epochlog.protocol.errors import DecodeError

log = logging.getLogger(__name__)

# the rebalance callback a partition set is handed to
ASSIGNED, REVOKED, LOST = "assigned", "revoked", "lost"


@dataclass(frozen=True)
class Release:
    """The partitions a member gives up: revoked (committed first, on_revoked) or lost
    (on_lost, nothing committed)."""

    revoked: frozenset[TopicPartition] = frozenset()
    lost: frozenset[TopicPartition] = frozenset()


def release_before_join(
    protocol: RebalanceProtocol,
    has_generation: bool,
    owned: Set[TopicPartition],
    subscribed_topics: Set[str],
) -> Release:
    if not has_generation:
        return Release(lost=frozenset(owned))
    if protocol is RebalanceProtocol.EAGER:
        return Release(revoked=frozenset(owned))
    return Release(revoked=frozenset(tp for tp in owned if tp.topic not in subscribed_topics))


def release_on_leave(in_stable_generation: bool, owned: Set[TopicPartition]) -> Release:
    if in_stable_generation:
        return Release(revoked=frozenset(owned))
    return Release(lost=frozenset(owned))


@dataclass(frozen=True)
class AssignmentChange:
    added: frozenset[TopicPartition]  # on_assigned
    revoked: frozenset[TopicPartition]  # cooperative only: committed, on_revoked, then rejoin
    unexpected_topics: frozenset[str]  # assigned but not subscribed: rejoin


def assignment_change(
    protocol: RebalanceProtocol,
    owned: Set[TopicPartition],
    assigned: Set[TopicPartition],
    subscribed_topics: Set[str],
    by_pattern: bool,
) -> AssignmentChange:
    unexpected = frozenset({tp.topic for tp in assigned} - subscribed_topics)
    revoked = owned - assigned if protocol is RebalanceProtocol.COOPERATIVE else set()
    return AssignmentChange(
        added=frozenset(assigned - owned),
        revoked=frozenset(revoked),
        unexpected_topics=frozenset() if by_pattern else unexpected,
    )


def subscription_metadata(
    protocol: RebalanceProtocol,
    topics: Iterable[str],
    owned: Iterable[TopicPartition],
    generation_id: int,
    rack_id: str | None,
) -> bytes:
    """The Subscription a JoinGroup carries for each assignor: owned partitions only under the
    cooperative protocol (an eager member has revoked them all)."""
    subscription = Subscription(
        topics=tuple(sorted(topics)),
        owned_partitions=tuple(sorted(owned)) if protocol is RebalanceProtocol.COOPERATIVE else (),
        generation_id=generation_id,
        rack_id=rack_id,
    )
    return encode_subscription(subscription)


def member_subscriptions(members: Iterable[Any]) -> dict[str, MemberSubscription]:
    """Each member of a JoinGroup response (member_id, group_instance_id, metadata) as the
    assignors take it."""
    subscriptions: dict[str, MemberSubscription] = {}
    for joined in members:
        try:
            sub = decode_subscription(joined.metadata)
        except DecodeError as exc:
            log.warning("member %s sent a bad subscription: %s", joined.member_id, exc)
            sub = Subscription(topics=())
        subscriptions[joined.member_id] = MemberSubscription(
            member_id=joined.member_id,
            topics=frozenset(sub.topics),
            owned_partitions=tuple(TopicPartition(t, p) for t, p in sub.owned_partitions),
            generation_id=sub.generation_id,
            group_instance_id=joined.group_instance_id,
            rack_id=sub.rack_id,
        )
    return subscriptions


def encoded_assignments(
    result: Mapping[str, list[TopicPartition]], member_ids: Iterable[str]
) -> dict[str, bytes]:
    """Every member's Assignment, an empty one for a member the assignor gave nothing."""
    return {
        member_id: encode_assignment(Assignment(tuple(result.get(member_id, []))))
        for member_id in member_ids
    }


def describe_assignment(assignment: Mapping[str, list[TopicPartition]]) -> str:
    return "; ".join(
        f"{member}: {', '.join(str(tp) for tp in tps) or '-'}"
        for member, tps in sorted(assignment.items())
    )
