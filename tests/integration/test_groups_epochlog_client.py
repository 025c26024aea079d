"""epochlog's own consumer in groups, against a real 3-broker cluster: subscribe, commit, resume,
rebalances with each assignor (every partition owned exactly once at each stable point, told by
the on_assign / on_revoke traces), a confluent-kafka member in the same group, static
membership, pattern subscription, and a member that stops polling.

One cluster for the module (group.initial.rebalance.delay.ms 300 ms, 5 offsets partitions), as
in test_groups_clients.py; every test has its own topic and group."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from epochlog.client import Admin, Consumer, Producer, TopicPartition
from epochlog.testing.cluster import LocalCluster

PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("groups-epochlog"),
        3,
        broker_config={
            "group.initial.rebalance.delay.ms": 300,
            "offsets.topic.num.partitions": 5,
            "group.min.session.timeout.ms": 1000,
        },
    )
    local.start()
    yield local
    local.close()


def make_topic(cluster: LocalCluster, name: str, records: int = 40) -> list[bytes]:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(name, PARTITIONS, 3)
    values = [f"{name}-{i}".encode() for i in range(records)]
    if records:
        with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as producer:
            for i, value in enumerate(values):
                producer.send(topic=name, value=value, partition=i % PARTITIONS)
            producer.flush(30)
    return values


def group_consumer(cluster: LocalCluster, group: str, **conf: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **conf,
        }
    )


def poll_values(consumer: Consumer, count: int, timeout_s: float = 30) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got.extend(r.value for r in consumer.poll(0.2))
    return got


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"


def test_subscribe_poll_commit_and_a_second_consumer_resumes_at_the_commit(cluster) -> None:
    values = make_topic(cluster, "el-resume")
    first = group_consumer(cluster, "el-resume-g")
    first.subscribe(["el-resume"])
    assert sorted(poll_values(first, len(values))) == sorted(values)
    committed = first.commit()
    assert sum(o.offset for o in committed.values()) == len(values)
    read_back = first.committed([("el-resume", p) for p in range(PARTITIONS)])
    assert {tp: o.offset for tp, o in read_back.items()} == {
        tp: o.offset for tp, o in committed.items()
    }
    assert all(o.leader_epoch >= 0 for o in read_back.values())
    first.close()  # LeaveGroup: the next member need not wait for the session to time out
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as producer:
        for i in range(8):
            producer.send(topic="el-resume", value=b"later-%d" % i, partition=i % PARTITIONS)
        producer.flush(10)
    second = group_consumer(cluster, "el-resume-g")
    second.subscribe(["el-resume"])
    assert sorted(poll_values(second, 8)) == sorted(b"later-%d" % i for i in range(8))
    assert poll_values(second, 1, timeout_s=2) == []  # nothing read twice
    second.close()


class Traced:
    """A group member whose on_assign / on_revoke / on_lost callbacks keep what it owns."""

    def __init__(self, cluster: LocalCluster, group: str, topic: str, name: str, **conf: object):
        self.name = name
        self.owned: set[TopicPartition] = set()
        self.trace: list[tuple[str, list[TopicPartition]]] = []
        self.consumer = group_consumer(cluster, group, **conf)
        self.consumer.subscribe(
            [topic], on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost
        )

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assert consumer is self.consumer  # the blocking consumer, in the polling thread
        assert not self.owned & set(partitions), f"{self.name} assigned what it owns"
        self.owned |= set(partitions)
        self.trace.append(("assign", partitions))

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assert set(partitions) <= self.owned, f"{self.name} revoked what it does not own"
        self.owned -= set(partitions)
        self.trace.append(("revoke", partitions))

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned -= set(partitions)
        self.trace.append(("lost", partitions))


def settle(members: list[Traced], topic: str, timeout_s: float = 30) -> list[set[int]]:
    """Poll every member until the group is stable: the same generation, each partition owned
    by exactly one member (by the callbacks' account, which must agree with assignment()) and
    the partitions spread evenly. At every step, no partition has two owners. Returns who owns
    what."""
    everything = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout_s
    while True:
        for member in members:
            member.consumer.poll(0.05)
        owned = [m.owned for m in members]
        counted = sum(len(o) for o in owned)
        union = set().union(*owned)
        assert counted == len(union), f"a partition with two owners: {owned}"
        stable = all(m.consumer.assignment() == m.owned for m in members)
        generations = {m.consumer.generation_id for m in members}
        sizes = [len(o) for o in owned]
        balanced = max(sizes) - min(sizes) <= 1
        if stable and union == everything and len(generations) == 1 and balanced:
            return [{tp.partition for tp in o} for o in owned]
        assert time.monotonic() < deadline, f"not settled: {[sorted(o) for o in owned]}"


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_members_join_and_leave_and_every_partition_is_owned_once(cluster, strategy) -> None:
    topic = f"el-share-{strategy}"
    make_topic(cluster, topic, records=0)
    group = f"{topic}-g"
    conf = {"partition.assignment.strategy": strategy}
    members = [Traced(cluster, group, topic, "a", **conf)]
    assert settle(members, topic) == [set(range(PARTITIONS))]
    members.append(Traced(cluster, group, topic, "b", **conf))
    split = settle(members, topic)
    assert sorted(len(s) for s in split) == [2, 2]
    members.append(Traced(cluster, group, topic, "c", **conf))
    split = settle(members, topic)
    assert sorted(len(s) for s in split) == [1, 1, 2]
    if strategy == "cooperative-sticky":
        # incremental: a joining member never made the others give up everything
        for member in members:
            for kind, partitions in member.trace:
                if kind == "revoke":
                    assert len(partitions) < PARTITIONS, member.trace
    leaver = members.pop(0)
    leaver.consumer.close()  # on_revoke, then LeaveGroup
    assert leaver.owned == set() and leaver.trace[-1][0] == "revoke"
    split = settle(members, topic)
    assert sorted(len(s) for s in split) == [2, 2]
    for member in members:
        member.consumer.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_epochlog_and_confluent_kafka_members_share_one_group(cluster, strategy) -> None:
    topic = f"el-mixed-{strategy}"
    make_topic(cluster, topic, records=0)
    group = f"{topic}-g"
    ours = [
        Traced(cluster, group, topic, n, **{"partition.assignment.strategy": strategy})
        for n in "ab"
    ]
    theirs = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "session.timeout.ms": 6000,
            "partition.assignment.strategy": strategy,
            "enable.auto.commit": False,
        }
    )
    theirs.subscribe([topic])
    everything = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    deadline = time.monotonic() + 40
    while True:
        theirs.poll(0.05)
        for member in ours:
            member.consumer.poll(0.05)
        their_part = {TopicPartition(tp.topic, tp.partition) for tp in theirs.assignment()}
        owned = [m.owned for m in ours] + [their_part]
        if (
            all(owned)
            and sum(len(o) for o in owned) == PARTITIONS
            and set().union(*owned) == everything
            and all(m.consumer.assignment() == m.owned for m in ours)
        ):
            break
        assert time.monotonic() < deadline, f"not settled: {owned}"
    theirs.close()
    assert sorted(len(s) for s in settle(ours, topic)) == [2, 2]
    for member in ours:
        member.consumer.close()


def test_a_static_member_restarts_without_a_rebalance(cluster) -> None:
    topic = "el-static"
    make_topic(cluster, topic, records=0)
    conf = {"group.instance.id": "instance-a", "session.timeout.ms": 10000}
    first = Traced(cluster, "el-static-g", topic, "first", **conf)
    settle([first], topic)
    generation = first.consumer.generation_id
    first.consumer.close()  # a static member sends no LeaveGroup
    second = Traced(cluster, "el-static-g", topic, "second", **conf)
    settle([second], topic)
    assert second.consumer.generation_id == generation  # same generation: no rebalance
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    described = admin.describe_consumer_groups(["el-static-g"])["el-static-g"].result(timeout=10)
    assert described.state.name == "STABLE"
    assert [m.group_instance_id for m in described.members] == ["instance-a"]
    second.consumer.close()


def test_a_pattern_subscription_picks_up_a_new_topic(cluster) -> None:
    make_topic(cluster, "el-pattern-1", records=4)
    consumer = group_consumer(cluster, "el-pattern-g", **{"metadata.max.age.ms": 500})
    assigned: list[TopicPartition] = []
    consumer.subscribe(pattern=r"el-pattern-\d+", on_assign=lambda c, ps: assigned.extend(ps))
    assert len(poll_values(consumer, 4)) == 4
    consumer.commit()  # the new topic's rebalance revokes el-pattern-1 (eager): resume there
    make_topic(cluster, "el-pattern-2", records=4)
    got = poll_values(consumer, 4, timeout_s=30)
    assert sorted(got) == sorted(f"el-pattern-2-{i}".encode() for i in range(4))
    assert consumer.subscription() == {"el-pattern-1", "el-pattern-2"}
    assert {tp.topic for tp in consumer.assignment()} == {"el-pattern-1", "el-pattern-2"}
    consumer.close()


def test_a_member_that_stops_polling_leaves_and_the_others_take_over(cluster) -> None:
    topic = "el-slow"
    make_topic(cluster, topic, records=0)
    conf = {"max.poll.interval.ms": 3000}
    slow = Traced(cluster, "el-slow-g", topic, "slow", **conf)
    busy = Traced(cluster, "el-slow-g", topic, "busy", **conf)
    settle([slow, busy], topic)
    before = busy.consumer.generation_id
    # `slow` stops polling; `busy` keeps polling and gets everything once `slow` is out
    deadline = time.monotonic() + 30
    while busy.owned != {TopicPartition(topic, p) for p in range(PARTITIONS)}:
        busy.consumer.poll(0.1)
        assert time.monotonic() < deadline, busy.trace
    assert busy.consumer.generation_id > before
    assert slow.trace[-1][0] == "assign"  # no callback ran: it was not polling
    slow.consumer.poll(0.1)  # back: its partitions are reported lost, and it rejoins
    assert slow.trace[-1][0] == "lost"
    assert len(settle([slow, busy], topic)) == 2
    slow.consumer.close()
    busy.consumer.close()


def test_the_asyncio_consumer_awaits_coroutine_callbacks_and_commits_in_the_background(
    cluster,
) -> None:
    import asyncio

    from epochlog.client import AsyncConsumer

    values = make_topic(cluster, "el-async")

    async def main() -> None:
        events: list[tuple[str, int]] = []

        async def on_assign(consumer: AsyncConsumer, partitions: list[TopicPartition]) -> None:
            await asyncio.sleep(0)
            events.append(("assign", len(partitions)))

        async def on_revoke(consumer: AsyncConsumer, partitions: list[TopicPartition]) -> None:
            await consumer.commit()  # the classic: commit what was read before giving it up
            events.append(("revoke", len(partitions)))

        config = {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "el-async-g",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
        async with AsyncConsumer(config) as consumer:
            consumer.subscribe(["el-async"], on_assign=on_assign, on_revoke=on_revoke)
            got: list[bytes] = []
            while len(got) < len(values):
                got.extend(r.value for r in await consumer.poll(0.2))
            await consumer.commit_async()
            committed = await consumer.committed([("el-async", p) for p in range(PARTITIONS)])
            assert sum(o.offset for o in committed.values()) == len(values)
        assert events == [("assign", PARTITIONS), ("revoke", PARTITIONS)]

    asyncio.run(main())


def test_auto_commit_on_close_and_an_assigning_consumer_resumes_at_the_commit(cluster) -> None:
    values = make_topic(cluster, "el-auto")
    first = group_consumer(
        cluster, "el-auto-g", **{"enable.auto.commit": True, "auto.commit.interval.ms": 60000}
    )
    first.subscribe(["el-auto"])
    assert sorted(poll_values(first, len(values))) == sorted(values)
    first.close()  # the interval has not come round: the commit on close stores the positions
    # assign() under the same group id starts at the committed offsets, without joining
    second = group_consumer(cluster, "el-auto-g")
    second.assign([("el-auto", p) for p in range(PARTITIONS)])
    assert poll_values(second, 1, timeout_s=3) == []
    committed = second.committed([("el-auto", p) for p in range(PARTITIONS)])
    assert [o.offset for o in committed.values()] == [len(values) // PARTITIONS] * PARTITIONS
    second.commit({("el-auto", 0): 0})  # generation -1: a consumer that assigns commits too
    assert second.committed([("el-auto", 0)])[TopicPartition("el-auto", 0)].offset == 0
    second.close()


def test_auto_commit_commits_on_its_interval_while_the_consumer_polls(cluster) -> None:
    values = make_topic(cluster, "el-interval")
    consumer = group_consumer(
        cluster, "el-interval-g", **{"enable.auto.commit": True, "auto.commit.interval.ms": 300}
    )
    try:
        consumer.subscribe(["el-interval"])
        read = 0
        deadline = time.monotonic() + 30
        while read < len(values):
            assert time.monotonic() < deadline, f"read {read} of {len(values)}"
            read += len(consumer.poll(0.2))
        # Keep polling, as an application does, past a few intervals; no explicit commit.
        committed_total = 0
        deadline = time.monotonic() + 10
        while committed_total < len(values):
            assert time.monotonic() < deadline, f"only {committed_total} committed"
            consumer.poll(0.2)
            checker = ck.Consumer(
                {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "el-interval-g"}
            )
            found = checker.committed(
                [ck.TopicPartition("el-interval", p) for p in range(PARTITIONS)], timeout=10
            )
            checker.close()
            committed_total = sum(max(tp.offset, 0) for tp in found)
    finally:
        consumer.close()
