"""Partition reassignment (KIP-455) on a real cluster: epochlog's admin client and CLI, and
kafka-python's admin client (confluent-kafka 2.16 has no reassignment API).

One 4-broker cluster for the module, with a fault-rules file: holding broker 4's replica
fetches keeps a reassignment onto it in progress for as long as a test needs. Each test has
its own single-partition topic placed by hand. The controller-failover test runs last and
leaves the cluster with a broker down."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KafkaPythonTopicPartition

from epochlog.cli.main import main as epochlog_main
from epochlog.client import Admin, NewTopic
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.cluster import LocalCluster
from epochlog.testing.faults import FaultRules
from epochlog.zk.reassign_partitions import REASSIGN_PARTITIONS_PATH, encode_reassign_partitions
from epochlog.zk.session import close_client, connect
from tests.integration.interop import wait_until_brokers_name_the_controller

HOLD_BROKER_4 = [{"api": "FETCH", "source": 4, "action": "hold"}]


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reassign-faults") / "faults.json"
    FaultRules.write(path, [])
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, faults: Path) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("reassign"),
        4,
        broker_config={
            "epochlog.test.faults.file": str(faults),
            "auto.leader.rebalance.enable": "false",
        },
    )
    local.start()
    wait_until_brokers_name_the_controller([b.port for b in local.brokers.values()])
    yield local
    local.close()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as client:
        yield client


@pytest.fixture(autouse=True)
def release_holds(faults: Path) -> Iterator[None]:
    yield
    FaultRules.write(faults, [])


def wait_until(predicate: Callable[[], bool], timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what or "condition not reached"
        time.sleep(0.2)


def make_topic(
    cluster: LocalCluster, admin: Admin, name: str, replicas: list[int], records: int = 0
) -> None:
    admin.create_topics([NewTopic(name, replica_assignment={0: replicas})])
    wait_until(lambda: partition(admin, name).isr and len(partition(admin, name).isr) == 3)
    if records:
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
        for i in range(records):
            producer.produce(name, f"{name}-{i}".encode(), partition=0)
        assert producer.flush(30) == 0


def partition(admin: Admin, topic: str) -> Any:
    return admin.describe_topics([topic])[topic].partitions[0]


def topic_znode(cluster: LocalCluster, topic: str) -> dict[str, Any]:
    client = connect(cluster.zk_connect or "", session_timeout_ms=4000)
    try:
        data, _ = client.get(f"/brokers/topics/{topic}")
        return json.loads(data)
    finally:
        close_client(client)


def log_dir(cluster: LocalCluster, broker: int, topic: str) -> Path:
    return cluster.brokers[broker].directory / "logs" / f"{topic}-0"


def moved(admin: Admin, topic: str, replicas: list[int]) -> Callable[[], bool]:
    def check() -> bool:
        p = partition(admin, topic)
        return list(p.replicas) == replicas and sorted(p.isr) == sorted(replicas)

    return check


class Traffic:
    """A confluent-kafka producer (acks=all, idempotent) writing to partition 0 and a consumer
    reading it, each in a thread, until stopped; what was acknowledged and what was read."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.bootstrap = bootstrap
        self.acked: list[bytes] = []
        self.read: list[bytes] = []
        self.stopping = threading.Event()
        self.threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]

    def __enter__(self) -> Traffic:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(90)

    def _produce(self) -> None:
        producer = ck.Producer(
            {"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True}
        )

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                self.acked.append(msg.value())

        i = 0
        while not self.stopping.is_set():
            producer.produce(self.topic, f"v{i}".encode(), partition=0, on_delivery=delivered)
            producer.poll(0.005)
            i += 1
        producer.flush(60)

    def _consume(self) -> None:
        consumer = ck.Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": f"{self.topic}-reader"}
        )
        consumer.assign([ck.TopicPartition(self.topic, 0, ck.OFFSET_BEGINNING)])
        try:
            idle_since = None
            while True:
                msg = consumer.poll(0.3)
                if msg is not None and msg.error() is None:
                    self.read.append(msg.value())
                    idle_since = None
                elif self.stopping.is_set() and not self.threads[0].is_alive():
                    # the producer has flushed: read until every acknowledged record is in
                    if set(self.acked) <= set(self.read):
                        return
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > 30:
                        return
        finally:
            consumer.close()


