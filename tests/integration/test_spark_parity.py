# ruff: noqa: F811 - pytest fixtures imported from spark_fixtures are parameters here
"""Parity with Spark's Kafka source and sink (issue 18) through real PySpark against a real
broker: one test per option or row of the issue that needs Spark. The fast ones run in
`make test`; the streaming ones are `slow`. Option parsing alone is in
tests/unit/test_spark_parity.py."""

from __future__ import annotations

import datetime
import json
import time

import pytest

from epochlog.cli.main import main as epochlog_main
from epochlog.client import Admin
from tests.integration.spark_fixtures import (  # noqa: F401 - fixtures
    consume_all,
    create_topic,
    produce,
    spark,
    spark_cluster,
    unique_topic,
)


@pytest.fixture(scope="module")
def orders(spark_cluster):
    """Topics <p>-orders-eu (3 records) and <p>-orders (2), <p>-other (1)."""
    bootstrap = spark_cluster.bootstrap_servers
    prefix = unique_topic("par")
    for name, count in (("orders-eu", 3), ("orders", 2), ("other", 1)):
        create_topic(bootstrap, f"{prefix}-{name}", 1)
        produce(bootstrap, f"{prefix}-{name}", [f"{name}-{i}".encode() for i in range(count)])
    return bootstrap, prefix


