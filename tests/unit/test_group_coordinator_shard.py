"""The classic group coordinator, driven directly: no sockets, no log, no clock.

Each test plays a sequence of requests and timer firings against one shard and checks the replies
and records it returns, the way a consumer group lives through joins, rebalances, failures and
restarts."""

from __future__ import annotations

import itertools

import pytest

from epochlog.coordinator.group.classic_group import (
    ClassicGroup,
    GroupState,
    IllegalGroupTransitionError,
    Member,
)
from epochlog.coordinator.group.operations import (
    EXPIRE_OFFSETS_TIMER,
    Effects,
    GroupConfig,
    Heartbeat,
    JoinGroup,
    JoinGroupReply,
    LeavingMember,
    OffsetCommit,
    OffsetToCommit,
    SyncGroup,
    SyncGroupReply,
    heartbeat_timer,
    join_timer,
)
from epochlog.coordinator.group.records import (
    GroupMetadataRecord,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
)
from epochlog.coordinator.group.shard import GroupCoordinatorShard
from epochlog.protocol.errors import ErrorCode as E

SESSION = 10_000
REBALANCE = 30_000
DELAY = 3_000


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, empty user data."""
    out = (0).to_bytes(2, "big") + len(topics).to_bytes(4, "big")
    for topic in topics:
        out += len(topic).to_bytes(2, "big") + topic.encode()
    return out + (-1).to_bytes(4, "big", signed=True)


class Harness:
    """A shard, a clock, and the runtime's bookkeeping: timers, replies, the log."""

    def __init__(self, config: GroupConfig | None = None) -> None:
        counter = itertools.count(1)
        self.shard = GroupCoordinatorShard(
            config or GroupConfig(initial_rebalance_delay_ms=DELAY),
            new_member_id=lambda prefix: f"{prefix}-{next(counter)}",
        )
        self.now = 0
        self.timers: dict[tuple, int] = {}
        self.replies: dict[object, object] = {}
        self.log: list[object] = []
        self.handles = itertools.count(1)
        self.apply(self.shard.loaded(0))

    def apply(self, effects: Effects) -> Effects:
        self.log.extend(effects.records)
        for handle, reply in effects.replies:
            assert handle not in self.replies, f"request {handle} answered twice"
            self.replies[handle] = reply
        for record in effects.records:
            self.shard.replay(record)
        for key, deadline in effects.timers.items():
            if deadline is None:
                self.timers.pop(key, None)
            else:
                self.timers[key] = deadline
        return effects

    def advance(self, ms: int) -> None:
        """Move the clock, firing due timers in deadline order."""
        target = self.now + ms
        while True:
            due = sorted((d, k) for k, d in self.timers.items() if d <= target)
            if not due:
                break
            deadline, key = due[0]
            del self.timers[key]
            self.now = max(self.now, deadline)
            self.apply(self.shard.on_timer(key, self.now))
        self.now = target

    def join(self, group: str, member_id: str = "", instance: str | None = None, **kw) -> object:
        handle = next(self.handles)
        request = JoinGroup(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            client_id=kw.pop("client_id", "client"),
            client_host="/127.0.0.1",
            session_timeout_ms=kw.pop("session_timeout_ms", SESSION),
            rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", REBALANCE),
            protocol_type=kw.pop("protocol_type", "consumer"),
            protocols=kw.pop("protocols", [("range", subscription("t"))]),
            **kw,
        )
        self.apply(self.shard.join_group(request, handle, self.now))
        return handle

    def sync(self, group: str, member_id: str, generation: int, assignments=None) -> object:
        handle = next(self.handles)
        request = SyncGroup(group, generation, member_id, None, None, None, assignments or {})
        self.apply(self.shard.sync_group(request, handle, self.now))
        return handle

    def heartbeat(self, group: str, member_id: str, generation: int) -> E:
        error, effects = self.shard.heartbeat(Heartbeat(group, generation, member_id), self.now)
        self.apply(effects)
        return error

    def new_member(self, group: str, **kw) -> str:
        """The KIP-394 handshake: join without an id, get one, join again with it."""
        reply = self.replies[self.join(group, **kw)]
        assert isinstance(reply, JoinGroupReply) and reply.error is E.MEMBER_ID_REQUIRED
        return reply.member_id


