"""Transactions end to end on a real 3-broker cluster: real transactional producers
(confluent-kafka, kafka-python, aiokafka) against the transaction coordinator, read back by a
read_committed confluent-kafka consumer.

One cluster for the module (5 `__transaction_state` partitions, timed-out transactions looked
for every 500 ms). Each test has its own topic and transactional ids."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator

import aiokafka
import confluent_kafka as ck
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.broker.harness import RawClient
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import wait_until_brokers_name_the_controller

PARTITIONS = 2
DEADLINE_S = 60  # a failure bound only: reads stop as soon as they have what they wait for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("txn-coord"),
        3,
        broker_config={
            "transaction.state.log.num.partitions": 5,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
        },
    )
    local.start()
    wait_until_brokers_name_the_controller([b.port for b in local.brokers.values()])
    yield local
    local.close()


def create_topic(cluster: LocalCluster, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, PARTITIONS, 3)])[name].result(30)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and all(p.leader >= 0 for p in topic.partitions.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"{name} has no leaders")


def transactional_producer(cluster: LocalCluster, transactional_id: str, **conf: object):
    return ck.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": transactional_id,
            **conf,
        }
    )


def read_committed(cluster: LocalCluster, topic: str, expected: int) -> list[str]:
    """Every record a read_committed consumer gets from the start of `topic`, reading until it
    has `expected` and then to the end of each partition (the LSO)."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values: list[str] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline and (len(values) < expected or len(at_end) < PARTITIONS):
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == ck.KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise AssertionError(message.error())
            at_end.discard(message.partition())
            values.append(message.value().decode())
    finally:
        consumer.close()
    return values


def test_confluent_kafka_commit_is_read_and_abort_is_not(cluster: LocalCluster) -> None:
    topic = "txn-ck"
    create_topic(cluster, topic)
    producer = transactional_producer(cluster, "ck-commit-abort")
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"committed-{i}".encode(), partition=i % PARTITIONS)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"aborted-{i}".encode(), partition=i % PARTITIONS)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"committed-last", partition=0)
    producer.commit_transaction(30)

    values = read_committed(cluster, topic, 11)
    assert sorted(values) == sorted([f"committed-{i}" for i in range(10)] + ["committed-last"])


def test_a_second_producer_with_the_same_id_fences_the_first(cluster: LocalCluster) -> None:
    topic = "txn-zombie"
    create_topic(cluster, topic)
    zombie = transactional_producer(cluster, "zombie-id")
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie-open", partition=0)
    zombie.flush(30)

    successor = transactional_producer(cluster, "zombie-id")
    successor.init_transactions(60)  # aborts the zombie's open transaction, bumps the epoch
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(30)

    with pytest.raises(ck.KafkaException) as raised:
        zombie.produce(topic, b"zombie-late", partition=1)
        zombie.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal(), error  # librdkafka: the producer is fenced for good
    assert read_committed(cluster, topic, 1) == ["successor"]


def test_kafka_python_transactional_producer_commits_and_aborts(cluster: LocalCluster) -> None:
    topic = "txn-kafka-python"
    create_topic(cluster, topic)
    producer = kafka.KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, transactional_id="kafka-python-txn"
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(5):
            producer.send(topic, f"kp-committed-{i}".encode(), partition=i % PARTITIONS)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(5):
            producer.send(topic, f"kp-aborted-{i}".encode(), partition=i % PARTITIONS)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    assert sorted(read_committed(cluster, topic, 5)) == [f"kp-committed-{i}" for i in range(5)]


def test_aiokafka_transactional_producer_commits_and_aborts(cluster: LocalCluster) -> None:
    topic = "txn-aiokafka"
    create_topic(cluster, topic)

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers, transactional_id="aiokafka-txn"
        )
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(5):
                    await producer.send_and_wait(
                        topic, f"aio-committed-{i}".encode(), partition=i % PARTITIONS
                    )
            await producer.begin_transaction()
            for i in range(5):
                await producer.send_and_wait(
                    topic, f"aio-aborted-{i}".encode(), partition=i % PARTITIONS
                )
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert sorted(read_committed(cluster, topic, 5)) == [f"aio-committed-{i}" for i in range(5)]
    assert sorted(asyncio.run(aiokafka_read_committed(cluster, topic))) == [
        f"aio-committed-{i}" for i in range(5)
    ]


