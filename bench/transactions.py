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

- produce, throughput shape (`--producers P`, default 8): the same N records from P producers
  in threads, N/P each, P idempotent against P transactional (each its own transactional.id,
  TXN_RECORDS per transaction). One producer is latency-bound (each commit waits for its round
  trips); P side by side show what transactions cost when the brokers set the pace.

Targets (issue 17): transactional produce >= 0.5x idempotent produce; read_committed consume
>= 0.9x read_uncommitted consume. On epochlog the cluster's `__transaction_state` (50
partitions) is created before the first idempotent run, as it exists for every later one.

Where a transaction's time goes (issue 17 item 7; librdkafka `debug=eos,protocol,msg` logs of
100 transactions of 100 records, 8 partitions, RF 3, linger.ms 5, one producer, 3 local brokers,
2 shared cores at load 4-6; median ms):

    step                                                  before   after
    commit_transaction -> AddPartitionsToTxn sent           1.0     1.0   (librdkafka)
    AddPartitionsToTxn sent -> answered                    24.3     6.2
      before: 1st try CONCURRENT_TRANSACTIONS (~2.5), librdkafka backoff (~19.5), 2nd try (~2.5)
      after: one try, held until the previous Complete record, then the Ongoing append
    Produce sent -> last answered (acks=all)                5.5     4.6
    last Produce answered -> EndTxn answered                3.4     2.5
      of which EndTxn's rtt (PrepareCommit appended)        2.1     1.9
    per transaction                                        35.0    15.4
    CONCURRENT_TRANSACTIONS answers per transaction         1       0

The markers (WriteTxnMarkers to each leader, each replicated) and the CompleteCommit record
(replicated) take ~4-5 ms after EndTxn's answer (inferred: the held AddPartitionsToTxn is
answered ~6 ms after it is sent, of which ~2 ms is its own Ongoing append). A transaction on
its critical path thus waits for five replicated appends in a row (markers, CompleteCommit,
Ongoing, the records, PrepareCommit) where an idempotent producer waits for one, and
librdkafka's mock (no replication, no disk) reaches only ~0.1x on this shape; 0.5x for one
producer is out of reach by construction. With P producers the brokers' CPU sets the pace:
the extra appends each wake the followers' fetches, which read every partition they follow
(`__transaction_state`'s included); cProfile of the brokers under 8 transactional producers
shows the fetch path (`read_from_local_log`) as the largest share.

For epochlog the bench also prints its brokers' CPU (`server_cpu`) per 100 records produced in each
shape, and the requests they answered per 100 records (from their metrics endpoints): what a
transaction costs the brokers against an idempotent producer's share of a large batch (DESIGN.md,
"Issues 17 and 18 measured on an idle machine").

KIP-890 part 1 verification (a leader asks the coordinator before the first transactional write
of each transaction to a partition) costs one more round trip per transaction: with one
producer, 5,000 records after a 2,000-record warm-up on a fresh 3-broker cluster, 19.1 and 18.5
ms per transaction without it against 28.1 and 28.0 ms with it (alternating runs;
`--broker-config transaction.partition.verification.enable=false` shows it in this bench).

Run: `.venv/bin/python bench/transactions.py [--messages 50000] [--rounds 3] [--rf 3]
[--producers 8]`.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from epochlog.processes import spawn  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import server_cpu  # noqa: E402

MOCK = Path(__file__).resolve().parents[2] / "shared" / "tools" / "librdkafka_mock_cluster.py"
PARTITIONS = 8
TXN_RECORDS = 100
RECORD_BYTES = 100
VALUE = os.urandom(RECORD_BYTES)
SHAPES = (
    "idempotent",
    "transactional",
    "parallel idempotent",
    "parallel transactional",
    "read_uncommitted",
    "read_committed",
)
console = Console(width=160)