def test_a_member_must_join_with_the_id_it_was_given_kip394() -> None:
    h = Harness()
    handle = h.join("g")
    reply = h.replies[handle]
    assert reply.error is E.MEMBER_ID_REQUIRED and reply.member_id == "client-1"
    assert h.shard.groups["g"].state is GroupState.EMPTY  # nobody has joined yet
    second = h.join("g", reply.member_id)
    assert second not in h.replies  # waits for the initial rebalance delay
    assert h.shard.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_three_members_join_within_the_initial_delay_and_get_one_generation() -> None:
    h = Harness()
    ids = [h.new_member("g") for _ in range(3)]
    handles = []
    for i in ids:  # a second apart: each join runs the delay again (KIP-134)
        handles.append(h.join("g", i))
        h.advance(1_000)
    h.advance(DELAY - 1_000 - 1)  # the last joined at 2 s: the delay ends at 2 s + DELAY
    assert not any(x in h.replies for x in handles)
    h.advance(1)
    replies = [h.replies[x] for x in handles]
    assert {r.generation for r in replies} == {1}
    assert all(r.error is E.NONE and r.protocol_name == "range" for r in replies)
    leader = replies[0].leader_id
    assert [len(r.members) for r in replies] == [3 if i == leader else 0 for i in ids]
    assert h.shard.groups["g"].state is GroupState.COMPLETING_REBALANCE
    # The followers wait for the leader's SyncGroup; the leader's completes everyone's.
    followers = [i for i in ids if i != leader]
    waiting = [h.sync("g", i, 1) for i in followers]
    assert not any(x in h.replies for x in waiting)
    done = h.sync("g", leader, 1, {i: i.encode() for i in ids})
    for member_id, handle in zip([*followers, leader], [*waiting, done], strict=True):
        assert h.replies[handle] == SyncGroupReply(E.NONE, "consumer", "range", member_id.encode())
    assert h.shard.groups["g"].state is GroupState.STABLE
    record = h.log[-1]
    assert isinstance(record, GroupMetadataRecord) and record.generation == 1
    assert {m.member_id: m.assignment for m in record.members} == {i: i.encode() for i in ids}


def stable_group(h: Harness, members: int = 2) -> list[str]:
    ids = [h.new_member("g") for _ in range(members)]
    handles = [h.join("g", i) for i in ids]
    h.advance(2 * DELAY)
    leader = h.replies[handles[0]].leader_id
    generation = h.replies[handles[0]].generation
    for i in ids:
        if i != leader:
            h.sync("g", i, generation)
    h.sync("g", leader, generation, {i: b"a-" + i.encode() for i in ids})
    assert h.shard.groups["g"].state is GroupState.STABLE
    return ids


def test_heartbeats_report_fenced_generations_and_rebalances() -> None:
    h = Harness()
    a, b = stable_group(h)
    assert h.heartbeat("g", a, 1) is E.NONE
    assert h.heartbeat("g", a, 0) is E.ILLEGAL_GENERATION
    assert h.heartbeat("g", "stranger", 1) is E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("nope", a, 1) is E.UNKNOWN_MEMBER_ID
    h.join("g", b, protocols=[("range", subscription("t", "u"))])  # b's subscription changed
    assert h.shard.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", a, 1) is E.REBALANCE_IN_PROGRESS


