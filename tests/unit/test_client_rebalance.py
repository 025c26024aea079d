"""What a consumer gives up and takes in a rebalance (eager and cooperative), what the leader reads
and writes, and when a subscription calls for a rejoin: the sans-I/O decisions the consumer
coordinator acts on, driven without a coordinator."""

from __future__ import annotations

import re
import uuid
from types import SimpleNamespace

import pytest

from epochlog.client.assignors import RebalanceProtocol
from epochlog.client.group_subscription import GroupSubscription
from epochlog.client.metadata import ClusterMetadata, PartitionInfo, TopicInfo, TopicPartition
from epochlog.client.rebalance import (
    assignment_change,
    describe_assignment,
    encoded_assignments,
    member_subscriptions,
    release_before_join,
    release_on_leave,
    subscription_metadata,
)
from epochlog.protocol.consumer_protocol import (
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_subscription,
)

EAGER, COOPERATIVE = RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


# ---------------------------------------------------------------- before a join, on leaving


def test_eager_revokes_every_owned_partition_before_joining() -> None:
    release = release_before_join(EAGER, True, {A0, B0}, {"a", "b"})
    assert release.revoked == {A0, B0} and not release.lost


def test_cooperative_revokes_only_partitions_of_topics_no_longer_subscribed() -> None:
    release = release_before_join(COOPERATIVE, True, {A0, A1, B0}, {"a"})
    assert release.revoked == {B0} and not release.lost


@pytest.mark.parametrize("protocol", [EAGER, COOPERATIVE])
def test_a_member_without_a_generation_loses_what_it_owns(protocol: RebalanceProtocol) -> None:
    release = release_before_join(protocol, False, {A0, B0}, {"a"})
    assert release.lost == {A0, B0} and not release.revoked


def test_leaving_revokes_in_a_stable_generation_and_loses_otherwise() -> None:
    assert release_on_leave(True, {A0}).revoked == {A0}
    assert release_on_leave(True, {A0}).lost == frozenset()
    assert release_on_leave(False, {A0}).lost == {A0}
    assert release_on_leave(False, {A0}).revoked == frozenset()


# ---------------------------------------------------------------- after a sync


def test_cooperative_revokes_what_is_no_longer_assigned_and_adds_what_is_new() -> None:
    change = assignment_change(COOPERATIVE, {A0, A1}, {A1, B0}, {"a", "b"}, by_pattern=False)
    assert change.added == {B0} and change.revoked == {A0} and not change.unexpected_topics


def test_eager_revokes_nothing_after_the_sync_having_revoked_all_before() -> None:
    change = assignment_change(EAGER, {A0}, {A1}, {"a"}, by_pattern=False)
    assert change.added == {A1} and change.revoked == frozenset()


def test_a_topic_assigned_but_not_subscribed_is_unexpected_unless_subscribed_by_pattern() -> None:
    assert assignment_change(EAGER, set(), {B0}, {"a"}, by_pattern=False).unexpected_topics == {"b"}
    assert not assignment_change(EAGER, set(), {B0}, {"a"}, by_pattern=True).unexpected_topics


# ---------------------------------------------------------------- the leader's part


def test_owned_partitions_are_in_the_subscription_under_the_cooperative_protocol_only() -> None:
    cooperative = decode_subscription(
        subscription_metadata(COOPERATIVE, {"b", "a"}, {B0, A0}, 3, "rack-1")
    )
    assert cooperative.topics == ("a", "b")
    assert cooperative.owned_partitions == (("a", 0), ("b", 0))
    assert (cooperative.generation_id, cooperative.rack_id) == (3, "rack-1")
    eager = decode_subscription(subscription_metadata(EAGER, {"a"}, {A0}, 3, None))
    assert eager.owned_partitions == () and eager.rack_id is None


def test_members_subscriptions_are_read_and_a_bad_one_subscribes_to_nothing() -> None:
    good = encode_subscription(Subscription(("a",), (("a", 1),), 7, "r"))
    members = [
        SimpleNamespace(member_id="m-1", group_instance_id="i-1", metadata=good),
        SimpleNamespace(member_id="m-2", group_instance_id=None, metadata=b"\x00"),
    ]
    subs = member_subscriptions(members)
    assert subs["m-1"].topics == {"a"} and subs["m-1"].owned_partitions == (A1,)
    assert (subs["m-1"].generation_id, subs["m-1"].group_instance_id) == (7, "i-1")
    assert subs["m-1"].rack_id == "r"
    assert subs["m-2"].topics == frozenset() and subs["m-2"].owned_partitions == ()