async def aiokafka_read_committed(cluster: LocalCluster, topic: str) -> list[str]:
    """What aiokafka's read_committed consumer reads from the start of `topic` to the LSO."""
    consumer = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        partitions = [aiokafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)  # the LSO under read_committed
        values: list[str] = []
        deadline = time.monotonic() + DEADLINE_S
        while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
            assert time.monotonic() < deadline, f"read {values} by the deadline"
            batches = await consumer.getmany(timeout_ms=500)
            values += [r.value.decode() for records in batches.values() for r in records]
        return values
    finally:
        await consumer.stop()


def kcat_values(cluster: LocalCluster, topic: str, *settings: str) -> list[str]:
    """`kcat -C -e` from the start of every partition: the values it read before it saw each
    partition's end (with read_committed, the last stable offset)."""
    consumed = subprocess.run(
        ["kcat", "-b", cluster.bootstrap_servers, "-C", "-t", topic, "-o", "beginning", "-e"]
        + ["-J", *(arg for setting in settings for arg in ("-X", setting))],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    assert consumed.returncode == 0, consumed.stderr
    return [json.loads(line)["payload"] for line in consumed.stdout.splitlines()]


def test_kcat_reads_committed_transactions_only_unless_told_otherwise(
    cluster: LocalCluster,
) -> None:
    """kcat has no transactional producer; as a consumer it is librdkafka, whose isolation.level
    defaults to read_committed: it stops at the LSO and skips aborted records."""
    topic = "txn-kcat"
    create_topic(cluster, topic)
    producer = transactional_producer(cluster, "kcat-reader")
    producer.init_transactions(30)
    for outcome in ("committed", "aborted", "committed-again"):
        producer.begin_transaction()
        for i in range(4):
            producer.produce(topic, f"{outcome}-{i}".encode(), partition=i % PARTITIONS)
        producer.flush(30)
        if outcome == "aborted":
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    producer.begin_transaction()  # left open: read_committed stops before it
    producer.produce(topic, b"open-0", partition=0)
    producer.flush(30)

    committed = [f"{o}-{i}" for o in ("committed", "committed-again") for i in range(4)]
    assert sorted(read_committed(cluster, topic, len(committed))) == sorted(committed)
    assert sorted(kcat_values(cluster, topic)) == sorted(committed)
    everything = kcat_values(cluster, topic, "isolation.level=read_uncommitted")
    assert sorted(everything) == sorted(committed + [f"aborted-{i}" for i in range(4)] + ["open-0"])
    producer.abort_transaction(30)


def test_api_versions_and_find_coordinator_for_transactional_ids(cluster: LocalCluster) -> None:
    port = next(iter(cluster.brokers.values())).port
    with RawClient("127.0.0.1", port) as client:
        versions = client.request(
            ApiKey.API_VERSIONS,
            3,
            m.ApiVersionsRequest(client_software_name="test", client_software_version="1"),
        )
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert {key: advertised[key] for key in (24, 25, 26, 65, 66)} == {
            24: (0, 4),
            25: (0, 4),
            26: (0, 4),
            65: (0, 0),
            66: (0, 1),
        }
        deadline = time.monotonic() + DEADLINE_S
        while True:
            batched = client.request(
                ApiKey.FIND_COORDINATOR,
                4,
                m.FindCoordinatorRequest(key_type=1, coordinator_keys=["find-a", "find-b", ""]),
            )
            found = {c.key: c for c in batched.coordinators}
            if found["find-a"].error_code == found["find-b"].error_code == ErrorCode.NONE:
                break
            assert time.monotonic() < deadline, batched
            time.sleep(0.1)
        assert found[""].error_code == ErrorCode.INVALID_REQUEST
        ports = {b.port: broker_id for broker_id, b in cluster.brokers.items()}
        for key in ("find-a", "find-b"):
            assert ports[found[key].port] == found[key].node_id
            single = client.request(
                ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(key=key, key_type=1)
            )
            assert (single.error_code, single.node_id) == (ErrorCode.NONE, found[key].node_id)