def test_a_partition_moves_from_1_2_3_to_2_3_4_under_acks_all_traffic(
    cluster: LocalCluster, admin: Admin
) -> None:
    topic = "moving"
    make_topic(cluster, admin, topic, [1, 2, 3], records=2000)
    assert partition(admin, topic).leader == 1
    with Traffic(cluster.bootstrap_servers, topic) as traffic:
        wait_until(lambda: len(traffic.acked) > 200, what="records acknowledged before the move")
        results = admin.alter_partition_reassignments({(topic, 0): [2, 3, 4]})
        assert results == {(topic, 0): None}
        wait_until(moved(admin, topic, [2, 3, 4]), what="the move to 2,3,4")
        acked_before = len(traffic.acked)
        wait_until(lambda: len(traffic.acked) > acked_before + 200, what="records after the move")
    assert traffic.acked, "nothing was acknowledged"
    lost = set(traffic.acked) - set(traffic.read)
    assert not lost, f"{len(lost)} acknowledged records were not read back"
    assert len(traffic.read) == len(set(traffic.read)), "a record was read twice"
    # the leader moved to the first of TRS
    wait_until(lambda: partition(admin, topic).leader == 2, what="broker 2 leading")
    znode = topic_znode(cluster, topic)
    assert znode["partitions"] == {"0": [2, 3, 4]}
    assert not znode.get("adding_replicas") and not znode.get("removing_replicas")
    assert admin.list_partition_reassignments() == {}
    wait_until(lambda: not log_dir(cluster, 1, topic).exists(), what="broker 1's log deleted")
    assert log_dir(cluster, 4, topic).exists()


