"""Issue 16 (log dirs, producers, paginated topics) on real brokers with two log dirs each.

kafka-python 3.0.12 is the real client with all four APIs (confluent-kafka 2.16 / librdkafka
2.16 and aiokafka 0.14 have none of them: librdkafka's describe_topics reads Metadata);
epochlog's own admin client and CLI are checked beside it. The move test writes with an acks=all
idempotent confluent-kafka producer while a replica moves between the dirs of its leader and
reads every acknowledged record back after a restart of that broker.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from pathlib import Path

import confluent_kafka as ck
import pytest
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartitionReplica as KpReplica

from epochlog.cli.main import main as cli_main
from epochlog.client import Admin
from epochlog.client.admin_log_dirs import TopicPartitionReplica
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.cluster import LocalCluster
from epochlog.testing.faults import FaultRules

TOPIC = "ledger"
PARTITIONS = 5


def wait_until(predicate, timeout_s: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout_s, f"timed out after {timeout_s} s: {what}"
        time.sleep(0.2)
    return time.monotonic() - started


def start_cluster(tmp_path: Path, zk_hosts: str, **config) -> LocalCluster:
    cluster = LocalCluster(
        tmp_path / "cluster",
        2,
        zookeeper=zk_hosts,
        broker_config={"log.segment.bytes": 1 << 20, **config},
        zk_session_timeout_ms=3000,
        log_dirs_per_broker=2,
    )
    cluster.start()
    return cluster


def isr_full(admin: Admin, topic: str, partitions: int) -> bool:
    described = admin.describe_topics([topic])[topic]
    return len(described.partitions) == partitions and all(
        len(p.isr) == 2 and p.leader >= 0 for p in described.partitions
    )


def log_dirs_of(cluster: LocalCluster, broker: int) -> list[str]:
    base = cluster.brokers[broker].directory
    return [str((base / "logs").resolve()), str((base / "logs-2").resolve())]


def replica_dirs(admin: Admin, broker: int, topic: str) -> dict[int, list[tuple[str, bool]]]:
    """partition -> [(dir, is_future)] on `broker`."""
    found: dict[int, list[tuple[str, bool]]] = defaultdict(list)
    for path, info in admin.describe_log_dirs([broker])[broker].items():
        for tp, replica in info.replicas.items():
            if tp.topic == topic:
                found[tp.partition].append((path, replica.is_future))
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper):
    from epochlog.zk.session import close_client, connect

    hosts = zookeeper.connect_string + "/log-dirs-module"
    root = connect(zookeeper.connect_string, session_timeout_ms=3000)
    try:
        root.ensure_path("/log-dirs-module")
    finally:
        close_client(root)
    started = start_cluster(tmp_path_factory.mktemp("logdirs"), hosts)
    try:
        with Admin({"bootstrap.servers": started.bootstrap_servers}) as admin:
            admin.create_topic(TOPIC, PARTITIONS, 2)
            wait_until(lambda: isr_full(admin, TOPIC, PARTITIONS), 30, "the ISRs to fill")
        producer = ck.Producer(
            {"bootstrap.servers": started.bootstrap_servers, "enable.idempotence": True}
        )
        for i in range(500):
            producer.produce(TOPIC, b"v%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        yield started
    finally:
        started.close()


def test_describe_log_dirs_from_kafka_python_our_admin_and_the_cli(cluster, capsys):
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        answers = {a["broker"]: a["log_dirs"] for a in kp.describe_log_dirs()}
    finally:
        kp.close()
    assert sorted(answers) == [1, 2]
    for broker, dirs in answers.items():
        assert sorted(d["log_dir"] for d in dirs) == log_dirs_of(cluster, broker)
        assert all(d["error_code"] == 0 and d["total_bytes"] > 0 for d in dirs)
        assert all(0 <= d["usable_bytes"] <= d["total_bytes"] for d in dirs)
        held = sorted(
            p["partition_index"]
            for d in dirs
            for t in d["topics"]
            if t["name"] == TOPIC
            for p in t["partitions"]
        )
        assert held == list(range(PARTITIONS))  # RF 2 on 2 brokers: every partition, once
        sizes = [p["partition_size"] for d in dirs for t in d["topics"] for p in t["partitions"]]
        assert all(size > 0 for size in sizes)

    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        ours = admin.describe_log_dirs()
    for broker, dirs in ours.items():
        mine = {
            (path, tp.topic, tp.partition, r.size, r.is_future)
            for path, info in dirs.items()
            for tp, r in info.replicas.items()
        }
        theirs = {
            (d["log_dir"], t["name"], p["partition_index"], p["partition_size"], p["is_future_key"])
            for d in answers[broker]
            for t in d["topics"]
            for p in t["partitions"]
        }
        assert mine == theirs

    capsys.readouterr()
    assert (
        cli_main(
            [
                "log-dirs",
                "describe",
                "--bootstrap-server",
                cluster.bootstrap_servers,
                "--broker-list",
                "2",
                "--topic-list",
                TOPIC,
                "--json",
            ]
        )
        == 0
    )
    document = json.loads(capsys.readouterr().out)
    assert document["version"] == 1 and [b["broker"] for b in document["brokers"]] == [2]
    listed = sorted(
        p["partition"] for d in document["brokers"][0]["logDirs"] for p in d["partitions"]
    )
    assert listed == sorted(f"{TOPIC}-{i}" for i in range(PARTITIONS))
    assert cli_main(["log-dirs", "describe", "--bootstrap-server", cluster.bootstrap_servers]) == 0
    table = capsys.readouterr().out
    assert "LOG-DIR" in table and f"{TOPIC}-0" in table
    code = cli_main(
        [
            "log-dirs",
            "describe",
            "--bootstrap-server",
            cluster.bootstrap_servers,
            "--broker-list",
            "9",
        ]
    )
    assert code == 2
    assert "do not exist from --broker-list: 9" in " ".join(capsys.readouterr().err.split())


def test_describe_producers_from_kafka_python_and_our_admin(cluster):
    partitions = [KpTopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        ours = admin.describe_producers([(TOPIC, p) for p in range(PARTITIONS)])
        leaders = {p.partition: p.leader for p in admin.describe_topics([TOPIC])[TOPIC].partitions}
        follower = 1 if leaders[0] == 2 else 2
        from_follower = admin.describe_producers([(TOPIC, 0)], broker_id=follower)
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        states = kp.describe_producers(partitions)
        kp_follower = kp.describe_producers([KpTopicPartition(TOPIC, 0)], broker_id=follower)
    finally:
        kp.close()
    for p in range(PARTITIONS):
        producers = states[KpTopicPartition(TOPIC, p)].active_producers
        assert len(producers) == 1  # one idempotent producer wrote 100 records here
        state = producers[0]
        assert state.producer_id >= 0 and state.producer_epoch == 0
        assert state.last_sequence == 99  # sequences 0..99
        assert state.coordinator_epoch == -1 and state.current_transaction_start_offset == -1
        assert state.last_timestamp > 0
        (mine,) = ours[(TOPIC, p)]
        assert (mine.producer_id, mine.last_sequence) == (state.producer_id, 99)
    # A follower answers from the producer state it keeps from the batches it copies, as
    # Kafka's does (kafka-transactions.sh describe-producers --broker-id).
    assert kp_follower[KpTopicPartition(TOPIC, 0)].active_producers[0].last_sequence == 99
    assert [s.last_sequence for s in from_follower[(TOPIC, 0)]] == [99]


def test_describe_topic_partitions_pages_with_kafka_python_and_our_admin(cluster):
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        first = kp.describe_topic_partitions([TOPIC], response_partition_limit=2)
        pages = [first]
        while pages[-1]["next_cursor"] is not None:
            pages.append(
                kp.describe_topic_partitions(
                    [TOPIC], response_partition_limit=2, cursor=pages[-1]["next_cursor"]
                )
            )
        unknown = kp.describe_topic_partitions(["no-such-topic"])
    finally:
        kp.close()
    assert first["next_cursor"] == {"topic_name": TOPIC, "partition_index": 2}
    seen = [p["partition_index"] for page in pages for t in page["topics"] for p in t["partitions"]]
    assert seen == list(range(PARTITIONS)) and len(pages) == 3
    topic = first["topics"][0]
    assert topic["error_code"] == 0 and not topic["is_internal"]
    assert topic["topic_authorized_operations"] == 3576  # every topic operation (no authorizer)
    assert unknown["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        paged = admin.describe_topic_partitions([TOPIC], page_size=2)[TOPIC]
        metadata = admin.describe_topics([TOPIC])[TOPIC]
        everything = admin.describe_topic_partitions(page_size=1)
    assert [(p.partition, p.leader, p.replicas, p.isr) for p in paged.partitions] == [
        (p.partition, p.leader, p.replicas, p.isr) for p in metadata.partitions
    ]
    assert paged.topic_id == metadata.topic_id
    assert len(everything[TOPIC].partitions) == PARTITIONS


def test_alter_replica_log_dirs_errors_from_kafka_python_and_our_admin(cluster):
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        answer = kp.alter_replica_log_dirs(
            {
                KpReplica(TOPIC, 0, 1): "/no/such/dir",
                KpReplica(TOPIC, 1, 1): "relative/dir",
                KpReplica("no-such-topic", 0, 1): log_dirs_of(cluster, 1)[0],
            }
        )
    finally:
        kp.close()
    names = {r.topic + "-" + str(r.partition): e.__name__ for r, e in answer.items()}
    assert names[f"{TOPIC}-0"] == "LogDirNotFoundError"
    assert names[f"{TOPIC}-1"] == "LogDirNotFoundError"
    assert names["no-such-topic-0"] == "ReplicaNotAvailableError"
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        ours = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 2): "/nowhere"})
    error = ours[TopicPartitionReplica(TOPIC, 0, 2)]
    assert error is not None and error.code is ErrorCode.LOG_DIR_NOT_FOUND


class AckedProducer:
    """acks=all idempotent confluent-kafka producer in a thread, remembering what was acked."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acked: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.topic = topic
        self.producer = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "batch.size": 16384,
                "message.timeout.ms": 60000,
            }
        )
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[msg.partition()].append((msg.offset(), msg.value()))

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            self.producer.produce(
                self.topic,
                b"rec-%07d-" % i + b"z" * 200,
                partition=0,
                on_delivery=self._on_delivery,
            )
            self.producer.poll(0)
            i += 1
            if i % 50 == 0:
                time.sleep(0.002)
        assert self.producer.flush(60) == 0

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(90)
        assert not self.thread.is_alive()
        assert not self.failed, self.failed[:5]


