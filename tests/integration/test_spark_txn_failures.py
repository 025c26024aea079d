"""The exactly-once sink's two safety mechanisms, end to end with PySpark on epochlog.

Each scenario runs a driver of its own (`spark_copy_job.py`, a subprocess in a new session)
copying 120 records (batches 0 and 1 of 60) from a 2-partition topic to another with
deliveryGuarantee=exactly-once, against ZooKeeper + one broker; the sink topic is then read
by a read_committed confluent-kafka consumer.

- A zombie task attempt is fenced: on master `local[2,2]` (a failed task is retried), the first
  attempt of batch 1's task 0 writes its rows in its transaction and fails; Spark's retry takes
  the same transactional id, whose InitProducerId bumps the epoch and aborts the attempt's
  transaction. Its rows are in the log (a read_uncommitted read sees them) but never readable
  committed, and the zombie's own late EndTxn(commit) is refused (PRODUCER_FENCED).
- A driver killed with SIGKILL after committing the first task's transaction of batch 1 and
  before Spark recorded the batch: the re-run (a new driver, same checkpoint) finds that
  partition's batch marker committed and writes nothing there, and the rest once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochlog.spark.exactly_once import TaskTransaction, TransactionFencedError
from epochlog.spark.txn_clients import end_transactions
from epochlog.testing.cluster import LocalCluster
from tests.integration.spark_fixtures import (
    consume_all,
    consume_committed,
    create_topic,
    produce,
    unique_topic,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
JOB = REPO_ROOT / "tests" / "integration" / "spark_copy_job.py"
RECORDS = 120
EXPECTED = {f"r{i}".encode() for i in range(RECORDS)}
JOB_TIMEOUT_S = 300  # a failure bound only


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("spark-txn-failures"),
        1,
        broker_config={"default.replication.factor": 1},
        zk_session_timeout_ms=4000,
    )
    local.start()
    try:
        yield local
    finally:
        local.close()


@pytest.fixture(scope="module")
def source_topic(cluster: LocalCluster) -> str:
    bootstrap = cluster.bootstrap_servers
    topic = create_topic(bootstrap, unique_topic("txn-failures-in"), 2)
    half = RECORDS // 2  # both partitions, so that each batch has two tasks with rows
    produce(bootstrap, topic, [f"r{i}".encode() for i in range(half)], partition=0)
    produce(bootstrap, topic, [f"r{i}".encode() for i in range(half, RECORDS)], partition=1)
    return topic


def start_job(
    log: Path, master: str, bootstrap: str, source: str, sink: str, checkpoint: Path, *extra: str
) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ":".join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    fmt = "epochlog_faulty" if extra else "epochlog"
    command = [sys.executable, str(JOB), master, bootstrap, source, sink, str(checkpoint), fmt]
    with open(log, "ab") as out:
        return subprocess.Popen(
            [*command, *extra],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the test kills the driver's whole process tree
        )


def finish(job: subprocess.Popen[bytes], log: Path) -> int:
    try:
        return job.wait(JOB_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_tree(job)
        raise AssertionError(f"the Spark job did not end; log tail:\n{tail(log)}") from None


def kill_tree(job: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job.pid, signal.SIGKILL)
    job.wait()


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


def test_a_zombie_task_attempt_is_fenced_and_its_rows_never_read(
    cluster: LocalCluster, source_topic: str, tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap_servers
    sink = create_topic(bootstrap, unique_topic("txn-zombie"), 2)
    marker, log = tmp_path / "zombie.json", tmp_path / "spark.log"
    job = start_job(
        log,
        "local[2,2]",
        bootstrap,
        source_topic,
        sink,
        tmp_path / "checkpoint",
        "fault=zombie",
        "faultBatch=1",
        f"faultMarker={marker}",
    )
    try:
        assert finish(job, log) == 0, tail(log)
    finally:
        kill_tree(job)
    zombie = TaskTransaction(**json.loads(marker.read_text()))
    assert zombie.records > 0 and zombie.batch_id == 1
    client = {"bootstrap.servers": bootstrap}
    with pytest.raises(TransactionFencedError):
        end_transactions(client, [zombie], commit=True)  # the zombie's late commit
    committed = Counter(r.value for r in consume_committed(bootstrap, sink))
    assert set(committed) == EXPECTED
    assert max(committed.values()) == 1
    # The zombie's rows were written: only their transaction's abort hides them.
    assert len(consume_all(bootstrap, sink)) == RECORDS + zombie.records


def test_a_driver_killed_mid_commit_is_rerun_without_rewriting_the_committed_task(
    cluster: LocalCluster, source_topic: str, tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap_servers
    sink = create_topic(bootstrap, unique_topic("txn-driver-kill"), 2)
    marker, log, checkpoint = tmp_path / "ended.json", tmp_path / "spark.log", tmp_path / "ckpt"
    job = start_job(
        log,
        "local[2]",
        bootstrap,
        source_topic,
        sink,
        checkpoint,
        "fault=commit-hang",
        "faultBatch=1",
        f"faultMarker={marker}",
    )
    try:
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while not marker.exists():
            assert job.poll() is None, f"the job ended before the fault:\n{tail(log)}"
            assert time.monotonic() < deadline, f"no commit of batch 1:\n{tail(log)}"
            time.sleep(0.2)
        time.sleep(0.5)  # the marker's JSON is written whole
    finally:
        kill_tree(job)
    tasks = [TaskTransaction(**t) for t in json.loads(marker.read_text())]
    assert len(tasks) == 2 and all(t.batch_id == 1 for t in tasks)
    assert sum(t.records for t in tasks) == 60
    assert not (checkpoint / "commits" / "1").exists()  # Spark never recorded batch 1

    rerun = start_job(log, "local[2]", bootstrap, source_topic, sink, checkpoint)
    try:
        assert finish(rerun, log) == 0, tail(log)
    finally:
        kill_tree(rerun)
    assert (checkpoint / "commits" / "1").exists()
    committed = Counter(r.value for r in consume_committed(bootstrap, sink))
    assert set(committed) == EXPECTED
    assert max(committed.values()) == 1
