# ruff: noqa: F811 - pytest fixtures imported from spark_fixtures are parameters here
"""Streaming writes restarted from their checkpoint after a crash in the sink.

A query copies 120 records from one topic to another (maxOffsetsPerTrigger=60: batches 0 and 1
of 60 each); the sink (`epochlog_faulty`, see spark_fixtures) crashes once in batch 1,
the query fails, and the same query is started again on its checkpoint with format("epochlog").
At-least-once loses nothing but writes the crashed batch's finished work twice; exactly-once
writes every record once as a read_committed confluent-kafka consumer sees it, whether a task
crashed after writing its rows in its (open) transaction or the driver crashed after committing
some tasks' transactions and not others (the re-run skips the partitions whose batch marker
committed, and the restart's InitProducerId aborts what the crashed run left open). The
default run keeps the driver's crash mid-commit (the hardest case); the task-crash variants are
marked slow. A crash in batch 0 replays it from the start its end offset carries, even when the
restarted query's startingOffsets would resolve elsewhere.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.spark_fixtures import (  # noqa: F401 - fixtures
    consume_all,
    consume_committed,
    create_topic,
    produce,
    spark,
    spark_cluster,
    unique_topic,
)

RECORDS = 120


@pytest.fixture(scope="module")
def source_topic(spark_cluster) -> str:
    bootstrap = spark_cluster.bootstrap_servers
    topic = create_topic(bootstrap, unique_topic("restart-in"), 2)
    half = RECORDS // 2  # both partitions, so that each batch has two tasks with rows
    produce(bootstrap, topic, [f"r{i}".encode() for i in range(half)], partition=0)
    produce(bootstrap, topic, [f"r{i}".encode() for i in range(half, RECORDS)], partition=1)
    return topic


def _run(
    spark,
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    fmt: str,
    starting: str = "earliest",
    **extra: str,
):
    writer = (
        spark.readStream.format("epochlog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", starting)
        .option("maxOffsetsPerTrigger", "60")
        .load()
        .selectExpr("value")
        .writeStream.format(fmt)
        .option("bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
    )
    for k, v in extra.items():
        writer = writer.option(k, v)
    # The JVM looks the sink's format up in the thread's active session, which py4j's threads
    # may lack: make it this session.
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    query = writer.start()
    query.awaitTermination(180)


def _crash_then_restart(spark, spark_cluster, source_topic, tmp_path, fault: str, guarantee: str):
    bootstrap = spark_cluster.bootstrap_servers
    sink = create_topic(bootstrap, unique_topic(f"restart-{fault}"), 2)
    checkpoint = str(tmp_path / "checkpoint")
    marker = tmp_path / "crashed"
    with pytest.raises(Exception, match="injected crash"):
        _run(
            spark,
            bootstrap,
            source_topic,
            sink,
            checkpoint,
            "epochlog_faulty",
            deliveryGuarantee=guarantee,
            fault=fault,
            faultBatch="1",
            faultMarker=str(marker),
        )
    assert marker.exists()
    _run(spark, bootstrap, source_topic, sink, checkpoint, "epochlog", deliveryGuarantee=guarantee)
    if guarantee == "exactly-once":
        return Counter(r.value for r in consume_committed(bootstrap, sink))
    return Counter(r.value for r in consume_all(bootstrap, sink))


@pytest.mark.slow  # the default run keeps the crash mid-commit
def test_at_least_once_restart_after_a_task_crash_loses_nothing(
    spark, spark_cluster, source_topic, tmp_path
) -> None:
    counts = _crash_then_restart(
        spark, spark_cluster, source_topic, tmp_path, "task", "at-least-once"
    )
    assert set(counts) == {f"r{i}".encode() for i in range(RECORDS)}
    assert sum(counts.values()) > RECORDS  # the crashed batch's written rows came again


@pytest.mark.slow  # the default run keeps the crash mid-commit
def test_exactly_once_restart_after_a_task_crash_writes_each_record_once(
    spark, spark_cluster, source_topic, tmp_path
) -> None:
    counts = _crash_then_restart(
        spark, spark_cluster, source_topic, tmp_path, "task", "exactly-once"
    )
    assert set(counts) == {f"r{i}".encode() for i in range(RECORDS)}
    assert max(counts.values()) == 1


def test_exactly_once_restart_after_a_driver_crash_mid_commit_writes_each_record_once(
    spark, spark_cluster, source_topic, tmp_path
) -> None:
    counts = _crash_then_restart(
        spark, spark_cluster, source_topic, tmp_path, "commit", "exactly-once"
    )
    assert set(counts) == {f"r{i}".encode() for i in range(RECORDS)}
    assert max(counts.values()) == 1


def test_a_replayed_batch_0_reads_from_its_recorded_start_whatever_starting_offsets_says(
    spark, spark_cluster, tmp_path
) -> None:
    """Batch 0 carries data and a task crashes after writing its rows in its transaction (none
    is committed, so the replay's own reads are what the sink gets); the restart's
    startingOffsets resolves to later offsets (as `latest` or a timestamp resolved anew would),
    and Spark asks initialOffset() again for the replayed batch 0: its records are still read
    from the start recorded in its end offset, none skipped and none written twice."""
    bootstrap = spark_cluster.bootstrap_servers
    source_topic = create_topic(bootstrap, unique_topic("restart-batch0-in"), 2)
    for p in (0, 1):
        produce(bootstrap, source_topic, [f"p{p}-{i}".encode() for i in range(60)], partition=p)
    sink = create_topic(bootstrap, unique_topic("restart-batch0"), 2)
    checkpoint = str(tmp_path / "checkpoint")
    marker = tmp_path / "crashed"
    first = json.dumps({source_topic: {"0": 10, "1": 10}})
    later = json.dumps({source_topic: {"0": 40, "1": 40}})
    with pytest.raises(Exception, match="injected crash"):
        _run(
            spark,
            bootstrap,
            source_topic,
            sink,
            checkpoint,
            "epochlog_faulty",
            starting=first,
            deliveryGuarantee="exactly-once",
            fault="task",
            faultBatch="0",
            faultMarker=str(marker),
        )
    assert marker.exists()
    batch0 = json.loads((Path(checkpoint) / "offsets" / "0").read_text().splitlines()[-1])
    assert batch0["$start"] == {source_topic: {"0": 10, "1": 10}}
    assert not (Path(checkpoint) / "commits" / "0").exists()  # batch 0 is replayed
    _run(
        spark,
        bootstrap,
        source_topic,
        sink,
        checkpoint,
        "epochlog",
        starting=later,
        deliveryGuarantee="exactly-once",
    )
    counts = Counter(r.value for r in consume_committed(bootstrap, sink))
    expected = {f"p{p}-{i}".encode() for p in (0, 1) for i in range(10, 60)}
    assert set(counts) == expected
    assert max(counts.values()) == 1