def test_a_member_that_stops_heartbeating_is_removed_and_the_rest_rebalance() -> None:
    h = Harness()
    a, b = stable_group(h)
    h.advance(SESSION // 2)
    assert h.heartbeat("g", a, 1) is E.NONE
    h.advance(SESSION // 2 + 1)
    # b never heartbeat: its session expired, a is told to rejoin.
    assert b not in h.shard.groups["g"].members
    assert h.heartbeat("g", a, 1) is E.REBALANCE_IN_PROGRESS
    rejoin = h.join("g", a)
    reply = h.replies[rejoin]  # the only member left has rejoined: no need to wait
    assert reply.generation == 2 and [m.member_id for m in reply.members] == [a]


def test_leaving_members_trigger_a_rebalance_and_the_last_one_empties_the_group() -> None:
    h = Harness()
    a, b = stable_group(h)
    reply, effects = h.shard.leave_group("g", [LeavingMember(b)], h.now)
    h.apply(effects)
    assert reply.members == ((LeavingMember(b), E.NONE),)
    assert h.shard.groups["g"].state is GroupState.PREPARING_REBALANCE
    reply, effects = h.shard.leave_group("g", [LeavingMember(a), LeavingMember("x")], h.now)
    h.apply(effects)
    assert [e for _, e in reply.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    group = h.shard.groups["g"]
    assert group.state is GroupState.EMPTY and group.generation == 2
    assert isinstance(h.log[-1], GroupMetadataRecord) and h.log[-1].members == ()


def test_a_static_member_restarting_keeps_its_assignment_without_a_rebalance_kip345() -> None:
    h = Harness()
    handles = [h.join("g", instance=instance) for instance in ("i-1", "i-2")]
    assert not any(x in h.replies for x in handles)  # static members join in one step
    h.advance(2 * DELAY)
    ids = [h.replies[x].member_id for x in handles]
    generation = h.replies[handles[0]].generation
    leader = h.replies[handles[0]].leader_id
    follower = next(i for i in ids if i != leader)
    follower_instance = "i-1" if follower == ids[0] else "i-2"
    h.sync("g", follower, generation)
    h.sync("g", leader, generation, {i: b"a-" + i.encode() for i in ids})
    # The follower restarts: a new member id, same instance id, same subscription.
    rejoined = h.replies[h.join("g", instance=follower_instance)]
    assert rejoined.error is E.NONE and rejoined.generation == generation
    assert rejoined.member_id != follower and rejoined.members == ()
    assert h.shard.groups["g"].state is GroupState.STABLE
    assert h.replies[h.sync("g", rejoined.member_id, generation)].assignment == (
        b"a-" + follower.encode()
    )
    # The old process, if it is still around, is fenced.
    assert h.heartbeat("g", follower, generation) is E.UNKNOWN_MEMBER_ID
    fenced = h.shard.heartbeat(Heartbeat("g", generation, follower, follower_instance), h.now)
    assert fenced[0] is E.FENCED_INSTANCE_ID


def test_sync_with_a_stale_generation_or_during_a_rebalance_is_refused() -> None:
    h = Harness()
    a, b = stable_group(h)
    assert h.replies[h.sync("g", a, 0)].error is E.ILLEGAL_GENERATION
    assert h.replies[h.sync("g", "x", 1)].error is E.UNKNOWN_MEMBER_ID
    h.join("g", a, protocols=[("range", subscription("u"))])
    assert h.replies[h.sync("g", b, 1)].error is E.REBALANCE_IN_PROGRESS


def test_a_new_rebalance_answers_waiting_syncs_with_rebalance_in_progress() -> None:
    h = Harness()
    ids = [h.new_member("g") for _ in range(2)]
    handles = [h.join("g", i) for i in ids]
    h.advance(2 * DELAY)
    leader = h.replies[handles[0]].leader_id
    follower = next(i for i in ids if i != leader)
    waiting = h.sync("g", follower, 1)
    h.join("g", leader, protocols=[("range", subscription("other"))])
    assert h.replies[waiting].error is E.REBALANCE_IN_PROGRESS


def test_the_leader_never_syncing_sends_the_group_back_to_rebalance() -> None:
    h = Harness()
    ids = [h.new_member("g") for _ in range(2)]
    handles = [h.join("g", i) for i in ids]
    h.advance(2 * DELAY)
    leader = h.replies[handles[0]].leader_id
    follower = next(i for i in ids if i != leader)
    waiting = h.sync("g", follower, 1)
    h.advance(REBALANCE)
    assert h.replies[waiting].error is E.REBALANCE_IN_PROGRESS
    assert leader not in h.shard.groups["g"].members


def test_protocol_choice_is_kafkas_vote_and_an_incompatible_member_is_refused() -> None:
    h = Harness()
    both = [("cooperative-sticky", b"c"), ("range", b"r")]
    a = h.new_member("g", protocols=both)
    b = h.new_member("g", protocols=[("range", b"r"), ("cooperative-sticky", b"c")])
    first = h.join("g", a, protocols=both)
    h.join("g", b, protocols=[("range", b"r"), ("cooperative-sticky", b"c")])
    h.advance(2 * DELAY)
    # One vote each: the tie goes to the first member's preference.
    assert h.replies[first].protocol_name == "cooperative-sticky"
    odd = h.replies[h.join("g", protocols=[("roundrobin", b"x")])]
    assert odd.error is E.INCONSISTENT_GROUP_PROTOCOL
    other_type = h.replies[h.join("g", protocol_type="connect", protocols=both)]
    assert other_type.error is E.INCONSISTENT_GROUP_PROTOCOL


def test_session_timeouts_outside_the_brokers_bounds_are_refused() -> None:
    h = Harness()
    assert h.replies[h.join("g", session_timeout_ms=10)].error is E.INVALID_SESSION_TIMEOUT
    assert h.replies[h.join("")].error is E.INVALID_GROUP_ID


def test_group_max_size() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=DELAY, max_size=2))
    h.new_member("g")
    h.new_member("g")
    assert h.replies[h.join("g")].error is E.GROUP_MAX_SIZE_REACHED


def commit(h: Harness, group: str, generation: int, member: str, *offsets: tuple) -> list[E]:
    request = OffsetCommit(
        group, generation, member, None, [OffsetToCommit(t, p, o) for t, p, o in offsets]
    )
    results, effects = h.shard.commit_offsets(request, h.now)
    h.apply(effects)
    return [r.error for r in results]


def test_offsets_committed_without_joining_are_fetched_back() -> None:
    h = Harness()
    assert commit(h, "simple", -1, "", ("t", 0, 42), ("t", 1, 7)) == [E.NONE, E.NONE]
    fetched = {(f.topic, f.partition): f.offset for f in h.shard.fetch_offsets("simple", None)}
    assert fetched == {("t", 0): 42, ("t", 1): 7}
    unknown = h.shard.fetch_offsets("simple", [("t", 9)])[0]
    assert (unknown.offset, unknown.error) == (-1, E.NONE)
    assert all(isinstance(r, OffsetCommitRecord) for r in h.log)


def test_commits_are_checked_against_the_members_generation() -> None:
    h = Harness()
    a, _b = stable_group(h)
    assert commit(h, "g", 1, a, ("t", 0, 5)) == [E.NONE]
    assert commit(h, "g", 0, a, ("t", 0, 6)) == [E.ILLEGAL_GENERATION]
    assert commit(h, "g", 1, "x", ("t", 0, 6)) == [E.UNKNOWN_MEMBER_ID]
    assert commit(h, "g", -1, "", ("t", 0, 6)) == [E.UNKNOWN_MEMBER_ID]  # a live group
    assert commit(h, "nope", 3, "m", ("t", 0, 6)) == [E.ILLEGAL_GENERATION]
    assert h.shard.fetch_offsets("g", [("t", 0)])[0].offset == 5


def test_a_commit_is_unstable_until_it_is_replicated() -> None:
    h = Harness()
    request = OffsetCommit("g", -1, "", None, [OffsetToCommit("t", 0, 10)])
    _, effects = h.shard.commit_offsets(request, h.now)  # appended, not yet replicated
    unstable = h.shard.fetch_offsets("g", [("t", 0)], require_stable=True)[0]
    assert unstable.error is E.UNSTABLE_OFFSET_COMMIT
    assert h.shard.fetch_offsets("g", [("t", 0)])[0].offset == -1
    h.apply(effects)  # replicated and replayed
    assert h.shard.fetch_offsets("g", [("t", 0)], require_stable=True)[0].offset == 10


def test_a_commit_during_the_sync_phase_is_refused_with_rebalance_in_progress() -> None:
    h = Harness()
    ids = [h.new_member("g") for _ in range(2)]
    for i in ids:
        h.join("g", i)
    h.advance(2 * DELAY)
    assert commit(h, "g", 1, ids[0], ("t", 0, 1)) == [E.REBALANCE_IN_PROGRESS]


def test_a_loaded_partition_has_the_groups_and_offsets_it_had() -> None:
    h = Harness()
    a, b = stable_group(h)
    commit(h, "g", 1, a, ("t", 0, 100))
    commit(h, "simple", -1, "", ("u", 3, 9))
    commit(h, "simple", -1, "", ("u", 3, 10))
    # A new coordinator replays the partition.
    fresh = GroupCoordinatorShard(GroupConfig())
    for record in h.log:
        fresh.replay(record)
    effects = fresh.loaded(h.now)
    group = fresh.groups["g"]
    assert group.state is GroupState.STABLE and set(group.members) == {a, b}
    assert group.generation == 1 and group.members[a].assignment == b"a-" + a.encode()
    assert set(effects.timers) >= {heartbeat_timer("g", a), heartbeat_timer("g", b)}
    assert fresh.fetch_offsets("simple", [("u", 3)])[0].offset == 10
    assert fresh.fetch_offsets("g", [("t", 0)])[0].offset == 100
    error, _ = fresh.heartbeat(Heartbeat("g", 1, a), h.now)
    assert error is E.NONE


def test_deleting_groups_writes_tombstones_and_only_empty_groups_go() -> None:
    h = Harness()
    stable_group(h)
    commit(h, "simple", -1, "", ("t", 0, 1), ("t", 1, 2))
    errors, effects = h.shard.delete_groups(["g", "simple", "nope"], h.now)
    h.apply(effects)
    assert errors == {
        "g": E.NON_EMPTY_GROUP,
        "simple": E.NONE,
        "nope": E.GROUP_ID_NOT_FOUND,
    }
    assert effects.records == [
        OffsetTombstone("simple", "t", 0),
        OffsetTombstone("simple", "t", 1),
        GroupTombstone("simple"),
    ]
    assert "simple" not in h.shard.groups
    assert h.shard.fetch_offsets("simple", [("t", 0)])[0].offset == -1


def test_offsets_of_an_empty_group_expire_after_the_retention() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=DELAY, offsets_retention_ms=120_000))
    commit(h, "simple", -1, "", ("t", 0, 1))
    h.advance(60_000)
    assert "simple" in h.shard.groups
    h.advance(121_000)
    assert OffsetTombstone("simple", "t", 0) in h.log and GroupTombstone("simple") in h.log
    assert "simple" not in h.shard.groups
    assert EXPIRE_OFFSETS_TIMER in h.timers  # it keeps running


