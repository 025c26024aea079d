# ruff: noqa: F811 - pytest fixtures imported from spark_fixtures are parameters here
"""Offsets behind latest and data-loss counts of a running query (issue 18, item 3).

A streaming query reads 100 records per partition of a 2-partition topic, 10 per batch
(maxOffsetsPerTrigger), with the lag listener installed. Batch 0 ends at 5 + 5: 95 behind in
each partition, as Spark's Kafka source would report. Then 100 more records per partition,
DeleteRecords below 150 in partition 0 (50 records the query never read) and a restart on the
same checkpoint with failOnDataLoss=false: the first batch reports one data-loss event of 50
offsets, and the run reads the 150 records that are left.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from epochlog.client import Admin
from epochlog.spark.lag import source_lag
from epochlog.spark.lag_listener import OffsetLagListener, SourceLag, install_lag_listener
from tests.integration.spark_fixtures import (  # noqa: F401 - fixtures
    create_topic,
    produce,
    spark,
    spark_cluster,
    unique_topic,
)


def _run(spark: Any, bootstrap: str, topic: str, checkpoint: Path) -> Any:
    query = (
        spark.readStream.format("epochlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10")
        .option("failOnDataLoss", "false")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    return query


def _heard(listener: OffsetLagListener, query: Any) -> dict[int, SourceLag]:
    """The listener's figures per batch of this run, once it has heard its last batch (listener
    events arrive after the batch, on Spark's listener bus)."""
    last = query.lastProgress["batchId"]
    deadline = time.monotonic() + 60  # a failure bound only
    while True:
        heard = {
            lag.batch_id: lag for lag in listener.history(query.id) if lag.run_id == query.runId
        }
        if last in heard:
            return heard
        assert time.monotonic() < deadline, f"listener never heard batch {last}: {sorted(heard)}"
        time.sleep(0.2)


def test_lag_and_data_loss_of_a_running_query(spark, spark_cluster, tmp_path: Path) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    topic = create_topic(bootstrap, unique_topic("lag"), 2)
    for p in (0, 1):
        produce(bootstrap, topic, [b"a%d" % i for i in range(100)], partition=p)
    listener = install_lag_listener(spark)
    try:
        first = _run(spark, bootstrap, topic, tmp_path / "ckpt")
        heard = _heard(listener, first)
        batches = sorted(heard)
        assert heard[batches[0]].metrics == {
            "minOffsetsBehindLatest": "95",
            "maxOffsetsBehindLatest": "95",
            "avgOffsetsBehindLatest": "95.0",
            "dataLoss": "0",
            "offsetOutOfRange": "0",
        }
        behind = [int(heard[b].metrics["maxOffsetsBehindLatest"]) for b in batches]
        assert behind == sorted(behind, reverse=True) and behind[-1] == 0
        # the same figures from the progress the query keeps
        assert source_lag(first.recentProgress[0])[0] == heard[batches[0]].metrics

        for p in (0, 1):
            produce(bootstrap, topic, [b"b%d" % i for i in range(100)], partition=p)
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.delete_records({(topic, 0): 150}, timeout=30)

        second = _run(spark, bootstrap, topic, tmp_path / "ckpt")  # restart, same checkpoint
        again = _heard(listener, second)
        start = again[min(again)].metrics
        assert (start["dataLoss"], start["offsetOutOfRange"]) == ("1", "50")
        assert start["maxOffsetsBehindLatest"] == "95"
        assert again[max(again)].metrics["dataLoss"] == "1"  # counted once
        assert sum(p["numInputRows"] for p in second.recentProgress) == 150
    finally:
        spark.streams.removeListener(listener)