def read_partition(bootstrap: str, topic: str, partition: int, until: int) -> dict[int, bytes]:
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([ck.TopicPartition(topic, partition, 0)])
    found: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    try:
        while len(found) < until and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            found[msg.offset()] = msg.value()
    finally:
        consumer.close()
    return found


@pytest.mark.slow
def test_a_replica_moves_between_log_dirs_under_acks_all_load_and_survives_a_restart(
    tmp_path, zk_hosts
):
    topic = "moving"
    cluster = start_cluster(tmp_path, zk_hosts, **{"min.insync.replicas": 2})
    try:
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topic(topic, 1, 2)
            wait_until(lambda: isr_full(admin, topic, 1), 30, "the ISR to fill")
            leader = admin.describe_topics([topic])[topic].partitions[0].leader
            producer = AckedProducer(cluster.bootstrap_servers, topic)
            wait_until(lambda: len(producer.acked[0]) > 20000, 60, "20,000 acked records")
            ((source, _),) = replica_dirs(admin, leader, topic)[0]
            target = next(d for d in log_dirs_of(cluster, leader) if d != source)
            replica = TopicPartitionReplica(topic, 0, leader)
            assert admin.alter_replica_log_dirs({replica: target}) == {replica: None}
            started = time.monotonic()
            wait_until(
                lambda: replica_dirs(admin, leader, topic)[0] == [(target, False)],
                60,
                f"the replica on broker {leader} to move to {target}",
            )
            moved_in = time.monotonic() - started
            acked_at_move = len(producer.acked[0])
            time.sleep(2)  # writes go on to the moved log
            producer.finish()
        total = len(producer.acked[0])
        assert total > acked_at_move
        cluster.stop_broker(leader)
        cluster.start_broker(leader)
        old_dir, new_dir = Path(source), Path(target)
        assert not [p for p in old_dir.iterdir() if p.name.startswith(f"{topic}-")]
        assert (new_dir / f"{topic}-0").is_dir()
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            wait_until(lambda: isr_full(admin, topic, 1), 60, "the ISR to fill again")
            assert replica_dirs(admin, leader, topic)[0] == [(target, False)]
            # Read from the moved replica itself: make it the only one serving.
            other = 1 if leader == 2 else 2
        cluster.stop_broker(other)
        found = read_partition(cluster.bootstrap_servers, topic, 0, total)
        missing = [o for o, v in producer.acked[0] if found.get(o) != v]
        print(
            f"moved a replica of {acked_at_move} records in {moved_in:.1f} s under acks=all load; "
            f"{total} records acknowledged, {len(missing)} missing after a restart"
        )
        assert missing == []
    finally:
        cluster.close()


