"""The group coordinator's broker dies or shuts down while members consume and commit.

kill -9: the new leader of the group's `__consumer_offsets` partition loads the group and its
offsets; the members find it and carry on; no acknowledged commit is lost and none moves
backwards. A controlled shutdown moves the coordinator without a rebalance: the loaded group is
Stable with its members, who only have to find the new coordinator."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from epochlog.client import Admin
from epochlog.testing.cluster import LocalCluster

PARTITIONS = 6
RECORDS = 6000


def start(tmp_path) -> LocalCluster:
    cluster = LocalCluster(
        tmp_path,
        3,
        broker_config={
            "group.initial.rebalance.delay.ms": 300,
            "offsets.topic.num.partitions": 3,
            "min.insync.replicas": 2,
        },
        zk_session_timeout_ms=4000,
    )
    cluster.start()
    return cluster


def fill(cluster: LocalCluster, topic: str) -> None:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(topic, PARTITIONS, 3)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def coordinator_of(cluster: LocalCluster, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    return admin.describe_consumer_groups([group])[group].result(timeout=20).coordinator.id


class Member(threading.Thread):
    """Consumes slowly and commits synchronously every 50 records; remembers every commit the
    coordinator acknowledged and every assignment it was given."""

    def __init__(self, cluster: LocalCluster, group: str, topic: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.consumer = ck.Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
            }
        )
        self.topic, self.stop = topic, stop
        self.acked: dict[int, int] = defaultdict(int)  # partition -> highest acknowledged commit
        self.assigned = 0
        self.errors: list[str] = []

    def run(self) -> None:
        def on_assign(consumer, partitions):
            self.assigned += 1

        self.consumer.subscribe([self.topic], on_assign=on_assign)
        since_commit = 0
        while not self.stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            since_commit += 1
            time.sleep(0.001)
            if since_commit >= 50:
                since_commit = 0
                try:
                    for tp in self.consumer.commit(asynchronous=False) or []:
                        if tp.error is None and tp.offset >= 0:
                            self.acked[tp.partition] = max(self.acked[tp.partition], tp.offset)
                except ck.KafkaException as exc:  # e.g. the coordinator moved: retried later
                    self.errors.append(str(exc))
        self.consumer.close()


def committed_offsets(cluster: LocalCluster, group: str, topic: str) -> dict[int, int]:
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        found = consumer.committed(
            [ck.TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20
        )
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def run_members(cluster, group, topic, stop, count=2) -> list[Member]:
    members = [Member(cluster, group, topic, stop) for _ in range(count)]
    for member in members:
        member.start()
    return members


def test_kill_9_of_the_coordinator_loses_no_acknowledged_commit(tmp_path) -> None:
    cluster = start(tmp_path)
    try:
        fill(cluster, "orders")
        stop = threading.Event()
        members = run_members(cluster, "billing", "orders", stop)
        deadline = time.monotonic() + 60
        while sum(len(m.acked) for m in members) < PARTITIONS:
            assert time.monotonic() < deadline, "members did not start committing"
            time.sleep(0.2)
        victim = coordinator_of(cluster, "billing")
        cluster.kill_broker(victim)
        killed_at = time.monotonic()
        before = {p: max(m.acked.get(p, 0) for m in members) for p in range(PARTITIONS)}
        # The members keep committing through the new coordinator.
        deadline = time.monotonic() + 60
        while True:
            now = {p: max(m.acked.get(p, 0) for m in members) for p in range(PARTITIONS)}
            if sum(now.values()) >= RECORDS or (
                any(now[p] > before[p] for p in now) and time.monotonic() - killed_at > 15
            ):
                break
            assert time.monotonic() < deadline, "no commit acknowledged after the kill"
            time.sleep(0.2)
        assert coordinator_of(cluster, "billing") != victim
        stop.set()
        for member in members:
            member.join(30)
        acked = {p: max(m.acked.get(p, 0) for m in members) for p in range(PARTITIONS)}
        committed = committed_offsets(cluster, "billing", "orders")
        for p in range(PARTITIONS):
            assert committed[p] >= acked[p], f"partition {p}: commit {acked[p]} lost ({committed})"
    finally:
        cluster.close()


@pytest.mark.parametrize("members", [2])
def test_a_controlled_shutdown_moves_the_coordinator_without_a_rebalance(tmp_path, members) -> None:
    cluster = start(tmp_path)
    try:
        fill(cluster, "events")
        stop = threading.Event()
        running = run_members(cluster, "audit", "events", stop, members)
        deadline = time.monotonic() + 60
        while sum(len(m.acked) for m in running) < PARTITIONS:
            assert time.monotonic() < deadline, "members did not start committing"
            time.sleep(0.2)
        assignments = [m.assigned for m in running]
        victim = coordinator_of(cluster, "audit")
        cluster.stop_broker(victim)
        deadline = time.monotonic() + 60
        while coordinator_of(cluster, "audit") == victim:
            assert time.monotonic() < deadline
        progress = {p: max(m.acked.get(p, 0) for m in running) for p in range(PARTITIONS)}
        deadline = time.monotonic() + 60
        while not any(
            max(m.acked.get(p, 0) for m in running) > progress[p] for p in range(PARTITIONS)
        ):
            assert time.monotonic() < deadline, "no commit after the move"
            time.sleep(0.2)
        stop.set()
        for member in running:
            member.join(30)
        # Nobody was assigned again: the group stayed Stable with the same generation.
        assert [m.assigned for m in running] == assignments
    finally:
        cluster.close()


class EpochlogMember(threading.Thread):
    """The same member with epochlog's own consumer: commits every 50 records it read."""

    def __init__(self, cluster: LocalCluster, group: str, topic: str, stop: threading.Event):
        super().__init__(daemon=True)
        from epochlog.client import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
            }
        )
        self.topic, self.stop = topic, stop
        self.acked: dict[int, int] = defaultdict(int)
        self.errors: list[str] = []

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        since_commit = 0
        while not self.stop.is_set():
            since_commit += len(self.consumer.poll(0.2))
            if since_commit >= 50:
                since_commit = 0
                try:
                    for tp, committed in self.consumer.commit(timeout=10).items():
                        self.acked[tp.partition] = max(self.acked[tp.partition], committed.offset)
                except Exception as exc:  # the coordinator moved: the next commit goes on
                    self.errors.append(str(exc))
        self.consumer.close()