def _producer(
    bootstrap: str, topic: str, transactional_id: str | None
) -> tuple[confluent_kafka.Producer, list[object]]:
    """A producer with its metadata, producer id and every leader's connection set up (not
    timed): one acknowledged record per partition, in a transaction for the transactional."""
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
    producer.list_topics(topic, timeout=30)
    if transactional_id:
        producer.init_transactions(60)
    failed: list[object] = []
    if transactional_id:
        producer.begin_transaction()
    for partition in range(PARTITIONS):
        producer.produce(topic, VALUE, partition=partition, on_delivery=_on_delivery(failed))
    if transactional_id:
        producer.commit_transaction(60)
    if producer.flush(60) or failed:
        raise RuntimeError(f"warm-up records to {topic} failed: {failed[:3]}")
    return producer, failed


def _on_delivery(failed: list[object]) -> Any:
    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    return on_delivery


def _send(
    producer: confluent_kafka.Producer,
    topic: str,
    records: range,
    transactional: bool,
    failed: list[object],
    done: Callable[[int], None],
) -> None:
    """The timed part: the records, TXN_RECORDS per transaction for the transactional, then
    every one acknowledged."""
    on_delivery = _on_delivery(failed)
    for first in range(records.start, records.stop, TXN_RECORDS):
        if transactional:
            producer.begin_transaction()
        last = min(first + TXN_RECORDS, records.stop)
        for i in range(first, last):
            while True:
                try:
                    producer.produce(topic, VALUE, key=str(i).encode(), on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
        if transactional:
            producer.commit_transaction(60)
        else:
            producer.poll(0)
        done(last - first)
    if producer.flush(120):
        raise RuntimeError(f"records to {topic} were not acknowledged")
    if failed:
        raise RuntimeError(f"{len(failed)} records failed: {failed[:3]}")


def produce(
    bootstrap: str, topic: str, n: int, transactional_id: str | None, progress: Progress
) -> float:
    """msg/s of n acknowledged records from one producer; transactional: committed
    TXN_RECORDS at a time."""
    producer, failed = _producer(bootstrap, topic, transactional_id)
    shape = "transactional" if transactional_id else "idempotent"
    task = progress.add_task(f"produce {shape}", total=n)
    start = time.perf_counter()
    _send(
        producer,
        topic,
        range(n),
        transactional_id is not None,
        failed,
        lambda k: progress.advance(task, k),
    )
    return n / (time.perf_counter() - start)


def produce_parallel(
    bootstrap: str,
    topic: str,
    n: int,
    producers: int,
    transactional_prefix: str | None,
    progress: Progress,
) -> float:
    """msg/s of n acknowledged records from `producers` producers in threads, n/producers
    each (each transactional with its own id when `transactional_prefix` is given), timed
    from the moment all are set up until the last one's records are acknowledged.
    confluent-kafka releases the GIL while it waits (commit_transaction, flush, poll), so the
    producers wait for the brokers side by side."""
    made = [
        _producer(bootstrap, topic, f"{transactional_prefix}-{i}" if transactional_prefix else None)
        for i in range(producers)
    ]
    shape = "transactional" if transactional_prefix else "idempotent"
    task = progress.add_task(f"produce {shape} x{producers}", total=n)
    share = -(-n // producers)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        producer, failed = made[index]
        try:
            _send(
                producer,
                topic,
                range(index * share, min((index + 1) * share, n)),
                transactional_prefix is not None,
                failed,
                lambda k: progress.advance(task, k),
            )
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(producers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} of {producers} producers failed: {errors[0]}")
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


def create_transaction_state(bootstrap: str) -> None:
    """A transactional producer's init_transactions: the cluster creates `__transaction_state`
    (its replicas then ride on every replica fetch, so idempotent runs see it too)."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "bench-setup"}
    )
    producer.init_transactions(60)
    producer.flush(10)


def requests_answered(endpoints: list[str]) -> collections.Counter[str]:
    """Requests the brokers have answered so far, by API name (their Prometheus endpoints'
    `kafka_network_requestmetrics_requests_total`, summed over versions and brokers)."""
    counts: collections.Counter[str] = collections.Counter()
    for endpoint in endpoints:
        with urllib.request.urlopen(endpoint, timeout=10) as answer:
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "kafka_network_requestmetrics_requests_total":
                    counts[sample.labels["request"]] += int(sample.value)
    return counts


def one_round(
    bootstrap: str,
    topics: tuple[str, str, str, str],
    n: int,
    producers: int,
    tag: str,
    progress: Progress,
    broker_pids: list[int],
    endpoints: list[str],
    requests: dict[str, collections.Counter[str]],
) -> tuple[dict[str, float], dict[str, float]]:
    """msg/s per shape, and the brokers' CPU ms per TXN_RECORDS records per produce shape; the
    requests the brokers answered per shape (from their metrics `endpoints`) go in
    `requests`."""
    idempotent_topic, transactional_topic, parallel_idempotent, parallel_transactional = topics
    cpu: dict[str, float] = {}

    def metered(shape: str, run: Callable[[], float]) -> float:
        before = server_cpu.cpu_seconds(broker_pids)
        answered = requests_answered(endpoints)
        rate = run()
        cpu[shape] = (server_cpu.cpu_seconds(broker_pids) - before) * 1000 / (n / TXN_RECORDS)
        requests.setdefault(shape, collections.Counter()).update(
            requests_answered(endpoints) - answered
        )
        return rate

    rates = {
        "idempotent": metered(
            "idempotent", lambda: produce(bootstrap, idempotent_topic, n, None, progress)
        )
    }
    rates["transactional"] = metered(
        "transactional",
        lambda: produce(bootstrap, transactional_topic, n, f"bench-{tag}", progress),
    )
    rates["parallel idempotent"] = metered(
        "parallel idempotent",
        lambda: produce_parallel(bootstrap, parallel_idempotent, n, producers, None, progress),
    )
    rates["parallel transactional"] = metered(
        "parallel transactional",
        lambda: produce_parallel(
            bootstrap, parallel_transactional, n, producers, f"bench-{tag}-p", progress
        ),
    )
    for isolation in ("read_uncommitted", "read_committed"):
        rates[isolation] = consume(
            bootstrap, transactional_topic, n + PARTITIONS, isolation, progress
        )
    return rates, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rf", type=int, default=3)
    parser.add_argument(
        "--producers",
        type=int,
        default=8,
        help="producers in parallel threads for the throughput shape (same total records)",
    )
    parser.add_argument(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a server.properties setting for epochlog's brokers (repeatable), e.g. "
        "transaction.partition.verification.enable=false to see what KIP-890 costs",
    )
    args = parser.parse_args()
    broker_config = dict(item.split("=", 1) for item in args.broker_config if "=" in item)
    if len(broker_config) != len(args.broker_config):
        parser.error(f"--broker-config takes KEY=VALUE, got {args.broker_config}")
    if args.producers < 1 or args.messages < args.producers * TXN_RECORDS:
        parser.error(
            f"--producers must be >= 1 and --messages >= producers x {TXN_RECORDS} "
            f"(got --producers {args.producers}, --messages {args.messages})"
        )
    n = args.messages
    runs: dict[str, list[dict[str, float]]] = {"librdkafka mock": [], "epochlog": []}
    cpu_rounds: list[dict[str, float]] = []  # epochlog brokers' CPU ms per TXN_RECORDS records
    requests: dict[str, collections.Counter[str]] = {}  # shape -> requests over all rounds
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
        cluster = LocalCluster(tmp, 3, broker_config=broker_config)
        cluster.start()
        try:
            create_transaction_state(cluster.bootstrap_servers)
            from epochlog.client import Admin

            for rnd in range(args.rounds):  # alternate the targets: noise hits both alike
                # A fresh mock per shape: it serves one topic made at start.
                rates: dict[str, float] = {}
                for shape, topic in (
                    ("idem", "bench-idem"),
                    ("txn", "bench-txn"),
                    ("pidem", "bench-pidem"),
                    ("ptxn", "bench-ptxn"),
                ):
                    mock, bootstrap = start_mock(topic, args.rf)
                    try:
                        if shape == "idem":
                            rates["idempotent"] = produce(bootstrap, topic, n, None, progress)
                        elif shape == "pidem":
                            rates["parallel idempotent"] = produce_parallel(
                                bootstrap, topic, n, args.producers, None, progress
                            )
                        elif shape == "ptxn":
                            rates["parallel transactional"] = produce_parallel(
                                bootstrap, topic, n, args.producers, f"bench-mock-{rnd}-p", progress
                            )
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
                topics = (
                    f"bench-idem-{rnd}",
                    f"bench-txn-{rnd}",
                    f"bench-pidem-{rnd}",
                    f"bench-ptxn-{rnd}",
                )
                with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
                    for topic in topics:
                        admin.create_topic(topic, PARTITIONS, args.rf)
                rates, cpu = one_round(
                    cluster.bootstrap_servers,
                    topics,
                    n,
                    args.producers,
                    f"epochlog-{rnd}",
                    progress,
                    [b.pid for b in cluster.brokers.values() if b.pid is not None],
                    list(cluster.metrics_endpoints().values()),
                    requests,
                )
                runs["epochlog"].append(rates)
                cpu_rounds.append(cpu)
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
        f"x{args.producers} idempotent msg/s",
        f"x{args.producers} transactional msg/s",
        f"x{args.producers} transactional / idempotent",
        "read_uncommitted msg/s",
        "read_committed msg/s",
        "read_committed / read_uncommitted",
    ):
        table.add_column(column, justify="left" if column == "target" else "right")
    for target, rounds in runs.items():
        median = {shape: statistics.median(r[shape] for r in rounds) for shape in SHAPES}
        produce_ratios = [r["transactional"] / r["idempotent"] for r in rounds]
        parallel_ratios = [r["parallel transactional"] / r["parallel idempotent"] for r in rounds]
        consume_ratios = [r["read_committed"] / r["read_uncommitted"] for r in rounds]
        table.add_row(
            target,
            f"{median['idempotent']:,.0f}",
            f"{median['transactional']:,.0f}",
            f"{statistics.median(produce_ratios):.2f}x "
            f"({', '.join(f'{r:.2f}' for r in produce_ratios)})",
            f"{median['parallel idempotent']:,.0f}",
            f"{median['parallel transactional']:,.0f}",
            f"{statistics.median(parallel_ratios):.2f}x "
            f"({', '.join(f'{r:.2f}' for r in parallel_ratios)})",
            f"{median['read_uncommitted']:,.0f}",
            f"{median['read_committed']:,.0f}",
            f"{statistics.median(consume_ratios):.2f}x "
            f"({', '.join(f'{r:.2f}' for r in consume_ratios)})",
        )
    console.print(table)
    cpu_ms = {shape: statistics.median(r[shape] for r in cpu_rounds) for shape in cpu_rounds[0]}
    console.print(
        f"epochlog's brokers' CPU per {TXN_RECORDS} records produced (ms, all three brokers, "
        "median of the rounds): "
        + ", ".join(f"{shape} {ms:.2f}" for shape, ms in cpu_ms.items())
        + f"; transactional / idempotent with {args.producers} producers: "
        f"{cpu_ms['parallel transactional'] / cpu_ms['parallel idempotent']:.0f}x the CPU"
    )
    per = args.rounds * n / TXN_RECORDS
    for shape, counts in requests.items():  # a local cluster's brokers serve their metrics
        console.print(
            f"epochlog's brokers answered per {TXN_RECORDS} records, {shape}: "
            + ", ".join(f"{name} {count / per:.1f}" for name, count in counts.most_common())
        )
    console.print(
        "[dim]ratios are taken within each round (both shapes one right after the other on the "
        "same target) and the median shown with every round's value. targets (issue 17): "
        "transactional >= 0.5x idempotent; read_committed >= 0.9x read_uncommitted. "
        f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores[/dim]"
    )


if __name__ == "__main__":
    main()
