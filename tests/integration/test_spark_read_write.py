# ruff: noqa: F811 - pytest fixtures imported from spark_fixtures are parameters here
"""format("epochlog") in Spark local mode against a real broker: every read and write path,
bad options, and failOnDataLoss after retention deleted data."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from epochlog.client import Consumer
from epochlog.testing.cluster import LocalCluster
from tests.integration.spark_fixtures import (  # noqa: F401 - fixtures
    consume_all,
    create_topic,
    produce,
    spark,
    spark_cluster,
    unique_topic,
)

BASE_TS = (int(time.time()) - 60) * 1000  # recent: retention.ms would delete older records
KAFKA_SCHEMA = [
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
]


@pytest.fixture(scope="module")
def loaded(spark_cluster):
    """A 2-partition topic with 40 records per partition (keys, a header, known timestamps)."""
    bootstrap = spark_cluster.bootstrap_servers
    topic = create_topic(bootstrap, unique_topic("read"), 2)
    for p in (0, 1):
        produce(
            bootstrap,
            topic,
            [f"v{p}-{i}".encode() for i in range(40)],
            keys=[f"k{i}".encode() for i in range(40)],
            headers=[("origin", b"test")],
            partition=p,
            timestamp=BASE_TS + p,
        )
    return bootstrap, topic


def read(spark, bootstrap: str, **options: str):
    reader = spark.read.format("epochlog").option("bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_has_kafkas_schema_and_every_record(spark, loaded) -> None:
    bootstrap, topic = loaded
    df = read(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == KAFKA_SCHEMA + [
        ("headers", "array<struct<key:string,value:binary>>")
    ]
    rows = df.collect()
    assert len(rows) == 80
    by_pos = {(r.partition, r.offset): r for r in rows}
    assert sorted(by_pos) == [(p, o) for p in (0, 1) for o in range(40)]
    first = by_pos[(1, 3)]
    assert (first.key, first.value, first.topic) == (b"k3", b"v1-3", topic)
    assert first.timestamp.timestamp() == pytest.approx((BASE_TS + 1) / 1000)
    assert first.timestampType == 0
    assert [(h.key, h.value) for h in first.headers] == [("origin", b"test")]
    assert [f.name for f in read(spark, bootstrap, subscribe=topic).schema.fields] == [
        n for n, _ in KAFKA_SCHEMA
    ]


def test_batch_read_with_assign_offsets_pattern_timestamps_and_splits(spark, loaded) -> None:
    bootstrap, topic = loaded
    df = read(
        spark,
        bootstrap,
        assign=json.dumps({topic: [1]}),
        startingOffsets=json.dumps({topic: {"1": 5}}),
        endingOffsets=json.dumps({topic: {"1": 15}}),
    )
    assert sorted(r.offset for r in df.collect()) == list(range(5, 15))
    pattern = read(spark, bootstrap, subscribePattern=topic.rsplit("-", 2)[0] + "-.*")
    assert {r.topic for r in pattern.select("topic").collect()} >= {topic}
    later = read(
        spark,
        bootstrap,
        subscribe=topic,
        startingTimestamp=str(BASE_TS + 1),
        startingOffsetsByTimestampStrategy="latest",  # partition 0 has no record that late
    )
    assert {r.partition for r in later.select("partition").collect()} == {1}
    split = read(spark, bootstrap, subscribe=topic, minPartitions="6", maxRecordsPerPartition="15")
    assert split.rdd.getNumPartitions() == 6
    assert split.count() == 80


def test_batch_write_routes_by_topic_partition_and_key_columns(spark, spark_cluster) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    a = create_topic(bootstrap, unique_topic("write-a"), 3)
    b = create_topic(bootstrap, unique_topic("write-b"), 1)
    rows = [
        (f"k{i}", f"v{i}", a if i % 2 else b, 2 if i % 5 == 0 and i % 2 else None)
        for i in range(50)
    ]
    df = spark.createDataFrame(rows, "key string, value string, topic string, partition int")
    df = df.selectExpr(
        "key",
        "value",
        "topic",
        "partition",
        "array(named_struct('key','n','value',binary(value))) as headers",
    )
    df.write.format("epochlog").option("bootstrap.servers", bootstrap).mode("append").save()
    got = consume_all(bootstrap, a) + consume_all(bootstrap, b)
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(50))
    for r in got:
        i = int(r.value[1:])
        assert r.topic == (a if i % 2 else b)
        assert r.key == f"k{i}".encode() and r.headers == [("n", r.value)]
        if i % 5 == 0 and i % 2:
            assert r.partition == 2
    # the topic option overrides the column
    c = create_topic(bootstrap, unique_topic("write-c"), 3)
    df.write.format("epochlog").option("bootstrap.servers", bootstrap).option("topic", c).mode(
        "append"
    ).save()
    assert len(consume_all(bootstrap, c)) == 50


def _stream(spark, bootstrap: str, **options: str):
    reader = spark.readStream.format("epochlog").option("bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_streaming_read_and_write_available_now_with_a_rate_limit(spark, loaded, tmp_path) -> None:
    bootstrap, topic = loaded
    out = create_topic(bootstrap, unique_topic("stream-out"), 2)
    query = (
        _stream(
            spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="30"
        )
        .selectExpr("key", "value")
        .writeStream.format("epochlog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    sizes = [p["numInputRows"] for p in query.recentProgress]
    assert sizes[0] == 30  # batch 0 reads (its end offset carries its start, for a replay)
    assert max(sizes) <= 30 and sum(sizes) == 80
    end0 = json.loads(query.recentProgress[0]["sources"][0]["endOffset"])
    assert end0["$start"] == {topic: {"0": 0, "1": 0}}
    got = consume_all(bootstrap, out)
    assert sorted(r.value for r in got) == sorted(
        f"v{p}-{i}".encode() for p in (0, 1) for i in range(40)
    )


def test_streaming_start_is_resolved_once_and_new_topics_start_at_earliest(
    spark, spark_cluster, tmp_path
) -> None:
    bootstrap = spark_cluster.bootstrap_servers
    prefix = unique_topic("pattern")
    first = create_topic(bootstrap, prefix + "-a", 1)
    produce(bootstrap, first, [b"old"] * 5)
    checkpoint = str(tmp_path / "ck")

    def run() -> list[bytes]:
        got: list[bytes] = []
        query = (
            _stream(spark, bootstrap, subscribePattern=prefix + "-.*", startingOffsets="latest")
            .select("value")
            .writeStream.foreachBatch(lambda df, _: got.extend(r.value for r in df.collect()))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        return got

    assert run() == []  # latest: the 5 old records are not read
    offsets0 = json.loads((Path(checkpoint) / "offsets" / "0").read_text().splitlines()[-1])
    assert offsets0 == {first: {"0": 5}}
    produce(bootstrap, first, [b"new"] * 3)
    second = create_topic(bootstrap, prefix + "-b", 1)
    produce(bootstrap, second, [b"b"] * 4)
    assert sorted(run()) == [b"b"] * 4 + [b"new"] * 3


def _error_text(excinfo: pytest.ExceptionInfo) -> str:
    return str(excinfo.value)


def test_bad_options_fail_on_the_driver_naming_the_option_or_column(
    spark, loaded, spark_cluster
) -> None:
    bootstrap, topic = loaded
    with pytest.raises(Exception) as excinfo:
        read(spark, bootstrap).collect()
    assert "subscribe" in _error_text(excinfo) and "assign" in _error_text(excinfo)
    with pytest.raises(Exception) as excinfo:
        read(spark, bootstrap, subscribe="no-such-topic-anywhere").collect()
    assert "option subscribe: topic 'no-such-topic-anywhere' does not exist" in _error_text(excinfo)
    assert (
        read(spark, bootstrap, subscribe="no-such-topic-anywhere", failOnDataLoss="false").count()
        == 0
    )
    with pytest.raises(Exception) as excinfo:
        _stream(spark, bootstrap, subscribe="no-such-topic-anywhere").writeStream.format(
            "memory"
        ).queryName("never").trigger(availableNow=True).start().awaitTermination(60)
    assert "does not exist" in _error_text(excinfo)
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception) as excinfo:
        df.write.format("epochlog").option("bootstrap.servers", bootstrap).option(
            "topic", topic
        ).mode("append").save()
    assert "column 'value' is required" in _error_text(excinfo)
    with pytest.raises(Exception) as excinfo:
        read(spark, bootstrap, subscribe=topic, startingOffsets="latest").collect()
    assert "startingOffsets" in _error_text(excinfo)


def test_fail_on_data_loss_after_retention_deleted_records(spark, tmp_path) -> None:
    # A cluster of its own: the broker applies segment.bytes / retention.bytes from its own
    # config (it ignores them as topic configs), and they would delete other tests' data.
    cluster = LocalCluster(
        tmp_path / "cluster",
        1,
        broker_config={
            "log.retention.check.interval.ms": 300,
            "log.segment.bytes": 1024,
            "log.retention.bytes": 2048,
        },
    ).start()
    try:
        bootstrap = cluster.bootstrap_servers
        topic = create_topic(bootstrap, unique_topic("retention"), 1)
        for _ in range(10):  # ten produce requests: ten batches, so several segments roll
            produce(bootstrap, topic, [b"x" * 100 for _ in range(10)])
        with Consumer({"bootstrap.servers": bootstrap}) as consumer:
            deadline = time.monotonic() + 30
            while (start := next(iter(consumer.beginning_offsets([(topic, 0)]).values()))) == 0:
                assert time.monotonic() < deadline, "retention deleted nothing"
                time.sleep(0.2)
        from_zero = {"startingOffsets": json.dumps({topic: {"0": 0}})}
        with pytest.raises(Exception) as excinfo:
            read(spark, bootstrap, subscribe=topic, **from_zero).collect()
        assert "failOnDataLoss" in _error_text(excinfo) and "retention" in _error_text(excinfo)
        rows = read(
            spark, bootstrap, subscribe=topic, failOnDataLoss="false", **from_zero
        ).collect()
        offsets = sorted(r.offset for r in rows)
        assert offsets[0] >= start and offsets[-1] == 99
        assert offsets == list(range(offsets[0], 100))
    finally:
        cluster.close()