def test_every_member_gets_an_assignment_an_empty_one_if_given_nothing() -> None:
    encoded = encoded_assignments({"m-1": [A0, A1]}, ["m-1", "m-2"])
    assert decode_assignment(encoded["m-1"]).partitions == (("a", 0), ("a", 1))
    assert decode_assignment(encoded["m-2"]).partitions == ()
    assert describe_assignment({"m-2": [], "m-1": [A0, A1]}) == f"m-1: {A0}, {A1}; m-2: -"


# ---------------------------------------------------------------- the subscription


def cluster(counts: dict[str, int], internal: frozenset[str] = frozenset()) -> ClusterMetadata:
    return ClusterMetadata(
        topics={
            name: TopicInfo(
                name,
                uuid.uuid4(),
                {p: PartitionInfo(name, p, 1, 0, (1,), (1,)) for p in range(n)},
                name in internal,
            )
            for name, n in counts.items()
        }
    )


def test_a_pattern_matches_whole_names_and_leaves_internal_topics_out() -> None:
    wanted = GroupSubscription(exclude_internal=True)
    snapshot = cluster({"orders": 1, "orders-eu": 1, "x-orders": 1, "__orders": 1}, {"__orders"})
    wanted.subscribe_pattern("_*orders.*", snapshot)
    assert wanted.subscribed and wanted.by_pattern
    assert wanted.topics == {"orders", "orders-eu"}
    keeping = GroupSubscription(exclude_internal=False)
    keeping.subscribe_pattern("_*orders.*", snapshot)
    assert keeping.topics == {"orders", "orders-eu", "__orders"}


def test_a_bad_pattern_raises_and_changes_nothing() -> None:
    wanted = GroupSubscription(exclude_internal=True)
    wanted.subscribe_topics(["a"])
    with pytest.raises(re.error):
        wanted.subscribe_pattern("(", cluster({"a": 1}))
    assert wanted.topics == {"a"} and not wanted.by_pattern


def test_new_metadata_changes_a_pattern_subscription_and_then_it_differs_from_the_join() -> None:
    wanted = GroupSubscription(exclude_internal=True)
    wanted.subscribe_pattern("t.*", cluster({"t1": 1}))
    wanted.joined()
    assert not wanted.changed_since_join
    assert not wanted.rematch(cluster({"t1": 1, "u": 1}))
    assert wanted.rematch(cluster({"t1": 1, "t2": 1}))
    assert wanted.topics == {"t1", "t2"} and wanted.changed_since_join


def test_explicit_topics_do_not_follow_metadata() -> None:
    wanted = GroupSubscription(exclude_internal=True)
    wanted.subscribe_topics(["a"])
    assert not wanted.rematch(cluster({"a": 1, "b": 1})) and wanted.topics == {"a"}


def test_unsubscribing_forgets_topics_pattern_and_the_last_join() -> None:
    wanted = GroupSubscription(exclude_internal=True)
    wanted.subscribe_pattern("a", cluster({"a": 1}))
    wanted.joined()
    wanted.unsubscribe()
    assert not wanted.subscribed and wanted.topics == frozenset() and not wanted.by_pattern
    assert not wanted.changed_since_join


def test_the_leader_sees_a_topic_it_assigned_grow() -> None:
    wanted = GroupSubscription(exclude_internal=True)
    assert wanted.resized_topic(cluster({"a": 3})) is None  # assigned nothing
    wanted.assigned({"a": 2, "b": 1})
    assert wanted.resized_topic(cluster({"a": 2, "b": 1})) is None
    assert wanted.resized_topic(cluster({"b": 1})) is None  # a topic gone does not count
    assert wanted.resized_topic(cluster({"a": 3, "b": 1})) == ("a", 3)
    wanted.assigned(None)
    assert wanted.resized_topic(cluster({"a": 3})) is None