def test_epochlog_members_carry_on_through_a_kill_9_of_their_coordinator(tmp_path) -> None:
    cluster = start(tmp_path)
    try:
        fill(cluster, "ledger")
        stop = threading.Event()
        members = [EpochlogMember(cluster, "ledger-g", "ledger", stop) for _ in range(2)]
        for member in members:
            member.start()
        deadline = time.monotonic() + 60
        while sum(len(m.acked) for m in members) < PARTITIONS:
            assert time.monotonic() < deadline, "members did not start committing"
            time.sleep(0.2)
        victim = coordinator_of(cluster, "ledger-g")
        cluster.kill_broker(victim)
        before = {p: max(m.acked.get(p, 0) for m in members) for p in range(PARTITIONS)}
        # More to read and commit once the members have found the new coordinator.
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
        for i in range(600):
            producer.produce("ledger", b"after-%d" % i, partition=i % PARTITIONS)
        assert producer.flush(60) == 0
        deadline = time.monotonic() + 60
        while not any(
            max(m.acked.get(p, 0) for m in members) > before[p] for p in range(PARTITIONS)
        ):
            assert time.monotonic() < deadline, "no commit acknowledged after the kill"
            time.sleep(0.2)
        assert coordinator_of(cluster, "ledger-g") != victim
        stop.set()
        for member in members:
            member.join(30)
        acked = {p: max(m.acked.get(p, 0) for m in members) for p in range(PARTITIONS)}
        committed = committed_offsets(cluster, "ledger-g", "ledger")
        for p in range(PARTITIONS):
            assert committed[p] >= acked[p], f"partition {p}: commit {acked[p]} lost ({committed})"
    finally:
        cluster.close()
