"""Server efficiency: the servers' CPU time per record, epochlog beside librdkafka's mock and Tansu.

What is ours alone on a machine the client shares: the client (confluent-kafka, this process and
its librdkafka threads) runs on one core, every server process (epochlog's 3 brokers and their
ZooKeeper; the mock; Tansu) on the other, each thread moved with `os.sched_setaffinity`. Around
each timed phase the servers' utime + stime is read from /proc/<pid>/stat, so a figure is the
CPU the servers spent, divided by the records moved; it includes what they spend idle (timers,
ZooKeeper ticks, followers' empty fetches), shown on its own in the "idle" column, measured over
one second before each phase.

The matrix: RF 1 and RF 3, 100 B and 1 KiB records, 16 partitions, acks=all, and two batchings:
- large: linger.ms 5, librdkafka's default batch size; records go to the partitions in turn in
  runs of 500 KB (5,000 x 100 B, 488 x 1 KiB), so batches are as large as linger.ms lets them be,
  the same on every target, and every partition gets an equal share. (Keyless records with
  librdkafka's sticky partitioner pick a partition per batch at random, which overfilled a mock
  partition's 5 MiB so that it dropped records; 1,000 keys made batches of ~280 records.)
- small: batches of 10 records: runs of 10 records a partition, batch.num.messages 10 with
  linger.ms 1, and a producer that always has records queued. A full batch is sent at once
  (batch.num.messages wins over linger), the linger only holds back a partial one: with
  linger.ms 0 librdkafka sends whatever is queued each time its thread wakes, and against the
  mock that measured 5-6 records a batch, not 10.
  The achieved records per batch and per ProduceRequest come from the producer's statistics
  (`topics.<t>.batchcnt`, `brokers.*.req.Produce`) and are printed beside each figure.
For each: the servers' CPU µs per record produced (timed after one acknowledged warm-up record
per partition), the pinned produce rate, and for large batches the CPU µs per record consumed
(assign() from the beginning until every record has arrived). Then end-to-end latency at a fixed
10,000 msg/s, RF 3, acks=all, linger.ms 1 (`--latency-linger-ms`): the record carries its
produce time, a consumer in this process (same core) takes now minus that; p50/p99 over the
records after the first second. (linger.ms 0 sends each record alone at this rate: 10,000
ProduceRequests a second, which measured ~130 ms p50 even on the mock.)

Targets (issue 20), 100 B records, ours over the mock: large batches RF 1 <= 2x produce and
consume, RF 3 <= 3x produce and <= 2x consume; batches of 10 records RF 1 <= 2x, RF 3 <= 3x
produce; end-to-end p99 < 10 ms.

Run: `python bench/efficiency.py [--quick] [--json OUT.json] [--compare OLD.json]`; a subset with
`--rf 3 --sizes 100 --batching small --targets epochlog mock`; `--profile rf3-100B-small` samples
one broker with py-spy during an extra run of that workload; `--compare OLD.json --against
NEW.json` prints before -> after without running anything.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import server_cpu  # noqa: E402
import tansu  # noqa: E402
from efficiency_results import (  # noqa: E402
    LABELS,
    LATENCY_RATE,
    LATENCY_WARMUP_S,
    PARTITIONS,
    TARGETS,
    Latency,
    Phase,
    Results,
    Run,
    Workload,
    console,
    fmt,
    load,
    percentile,
    print_comparison,
    print_tables,
    record_counts,
)

from epochlog.processes import spawn  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402

MOCK = Path(__file__).resolve().parents[2] / "shared" / "tools" / "librdkafka_mock_cluster.py"
IDLE_S = 1.0
STATS_INTERVAL_MS = 250
STALL_S = 30.0
LARGE_RUN_BYTES = 500_000  # records a partition gets in a row with large batches


# ----------------------------------------------------------------------------- targets


@dataclass
class Endpoint:
    bootstrap: str
    topic: str
    pids: list[int]


class Target:
    """A server to measure: `endpoint(rf, topic)` makes the topic and names the pids to watch;
    `release` undoes it, so that each workload starts from the same state."""

    name: str
    # what a consumer measuring latency sets for this server (Kafka's defaults unless said)
    latency_consumer_config: dict[str, Any] = {}

    def endpoint(self, rf: int, topic: str) -> Endpoint:
        raise NotImplementedError

    def release(self, endpoint: Endpoint) -> None:
        pass

    def close(self) -> None:
        pass


def create_topic(bootstrap: str, topic: str, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, rf)]).values():
        future.result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (
            metadata is not None
            and metadata.error is None
            and len(metadata.partitions) == PARTITIONS
            and all(p.leader >= 0 and len(p.isrs) == rf for p in metadata.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic}: partitions without a leader or a full ISR after 60 s")


CONSUMER_GROUP = "bench-efficiency"


def warm_group_coordinator(bootstrap: str) -> None:
    """Until the consumers' group has a coordinator: the first FindCoordinator makes epochlog
    create __consumer_offsets, which is no part of what a consume phase measures."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": CONSUMER_GROUP, "enable.auto.commit": False}
    )
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                consumer.committed([confluent_kafka.TopicPartition("eff-warm-up", 0)], timeout=10)
                return
            except confluent_kafka.KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