def read(spark, bootstrap: str, **options: str):
    reader = spark.read.format("epochlog").option("bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_subscribe_pattern_is_found_within_topic_names(spark, orders) -> None:
    bootstrap, prefix = orders
    rows = read(spark, bootstrap, subscribePattern=f"{prefix}-orders").collect()
    topics = {r.topic for r in rows}
    assert topics == {f"{prefix}-orders", f"{prefix}-orders-eu"}  # Spark's findFirstIn
    whole = read(spark, bootstrap, subscribePattern=f"^{prefix}-orders$").collect()
    assert {r.topic for r in whole} == {f"{prefix}-orders"}


def test_unknown_kafka_options_are_ignored_and_plaintext_accepted(spark, orders) -> None:
    bootstrap, prefix = orders
    rows = read(
        spark,
        bootstrap,
        subscribe=f"{prefix}-orders",
        **{"kafka.security.protocol": "PLAINTEXT", "kafka.sasl.jaas.config": "ignored"},
    ).collect()
    assert sorted(r.value for r in rows) == [b"orders-0", b"orders-1"]


def test_a_user_schema_is_refused_at_load(spark, orders) -> None:
    bootstrap, prefix = orders
    reader = (
        spark.read.format("epochlog")
        .schema("value binary")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", f"{prefix}-orders")
    )
    with pytest.raises(Exception, match="fixed schema and cannot be set with a custom one"):
        reader.load().collect()


def test_ending_offsets_json_leaving_a_partition_out_fails(spark, spark_cluster) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = create_topic(bootstrap, unique_topic("par-end"), 2)
    df = read(spark, bootstrap, subscribe=topic, endingOffsets=f'{{"{topic}":{{"0":-1}}}}')
    with pytest.raises(Exception, match=f"endingOffsets.*{topic}-1"):
        df.collect()


def test_batch_latest_in_starting_offsets_json_is_refused(spark, orders) -> None:
    bootstrap, prefix = orders
    topic = f"{prefix}-orders"
    df = read(spark, bootstrap, subscribe=topic, startingOffsets=f'{{"{topic}":{{"0":-1}}}}')
    with pytest.raises(Exception, match="latest.*not valid for batch queries"):
        df.collect()


def _sink_df(spark):
    return spark.createDataFrame([("k", "v")], "key string, value string")


def test_batch_overwrite_is_refused_and_nothing_written(spark, spark_cluster) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = create_topic(bootstrap, unique_topic("par-ow"), 1)
    writer = (
        _sink_df(spark)
        .write.format("epochlog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", topic)
        .mode("overwrite")
    )
    with pytest.raises(Exception, match="Overwrite is not allowed"):
        writer.save()
    assert consume_all(bootstrap, topic) == []


def test_the_default_save_mode_is_refused_by_pyspark_and_append_writes(
    spark, spark_cluster
) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = create_topic(bootstrap, unique_topic("par-mode"), 1)
    writer = _sink_df(spark).write.format("epochlog").option("bootstrap.servers", bootstrap)
    with pytest.raises(Exception, match="ErrorIfExists"):
        writer.option("topic", topic).save()
    writer.option("topic", topic).mode("append").save()
    assert [r.value for r in consume_all(bootstrap, topic)] == [b"v"]


def test_the_sink_writes_the_timestamp_column(spark, spark_cluster) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = create_topic(bootstrap, unique_topic("par-ts"), 1)
    # recent (retention would delete older records), out of order, one with milliseconds
    a_ms = (int(time.time()) - 3600) * 1000
    b_ms = a_ms - 7_200_000 + 500
    utc = datetime.UTC
    df = spark.createDataFrame(
        [
            ("a", datetime.datetime.fromtimestamp(a_ms / 1000, utc)),
            ("b", datetime.datetime.fromtimestamp(b_ms / 1000, utc)),
        ],
        "value string, timestamp timestamp",
    ).coalesce(1)
    df.write.format("epochlog").option("bootstrap.servers", bootstrap).option("topic", topic).mode(
        "append"
    ).save()
    got = {r.value: r.timestamp for r in consume_all(bootstrap, topic)}
    assert got == {b"a": a_ms, b"b": b_ms}


# ------------------------------------------------------------------ streaming (slow)


def _stream(spark, bootstrap: str, **options: str):
    reader = spark.readStream.format("epochlog").option("bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _committed(bootstrap: str, group: str) -> dict:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return {
            (tp.topic, tp.partition): o.offset
            for tp, o in admin.list_group_offsets(group).items()
            if o is not None
        }


@pytest.mark.slow
def test_kafka_group_id_gets_the_querys_progress(spark, spark_cluster, tmp_path, capsys) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = create_topic(bootstrap, unique_topic("par-group"), 2)
    produce(bootstrap, topic, [b"a"] * 5, partition=0)
    produce(bootstrap, topic, [b"b"] * 3, partition=1)
    group = unique_topic("par-g")
    query = (
        _stream(
            spark,
            bootstrap,
            subscribe=topic,
            startingOffsets="earliest",
            **{"kafka.group.id": group},
        )
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert _committed(bootstrap, group) == {(topic, 0): 5, (topic, 1): 3}
    # `epochlog groups describe` shows the query's lag once more records arrive
    produce(bootstrap, topic, [b"c"] * 2, partition=1)
    capsys.readouterr()
    code = epochlog_main(["groups", "describe", group, "--json", "--bootstrap-server", bootstrap])
    (report,) = json.loads(capsys.readouterr().out)
    assert code == 0
    assert sorted((r["partition"], r["lag"]) for r in report["partitions"]) == [(0, 0), (1, 2)]


@pytest.mark.slow
def test_trigger_once_reads_everything_despite_min_offsets(spark, spark_cluster, tmp_path) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = create_topic(bootstrap, unique_topic("par-once"), 1)
    produce(bootstrap, topic, [b"x"] * 4)
    got: list[bytes] = []
    query = (
        _stream(
            spark,
            bootstrap,
            subscribe=topic,
            startingOffsets="earliest",
            minOffsetsPerTrigger="1000",
            maxTriggerDelay="15m",
        )
        .select("value")
        .writeStream.foreachBatch(lambda df, _: got.extend(r.value for r in df.collect()))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(once=True)
        .start()
    )
    query.awaitTermination(180)
    assert got == [b"x"] * 4


@pytest.mark.slow
def test_a_deleted_topic_leaves_the_offsets_and_its_re_creation_is_read_from_0(
    spark, spark_cluster, tmp_path
) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    prefix = unique_topic("par-del")
    keep = create_topic(bootstrap, f"{prefix}-keep", 1)
    gone = create_topic(bootstrap, f"{prefix}-gone", 1)
    produce(bootstrap, gone, [b"old"] * 6)
    checkpoint = str(tmp_path / "ck")

    def run() -> list[bytes]:
        got: list[bytes] = []
        query = (
            _stream(
                spark,
                bootstrap,
                subscribePattern=f"{prefix}-",
                startingOffsets="earliest",
                failOnDataLoss="false",
            )
            .select("value")
            .writeStream.foreachBatch(lambda df, _: got.extend(r.value for r in df.collect()))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        return got

    assert run() == [b"old"] * 6
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.delete_topic(gone)
        deadline = time.monotonic() + 30
        while gone in admin.list_topics() and time.monotonic() < deadline:
            time.sleep(0.2)
    produce(bootstrap, keep, [b"k"])
    assert run() == [b"k"]  # the batch that drops the deleted partition
    create_topic(bootstrap, gone, 1)
    produce(bootstrap, gone, [b"new"] * 2)
    assert run() == [b"new"] * 2  # re-created: a new partition, read from offset 0
