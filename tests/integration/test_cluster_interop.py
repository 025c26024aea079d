"""Existing Kafka clients against a real local cluster: ZooKeeper + 3 broker processes.

Each client library (confluent-kafka, kafka-python with its default idempotent producer,
aiokafka, kcat) produces keyed records with headers to a topic spread over all brokers and
reads them back byte for byte with assign(). Then every broker is restarted, one of them killed
with SIGKILL, and every acknowledged record must still be there.
"""

from __future__ import annotations

import time

import confluent_kafka as ck
import confluent_kafka.admin
import pytest

from epochlog.client import Admin, KafkaError, NewTopic
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import (
    Record,
    aiokafka_round_trip,
    assert_same,
    confluent_consume,
    confluent_produce,
    kafka_python_round_trip,
    kcat_round_trip,
    records,
    wait_until_brokers_name_the_controller,
)

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("cluster"), 3)
    c.start()
    wait_until_brokers_name_the_controller([b.port for b in c.brokers.values()])
    yield c
    c.close()


@pytest.fixture(scope="module")
def acknowledged() -> dict[str, list[Record]]:
    """Every record a client had acknowledged, by topic, for the restart test."""
    return {}


def create(cluster: LocalCluster, topic: str, partitions: int = PARTITIONS) -> None:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(topic, partitions, 1)
        leaders = {p.leader for p in admin.describe_topics([topic])[topic].partitions}
    if partitions == 3:
        assert leaders == {1, 2, 3}  # spread over the brokers


def test_confluent_kafka_idempotent_round_trip(cluster, acknowledged):
    create(cluster, "confluent")
    items = records("confluent", 600, PARTITIONS)
    confluent_produce(
        cluster.bootstrap_servers, "confluent", items, acks="all", **{"enable.idempotence": True}
    )
    assert_same(confluent_consume(cluster.bootstrap_servers, "confluent", PARTITIONS, 600), items)
    acknowledged["confluent"] = items


def test_kafka_python_default_idempotent_round_trip(cluster, acknowledged):
    create(cluster, "kafka-python")
    items = records("kafka-python", 300, PARTITIONS)
    offsets, got = kafka_python_round_trip(
        cluster.bootstrap_servers, "kafka-python", items, PARTITIONS
    )
    assert sorted(offsets) == sorted(list(range(100)) * 3)
    assert_same(got, items)
    acknowledged["kafka-python"] = items


def test_aiokafka_round_trip(cluster, acknowledged):
    create(cluster, "aiokafka")
    items = records("aiokafka", 300, PARTITIONS)
    assert_same(
        aiokafka_round_trip(cluster.bootstrap_servers, "aiokafka", items, PARTITIONS), items
    )
    acknowledged["aiokafka"] = items


def test_kcat_round_trip(cluster, acknowledged):
    create(cluster, "kcat", partitions=1)
    messages = kcat_round_trip(cluster.bootstrap_servers, "kcat", 100)
    assert [(j["key"], j["payload"]) for j in messages] == [
        (f"key{i}", f"value {i} é") for i in range(100)
    ]
    assert all(j["headers"] == ["src", "kcat"] for j in messages)
    acknowledged["kcat"] = [
        (0, f"key{i}".encode(), f"value {i} é".encode(), [("src", b"kcat")]) for i in range(100)
    ]


def test_describe_cluster_shows_broker_epochs_and_other_clients_skip_them(cluster):
    epochs = cluster.zk_state()["brokers"]
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        described = admin.describe_cluster()
    assert {b.node_id: b.epoch for b in described.brokers} == epochs
    assert described.controller_id == cluster.controller_id()
    # librdkafka decodes the same response (the epoch is a tagged field it does not know).
    librdkafka = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    nodes = librdkafka.describe_cluster().result(10).nodes
    assert sorted(node.id for node in nodes) == sorted(epochs)


def test_topic_configs_are_validated_and_applied(cluster):
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        refused = admin.create_topics([NewTopic("bad-config", 1, 3, {"retention.ms": "soon"})])
        error = refused["bad-config"]
        assert isinstance(error, KafkaError) and error.code is ErrorCode.INVALID_CONFIG
        assert "retention.ms" in str(error)
        assert "bad-config" not in admin.list_topics()
        created = admin.create_topics(
            [NewTopic("configured", 1, 3, {"segment.bytes": "2048", "min.insync.replicas": "3"})]
        )
        assert created == {"configured": None}
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(40):  # 20 batches of ~1 KiB
        producer.produce("configured", b"v" * 500, key=b"%d" % i)
        if i % 2:
            assert producer.flush(30) == 0
    # segment.bytes=2048 rolled every replica's log many times (the default is 1 GiB).
    for broker in cluster.brokers.values():
        segments = list((broker.directory / "logs").rglob("configured-0/*.log"))
        assert len(segments) > 3, (broker.broker_id, segments)
    # min.insync.replicas=3: with one replica down, acks=all is refused on this topic only.
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        leader = admin.describe_topics(["configured"])["configured"].partitions[0].leader
    victim = next(b for b in cluster.brokers if b not in (cluster.controller_id(), leader))
    cluster.kill_broker(victim)
    try:
        errors: list[object] = []
        strict = ck.Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "retries": 0,  # report the broker's error, not the timeout of the retries
                "message.timeout.ms": 10000,
            }
        )
        deadline = time.monotonic() + 30
        while victim in cluster.zk_state()["brokers"]:  # its session expires, the ISR shrinks
            assert time.monotonic() < deadline, "the killed broker's registration stayed"
            time.sleep(0.2)
        time.sleep(1)  # the controller's LeaderAndIsr with the smaller ISR reaches the leader
        strict.produce("configured", b"x", on_delivery=lambda err, _m: errors.append(err))
        strict.flush(15)
        assert errors and errors[0] is not None
        assert errors[0].code() == ck.KafkaError.NOT_ENOUGH_REPLICAS
    finally:
        cluster.start_broker(victim)


def test_every_acknowledged_record_survives_restarting_all_brokers(cluster, acknowledged):
    assert set(acknowledged) == {"confluent", "kafka-python", "aiokafka", "kcat"}
    cluster.stop_broker(1)
    cluster.kill_broker(2)  # a crash: recovery on restart
    cluster.stop_broker(3)
    for broker_id in (1, 2, 3):
        cluster.start_broker(broker_id, wait=False)
    cluster.wait_ready()
    for topic, items in acknowledged.items():
        partitions = 1 if topic == "kcat" else PARTITIONS
        got = confluent_consume(cluster.bootstrap_servers, topic, partitions, len(items))
        assert_same(got, items)
