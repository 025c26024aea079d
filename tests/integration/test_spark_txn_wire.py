"""The exactly-once sink's wire exchange (`epochlog/spark/txn_clients.py`), with no Spark: a
task's transaction (InitProducerId, AddPartitionsToTxn, transactional Produce, AddOffsetsToTxn,
TxnOffsetCommit) left open, then committed by another client with EndTxn from the (id, producer
id, epoch) alone.

Against epochlog (ZooKeeper + one broker) and librdkafka's mock cluster. The mock writes commit
markers, but it neither filters aborted records for read_committed nor keeps transactional offset
commits nor bumps the epoch of a known transactional id, so the two safety mechanisms run against
epochlog only: a second attempt with the same transactional id fences the first (its EndTxn is
refused, its rows are aborted), and a batch whose marker was committed is not written again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import confluent_kafka as ck
import pyarrow as pa
import pytest

from epochlog.client import Admin
from epochlog.processes import spawn
from epochlog.spark.exactly_once import TaskTransaction, TransactionFencedError
from epochlog.spark.options import parse_sink_options
from epochlog.spark.txn_clients import end_transactions, write_in_transaction
from epochlog.testing.cluster import LocalCluster

MOCK_TOOL = "/work/shared/tools/librdkafka_mock_cluster.py"
TOPIC = "txn-out"
PARTITIONS = 2
DEADLINE_S = 30  # a failure bound only


@pytest.fixture(scope="module")
def epochlog_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """ZooKeeper + one epochlog broker: the two safety mechanisms run here only."""
    yield from _epochlog_cluster(tmp_path_factory)


@pytest.fixture(scope="module", params=["epochlog", "mock"])
def bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "epochlog":
        yield request.getfixturevalue("epochlog_bootstrap")
    else:
        yield from _mock_cluster()


def _epochlog_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster = LocalCluster(
        tmp_path_factory.mktemp("spark-txn-wire"),
        1,
        broker_config={
            "offsets.topic.num.partitions": 2,
            "transaction.state.log.num.partitions": 2,
        },
    )
    cluster.start()
    try:
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topic(TOPIC, PARTITIONS, 1)
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline:
                parts = admin.describe_topics([TOPIC])[TOPIC].partitions
                if len(parts) == PARTITIONS and all(p.leader >= 0 for p in parts):
                    break
                time.sleep(0.1)
        yield cluster.bootstrap_servers
    finally:
        cluster.close()


def _mock_cluster() -> Iterator[str]:
    proc = spawn(
        [sys.executable, MOCK_TOOL, "3", TOPIC, str(PARTITIONS), "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        servers = proc.stdout.readline().strip()
        assert servers, "the mock cluster printed no bootstrap list"
        yield servers
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def sink_options(bootstrap: str, prefix: str):  # noqa: ANN201
    return parse_sink_options(
        {
            "bootstrap.servers": bootstrap,
            "topic": TOPIC,
            "deliveryGuarantee": "exactly-once",
            "transactionalIdPrefix": prefix,
        },
        {"value": "binary", "key": "binary"},
        streaming=True,
    )


def rows(values: list[bytes]) -> Iterator[pa.RecordBatch]:
    yield pa.record_batch(
        [
            pa.array([b"k%d" % i for i in range(len(values))], pa.binary()),
            pa.array(values, pa.binary()),
        ],
        names=["key", "value"],
    )


def read_all(bootstrap: str) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record, read until each partition's end."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "check",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([ck.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    out: list[tuple[int, int, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + DEADLINE_S
    while len(at_end) < PARTITIONS and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
            at_end.add(msg.partition())
            continue
        out.append((msg.partition(), msg.offset(), msg.value()))
    consumer.close()
    assert len(at_end) == PARTITIONS, "did not reach the end of every partition"
    return out


def test_task_transaction_committed_by_the_driver_from_id_and_epoch(bootstrap: str) -> None:
    options = sink_options(bootstrap, "wire-a")
    values = [b"v%d" % i for i in range(50)]
    task = write_in_transaction(options, "wire-a-0", 7, "wire-a", rows(values))
    assert isinstance(task, TaskTransaction)
    assert (task.records, task.batch_id, task.already_committed) == (50, 7, False)
    assert task.producer_id >= 0 and task.producer_epoch >= 0
    end_transactions(options.client, [task], commit=True)
    assert sorted(v for _, _, v in read_all(bootstrap)) == sorted(values)


def test_batches_are_transactional_and_followed_by_a_commit_marker(bootstrap: str) -> None:
    options = sink_options(bootstrap, "wire-b")
    low, high = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "w"}
    ).get_watermark_offsets(ck.TopicPartition(TOPIC, 0), timeout=10)
    batch = pa.record_batch(
        [pa.array([b"only"], pa.binary()), pa.array([0], pa.int32())], names=["value", "partition"]
    )
    task = write_in_transaction(options, "wire-b-0", 1, "wire-b", iter([batch]))
    end_transactions(options.client, [task], commit=True)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "w2"})
    _, after = consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, 0), timeout=10)
    consumer.close()
    assert after == high + 2  # the record and the commit marker (a control batch)


def test_a_retried_attempt_fences_the_first_and_only_its_rows_are_read(
    epochlog_bootstrap: str,
) -> None:
    """Two attempts of one task (same transactional id): the second's InitProducerId bumps the
    epoch and aborts the first's open transaction; the first's EndTxn(commit) is refused."""
    bootstrap = epochlog_bootstrap
    options = sink_options(bootstrap, "wire-c")
    before = {v for _, _, v in read_all(bootstrap)}
    zombie = write_in_transaction(options, "wire-c-0", 3, "wire-c", rows([b"zombie"] * 20))
    retry = write_in_transaction(options, "wire-c-0", 3, "wire-c", rows([b"retry"] * 20))
    assert retry.producer_id == zombie.producer_id
    assert retry.producer_epoch > zombie.producer_epoch
    with pytest.raises(TransactionFencedError, match="wire-c-0"):
        end_transactions(options.client, [zombie], commit=True)
    end_transactions(options.client, [retry], commit=True)
    new = [v for _, _, v in read_all(bootstrap) if v not in before]
    assert new == [b"retry"] * 20


def test_a_batch_whose_marker_was_committed_is_not_written_again(epochlog_bootstrap: str) -> None:
    """The batch marker commits with the rows (TxnOffsetCommit in the same transaction): a
    re-run of batch 5 or an earlier one writes nothing; batch 6 is written."""
    bootstrap = epochlog_bootstrap
    options = sink_options(bootstrap, "wire-d")
    first = write_in_transaction(options, "wire-d-1", 5, "wire-d", rows([b"d5"] * 10))
    end_transactions(options.client, [first], commit=True)
    for batch in (5, 4):
        again = write_in_transaction(options, "wire-d-1", batch, "wire-d", rows([b"again"] * 10))
        assert (again.already_committed, again.records, again.needs_end) == (True, 0, False)
    later = write_in_transaction(options, "wire-d-1", 6, "wire-d", rows([b"d6"] * 10))
    assert (later.already_committed, later.records) == (False, 10)
    end_transactions(options.client, [later], commit=True)
    values = [v for _, _, v in read_all(bootstrap)]
    assert values.count(b"d5") == 10 and values.count(b"d6") == 10
    assert b"again" not in values


def test_an_uncommitted_marker_does_not_count_and_its_rows_stay_unread(
    epochlog_bootstrap: str,
) -> None:
    """A task whose transaction the driver never ended (it died first): the retry aborts it, so
    its marker never counts and the retry writes the batch."""
    bootstrap = epochlog_bootstrap
    options = sink_options(bootstrap, "wire-e")
    write_in_transaction(options, "wire-e-0", 2, "wire-e", rows([b"lost"] * 5))
    retry = write_in_transaction(options, "wire-e-0", 2, "wire-e", rows([b"kept"] * 5))
    assert (retry.already_committed, retry.records) == (False, 5)
    end_transactions(options.client, [retry], commit=True)
    values = [v for _, _, v in read_all(bootstrap)]
    assert values.count(b"kept") == 5 and b"lost" not in values
