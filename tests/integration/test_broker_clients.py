"""Real Kafka clients against an in-process broker, without ZooKeeper.

The test plays the controller: it sends UpdateMetadata and LeaderAndIsr over a socket with our
codec, making the broker leader of a topic's partitions. Then confluent-kafka (acks=all, and
idempotent), kafka-python (idempotent by default), aiokafka and kcat each produce keyed records
with headers and read them back with assign(), byte for byte. The broker is then restarted on
the same dirs (stop + start), and a broker process is killed with SIGKILL and started again:
every acknowledged record must still be there.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from epochlog.broker.harness import BrokerThread, RawClient, become_leader
from epochlog.processes import spawn
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.records import RecordBatchBuilder

Record = tuple[int, bytes, bytes, list[tuple[str, bytes]]]  # partition, key, value, headers


def config(log_dir: Path, broker_id: int = 1, **extra) -> dict:
    return {
        "broker.id": broker_id,
        "zookeeper.connect": "unused:2181",
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(log_dir),
        **extra,
    }


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    thread = BrokerThread(config(tmp_path_factory.mktemp("broker"))).start()
    yield thread
    thread.stop()


def make_topic(port: int, topic: str, partitions: int = 2, epoch: int = 0) -> None:
    """Make broker 1 leader of the topic (the same topic id every time, as ZooKeeper would)."""
    with RawClient("127.0.0.1", port) as client:
        _, update, leader = become_leader(
            client,
            broker_id=1,
            port=port,
            topic=topic,
            partitions=partitions,
            leader_epoch=epoch,
            topic_id=uuid.uuid5(uuid.NAMESPACE_URL, topic),
        )
    assert update.error_code == 0 and leader.error_code == 0
    assert all(p.error_code == 0 for t in leader.topics for p in t.partition_errors)


def records(tag: str, n: int, partitions: int = 2) -> list[Record]:
    return [
        (
            i % partitions,
            f"{tag}-key-{i}".encode(),
            f"{tag}-value-{i}-".encode() + bytes(range(i % 256)),
            [("h1", f"{i}".encode()), ("bin", bytes([i % 256, 0, 255]))],
        )
        for i in range(n)
    ]


def by_partition(items: list[Record]) -> dict[int, list[Record]]:
    result: dict[int, list[Record]] = {}
    for item in items:
        result.setdefault(item[0], []).append(item)
    return result


def assert_same(got: list[Record], expected: list[Record]) -> None:
    assert by_partition(got) == by_partition(expected)


# ------------------------------------------------------------------- confluent-kafka


def confluent_produce(bootstrap: str, topic: str, items: list[Record], **conf) -> None:
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[object] = []
    for partition, key, value, headers in items:
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=headers,
            partition=partition,
            on_delivery=lambda err, _msg: err and errors.append(err),
        )
    assert producer.flush(30) == 0
    assert errors == []


def confluent_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[Record]:
    import confluent_kafka as ck

    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "test", "enable.auto.commit": False}
    )
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[Record] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.partition(), msg.key(), msg.value(), list(msg.headers() or [])))
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("idempotent", [False, True], ids=["acks-all", "idempotent"])
def test_confluent_kafka_reads_back_what_it_produced(broker, idempotent):
    topic = f"confluent-{idempotent}"
    make_topic(broker.port, topic)
    items = records(topic, 500)
    confluent_produce(
        broker.bootstrap, topic, items, acks="all", **{"enable.idempotence": idempotent}
    )
    assert_same(confluent_consume(broker.bootstrap, topic, 2, len(items)), items)


# ---------------------------------------------------------------------- kafka-python


def test_kafka_python_default_idempotent_producer_round_trip(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "kafka-python"
    make_topic(broker.port, topic)
    items = records(topic, 300)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    futures = [producer.send(topic, key=k, value=v, headers=h, partition=p) for p, k, v, h in items]
    producer.flush(30)
    offsets = [f.get(10).offset for f in futures]
    producer.close()
    assert sorted(offsets) == sorted(list(range(150)) * 2)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False
    )
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    consumer.seek_to_beginning()
    got: list[Record] = []
    deadline = time.monotonic() + 20
    while len(got) < len(items) and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=500).values():
            got.extend((r.partition, r.key, r.value, list(r.headers)) for r in messages)
    consumer.close()
    assert_same(got, items)


# --------------------------------------------------------------------------- aiokafka


def test_aiokafka_round_trip(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    topic = "aiokafka"
    make_topic(broker.port, topic)
    items = records(topic, 200)

    async def run() -> list[Record]:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=True
        )
        await producer.start()
        try:
            sends = [
                await producer.send(topic, key=k, value=v, headers=h, partition=p)
                for p, k, v, h in items
            ]
            await asyncio.gather(*sends)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False
        )
        await consumer.start()
        got: list[Record] = []
        try:
            parts = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            deadline = time.monotonic() + 20
            while len(got) < len(items) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for messages in batches.values():
                    got.extend((r.partition, r.key, r.value, list(r.headers)) for r in messages)
        finally:
            await consumer.stop()
        return got

    assert_same(asyncio.run(run()), items)


# ------------------------------------------------------------------------------- kcat


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_produce_and_consume(broker):
    topic = "kcat"
    make_topic(broker.port, topic, partitions=1)
    lines = [f"key{i}:value {i} é" for i in range(100)]
    produced = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K:", "-H", "src=kcat"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-J"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.returncode == 0, consumed.stderr
    messages = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert [(j["offset"], j["key"], j["payload"]) for j in messages] == [
        (i, f"key{i}", f"value {i} é") for i in range(100)
    ]
    assert all(j["headers"] == ["src", "kcat"] for j in messages)


# -------------------------------------------------------------------- restart and kill


def idempotent_batch(producer_id: int, sequence: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=sequence)
    builder.append(1_700_000_000_000, b"idem-key", b"idem-value", [("h", b"v")])
    return builder.build()


def raw_produce(port: int, topic: str, records: bytes) -> tuple[int, int]:
    P = m.ProduceRequest
    body = P(
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            P.TopicProduceData(
                name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)]
            )
        ],
    )
    with RawClient("127.0.0.1", port) as client:
        result = client.request(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]
    return result.error_code, result.base_offset


def test_records_and_producer_state_survive_a_restart_on_the_same_dirs(tmp_path):
    first = BrokerThread(config(tmp_path)).start()
    try:
        make_topic(first.port, "durable")
        items = records("before", 300)
        confluent_produce(first.bootstrap, "durable", items, acks="all")
        assert raw_produce(first.port, "durable", idempotent_batch(4242, 0)) == (0, 150)
    finally:
        first.stop()
    # A clean stop checkpoints the high watermarks.
    checkpoint = (tmp_path / "replication-offset-checkpoint").read_text().split("\n")
    assert sorted(checkpoint[2:4]) == ["durable 0 151", "durable 1 150"]
    second = BrokerThread(config(tmp_path)).start()
    try:
        make_topic(second.port, "durable", epoch=1)
        # The retry of a batch written before the restart is recognised, not appended again.
        assert raw_produce(second.port, "durable", idempotent_batch(4242, 0)) == (0, 150)
        assert raw_produce(second.port, "durable", idempotent_batch(4242, 1)) == (0, 151)
        more = records("after", 100)
        confluent_produce(second.bootstrap, "durable", more, acks="all")
        got = confluent_consume(second.bootstrap, "durable", 2, 402)
        idem = (0, b"idem-key", b"idem-value", [("h", b"v")])
        assert_same(got, items + [idem, idem] + more)
    finally:
        second.stop()


def start_broker_process(log_dir: Path) -> tuple[subprocess.Popen[str], int]:
    process = spawn(
        [
            sys.executable,
            "-m",
            "epochlog.broker.harness",
            "broker.id=1",
            "listeners=PLAINTEXT://127.0.0.1:0",
            f"log.dirs={log_dir}",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("PORT "), line
    return process, int(line.split()[1])


def test_acknowledged_records_survive_kill_9(tmp_path):
    process, port = start_broker_process(tmp_path)
    try:
        make_topic(port, "killed")
        items = records("killed", 400)
        confluent_produce(f"127.0.0.1:{port}", "killed", items, acks="all")
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    process, port = start_broker_process(tmp_path)
    try:
        make_topic(port, "killed", epoch=1)
        got = confluent_consume(f"127.0.0.1:{port}", "killed", 2, len(items))
        assert_same(got, items)
    finally:
        process.terminate()
        process.wait(10)