def test_list_shows_a_reassignment_in_progress_and_cancel_reverts_it(
    cluster: LocalCluster, admin: Admin, faults: Path
) -> None:
    topic = "cancelled"
    make_topic(cluster, admin, topic, [1, 2, 3], records=100)
    FaultRules.write(faults, HOLD_BROKER_4)  # broker 4 never catches up
    assert admin.alter_partition_reassignments({(topic, 0): [2, 3, 4]}) == {(topic, 0): None}
    listed = admin.list_partition_reassignments()
    assert set(listed) == {(topic, 0)}
    assert (listed[(topic, 0)].replicas, listed[(topic, 0)].adding_replicas) == ([2, 3, 4, 1], [4])
    assert listed[(topic, 0)].removing_replicas == [1]
    assert admin.list_partition_reassignments([(topic, 0), ("nope", 3)]) == listed
    znode = topic_znode(cluster, topic)  # Kafka's topic znode format, for the next controller
    assert znode["partitions"]["0"] == [2, 3, 4, 1]
    assert (znode["adding_replicas"], znode["removing_replicas"]) == ({"0": [4]}, {"0": [1]})
    wait_until(lambda: log_dir(cluster, 4, topic).exists(), what="the new replica's log")
    wait_until(lambda: partition(admin, topic).replicas == (2, 3, 4, 1), what="RS in metadata")
    assert 4 not in partition(admin, topic).isr

    # refusals name the partition and change nothing
    refused = admin.alter_partition_reassignments(
        {(topic, 0): [2, 2], ("nope", 0): [1, 2], ("moving", 0): None, (topic, 1): [1]}
    )
    assert {tp: e.code for tp, e in refused.items() if e is not None} == {
        (topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("moving", 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        (topic, 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert admin.list_partition_reassignments() == listed
    # no partitions are added to a topic being reassigned (Kafka's REASSIGNMENT_IN_PROGRESS)
    grown = admin.create_partitions({topic: 2})[topic]
    assert grown is not None and grown.code is ErrorCode.REASSIGNMENT_IN_PROGRESS
    assert topic_znode(cluster, topic)["adding_replicas"] == {"0": [4]}

    assert admin.alter_partition_reassignments({(topic, 0): None}) == {(topic, 0): None}
    wait_until(moved(admin, topic, [2, 3, 1]), what="the original replicas back")
    assert admin.list_partition_reassignments() == {}
    assert topic_znode(cluster, topic)["partitions"] == {"0": [2, 3, 1]}
    wait_until(lambda: not log_dir(cluster, 4, topic).exists(), what="broker 4's log deleted")


def test_the_cli_generates_executes_and_verifies_with_kafkas_vocabulary(
    cluster: LocalCluster, admin: Admin, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = "by-cli"
    make_topic(cluster, admin, topic, [1, 2, 3], records=100)
    server = ["--bootstrap-server", cluster.bootstrap_servers]
    to_move = tmp_path / "topics.json"
    to_move.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    code = epochlog_main(
        ["reassign", "--generate", "--topics-to-move-json-file", str(to_move)]
        + ["--broker-list", "2,3,4", *server]
    )
    out = capsys.readouterr().out
    assert code == 0
    current, proposed = out.split("Proposed partition reassignment configuration\n")
    assert json.loads(current.split("\n")[1])["partitions"][0]["replicas"] == [1, 2, 3]
    proposal = json.loads(proposed)
    assert sorted(proposal["partitions"][0]["replicas"]) == [2, 3, 4]
    assert proposal["partitions"][0]["log_dirs"] == ["any"] * 3

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [4, 3, 2], "log_dirs": ["any"] * 3}
    ]}))  # fmt: skip
    assert (
        epochlog_main(["reassign", "--execute", "--reassignment-json-file", str(plan), *server])
        == 0
    )
    out = capsys.readouterr().out
    assert "Current partition replica assignment\n\n" in out
    rollback = json.loads(out.split("\n")[2])
    assert rollback["partitions"] == [
        {"topic": topic, "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["any"] * 3}
    ]
    assert "Save this to use as the --reassignment-json-file option during rollback" in out
    assert f"Successfully started partition reassignment for {topic}-0" in out

    def verified() -> str:
        assert (
            epochlog_main(["reassign", "--verify", "--reassignment-json-file", str(plan), *server])
            == 0
        )
        return capsys.readouterr().out

    wait_until(lambda: f"Reassignment of partition {topic}-0 is completed." in verified())
    # the old leader is not in TRS: the first of TRS leads
    wait_until(lambda: partition(admin, topic).leader == 4, what="broker 4 leading")

    assert epochlog_main(["reassign", "--list", *server]) == 0
    assert capsys.readouterr().out == "No partition reassignments found.\n"
    assert (
        epochlog_main(["reassign", "--cancel", "--reassignment-json-file", str(plan), *server]) == 0
    )
    assert capsys.readouterr().out == "None of the specified partition reassignments are active.\n"
    bad = tmp_path / "bad.json"
    bad.write_text('{"version":1,"partitions":[{"topic":"by-cli","partition":0,"replicas":[9]}]}')
    assert (
        epochlog_main(["reassign", "--execute", "--reassignment-json-file", str(bad), *server]) == 2
    )
    assert list(partition(admin, topic).replicas) == [4, 3, 2]


def test_kafka_pythons_admin_client_reassigns_lists_and_cancels(
    cluster: LocalCluster, admin: Admin, faults: Path
) -> None:
    topic = "by-kafka-python"
    make_topic(cluster, admin, topic, [1, 2, 3], records=100)
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        tp = KafkaPythonTopicPartition(topic, 0)
        FaultRules.write(faults, HOLD_BROKER_4)
        assert client.alter_partition_reassignments({tp: [1, 2, 4]}) == {tp: None}
        assert client.list_partition_reassignments() == {
            tp: {"replicas": [1, 2, 4, 3], "adding_replicas": [4], "removing_replicas": [3]}
        }
        assert client.alter_partition_reassignments({tp: None}) == {tp: None}
        assert client.list_partition_reassignments() == {}
        FaultRules.write(faults, [])
        assert client.alter_partition_reassignments({tp: [1, 2, 4]}) == {tp: None}
        wait_until(moved(admin, topic, [1, 2, 4]), what="the move to 1,2,4")
        # in TRS, the leader stays, at a new epoch (0 created, 1 started, 2 cancelled,
        # 3 started again, 4 completed)
        wait_until(
            lambda: (
                (partition(admin, topic).leader, partition(admin, topic).leader_epoch) == (1, 4)
            ),
            what="broker 1 leading at epoch 4",
        )
        wait_until(lambda: not log_dir(cluster, 3, topic).exists(), what="broker 3's log")
    finally:
        client.close()


def test_the_zookeeper_request_znode_admin_reassign_partitions_is_honoured(
    cluster: LocalCluster, admin: Admin
) -> None:
    topic = "by-znode"
    make_topic(cluster, admin, topic, [1, 2, 3], records=100)
    client = connect(cluster.zk_connect or "", session_timeout_ms=4000)
    try:
        # as kafka-reassign-partitions --zookeeper wrote it; the unknown partition is dropped
        request = encode_reassign_partitions({(topic, 0): [3, 2, 4], ("nope", 0): [1]})
        client.create(REASSIGN_PARTITIONS_PATH, request, makepath=True)
        wait_until(moved(admin, topic, [3, 2, 4]), what="the move to 3,2,4")
        wait_until(lambda: partition(admin, topic).leader == 3, what="broker 3 leading")
        wait_until(
            lambda: client.exists(REASSIGN_PARTITIONS_PATH) is None,
            what="the znode deleted once its reassignments are done",
        )
    finally:
        close_client(client)


def test_a_reassignment_interrupted_by_a_controller_kill_completes_under_the_next(
    cluster: LocalCluster, admin: Admin, faults: Path
) -> None:
    controller = cluster.controller_id()
    assert controller is not None
    # the controller leads the partition and is the replica the reassignment removes; the
    # added replica is another broker, held back
    *stay, added = [b for b in (1, 2, 3, 4) if b != controller]
    topic = "failover"
    make_topic(cluster, admin, topic, [controller, *stay], records=5000)
    FaultRules.write(faults, [{"api": "FETCH", "source": added, "action": "hold"}])
    assert admin.alter_partition_reassignments({(topic, 0): [*stay, added]}) == {(topic, 0): None}
    wait_until(lambda: log_dir(cluster, added, topic).exists(), what="the new replica's log")
    cluster.kill_broker(controller)  # SIGKILL, while the new replica is held back
    wait_until(lambda: cluster.controller_id() not in (None, controller), what="a new controller")
    znode = topic_znode(cluster, topic)  # what the new controller loaded
    assert znode["adding_replicas"] == {"0": [added]}
    assert znode["removing_replicas"] == {"0": [controller]}
    FaultRules.write(faults, [])
    target = [*stay, added]
    wait_until(moved(admin, topic, target), 90, "the move completed by the new controller")
    wait_until(lambda: partition(admin, topic).leader == stay[0], what="the first of TRS leading")
    assert topic_znode(cluster, topic)["partitions"] == {"0": target}
    assert admin.list_partition_reassignments() == {}
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": topic})
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    values: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(values) < 5000 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.add(msg.value())
    consumer.close()
    assert values == {f"{topic}-{i}".encode() for i in range(5000)}
    assert os.path.isdir(log_dir(cluster, added, topic))
