# ruff: noqa: F811 - pytest fixtures imported from spark_fixtures are parameters here
"""The source's `kafka.isolation.level`, over transactions written by confluent-kafka.

A librdkafka transactional producer writes, to partition 0 of a topic: a committed transaction
(c0..c9), an aborted one (a0..a9), another committed one (d0..d9), and then leaves one open
(o0..o9) while Spark reads. With kafka.isolation.level=read_committed (batch and streaming) the
source reads the 20 committed rows: the aborted rows never, and the open transaction's neither,
without waiting for it (the end offset is the last stable offset). The default,
read_uncommitted, reads every row written, as Spark's Kafka source does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

from tests.integration.spark_fixtures import (  # noqa: F401 - fixtures
    create_topic,
    spark,
    spark_cluster,
    unique_topic,
)

COMMITTED = [b"c%d" % i for i in range(10)] + [b"d%d" % i for i in range(10)]
ABORTED = [b"a%d" % i for i in range(10)]
OPEN = [b"o%d" % i for i in range(10)]
TIMEOUT_S = 60  # a failure bound for the producer's calls only


def _transaction(producer: ck.Producer, topic: str, values: list[bytes]) -> None:
    producer.begin_transaction()
    for v in values:
        producer.produce(topic, v, partition=0)
    producer.flush(TIMEOUT_S)


@pytest.fixture(scope="module")
def transactional_topic(spark_cluster) -> Iterator[str]:
    """The topic with its four transactions; the open one stays open until the module ends."""
    bootstrap = spark_cluster.bootstrap_servers
    topic = create_topic(bootstrap, unique_topic("isolation"), 1)
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-writer", "linger.ms": 5}
    )
    producer.init_transactions(TIMEOUT_S)
    _transaction(producer, topic, COMMITTED[:10])
    producer.commit_transaction(TIMEOUT_S)
    _transaction(producer, topic, ABORTED)
    producer.abort_transaction(TIMEOUT_S)
    _transaction(producer, topic, COMMITTED[10:])
    producer.commit_transaction(TIMEOUT_S)
    _transaction(producer, topic, OPEN)
    try:
        yield topic
    finally:
        producer.abort_transaction(TIMEOUT_S)


def _batch_read(spark, bootstrap: str, topic: str, **options: str) -> list[bytes]:
    reader = (
        spark.read.format("epochlog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafkaConsumer.pollTimeoutMs", "20000")
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return [bytes(r.value) for r in reader.load().select("value").collect()]


def test_read_committed_batch_skips_aborted_and_open_transactions(
    spark, spark_cluster, transactional_topic
) -> None:
    values = _batch_read(
        spark,
        spark_cluster.bootstrap_servers,
        transactional_topic,
        **{"kafka.isolation.level": "read_committed"},
    )
    assert values == COMMITTED  # in offset order, the aborted and the open ones left out


def test_read_uncommitted_batch_reads_every_row_written(
    spark, spark_cluster, transactional_topic
) -> None:
    values = _batch_read(spark, spark_cluster.bootstrap_servers, transactional_topic)
    assert values == COMMITTED[:10] + ABORTED + COMMITTED[10:] + OPEN


def test_read_committed_stream_skips_aborted_and_open_transactions(
    spark, spark_cluster, transactional_topic, tmp_path: Path
) -> None:
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    name = f"isolation_{int(time.time() * 1000)}"
    query = (
        spark.readStream.format("epochlog")
        .option("bootstrap.servers", spark_cluster.bootstrap_servers)
        .option("subscribe", transactional_topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select("value")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    values = [bytes(r.value) for r in spark.sql(f"select value from {name}").collect()]
    assert values == COMMITTED