def test_offset_delete_refuses_topics_a_live_group_subscribes_to() -> None:
    h = Harness()
    a, _ = stable_group(h)
    commit(h, "g", 1, a, ("t", 0, 1), ("old", 0, 2))
    error, results, effects = h.shard.delete_offsets("g", [("t", 0), ("old", 0)])
    h.apply(effects)
    assert error is E.NONE
    assert [r.error for r in results] == [E.GROUP_SUBSCRIBED_TO_TOPIC, E.NONE]
    assert effects.records == [OffsetTombstone("g", "old", 0)]
    assert h.shard.delete_offsets("nope", [("t", 0)])[0] is E.GROUP_ID_NOT_FOUND


def test_describe_and_list_groups() -> None:
    h = Harness()
    a, b = stable_group(h)
    commit(h, "simple", -1, "", ("t", 0, 1))
    (described, missing) = h.shard.describe_groups(["g", "nope"])
    assert (described.state, described.protocol_type, described.protocol_name) == (
        "Stable",
        "consumer",
        "range",
    )
    assert {m.member_id: m.assignment for m in described.members} == {
        a: b"a-" + a.encode(),
        b: b"a-" + b.encode(),
    }
    assert missing.state == "Dead"
    listed = {(g.group_id, g.state) for g in h.shard.list_groups()}
    assert listed == {("g", "Stable"), ("simple", "Empty")}
    assert [g.group_id for g in h.shard.list_groups(["empty"])] == ["simple"]


