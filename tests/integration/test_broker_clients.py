"""Real Kafka clients against an in-process broker, without ZooKeeper.

The test plays the controller: it sends UpdateMetadata and LeaderAndIsr over a socket with our
codec, making the broker leader of a topic's partitions. Then confluent-kafka (acks=all, and
idempotent), kafka-python (idempotent by default), aiokafka and kcat each produce keyed records
with headers and read them back with assign(), byte for byte. The broker is then restarted on
the same dirs (stop + start), and a broker process is killed with SIGKILL and started again:
every acknowledged record must still be there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import confluent_kafka.admin
import pytest

from epochlog.broker.harness import BrokerThread, RawClient, become_leader
from epochlog.processes import spawn
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.records import RecordBatchBuilder
from tests.integration.interop import (
    aiokafka_round_trip,
    assert_same,
    confluent_consume,
    confluent_produce,
    kafka_python_round_trip,
    kcat_round_trip,
    records,
)


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


@pytest.mark.parametrize("idempotent", [False, True], ids=["acks-all", "idempotent"])
def test_confluent_kafka_reads_back_what_it_produced(broker, idempotent):
    topic = f"confluent-{idempotent}"
    make_topic(broker.port, topic)
    items = records(topic, 500)
    confluent_produce(
        broker.bootstrap, topic, items, acks="all", **{"enable.idempotence": idempotent}
    )
    assert_same(confluent_consume(broker.bootstrap, topic, 2, len(items)), items)


def test_confluent_kafka_lists_every_topic(broker):
    # librdkafka's all-topics Metadata v13 carries bytes after the body; Kafka ignores them.
    make_topic(broker.port, "listed", partitions=3)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    metadata = admin.list_topics(timeout=10)
    assert "listed" in metadata.topics
    assert sorted(metadata.topics["listed"].partitions) == [0, 1, 2]
    assert [b.id for b in metadata.brokers.values()] == [1]


# ---------------------------------------------------------------------- kafka-python


def test_kafka_python_default_idempotent_producer_round_trip(broker):
    topic = "kafka-python"
    make_topic(broker.port, topic)
    items = records(topic, 300)
    offsets, got = kafka_python_round_trip(broker.bootstrap, topic, items, 2)
    assert sorted(offsets) == sorted(list(range(150)) * 2)
    assert_same(got, items)


# --------------------------------------------------------------------------- aiokafka


def test_aiokafka_round_trip(broker):
    topic = "aiokafka"
    make_topic(broker.port, topic)
    items = records(topic, 200)
    assert_same(aiokafka_round_trip(broker.bootstrap, topic, items, 2), items)


# ------------------------------------------------------------------------------- kcat


def test_kcat_produce_and_consume(broker):
    topic = "kcat"
    make_topic(broker.port, topic, partitions=1)
    messages = kcat_round_trip(broker.bootstrap, topic, 100)
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