class EpochlogTarget(Target):
    name = "epochlog"

    def __init__(self, directory: str, broker_config: dict[str, str]) -> None:
        self.cluster = LocalCluster(directory, 3, broker_config=broker_config)
        self.cluster.start()
        warm_group_coordinator(self.cluster.bootstrap_servers)

    @property
    def pids(self) -> list[int]:
        pids = [b.pid for b in self.cluster.brokers.values() if b.pid is not None]
        return pids + ([self.cluster.zk_pid] if self.cluster.zk_pid else [])

    def endpoint(self, rf: int, topic: str) -> Endpoint:
        create_topic(self.cluster.bootstrap_servers, topic, rf)
        return Endpoint(self.cluster.bootstrap_servers, topic, self.pids)

    def release(self, endpoint: Endpoint) -> None:
        # an idle topic still costs its followers' fetches: each workload starts from none
        admin = AdminClient({"bootstrap.servers": endpoint.bootstrap})
        for future in admin.delete_topics([endpoint.topic]).values():
            future.result(60)

    def close(self) -> None:
        self.cluster.close()


class MockTarget(Target):
    """A fresh mock per workload: its topic is made at start-up, and it keeps 5 MiB a partition."""

    name = "mock"
    # The mock holds every Fetch for its full max wait instead of answering when records
    # arrive: with the default 500 ms its end-to-end p50 measured 266 ms.
    latency_consumer_config = {"fetch.wait.max.ms": 10}

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None

    def endpoint(self, rf: int, topic: str) -> Endpoint:
        self.process = spawn(
            [sys.executable, str(MOCK), "3", topic, str(PARTITIONS), str(rf)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        return Endpoint(self.process.stdout.readline().strip(), topic, [self.process.pid])

    def release(self, endpoint: Endpoint) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait()
            self.process = None

    def close(self) -> None:
        self.release(Endpoint("", "", []))


class TansuTarget(Target):
    name = "tansu"

    def __init__(self, executable: Path, log_path: Path) -> None:
        self.broker = tansu.TansuBroker(executable, log_path)
        warm_group_coordinator(self.broker.bootstrap_servers)

    def endpoint(self, rf: int, topic: str) -> Endpoint:
        create_topic(self.broker.bootstrap_servers, topic, rf)
        return Endpoint(self.broker.bootstrap_servers, topic, [self.broker.pid])

    def close(self) -> None:
        self.broker.close()


# ----------------------------------------------------------------------------- measuring


class Pinning:
    """The client on one core, the servers on the other."""

    def __init__(self, client_core: int, server_core: int) -> None:
        self.client = {client_core}
        self.server = {server_core}

    def apply(self, server_pids: list[int]) -> None:
        server_cpu.pin(server_pids, self.server)
        server_cpu.pin([os.getpid()], self.client, descendants=False)
        stray = server_cpu.unpinned_threads(server_pids, self.server)
        if stray:
            raise RuntimeError(f"server threads {stray[:5]} still run off core {self.server}")


def idle_cores(pids: list[int], seconds: float = IDLE_S) -> float:
    start = server_cpu.cpu_seconds(pids)
    time.sleep(seconds)
    return (server_cpu.cpu_seconds(pids) - start) / seconds


class ProducerStats:
    """Sums the producer's statistics windows: records per batch and ProduceRequests sent."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.lock = threading.Lock()
        self.emitted = 0
        self.batch_records = 0
        self.batches = 0
        self.produce_requests = 0  # cumulative, from the latest emit

    def on_stats(self, raw: str) -> None:
        stats = json.loads(raw)
        topic = stats.get("topics", {}).get(self.topic)
        with self.lock:
            self.emitted += 1
            if topic is not None:
                self.batch_records += topic["batchcnt"]["sum"]
                self.batches += topic["batchcnt"]["cnt"]
            self.produce_requests = sum(
                b.get("req", {}).get("Produce", 0) for b in stats.get("brokers", {}).values()
            )

    def next_emit(self, producer: confluent_kafka.Producer) -> None:
        """Until one more statistics window has been emitted (it closes the current one)."""
        with self.lock:
            seen = self.emitted
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            producer.poll(0.05)
            with self.lock:
                if self.emitted > seen:
                    return
        raise RuntimeError("the producer emitted no statistics for 10 s")

    def reset(self) -> tuple[int, int]:
        with self.lock:
            self.batch_records = self.batches = 0
            return self.produce_requests, self.emitted


def producer_config(endpoint: Endpoint, workload: Workload, stats: ProducerStats) -> dict:
    config: dict[str, Any] = {
        "bootstrap.servers": endpoint.bootstrap,
        "acks": "all",
        "queue.buffering.max.messages": 1_000_000,
        "statistics.interval.ms": STATS_INTERVAL_MS,
        "log_level": 4,  # warnings and worse: not the info line on a closing producer's queue
        "stats_cb": stats.on_stats,
    }
    if workload.batching == "large":
        config["linger.ms"] = 5
    else:
        config.update({"linger.ms": 1, "batch.num.messages": 10})
    return config


def produce(
    endpoint: Endpoint,
    workload: Workload,
    n: int,
    pinning: Pinning,
    progress: Progress,
) -> Phase:
    stats = ProducerStats(endpoint.topic)
    producer = confluent_kafka.Producer(producer_config(endpoint, workload, stats))
    producer.list_topics(endpoint.topic, timeout=10)
    value = os.urandom(workload.size)
    run = 10 if workload.batching == "small" else max(1, LARGE_RUN_BYTES // workload.size)
    # Warm-up, not timed: one acknowledged record per partition (followers are fetching).
    for partition in range(PARTITIONS):
        producer.produce(endpoint.topic, value, partition=partition)
    if producer.flush(60):
        raise RuntimeError(f"warm-up records to {endpoint.topic} were not acknowledged")
    pinning.apply(endpoint.pids)
    idle = idle_cores(endpoint.pids)
    stats.next_emit(producer)  # the window holding the warm-up closes before the clock starts
    requests_before, _ = stats.reset()
    task = progress.add_task(f"  produce {n:,}", total=n)
    failed: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    cpu_start = server_cpu.cpu_seconds(endpoint.pids)
    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(
                    endpoint.topic,
                    value,
                    partition=(i // run) % PARTITIONS,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.005)
        if i % 20_000 == 0:
            producer.poll(0)
            progress.update(task, completed=i)
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - start
    cpu = server_cpu.cpu_seconds(endpoint.pids) - cpu_start
    progress.update(task, completed=n)
    progress.remove_task(task)
    if remaining or failed:
        raise RuntimeError(f"{remaining} undelivered, {len(failed)} failed: {failed[:3]}")
    stats.next_emit(producer)
    with stats.lock:
        batches, batch_records = stats.batches, stats.batch_records
        requests = stats.produce_requests - requests_before
    if batch_records != n:  # the windows add up to exactly the timed records, or say so
        console.print(f"[yellow]statistics windows counted {batch_records:,} of {n:,}[/yellow]")
    return Phase(
        n,
        elapsed,
        cpu,
        idle,
        batch_records / batches if batches else None,
        n / requests if requests else None,
    )


def consume(endpoint: Endpoint, total: int, pinning: Pinning, progress: Progress) -> Phase:
    """Every record of the topic from the beginning, with assign() (no group protocol)."""
    pinning.apply(endpoint.pids)
    idle = idle_cores(endpoint.pids)
    task = progress.add_task(f"  consume {total:,}", total=total)
    cpu_start = server_cpu.cpu_seconds(endpoint.pids)
    start = time.perf_counter()
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": endpoint.bootstrap,
            "group.id": CONSUMER_GROUP,
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 1_048_576,
            "queued.min.messages": 1_000_000,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(endpoint.topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(PARTITIONS)
        ]
    )
    seen = 0
    last_progress = time.perf_counter()
    while seen < total:
        batch = consumer.consume(num_messages=10_000, timeout=0.2)
        for message in batch:
            if message.error() is None:
                seen += 1
        progress.update(task, completed=seen)
        if batch:
            last_progress = time.perf_counter()
        elif time.perf_counter() - last_progress > STALL_S:
            raise RuntimeError(
                f"{endpoint.topic}: consumed {seen:,} of {total:,} records, then nothing for "
                f"{STALL_S:.0f} s (the mock drops a partition's oldest records past 5 MiB)"
            )
    elapsed = time.perf_counter() - start
    cpu = server_cpu.cpu_seconds(endpoint.pids) - cpu_start
    progress.remove_task(task)
    consumer.close()
    return Phase(seen, elapsed, cpu, idle)


def end_to_end_latency(
    endpoint: Endpoint,
    seconds: float,
    linger_ms: float,
    consumer_config: dict[str, Any],
    pinning: Pinning,
    progress: Progress,
) -> tuple[list[float], float, float]:
    """Latencies (ms) of records produced at LATENCY_RATE msg/s, acks=all, read by a consumer
    thread of this process; and the achieved rate and the servers' CPU µs per record over the
    run."""
    pinning.apply(endpoint.pids)
    n = int(LATENCY_RATE * seconds)
    received: list[tuple[int, int]] = []  # (sequence, latency ns)
    stop = threading.Event()
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": endpoint.bootstrap,
            "group.id": CONSUMER_GROUP,
            "enable.auto.commit": False,
            **consumer_config,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(endpoint.topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(PARTITIONS)
        ]
    )

    def read() -> None:
        while not stop.is_set():
            message = consumer.poll(0.05)
            if message is None or message.error() is not None:
                continue
            now = time.monotonic_ns()
            sequence, produced = struct.unpack_from(">qq", message.value())
            if sequence >= 0:
                received.append((sequence, now - produced))

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": endpoint.bootstrap, "acks": "all", "linger.ms": linger_ms}
    )
    producer.list_topics(endpoint.topic, timeout=10)
    padding = os.urandom(100 - 16)
    for partition in range(PARTITIONS):  # warm-up: sequence -1, not counted
        producer.produce(endpoint.topic, struct.pack(">qq", -1, 0) + padding, partition=partition)
    producer.flush(60)
    reader = threading.Thread(target=read, name="latency-reader", daemon=True)
    reader.start()
    time.sleep(0.5)  # the consumer has its offsets
    task = progress.add_task(f"  latency at {LATENCY_RATE:,} msg/s", total=n)
    cpu_start = server_cpu.cpu_seconds(endpoint.pids)
    start = time.monotonic()
    sent = 0
    while sent < n:
        due = min(n, int((time.monotonic() - start) * LATENCY_RATE) + 1)
        while sent < due:
            value = struct.pack(">qq", sent, time.monotonic_ns()) + padding
            producer.produce(endpoint.topic, value)
            sent += 1
        producer.poll(0)
        progress.update(task, completed=sent)
        time.sleep(0.0005)
    produced_s = time.monotonic() - start
    producer.flush(60)
    deadline = time.monotonic() + 30
    while len(received) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    cpu = server_cpu.cpu_seconds(endpoint.pids) - cpu_start
    stop.set()
    reader.join()
    consumer.close()
    progress.remove_task(task)
    if len(received) < n:
        raise RuntimeError(f"latency run: {len(received):,} of {n:,} records came back in 30 s")
    skip = int(LATENCY_RATE * LATENCY_WARMUP_S)
    latencies = [ns / 1e6 for sequence, ns in received if sequence >= skip]
    return latencies, n / produced_s, cpu / n * 1e6


# ----------------------------------------------------------------------------- running


@contextlib.contextmanager
def open_targets(
    names: list[str], tmp: str, results: Results, broker_config: dict[str, str]
) -> Iterator[dict[str, Target]]:
    targets: dict[str, Target] = {}
    try:
        for name in names:
            console.print(f"[dim]starting {LABELS[name]} ...[/dim]")
            if name == "epochlog":
                targets[name] = EpochlogTarget(os.path.join(tmp, "epochlog"), broker_config)
            elif name == "mock":
                targets[name] = MockTarget()
            else:
                try:
                    executable = tansu.binary()
                    targets[name] = TansuTarget(executable, Path(tmp) / "tansu.out")
                except tansu.TansuUnavailable as e:
                    results.skipped["tansu"] = str(e)
                    console.print(f"[yellow]Tansu does not run here: {e}[/yellow]")
        yield targets
    finally:
        for target in targets.values():
            target.close()


def run_matrix(args: argparse.Namespace, results: Results, targets: dict[str, Target]) -> None:
    pinning = Pinning(args.client_core, args.server_core)
    workloads = (
        []
        if args.latency_only
        else [
            Workload(rf, size, batching)
            for rf in args.rf
            for size in args.sizes
            for batching in args.batching
        ]
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        steps = len(workloads) * args.repeat * len(targets) + (0 if args.no_latency else 1)
        overall = progress.add_task("efficiency", total=steps)
        for repeat in range(args.repeat):
            for workload in workloads:
                n = record_counts(workload.size, workload.batching, args.scale)
                for name, target in targets.items():
                    progress.update(
                        overall, description=f"{workload.label}: {LABELS[name]} ({n:,} records)"
                    )
                    if name == "tansu" and workload.rf != 1:
                        results.skipped.setdefault(
                            "tansu at RF 3", "Tansu is one broker: no replication factor above 1"
                        )
                        progress.advance(overall)
                        continue
                    topic = f"eff-{workload.key}-{repeat}"
                    endpoint = target.endpoint(workload.rf, topic)
                    try:
                        produced = produce(endpoint, workload, n, pinning, progress)
                        run = Run(name, workload.key, produced)
                        if workload.batching == "large":
                            run.consume = consume(endpoint, n + PARTITIONS, pinning, progress)
                    finally:
                        target.release(endpoint)
                    results.runs.append(run)
                    progress.console.print(run_line(run))
                    progress.advance(overall)
        if not args.no_latency:
            for name, target in targets.items():
                rf = 3 if name != "tansu" else 1
                progress.update(overall, description=f"latency: {LABELS[name]} (RF {rf})")
                endpoint = target.endpoint(rf, "eff-latency")
                try:
                    values, achieved, cpu_us = end_to_end_latency(
                        endpoint,
                        args.latency_seconds,
                        args.latency_linger_ms,
                        target.latency_consumer_config,
                        pinning,
                        progress,
                    )
                finally:
                    target.release(endpoint)
                latency = Latency(
                    name,
                    rf,
                    LATENCY_RATE,
                    len(values),
                    percentile(values, 50),
                    percentile(values, 99),
                    max(values),
                    achieved,
                    cpu_us,
                )
                results.latency.append(latency)
                progress.console.print(
                    f"  {LABELS[name]}: p50 {latency.p50_ms:.2f} ms, p99 {latency.p99_ms:.2f} ms"
                )
            progress.advance(overall)


def run_line(run: Run) -> str:
    p = run.produce
    line = (
        f"  {LABELS[run.target]} {run.workload}: produce {p.us_per_record:.2f} µs/rec "
        f"({p.rate:,.0f} msg/s, {fmt(p.records_per_batch, '.1f')} rec/batch)"
    )
    if run.consume:
        line += f", consume {run.consume.us_per_record:.3f} µs/rec"
    return line


def profile_workload(args: argparse.Namespace, target: EpochlogTarget, profile_dir: Path) -> None:
    """One more run of a workload on epochlog with py-spy sampling one broker; its hotspots."""
    from profiling import PySpy, print_hotspots, py_spy

    if py_spy() is None:
        raise SystemExit("--profile needs py-spy (pinned in pyproject.toml's dev extra)")
    workload: Workload = args.profile
    pinning = Pinning(args.client_core, args.server_core)
    n = record_counts(workload.size, workload.batching, args.profile_scale)
    broker = target.cluster.brokers[args.profile_broker]
    assert broker.pid is not None
    profile_dir.mkdir(parents=True, exist_ok=True)
    path = profile_dir / f"broker{args.profile_broker}-{workload.key}.txt"
    endpoint = target.endpoint(workload.rf, f"eff-profile-{workload.key}")
    try:
        with Progress(console=console) as progress:
            spy = PySpy(broker.pid, path)
            server_cpu.pin([spy.process.pid], pinning.client)  # the sampler is not the server
            try:
                phase = produce(endpoint, workload, n, pinning, progress)
                if workload.batching == "large":
                    consume(endpoint, n + PARTITIONS, pinning, progress)
            finally:
                stopped = spy.stop()
    finally:
        target.release(endpoint)
    console.print(
        f"profiled run (py-spy on broker {args.profile_broker}, slower than unprofiled): "
        f"produce {phase.us_per_record:.2f} µs/rec"
    )
    if stopped is not None:
        print_hotspots(console, f"broker {args.profile_broker}, {workload.label}", stopped)


# ----------------------------------------------------------------------------- main


def git_commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(Path(__file__).resolve().parent), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "?"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 B only, a fifth of the records")
    parser.add_argument("--rf", type=int, nargs="+", choices=(1, 3), default=[1, 3])
    parser.add_argument("--sizes", type=int, nargs="+", choices=(100, 1024), default=[100, 1024])
    parser.add_argument(
        "--batching", nargs="+", choices=("large", "small"), default=["large", "small"]
    )
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the record counts")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (medians shown)")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument(
        "--latency-only", action="store_true", help="the end-to-end latency runs, no matrix"
    )
    parser.add_argument("--latency-linger-ms", type=float, default=1.0)
    parser.add_argument("--client-core", type=int, default=0)
    parser.add_argument("--server-core", type=int, default=1)
    parser.add_argument(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config for epochlog's brokers (repeatable)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="save the results here")
    parser.add_argument("--compare", type=Path, metavar="OLD.json", help="print before -> after")
    parser.add_argument(
        "--against",
        type=Path,
        metavar="NEW.json",
        help="with --compare: compare two saved runs, run nothing",
    )
    parser.add_argument(
        "--profile",
        type=Workload.parse,
        metavar="WORKLOAD",
        help="py-spy one epochlog broker during an extra run of WORKLOAD, e.g. rf3-100B-small",
    )
    parser.add_argument("--profile-broker", type=int, default=1, choices=(1, 2, 3))
    parser.add_argument(
        "--profile-scale", type=float, default=3.0, help="record counts of the profiled run"
    )
    parser.add_argument("--profile-dir", type=Path, default=Path("/tmp/epochlog-efficiency"))
    args = parser.parse_args(argv)
    if args.against and not args.compare:
        parser.error("--against NEW.json needs --compare OLD.json")
    if args.client_core == args.server_core:
        parser.error(f"--client-core and --server-core are both {args.client_core}")
    available = os.sched_getaffinity(0)
    for flag, core in (("--client-core", args.client_core), ("--server-core", args.server_core)):
        if core not in available:
            parser.error(f"{flag} {core}: this process may run on cores {sorted(available)}")
    for item in args.broker_config:
        if "=" not in item:
            parser.error(f"--broker-config {item!r}: expected KEY=VALUE")
    if args.quick:
        args.sizes = [100]
        args.scale = args.scale / 5
        args.latency_seconds = min(args.latency_seconds, 4.0)
    if args.latency_seconds <= LATENCY_WARMUP_S:
        parser.error(f"--latency-seconds must exceed the {LATENCY_WARMUP_S:g} s warm-up")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    old = load(args.compare) if args.compare else None
    if old is not None and args.against:
        print_comparison(old, load(args.against))
        return
    # This process and every librdkafka thread it starts later stay on the client's core.
    server_cpu.pin([os.getpid()], {args.client_core}, descendants=False)
    results = Results(
        {
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git_commit(),
            "confluent_kafka": confluent_kafka.version(),
            "librdkafka": confluent_kafka.libversion()[0],
            "client_core": args.client_core,
            "server_core": args.server_core,
            "repeat": args.repeat,
            "scale": args.scale,
            "latency_linger_ms": args.latency_linger_ms,
            "tansu": tansu.VERSION,
            "argv": sys.argv[1:] if argv is None else argv,
        }
    )
    broker_config = dict(item.split("=", 1) for item in args.broker_config)
    with (
        tempfile.TemporaryDirectory(prefix="epochlog-efficiency-") as tmp,
        open_targets(args.targets, tmp, results, broker_config) as targets,
    ):
        run_matrix(args, results, targets)
        if args.profile is not None:
            epochlog = targets.get("epochlog")
            if not isinstance(epochlog, EpochlogTarget):
                raise SystemExit("--profile needs epochlog among --targets")
            profile_workload(args, epochlog, args.profile_dir)
    results.meta["load_average"] = os.getloadavg()[0]
    results.meta["cores"] = os.cpu_count()
    print_tables(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results.to_json(), indent=1))
        console.print(f"saved {args.json}")
    if old is not None:
        print_comparison(old, results)


if __name__ == "__main__":
    main()