@pytest.mark.slow
def test_an_offline_log_dir_is_a_storage_error_in_describe_log_dirs(tmp_path, zk_hosts):
    topic = "failing"
    faults = tmp_path / "faults.json"
    FaultRules.write(faults, [])
    cluster = start_cluster(
        tmp_path,
        zk_hosts,
        **{"epochlog.test.faults.file": str(faults), "epochlog.log.dir.probe.interval.ms": 500},
    )
    try:
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topic(topic, 1, 2)
            wait_until(lambda: isr_full(admin, topic, 1), 30, "the ISR to fill")
            victim = admin.describe_topics([topic])[topic].partitions[0].leader
            ((failing_dir, _),) = replica_dirs(admin, victim, topic)[0]
            FaultRules.write(faults, [{"storage": "EIO", "broker": victim}])
            producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
            for i in range(20):
                producer.produce(topic, b"x%d" % i)
            assert producer.flush(60) == 0  # acknowledged once the leadership moved

            def offline() -> bool:
                dirs = admin.describe_log_dirs([victim])[victim]
                return dirs[failing_dir].error is not None

            wait_until(offline, 30, f"{failing_dir} to be reported offline")
            dirs = admin.describe_log_dirs([victim])[victim]
            assert dirs[failing_dir].error.code is ErrorCode.KAFKA_STORAGE_ERROR
            assert dirs[failing_dir].replicas == {} and dirs[failing_dir].total_bytes == -1
            (healthy,) = [d for d in log_dirs_of(cluster, victim) if d != failing_dir]
            assert dirs[healthy].error is None
        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            (answer,) = kp.describe_log_dirs(brokers=[victim])
        finally:
            kp.close()
        codes = {d["log_dir"]: d["error_code"] for d in answer["log_dirs"]}
        assert codes == {failing_dir: ErrorCode.KAFKA_STORAGE_ERROR, healthy: 0}
        # Moving a replica while a dir is offline is refused, as Kafka refuses it.
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            replica = TopicPartitionReplica(topic, 0, victim)
            error = admin.alter_replica_log_dirs({replica: failing_dir})[replica]
        assert error is not None and error.code is ErrorCode.KAFKA_STORAGE_ERROR
    finally:
        cluster.close()