def test_the_state_table_refuses_a_transition_it_does_not_list() -> None:
    group = ClassicGroup("g")
    with pytest.raises(IllegalGroupTransitionError, match="'g' cannot move from Empty to Stable"):
        group.transition_to(GroupState.STABLE, 0)
    group.transition_to(GroupState.PREPARING_REBALANCE, 0)
    group.transition_to(GroupState.COMPLETING_REBALANCE, 0)
    group.transition_to(GroupState.STABLE, 0)


def test_a_pending_member_that_never_joins_expires() -> None:
    h = Harness()
    a, b = stable_group(h)
    pending = h.new_member("g")
    assert pending in h.shard.groups["g"].pending_members
    h.advance(SESSION + 1)
    assert pending not in h.shard.groups["g"].pending_members
    assert join_timer("g") not in h.timers or h.shard.groups["g"].state is not GroupState.STABLE
    del a, b


def test_member_removal_drops_its_leadership() -> None:
    group = ClassicGroup("g")
    for i in ("a", "b"):
        group.add_member(Member(i, None, "c", "h", 1, 1, "consumer", [("range", b"")]))
    assert group.leader_id == "a"
    group.remove_member("a")
    assert group.leader_id == "b"


def test_members_joining_together_wait_one_initial_delay() -> None:
    h = Harness()
    handles = [h.join("g", h.new_member("g")) for _ in range(10)]
    h.advance(DELAY - 1)
    assert not any(x in h.replies for x in handles)
    h.advance(1)
    assert {h.replies[x].generation for x in handles} == {1}


def test_the_initial_delay_ends_at_the_rebalance_timeout_however_often_members_join() -> None:
    h = Harness()
    handles = []
    while h.now < REBALANCE + DELAY:  # a new member every DELAY / 2: the delay never runs out
        handles.append(h.join("g", h.new_member("g")))
        if handles[0] in h.replies:
            break
        h.advance(DELAY // 2)
    first = h.replies[handles[0]]
    assert first.error is E.NONE and first.generation == 1
    assert REBALANCE <= h.now <= REBALANCE + DELAY // 2
