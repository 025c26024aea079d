# ruff: noqa: F811 - pytest fixtures imported from spark_fixtures are parameters here
"""A streaming query copies a topic while a partition leader is killed with SIGKILL.

Three brokers (real ZooKeeper), topics with replication factor 3 and min.insync.replicas 2. A
producer writes records at a steady rate (acks=all); a query (1 s trigger) copies them from the
source topic to a sink topic with format("epochlog") both ways; once it has copied some, the
leader of sink partition 0 (it leads source partitions too: three brokers share six leaderships)
is killed -9 and started again. Every acknowledged record must reach the sink: exactly once with
deliveryGuarantee=exactly-once (read by a read_committed confluent-kafka consumer), at least once
with at-least-once.

The short variant of this scenario in the default run is the demo's test
(tests/integration/test_cluster_demo.py), whose counts job writes exactly-once through a kill.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from epochlog.client import Admin, Producer
from epochlog.testing.cluster import LocalCluster
from tests.integration.spark_fixtures import (  # noqa: F401 - fixtures
    consume_all,
    consume_committed,
    create_topic,
    spark,
    unique_topic,
)

RECORDS = 3000
RATE = 150.0  # records per second: 20 s of producing


@pytest.fixture(scope="module")
def three_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("leader-kill"), 3, zk_session_timeout_ms=4000)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


class SteadyProducer(threading.Thread):
    """Produces r0..r{n-1} at `rate` per second; `acked` holds the acknowledged values."""

    def __init__(self, bootstrap: str, topic: str, n: int, rate: float) -> None:
        super().__init__(name="steady-producer", daemon=True)
        self.bootstrap, self.topic, self.n, self.rate = bootstrap, topic, n, rate
        self.sent = 0
        self.acked: set[bytes] = set()
        self.failed: list[str] = []
        self._lock = threading.Lock()

    def run(self) -> None:
        def delivered(value: bytes):  # noqa: ANN202 - a callback factory
            def done(metadata, error) -> None:  # noqa: ANN001
                with self._lock:
                    if error is None:
                        self.acked.add(value)
                    else:
                        self.failed.append(f"{value!r}: {error}")

            return done

        with Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5}) as p:
            start = time.monotonic()
            for i in range(self.n):
                value = f"r{i}".encode()
                p.send(self.topic, value, key=f"k{i % 40}".encode(), on_delivery=delivered(value))
                self.sent = i + 1
                pause = start + (i + 1) / self.rate - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
            p.flush(120)


def _rows_read(query) -> int:  # noqa: ANN001
    return sum(p["numInputRows"] for p in query.recentProgress)


@pytest.mark.slow
@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_leader_killed_mid_stream_loses_nothing(spark, three_brokers, tmp_path, guarantee) -> None:
    cluster = three_brokers
    bootstrap = cluster.bootstrap_servers
    source = create_topic(bootstrap, unique_topic("kill-in"), 3, 3, min_insync_replicas="2")
    sink = create_topic(bootstrap, unique_topic("kill-out"), 2, 3, min_insync_replicas="2")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        victim = admin.describe_topics([sink])[sink].partitions[0].leader
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    query = (
        spark.readStream.format("epochlog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("epochlog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("deliveryGuarantee", guarantee)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        deadline = time.monotonic() + 180
        while query.lastProgress is None:  # running (batch 0 done) before records flow
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, "no micro-batch in 180 s"
            time.sleep(0.2)
        producer = SteadyProducer(bootstrap, source, RECORDS, RATE)
        producer.start()
        while producer.sent < RECORDS // 3 or _rows_read(query) == 0:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, "the query read nothing in 180 s"
            time.sleep(0.2)
        sent_at_kill = producer.sent
        cluster.kill_broker(victim)
        time.sleep(2)
        cluster.start_broker(victim)
        producer.join(180)
        assert not producer.is_alive() and not producer.failed, producer.failed[:5]
        assert len(producer.acked) == RECORDS
        assert sent_at_kill < RECORDS, "the producer was done before the kill: not mid-stream"

        deadline = time.monotonic() + 240
        while True:
            assert query.exception() is None, query.exception()
            read = consume_committed if guarantee == "exactly-once" else consume_all
            counts = Counter(r.value for r in read(bootstrap, sink, timeout_s=60))
            if set(counts) >= producer.acked or time.monotonic() > deadline:
                break
            time.sleep(2)
    finally:
        query.stop()
    missing = producer.acked - set(counts)
    assert not missing, f"{len(missing)} acknowledged records never reached the sink"
    assert set(counts) == producer.acked
    if guarantee == "exactly-once":
        duplicated = {v: n for v, n in counts.items() if n > 1}
        assert not duplicated, f"{len(duplicated)} records written more than once"
