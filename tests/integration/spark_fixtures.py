"""Shared fixtures and helpers for the Spark data source tests.

`spark`: one local[2] SparkSession for the whole test run (starting one costs ~10 s), with
format("epochlog") registered; it is never stopped between modules. Test modules import the
fixtures they use (`from tests.integration.spark_fixtures import spark, spark_cluster`).
`spark_cluster`: one LocalCluster (real ZooKeeper + one broker) per module, with retention
checked every 500 ms so tests can make retention delete data.
Python workers import this module (fault-injecting data sources live here), so the repository
root is put on PYTHONPATH before the JVM starts.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from epochlog.client import Admin, Consumer, ConsumerRecord, Producer
from epochlog.testing.cluster import LocalCluster

REPO_ROOT = Path(__file__).resolve().parents[2]
_names = itertools.count()


def start_spark(master: str = "local[2]") -> object:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    os.environ["PYTHONPATH"] = ":".join(dict.fromkeys(paths))
    from pyspark.sql import SparkSession

    from epochlog.spark import register

    session = (
        SparkSession.builder.master(master)
        .appName("epochlog-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.sql.streaming.minBatchesToRetain", "100")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    session.dataSource.register(FaultyEpochlogDataSource)
    return session


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    session = start_spark()
    yield session
    session.stop()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(
        tmp_path_factory.mktemp("spark-cluster"),
        1,
        broker_config={
            "log.retention.check.interval.ms": 500,
            "default.replication.factor": 1,
        },
        zk_session_timeout_ms=4000,
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


def create_topic(
    bootstrap: str, name: str, partitions: int = 2, rf: int = 1, **configs: str
) -> str:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic(
            name, partitions, rf, {k.replace("_", "."): v for k, v in configs.items()}
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            parts = admin.describe_topics([name])[name].partitions
            if len(parts) == partitions and all(p.leader >= 0 for p in parts):
                return name
            time.sleep(0.1)
    raise AssertionError(f"topic {name} has no leaders")


def produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    *,
    partition: int | None = None,
    keys: list[bytes] | None = None,
    headers: list[tuple[str, bytes]] | None = None,
    timestamp: int | None = None,
) -> None:
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        futures = [
            producer.send(
                topic,
                v,
                key=keys[i] if keys else None,
                headers=headers,
                partition=partition,
                timestamp=timestamp,
            )
            for i, v in enumerate(values)
        ]
        producer.flush(60)
        for f in futures:
            f.result(0)


def consume_all(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[ConsumerRecord]:
    """Every record in the topic now (up to the end offsets read at the start)."""
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            parts = admin.describe_topics([topic])[topic].partitions
        tps = [(topic, p.partition) for p in parts]
        ends = {(tp.topic, tp.partition): o for tp, o in consumer.end_offsets(tps).items()}
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        out: list[ConsumerRecord] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(consumer.position(tp) >= ends[tp] for tp in tps):
                break
            out.extend(r for r in consumer.poll(0.5) if r.offset < ends[(r.topic, r.partition)])
        else:
            raise AssertionError(f"could not read all of {topic} in {timeout_s} s")
        return out


class CommittedRecord(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def consume_committed(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[CommittedRecord]:
    """Every committed record in the topic now: a confluent-kafka (librdkafka) consumer with
    isolation.level=read_committed, from the beginning of each partition to its last stable
    offset (the end it reports at that moment); aborted transactions' records are not read."""
    import confluent_kafka as ck

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        partitions = [p.partition for p in admin.describe_topics([topic])[topic].partitions]
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{topic}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
        out: list[CommittedRecord] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"could not read all of {topic} in {timeout_s} s"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            out.append(CommittedRecord(msg.partition(), msg.offset(), msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


# ------------------------------------------------------------------------------ fault injection
# A data source `epochlog_faulty` whose sink crashes once, where the option `fault` says:
#   task    after the task wrote its rows (exactly-once: in its transaction, left open), in batch
#           `faultBatch`;
#   commit  (exactly-once) in the driver's commit of batch `faultBatch`, after the first
#           task's transaction was committed (a driver that dies half-way through a commit).
#   commit-hang  (exactly-once) as `commit`, but the commit then hangs instead of failing, so
#           that the test can kill the driver's whole process tree with SIGKILL there.
#   zombie  (exactly-once) the first attempt of partition 0's task in batch `faultBatch` writes
#           its rows in its transaction, saves its TaskTransaction (JSON) in `faultMarker` and
#           fails; Spark's retry of the task (a master allowing task failures, `local[2,2]`)
#           then takes the transactional id: the saved attempt is the zombie.
# `faultMarker` is a file created by the crash, so the fault fires once.

from collections.abc import Iterator as _Iterator  # noqa: E402

from pyspark.sql.datasource import WriterCommitMessage  # noqa: E402

from epochlog.spark import EpochlogDataSource  # noqa: E402
from epochlog.spark.exactly_once import TaskTransaction  # noqa: E402
from epochlog.spark.exactly_once_writer import ExactlyOnceStreamWriter  # noqa: E402
from epochlog.spark.options import EXACTLY_ONCE, parse_sink_options  # noqa: E402
from epochlog.spark.txn_clients import end_transactions  # noqa: E402
from epochlog.spark.writer import EpochlogStreamWriter  # noqa: E402


class InjectedCrash(RuntimeError):
    pass


def _fire_once(marker: str) -> None:
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    raise InjectedCrash(f"injected crash ({marker})")


def _task_batch() -> int:
    from pyspark import TaskContext

    return int(TaskContext.get().getLocalProperty("streaming.sql.batchId"))


class FaultyAtLeastOnceWriter(EpochlogStreamWriter):
    def __init__(self, options, fault: dict[str, str]) -> None:  # noqa: ANN001
        super().__init__(options)
        self.fault = fault

    def write(self, iterator: _Iterator) -> WriterCommitMessage:
        message = super().write(iterator)
        if self.fault["fault"] == "task" and _task_batch() == int(self.fault["faultbatch"]):
            _fire_once(self.fault["faultmarker"])
        return message


class FaultyExactlyOnceWriter(ExactlyOnceStreamWriter):
    def __init__(self, options, fault: dict[str, str]) -> None:  # noqa: ANN001
        super().__init__(options)
        self.fault = fault

    def write(self, iterator: _Iterator) -> WriterCommitMessage:
        from pyspark import TaskContext

        message = super().write(iterator)
        fault, in_batch = self.fault["fault"], _task_batch() == int(self.fault["faultbatch"])
        if fault == "task" and in_batch:
            _fire_once(self.fault["faultmarker"])
        context = TaskContext.get()
        if (
            fault == "zombie"
            and in_batch
            and context.partitionId() == 0
            and context.attemptNumber() == 0
            and isinstance(message, TaskTransaction)
        ):
            with open(self.fault["faultmarker"], "x") as out:
                json.dump(dataclasses.asdict(message), out)
            raise InjectedCrash(f"injected zombie: {message}")
        return message

    def commit(self, messages: list, batchId: int) -> None:  # noqa: N803
        fault = self.fault["fault"]
        if fault not in ("commit", "commit-hang") or batchId != int(self.fault["faultbatch"]):
            super().commit(messages, batchId)
            return
        open_txns = [m for m in messages if isinstance(m, TaskTransaction) and m.needs_end]
        end_transactions(self.options.client, open_txns[:1], commit=True)
        if fault == "commit-hang":
            with open(self.fault["faultmarker"], "x") as out:
                json.dump([dataclasses.asdict(m) for m in open_txns], out)
            time.sleep(3600)  # the test kills the driver here
        _fire_once(self.fault["faultmarker"])
        end_transactions(self.options.client, open_txns[1:], commit=True)


class FaultyEpochlogDataSource(EpochlogDataSource):
    @classmethod
    def name(cls) -> str:
        return "epochlog_faulty"

    def streamWriter(self, schema, overwrite):  # noqa: ANN001, ANN201
        columns = {f.name: f.dataType.simpleString() for f in schema.fields}
        options = parse_sink_options(self.options, columns, streaming=True)
        fault = {k: self.options[k] for k in ("fault", "faultbatch", "faultmarker")}
        if options.delivery_guarantee == EXACTLY_ONCE:
            return FaultyExactlyOnceWriter(options, fault)
        return FaultyAtLeastOnceWriter(options, fault)
