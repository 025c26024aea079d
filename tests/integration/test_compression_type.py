"""compression.type on the topic and the broker, with real clients against a 2-broker cluster.

Topics have 2 partitions on 2 replicas, so each broker leads one and follows the other. What the
brokers store is read from their log segments on disk: the leader's batches carry the topic's
codec, and the follower's segment holds the very same bytes (followers never recompress)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from epochlog.broker.harness import RawClient
from epochlog.client import Admin
from epochlog.client.admin_configs import AlterOp, ConfigOp
from epochlog.client.admin_configs import ConfigResource as EResource
from epochlog.client.admin_configs import ResourceType as EType
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatch, decode_batches
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import (
    Record,
    assert_same,
    confluent_consume,
    confluent_produce,
    records,
    wait_until_brokers_name_the_controller,
)

PARTITIONS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path_factory.mktemp("compression-type"), 2)
    local.start()
    yield local
    local.close()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> AdminClient:
    wait_until_brokers_name_the_controller([b.port for b in cluster.brokers.values()])
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def until(what: str, check: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"never saw: {what}")


def create_topic(admin: AdminClient, name: str, config: dict[str, str] | None = None) -> None:
    futures = admin.create_topics([NewTopic(name, PARTITIONS, 2, config=config or {})])
    futures[name].result(30)

    def led() -> bool:
        topic = admin.list_topics(name, timeout=10).topics[name]
        return len(topic.partitions) == PARTITIONS and all(
            p.leader >= 0 and len(p.isrs) == 2 for p in topic.partitions.values()
        )

    until(f"{name}: every partition led, both replicas in sync", led)


def stored_batches(cluster: LocalCluster, broker_id: int, topic: str, partition: int) -> bytes:
    """The bytes of every segment of the partition on the broker, in offset order."""
    directory = Path(cluster.directory) / f"broker-{broker_id}" / "logs" / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def replicas_agree(cluster: LocalCluster, topic: str, count: int) -> list[list[RecordBatch]]:
    """Once both brokers hold `count` records of each partition, byte for byte the same: the
    batches of each partition."""
    found: list[list[RecordBatch]] = []

    def agree() -> bool:
        found.clear()
        for partition in range(PARTITIONS):
            copies = [stored_batches(cluster, b, topic, partition) for b in (1, 2)]
            if copies[0] != copies[1]:
                return False
            batches = decode_batches(copies[0])
            if sum(len(b.records) for b in batches) < count:
                return False
            found.append(batches)
        return True

    until(f"{topic}: both replicas holding the same {count} records per partition", agree)
    return found


def kafka_python_consume(bootstrap: str, topic: str, count: int) -> list[Record]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    got: list[Record] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            for messages in consumer.poll(timeout_ms=500).values():
                got.extend((r.partition, r.key, r.value, list(r.headers)) for r in messages)
    finally:
        consumer.close()
    return got


def test_gzip_topic_stores_uncompressed_idempotent_batches_as_gzip(
    cluster: LocalCluster, admin: AdminClient
) -> None:
    topic = "gzip-topic"
    create_topic(admin, topic, {"compression.type": "gzip", "compression.gzip.level": "9"})
    items = records("gz", 300, PARTITIONS)
    confluent_produce(
        cluster.bootstrap_servers,
        topic,
        items,
        **{"compression.type": "none", "enable.idempotence": True, "batch.num.messages": 50},
    )
    assert_same(confluent_consume(cluster.bootstrap_servers, topic, PARTITIONS, 300), items)
    assert_same(kafka_python_consume(cluster.bootstrap_servers, topic, 300), items)
    per_partition = replicas_agree(cluster, topic, 150)
    for batches in per_partition:
        assert len(batches) >= 3  # several producer batches
        assert {b.header.compression for b in batches} == {Compression.GZIP}
        # the idempotent producer's id, epoch and sequences are kept: each batch's base
        # sequence is the count of the records before it
        assert len({(b.header.producer_id, b.header.producer_epoch) for b in batches}) == 1
        assert batches[0].header.producer_id >= 0
        starts = [0]
        for b in batches[:-1]:
            starts.append(starts[-1] + len(b.records))
        assert [b.header.base_sequence for b in batches] == starts


def test_uncompressed_topic_stores_a_zstd_producers_batches_uncompressed(
    cluster: LocalCluster, admin: AdminClient
) -> None:
    topic = "plain-topic"
    create_topic(admin, topic, {"compression.type": "uncompressed"})
    items = records("zs", 100, PARTITIONS)
    confluent_produce(cluster.bootstrap_servers, topic, items, **{"compression.type": "zstd"})
    assert_same(confluent_consume(cluster.bootstrap_servers, topic, PARTITIONS, 100), items)
    assert_same(kafka_python_consume(cluster.bootstrap_servers, topic, 100), items)
    for batches in replicas_agree(cluster, topic, 50):
        assert {b.header.compression for b in batches} == {Compression.NONE}


def test_producer_leaves_batches_as_the_producer_compressed_them(
    cluster: LocalCluster, admin: AdminClient
) -> None:
    topic = "producer-topic"
    create_topic(admin, topic)  # the broker default: producer
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    entry = next(iter(described.values())).result(30)["compression.type"]
    assert (entry.value, entry.source) == ("producer", ConfigSource.DEFAULT_CONFIG.value)
    lz4 = records("lz", 40, PARTITIONS)
    snappy = records("sn", 40, PARTITIONS)
    confluent_produce(cluster.bootstrap_servers, topic, lz4, **{"compression.type": "lz4"})
    confluent_produce(cluster.bootstrap_servers, topic, snappy, **{"compression.type": "snappy"})
    assert_same(
        confluent_consume(cluster.bootstrap_servers, topic, PARTITIONS, 80), [*lz4, *snappy]
    )
    for batches in replicas_agree(cluster, topic, 40):
        codecs = {b.records[0].key[:2]: b.header.compression for b in batches}
        assert codecs == {b"lz": Compression.LZ4, b"sn": Compression.SNAPPY}


def test_a_dynamic_broker_default_takes_effect_without_restart(
    cluster: LocalCluster, admin: AdminClient
) -> None:
    topic = "dynamic-topic"
    create_topic(admin, topic)
    default = EResource(EType.BROKER, "")
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as ours:
        ours.incremental_alter_configs({default: [ConfigOp("compression.type", "zstd")]})
    try:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)

        def described_zstd() -> bool:
            entry = admin.describe_configs([resource])[resource].result(30)["compression.type"]
            return (entry.value, entry.source) == (
                "zstd",
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
            )

        until("the topic describing compression.type=zstd from the broker default", described_zstd)
        sent = 0

        def stored_zstd() -> bool:
            # every broker has seen the change once a new batch to each leader is stored as zstd
            nonlocal sent
            items = records(f"d{sent}", PARTITIONS, PARTITIONS)
            confluent_produce(
                cluster.bootstrap_servers, topic, items, **{"compression.type": "gzip"}
            )
            sent += 1
            last = [decode_batches(stored_batches(cluster, 1, topic, p))[-1] for p in (0, 1)]
            return all(b.header.compression is Compression.ZSTD for b in last)

        until("both leaders rebuilding gzip batches as zstd", stored_zstd)
        got = confluent_consume(cluster.bootstrap_servers, topic, PARTITIONS, sent * PARTITIONS)
        assert len(got) == sent * PARTITIONS
    finally:
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as ours:
            ours.incremental_alter_configs(
                {default: [ConfigOp("compression.type", None, AlterOp.DELETE)]}
            )


def raw_fetch(port: int, version: int, topic: str, partition: int) -> tuple[ErrorCode, bytes]:
    F = m.FetchRequest
    body = F(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        isolation_level=0,
        topics=[
            F.FetchTopic(
                topic=topic,
                partitions=[
                    F.FetchPartition(
                        partition=partition, fetch_offset=0, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    with RawClient("127.0.0.1", port) as client:
        answer = client.request(ApiKey.FETCH, version, body).responses[0].partitions[0]
    return ErrorCode(answer.error_code), bytes(answer.records or b"")


def test_zstd_topic_refuses_fetches_below_v10_and_serves_newer_ones(
    cluster: LocalCluster, admin: AdminClient
) -> None:
    topic = "zstd-topic"
    create_topic(admin, topic, {"compression.type": "zstd", "compression.zstd.level": "10"})
    items = records("zt", 20, PARTITIONS)
    confluent_produce(cluster.bootstrap_servers, topic, items, **{"compression.type": "none"})
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    port = cluster.brokers[leader].port
    error, _ = raw_fetch(port, 9, topic, 0)
    assert error is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    error, data = raw_fetch(port, 11, topic, 0)
    assert error is ErrorCode.NONE
    batches = decode_batches(data)
    assert {b.header.compression for b in batches} == {Compression.ZSTD}
    assert sum(len(b.records) for b in batches) == 10
    assert_same(kafka_python_consume(cluster.bootstrap_servers, topic, 20), items)
