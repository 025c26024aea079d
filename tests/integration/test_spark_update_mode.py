# ruff: noqa: F811 - pytest fixtures imported from spark_fixtures are parameters here
"""An aggregation's updates to a topic, exactly once (issue 18, item 4).

PySpark refuses outputMode("update") for a Python data source's sink; `foreachBatch` with
`epochlog.spark.write_batch_exactly_once` writes each micro-batch's changed rows in Kafka
transactions, once per batch id. The output is read with a read_committed confluent-kafka
consumer.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import epochlog.spark
from epochlog.spark.exactly_once import TaskTransaction
from epochlog.spark.foreach_batch import (
    TRANSACTION_COLUMN,
    _write_task,
    foreach_batch_options,
    write_batch_exactly_once,
)
from epochlog.spark.options import OptionError
from tests.integration.spark_fixtures import (  # noqa: F401 - fixtures
    consume_committed,
    create_topic,
    produce,
    spark,
    spark_cluster,
    unique_topic,
)


def test_python_sinks_refuse_update_mode(spark, spark_cluster, tmp_path: Path) -> None:
    """Why the helper exists: pyspark refuses the update mode for format('epochlog')."""
    # After the cluster fixture starts, the JVM's active session (a thread-local, which Spark's
    # streaming sink lookup of Python data sources uses) is no longer this one: without this,
    # start() fails with DATA_SOURCE_NOT_FOUND whatever the output mode.
    spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)
    bootstrap = spark_cluster.bootstrap_servers
    source = create_topic(bootstrap, unique_topic("refused-in"), 1)
    counts = (
        spark.readStream.format("epochlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .load()
        .groupBy("key")
        .count()
        .selectExpr("key", "CAST(count AS STRING) AS value")
    )
    query = (
        counts.writeStream.format("epochlog")
        .outputMode("update")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", unique_topic("refused-out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        with pytest.raises(Exception, match="epochlog does not support Update mode"):
            query.awaitTermination(120)
    finally:
        query.stop()


def _run_counts(spark: Any, bootstrap: str, source: str, sink: dict, ckpt: Path) -> list:
    """One availableNow run of the streaming count per key, written in update mode."""
    results: list = []

    def write_counts(df: Any, batch_id: int) -> None:
        out = df.selectExpr("k AS key", "CAST(count AS STRING) AS value")
        results.append(epochlog.spark.write_batch_exactly_once(out, batch_id, sink))

    counts = (
        spark.readStream.format("epochlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(key AS STRING) AS k")
        .groupBy("k")
        .count()
    )
    query = (
        counts.writeStream.outputMode("update")
        .foreachBatch(write_counts)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    return results


def test_streaming_aggregation_updates_written_exactly_once(
    spark, spark_cluster, tmp_path: Path
) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    source = create_topic(bootstrap, unique_topic("clicks"), 2)
    target = create_topic(bootstrap, unique_topic("click-counts"), 2)
    sink = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": target,
        "transactionalIdPrefix": f"{target}-sink",
    }
    keys = [b"k%d" % (i % 4) for i in range(20)]
    produce(bootstrap, source, [b"x"] * 20, keys=keys)
    first = _run_counts(spark, bootstrap, source, sink, tmp_path / "ckpt")
    assert sum(r.records for r in first) == 4  # every key changed

    produce(bootstrap, source, [b"y"] * 8, keys=[b"k0", b"k1"] * 4)
    second = _run_counts(spark, bootstrap, source, sink, tmp_path / "ckpt")  # restart
    assert sum(r.records for r in second) == 2  # update mode: only k0 and k1 changed
    assert min(r.batch_id for r in second) > max(r.batch_id for r in first)

    out = consume_committed(bootstrap, target)
    assert len(out) == 6  # 4 + 2 updates, none twice
    latest: dict[bytes, bytes] = {}
    for record in sorted(out, key=lambda r: (r.partition, r.offset)):
        assert record.key is not None and record.value is not None
        latest[record.key] = record.value
    assert latest == {b"k0": b"9", b"k1": b"9", b"k2": b"5", b"k3": b"5"}


def test_a_batch_id_is_written_once_even_after_a_crash_before_the_commit(
    spark, spark_cluster
) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    target = create_topic(bootstrap, unique_topic("by-batch-id"), 2)
    sink = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": target,
        "transactionalIdPrefix": f"{target}-sink",
    }
    df = spark.range(0, 10, numPartitions=2).selectExpr("CAST(id AS STRING) AS value")
    options = foreach_batch_options(sink, {"value": "string"})

    # A run that died after its tasks wrote batch 0, before the driver committed: two open
    # transactions, rows written but not committed.
    def task(batches: Any) -> Any:
        return _write_task(options, 0, batches)

    leftovers = [
        TaskTransaction(**json.loads(row[TRANSACTION_COLUMN]))
        for row in df.mapInArrow(task, f"{TRANSACTION_COLUMN} string").collect()
    ]
    assert sum(t.records for t in leftovers) == 10 and all(t.needs_end for t in leftovers)

    again = write_batch_exactly_once(df, 0, sink)  # the re-run of batch 0
    assert dataclasses.astuple(again) == (0, 10, 2, 0)
    repeat = write_batch_exactly_once(df, 0, sink)  # batch 0 once more: already committed
    assert dataclasses.astuple(repeat) == (0, 0, 2, 2)
    nxt = write_batch_exactly_once(df, 1, sink)
    assert nxt.records == 10

    values = sorted(r.value for r in consume_committed(bootstrap, target))
    assert values == sorted([str(i).encode() for i in range(10)] * 2)  # batches 0 and 1, once


def test_bad_options_fail_on_the_driver_naming_the_option(spark) -> None:
    df = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    base = {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t"}
    with pytest.raises(OptionError, match="transactionalIdPrefix"):
        write_batch_exactly_once(df, 0, base)
    with pytest.raises(OptionError, match="deliveryGuarantee"):
        write_batch_exactly_once(
            df, 0, base, transactionalIdPrefix="p", deliveryGuarantee="at-least-once"
        )
    with pytest.raises(OptionError, match="value"):
        write_batch_exactly_once(spark.range(3), 0, base, transactionalIdPrefix="p")
    with pytest.raises(ValueError, match="batch_id"):
        write_batch_exactly_once(df, -1, base, transactionalIdPrefix="p")
