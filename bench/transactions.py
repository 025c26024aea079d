"""Transactions: transactional produce against idempotent produce, read_committed consume
against read_uncommitted; epochlog, with librdkafka's mock cluster as an anchor.

In one run, on the same machine, with confluent-kafka on both targets:
- produce: N records of 100 bytes, keyed so they spread over every partition, with
  acks=all, once from an idempotent producer and once from a transactional producer that commits
  every TXN_RECORDS records (begin_transaction, TXN_RECORDS produce() calls, commit_transaction:
  librdkafka adds the partitions, flushes and ends the transaction, waiting for each step).
  The ratio is transactional msg/s over idempotent msg/s, both measured on the same target one
  right after the other.
- consume: the transactional topic (records plus a commit marker per partition per transaction)
  read from the beginning with assign(), once with isolation.level=read_uncommitted and once
  with read_committed; read_committed reads only up to the last stable offset and drops the
  markers (and aborted records, of which there are none here, so the two read the same records).

Targets (issue 17): transactional produce >= 0.5x idempotent produce; read_committed consume
>= 0.9x read_uncommitted consume.

Run: `.venv/bin/python bench/transactions.py [--messages 50000] [--rounds 3] [--rf 3]`.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from epochlog.processes import spawn  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402

MOCK = Path(__file__).resolve().parents[2] / "shared" / "tools" / "librdkafka_mock_cluster.py"
PARTITIONS = 8
TXN_RECORDS = 100
RECORD_BYTES = 100
SHAPES = ("idempotent", "transactional", "read_uncommitted", "read_committed")
console = Console(width=160)


def produce(
    bootstrap: str, topic: str, n: int, transactional_id: str | None, progress: Progress
) -> float:
    """msg/s of n acknowledged records; transactional: committed TXN_RECORDS at a time."""
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "queue.buffering.max.messages": 1_000_000,
    }
    if transactional_id:
        config["transactional.id"] = transactional_id
    producer = confluent_kafka.Producer(config)
    producer.list_topics(topic, timeout=30)  # metadata first: not timed
    if transactional_id:
        producer.init_transactions(60)  # coordinator lookup and producer id: not timed
    value = os.urandom(RECORD_BYTES)
    failed: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    # Warm-up, not timed, alike for both shapes: one acknowledged record per partition (the
    # idempotent producer's id, every leader's connection; a transaction for the transactional).
    if transactional_id:
        producer.begin_transaction()
    for partition in range(PARTITIONS):
        producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
    if transactional_id:
        producer.commit_transaction(60)
    if producer.flush(60) or failed:
        raise RuntimeError(f"warm-up records to {topic} failed: {failed[:3]}")
    shape = "transactional" if transactional_id else "idempotent"
    task = progress.add_task(f"produce {shape}", total=n)
    start = time.perf_counter()
    for first in range(0, n, TXN_RECORDS):
        if transactional_id:
            producer.begin_transaction()
        for i in range(first, min(first + TXN_RECORDS, n)):
            while True:
                try:
                    producer.produce(topic, value, key=str(i).encode(), on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
        if transactional_id:
            producer.commit_transaction(60)
        else:
            producer.poll(0)
        progress.update(task, completed=min(first + TXN_RECORDS, n))
    if producer.flush(120):
        raise RuntimeError(f"records to {topic} were not acknowledged")
    elapsed = time.perf_counter() - start
    if failed:
        raise RuntimeError(f"{len(failed)} records failed: {failed[:3]}")
    return n / elapsed


def consume(bootstrap: str, topic: str, n: int, isolation: str, progress: Progress) -> float:
    """msg/s of confluent-kafka's consume() loop over the topic's n records (the warm-up's
    included) from its start, timed from the first records (connections and offset lookups
    set up)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-transactions",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "queued.min.messages": 1_000_000,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(PARTITIONS)
        ]
    )
    task = progress.add_task(f"consume {isolation}", total=n)
    seen = first = 0
    start = time.perf_counter()
    deadline = start + 300
    while seen < n:
        batch = consumer.consume(num_messages=10000, timeout=1.0)
        for message in batch:
            error = message.error()
            if error is None:
                seen += 1
            elif error.code() != confluent_kafka.KafkaError._PARTITION_EOF:
                raise RuntimeError(f"consume {isolation}: {error}")
        if batch and not first:
            first, start = seen, time.perf_counter()
        progress.update(task, completed=seen)
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{isolation}: consumed only {seen} of {n} in 300 s")
    elapsed = time.perf_counter() - start
    consumer.close()
    if n - first < n // 2:
        raise RuntimeError(f"{isolation}: the first fetches held {first} of {n}; use more records")
    if seen != n:
        raise RuntimeError(f"{isolation}: read {seen} records, expected {n}")
    return (n - first) / elapsed


