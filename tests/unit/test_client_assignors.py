"""The leader's assignors as pure functions: Kafka's range and roundrobin layouts, and
cooperative-sticky's stickiness, balance and two-phase hand-over (KIP-429)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.client.assignors import (
    MemberSubscription,
    RebalanceProtocol,
    cooperative_sticky_assign,
    range_assign,
    rebalance_protocol,
    roundrobin_assign,
)
from epochlog.client.metadata import TopicPartition as TP


def member(
    member_id: str,
    topics: set[str],
    owned: list[TP] = (),  # type: ignore[assignment]
    generation: int = 1,
    instance: str | None = None,
) -> MemberSubscription:
    return MemberSubscription(member_id, frozenset(topics), tuple(owned), generation, instance)


def group(*members: MemberSubscription) -> dict[str, MemberSubscription]:
    return {m.member_id: m for m in members}


def parts(assignment: dict[str, list[TP]]) -> dict[str, list[str]]:
    return {m: [f"{tp.topic}{tp.partition}" for tp in tps] for m, tps in assignment.items()}


def test_range_gives_each_member_a_contiguous_range_per_topic_extra_ones_first() -> None:
    members = group(member("c", {"t", "u"}), member("a", {"t", "u"}), member("b", {"t"}))
    got = range_assign({"t": 5, "u": 3}, members)
    assert parts(got) == {
        "a": ["t0", "t1", "u0", "u1"],
        "b": ["t2", "t3"],
        "c": ["t4", "u2"],
    }


def test_range_puts_static_members_first_in_instance_id_order() -> None:
    members = group(member("a", {"t"}), member("z", {"t"}, instance="i1"))
    assert parts(range_assign({"t": 3}, members)) == {"z": ["t0", "t1"], "a": ["t2"]}


def test_roundrobin_deals_sorted_partitions_skipping_members_not_subscribed() -> None:
    members = group(member("a", {"t", "u"}), member("b", {"u"}), member("c", {"t", "u"}))
    got = roundrobin_assign({"t": 3, "u": 3}, members)
    assert parts(got) == {"a": ["t0", "t2", "u2"], "b": ["u0"], "c": ["t1", "u1"]}


def test_rebalance_protocol_is_cooperative_only_if_every_assignor_supports_it() -> None:
    assert rebalance_protocol(["range", "cooperative-sticky"]) is RebalanceProtocol.EAGER
    assert rebalance_protocol(["cooperative-sticky"]) is RebalanceProtocol.COOPERATIVE


def test_cooperative_sticky_first_assignment_is_balanced() -> None:
    members = group(member("a", {"t"}), member("b", {"t"}), member("c", {"t"}))
    got = cooperative_sticky_assign({"t": 7}, members)
    assert sorted(len(v) for v in got.values()) == [2, 2, 3]
    assert sorted(tp for v in got.values() for tp in v) == [TP("t", p) for p in range(7)]


def test_cooperative_sticky_a_new_member_gets_partitions_only_after_the_owners_revoke() -> None:
    owned_a = [TP("t", p) for p in range(3)]
    owned_b = [TP("t", p) for p in range(3, 6)]
    first = cooperative_sticky_assign(
        {"t": 6},
        group(member("a", {"t"}, owned_a), member("b", {"t"}, owned_b), member("c", {"t"}, [], -1)),
    )
    # phase 1: each owner keeps two of its three, the third is held back from c
    assert first["c"] == []
    assert set(first["a"]) < set(owned_a) and len(first["a"]) == 2
    assert set(first["b"]) < set(owned_b) and len(first["b"]) == 2
    # phase 2: a and b rejoin owning what they kept; c gets the two revoked ones
    second = cooperative_sticky_assign(
        {"t": 6},
        group(
            member("a", {"t"}, first["a"], 2),
            member("b", {"t"}, first["b"], 2),
            member("c", {"t"}, [], 2),
        ),
    )
    assert second["a"] == first["a"] and second["b"] == first["b"]
    assert sorted(second["c"]) == sorted(set(owned_a + owned_b) - set(first["a"] + first["b"]))


def test_cooperative_sticky_a_leavers_partitions_go_to_the_others_who_keep_theirs() -> None:
    got = cooperative_sticky_assign(
        {"t": 6},
        group(member("a", {"t"}, [TP("t", 0), TP("t", 1)]), member("b", {"t"}, [TP("t", 2)])),
    )
    assert {TP("t", 0), TP("t", 1)} <= set(got["a"]) and TP("t", 2) in got["b"]
    assert sorted(len(v) for v in got.values()) == [3, 3]


def test_cooperative_sticky_claims_kafka_does_not_trust() -> None:
    counts = {"t": 4, "u": 1}
    got = cooperative_sticky_assign(
        counts,
        group(
            # same partition claimed in the same generation: neither keeps it as owned
            member("a", {"t"}, [TP("t", 0), TP("t", 1)], 5),
            member("b", {"t"}, [TP("t", 0), TP("t", 2)], 5),
            # an older generation loses to a newer one; a topic no longer subscribed is no claim
            member("c", {"t"}, [TP("t", 2), TP("t", 3), TP("u", 0), TP("t", 9)], 4),
        ),
    )
    owners = {tp: m for m, tps in got.items() for tp in tps}
    assert owners.get(TP("t", 1)) == "a" and owners.get(TP("t", 2)) == "b"
    assert owners.get(TP("t", 3)) == "c"
    # both claimers revoke it, so only one of them may keep it in this round (Java's rule)
    assert owners.get(TP("t", 0)) in (None, "a", "b")
    assert TP("u", 0) not in owners  # nobody subscribes to u


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, int], list[set[str]], list[list[TP]]]:
    counts = {t: draw(st.integers(0, 6)) for t in ("t", "u", "v")}
    n = draw(st.integers(1, 5))
    subscriptions = [draw(st.sets(st.sampled_from(sorted(counts)), min_size=1)) for _ in range(n)]
    everything = [TP(t, p) for t, c in counts.items() for p in range(c)]
    owner = [draw(st.integers(-1, n - 1)) for _ in everything]
    owned = [[tp for tp, o in zip(everything, owner, strict=True) if o == i] for i in range(n)]
    return counts, subscriptions, owned


def check_cooperative_round(
    counts: dict[str, int], members: dict[str, MemberSubscription]
) -> dict[str, list[TP]]:
    """One rebalance: nothing given twice, only subscribed topics, no direct hand-over."""
    got = cooperative_sticky_assign(counts, members)
    given_out = [tp for tps in got.values() for tp in tps]
    assert len(given_out) == len(set(given_out))
    for m_id, tps in got.items():
        for tp in tps:
            assert tp.topic in members[m_id].topics
            listed_by_others = [
                o for o in members if o != m_id and tp in members[o].owned_partitions
            ]
            assert not listed_by_others or tp in members[m_id].owned_partitions
    return got


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_cooperative_sticky_never_hands_over_in_one_step_and_settles(scenario) -> None:
    """Each member rejoins owning what it was given (the owners revoked the rest): every
    round is safe, and the group settles with every partition someone subscribes to handed
    out, in two rounds and without moving anything kept when subscriptions are equal."""
    counts, subscriptions, owned = scenario
    ids = [f"m{i}" for i in range(len(subscriptions))]
    members = group(
        *(member(i, s, o, 3) for i, s, o in zip(ids, subscriptions, owned, strict=True))
    )
    reachable = {
        TP(t, p) for t, c in counts.items() for p in range(c) if any(t in s for s in subscriptions)
    }
    equal = all(s == subscriptions[0] for s in subscriptions)
    rounds = []
    for generation in range(4, 9):
        got = check_cooperative_round(counts, members)
        rounds.append(got)
        if {tp for tps in got.values() for tp in tps} == reachable:
            break
        members = group(*(member(i, members[i].topics, got[i], generation) for i in ids))
    else:
        raise AssertionError(f"not settled in 5 rounds: {rounds}")
    if equal:
        assert len(rounds) <= 2
        for i in ids:
            assert set(rounds[0][i]) <= set(rounds[-1][i])  # sticky: nothing kept moves
        sizes = [len(v) for v in rounds[-1].values()]
        assert max(sizes) - min(sizes) <= 1