def start_mock(topic: str, rf: int) -> tuple[subprocess.Popen[str], str]:
    process = spawn(
        [sys.executable, str(MOCK), "3", topic, str(PARTITIONS), str(rf)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def one_round(
    bootstrap: str, topics: tuple[str, str], n: int, tag: str, progress: Progress
) -> dict[str, float]:
    idempotent_topic, transactional_topic = topics
    rates = {"idempotent": produce(bootstrap, idempotent_topic, n, None, progress)}
    rates["transactional"] = produce(bootstrap, transactional_topic, n, f"bench-{tag}", progress)
    for isolation in ("read_uncommitted", "read_committed"):
        rates[isolation] = consume(
            bootstrap, transactional_topic, n + PARTITIONS, isolation, progress
        )
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rf", type=int, default=3)
    args = parser.parse_args()
    n = args.messages
    runs: dict[str, list[dict[str, float]]] = {"librdkafka mock": [], "epochlog": []}
    with (
        tempfile.TemporaryDirectory(prefix="epochlog-bench-") as tmp,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress,
    ):
        cluster = LocalCluster(tmp, 3)
        cluster.start()
        try:
            from epochlog.client import Admin

            for rnd in range(args.rounds):  # alternate the targets: noise hits both alike
                # A fresh mock per shape: it serves one topic made at start.
                rates: dict[str, float] = {}
                for shape, topic in (("idem", "bench-idem"), ("txn", "bench-txn")):
                    mock, bootstrap = start_mock(topic, args.rf)
                    try:
                        if shape == "idem":
                            rates["idempotent"] = produce(bootstrap, topic, n, None, progress)
                        else:
                            rates["transactional"] = produce(
                                bootstrap, topic, n, f"bench-mock-{rnd}", progress
                            )
                            for isolation in ("read_uncommitted", "read_committed"):
                                rates[isolation] = consume(
                                    bootstrap, topic, n + PARTITIONS, isolation, progress
                                )
                    finally:
                        mock.send_signal(signal.SIGTERM)
                        mock.wait()
                runs["librdkafka mock"].append(rates)
                topics = (f"bench-idem-{rnd}", f"bench-txn-{rnd}")
                with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
                    for topic in topics:
                        admin.create_topic(topic, PARTITIONS, args.rf)
                runs["epochlog"].append(
                    one_round(cluster.bootstrap_servers, topics, n, f"epochlog-{rnd}", progress)
                )
        finally:
            cluster.close()

    table = Table(
        title=f"confluent-kafka {confluent_kafka.__version__} (librdkafka "
        f"{confluent_kafka.libversion()[0]}), median of {args.rounds} rounds: {n:,} x "
        f"{RECORD_BYTES} B records, {TXN_RECORDS} per transaction, acks=all, RF {args.rf}, "
        f"{PARTITIONS} partitions"
    )
    for column in (
        "target",
        "idempotent msg/s",
        "transactional msg/s",
        "transactional / idempotent",
        "read_uncommitted msg/s",
        "read_committed msg/s",
        "read_committed / read_uncommitted",
    ):
        table.add_column(column, justify="left" if column == "target" else "right")
    for target, rounds in runs.items():
        median = {shape: statistics.median(r[shape] for r in rounds) for shape in SHAPES}
        produce_ratios = [r["transactional"] / r["idempotent"] for r in rounds]
        consume_ratios = [r["read_committed"] / r["read_uncommitted"] for r in rounds]
        table.add_row(
            target,
            f"{median['idempotent']:,.0f}",
            f"{median['transactional']:,.0f}",
            f"{statistics.median(produce_ratios):.2f}x "
            f"({', '.join(f'{r:.2f}' for r in produce_ratios)})",
            f"{median['read_uncommitted']:,.0f}",
            f"{median['read_committed']:,.0f}",
            f"{statistics.median(consume_ratios):.2f}x "
            f"({', '.join(f'{r:.2f}' for r in consume_ratios)})",
        )
    console.print(table)
    console.print(
        "[dim]ratios are taken within each round (both shapes one right after the other on the "
        "same target) and the median shown with every round's value. targets (issue 17): "
        "transactional >= 0.5x idempotent; read_committed >= 0.9x read_uncommitted. "
        f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores[/dim]"
    )


if __name__ == "__main__":
    main()
