"""Client throughput: epochlog.client against confluent-kafka and kafka-python, same cluster,
same run; and how fast each rebootstraps after `epochlog proxy switch`.

Part 1, throughput. One local 3-broker cluster (real ZooKeeper, real broker processes). Each
client produces N records of 100 bytes (keys `0..999`, acks=all, linger.ms=5, its other
defaults: idempotence on for epochlog and kafka-python, off for librdkafka) into a topic of its
own (6 partitions, replication factor 1), then reads them back with assign() from the beginning.
Rates are messages per second from the first send to the last acknowledgement, and from the first
fetched records to the last (steady state). Runs alternate between clients; medians are shown.
epochlog is measured through its blocking `Producer` and its asyncio `AsyncProducer`.
Targets from the issue: epochlog produce >= 2x kafka-python and >= 0.5x confluent-kafka,
consume >= 2x kafka-python.

Part 2, rebootstrap after a switch. `epochlog proxy` fronts the cluster (A); a second cluster
(B, 1 broker) has the same topic. A producer (defaults otherwise) sends one record every 5 ms
through the proxy; the proxy is switched to B; the figure is the time from the switch to the
acknowledgement of the first record that landed in B (found by reading B afterwards).

Run: `.venv/bin/python bench/client.py [--messages 100000] [--rounds 3]` (`make bench-client`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka as ck  # noqa: E402
import kafka  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from epochlog.client import Admin, AsyncProducer, Consumer, Producer  # noqa: E402
from epochlog.processes import spawn  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402
from epochlog.zk.launcher import free_port  # noqa: E402

PARTITIONS = 6
SIZE = 100
console = Console(width=120)


def keys(n: int) -> list[bytes]:
    return [str(i % 1000).encode() for i in range(n)]


# ----------------------------------------------------------------------------- produce


def produce_ours_sync(bootstrap: str, topic: str, n: int) -> float:
    value, ks = os.urandom(SIZE), keys(n)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        producer.partitions_for(topic)  # metadata first: not timed
        start = time.perf_counter()
        futures = [producer.send(topic, value, ks[i]) for i in range(n)]
        producer.flush(300)
        elapsed = time.perf_counter() - start
        failed = sum(1 for f in futures if f.exception() is not None)
    if failed:
        raise RuntimeError(f"epochlog: {failed} records failed")
    return n / elapsed


def produce_ours_async(bootstrap: str, topic: str, n: int) -> float:
    async def run() -> float:
        value, ks = os.urandom(SIZE), keys(n)
        async with AsyncProducer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
            await producer.partitions_for(topic)
            start = time.perf_counter()
            futures = []
            for i in range(n):
                futures.append(producer.send_nowait(topic, value, ks[i], []))
                if i % 5000 == 0:
                    await asyncio.sleep(0)  # let the sender run, as an application would
            await producer.flush(300)
            elapsed = time.perf_counter() - start
            failed = sum(1 for f in futures if f.exception() is not None)
        if failed:
            raise RuntimeError(f"epochlog async: {failed} records failed")
        return n / elapsed

    return asyncio.run(run())


def produce_confluent(bootstrap: str, topic: str, n: int) -> float:
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    producer.list_topics(topic, timeout=10)
    value, ks = os.urandom(SIZE), keys(n)
    failed: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value, key=ks[i], on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - start
    if remaining or failed:
        raise RuntimeError(f"confluent: {remaining} undelivered, {len(failed)} failed")
    return n / elapsed


def produce_kafka_python(bootstrap: str, topic: str, n: int) -> float:
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    producer.partitions_for(topic)
    value, ks = os.urandom(SIZE), keys(n)
    start = time.perf_counter()
    futures = [producer.send(topic, value, key=ks[i]) for i in range(n)]
    producer.flush(300)
    elapsed = time.perf_counter() - start
    failed = sum(1 for f in futures if f.failed())
    producer.close()
    if failed:
        raise RuntimeError(f"kafka-python: {failed} records failed")
    return n / elapsed


# ----------------------------------------------------------------------------- consume


def steady_rate(poll: Callable[[], int], n: int, what: str) -> float:
    seen = first = 0
    start = time.perf_counter()
    began = start
    while seen < n:
        got = poll()
        if got and not first:
            first, start = max(got, 1), time.perf_counter()
            seen = got
            continue
        seen += got
        if time.perf_counter() - began > 300:
            raise RuntimeError(f"{what}: consumed only {seen} of {n} in 300 s")
    return (n - first) / (time.perf_counter() - start)


def consume_ours(bootstrap: str, topic: str, n: int) -> float:
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([(topic, p) for p in range(PARTITIONS)])
        return steady_rate(lambda: len(consumer.poll(1.0)), n, "epochlog")


def consume_confluent(bootstrap: str, topic: str, n: int) -> float:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "queued.min.messages": 1_000_000,
        }
    )
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])

    def poll() -> int:
        return sum(
            1 for m in consumer.consume(num_messages=10000, timeout=1.0) if m.error() is None
        )

    try:
        return steady_rate(poll, n, "confluent")
    finally:
        consumer.close()


def consume_kafka_python(bootstrap: str, topic: str, n: int) -> float:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest"
    )
    consumer.assign([kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])

    def poll() -> int:
        return sum(len(v) for v in consumer.poll(timeout_ms=1000, max_records=10000).values())

    try:
        return steady_rate(poll, n, "kafka-python")
    finally:
        consumer.close()


# ----------------------------------------------------------------------------- switch


def start_proxy(upstream: str, control: str) -> tuple[subprocess.Popen[bytes], str]:
    listen = f"127.0.0.1:{free_port()}"
    proc = spawn(
        [
            sys.executable,
            "-m",
            "epochlog",
            "proxy",
            "--listen",
            listen,
            "--upstream",
            upstream,
            "--control",
            control,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not os.path.exists(control):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("the proxy did not start")
        time.sleep(0.05)
    return proc, listen


def switch(listen: str, control: str, upstream: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "epochlog",
            "proxy",
            "switch",
            "--listen",
            listen,
            "--upstream",
            upstream,
            "--control",
            control,
        ],
        check=True,
        capture_output=True,
    )


def switch_time(client: str, a: LocalCluster, b: LocalCluster, topic: str, directory: str) -> float:
    """Seconds from the switch to the acknowledgement of the first record that landed in B."""
    control = os.path.join(directory, f"{client}.sock")
    proc, listen = start_proxy(a.bootstrap_servers, control)
    acked: dict[bytes, float] = {}
    stop = threading.Event()
    try:
        if client == "epochlog":
            producer = Producer({"bootstrap.servers": listen, "linger.ms": 0})

            def send(value: bytes) -> None:
                producer.send(topic, value).add_done_callback(
                    lambda f, v=value: (
                        f.exception() is None and acked.__setitem__(v, time.monotonic())
                    )
                )

            def close() -> None:
                producer.close(30)
        else:
            cp = ck.Producer({"bootstrap.servers": listen, "linger.ms": 0, "acks": "all"})

            def send(value: bytes) -> None:
                cp.produce(
                    topic,
                    value,
                    on_delivery=lambda err, m: (
                        err is None and acked.__setitem__(m.value(), time.monotonic())
                    ),
                )
                cp.poll(0)

            def close() -> None:
                cp.flush(30)

        def run() -> None:
            i = 0
            while not stop.is_set():
                send(b"%s-%08d" % (client.encode(), i))
                i += 1
                time.sleep(0.005)

        sender = threading.Thread(target=run)
        sender.start()
        time.sleep(2)
        switched_at = time.monotonic()
        switch(listen, control, b.bootstrap_servers)
        deadline = time.monotonic() + 60
        prefix = client.encode() + b"-"
        in_b: list[bytes] = []
        while not in_b and time.monotonic() < deadline:
            time.sleep(1)
            in_b = read_values(b, topic, prefix)
        stop.set()
        sender.join()
        close()
        landed = [acked[v] for v in read_values(b, topic, prefix) if v in acked]
        if not landed:
            return float("nan")
        return min(landed) - switched_at
    finally:
        stop.set()
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(10)


def read_values(c: LocalCluster, topic: str, prefix: bytes) -> list[bytes]:
    config = {"bootstrap.servers": c.bootstrap_servers, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        tps = [(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(0.2)]
    return [v for v in got if v.startswith(prefix)]


# ----------------------------------------------------------------------------- main

PRODUCERS = {
    "epochlog (Producer)": produce_ours_sync,
    "epochlog (AsyncProducer)": produce_ours_async,
    "confluent-kafka": produce_confluent,
    "kafka-python": produce_kafka_python,
}
CONSUMERS = {
    "epochlog (Producer)": consume_ours,
    "confluent-kafka": consume_confluent,
    "kafka-python": consume_kafka_python,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-switch", action="store_true")
    args = parser.parse_args()
    n = args.messages
    produced: dict[str, list[float]] = {name: [] for name in PRODUCERS}
    consumed: dict[str, list[float]] = {name: [] for name in CONSUMERS}
    switch_s: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-client-") as directory:
        cluster = LocalCluster(Path(directory) / "a", 3)
        second = LocalCluster(Path(directory) / "b", 1)
        try:
            console.print("starting a 3-broker cluster (and a 1-broker one for the switch)")
            cluster.start()
            if not args.skip_switch:
                second.start()
            columns = (
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
            )
            steps = args.rounds * (len(PRODUCERS) + len(CONSUMERS))
            with (
                Progress(*columns, console=console) as progress,
                Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin,
            ):
                task = progress.add_task("throughput runs", total=steps)
                for r in range(args.rounds):
                    for index, (name, produce) in enumerate(PRODUCERS.items()):
                        topic = f"bench-{r}-{index}"
                        admin.create_topic(topic, PARTITIONS, 1)
                        progress.update(task, description=f"round {r + 1}: produce {name}")
                        produced[name].append(produce(cluster.bootstrap_servers, topic, n))
                        progress.advance(task)
                        consumer_name = name if name in CONSUMERS else None
                        if consumer_name is not None:
                            progress.update(task, description=f"round {r + 1}: consume {name}")
                            rate = CONSUMERS[consumer_name](cluster.bootstrap_servers, topic, n)
                            consumed[consumer_name].append(rate)
                            progress.advance(task)
            if not args.skip_switch:
                for c in (cluster, second):
                    with Admin({"bootstrap.servers": c.bootstrap_servers}) as admin:
                        admin.create_topic("switching", PARTITIONS, 1)
                for client in ("epochlog", "confluent-kafka"):
                    console.print(f"switch: {client}")
                    switch_s[client] = switch_time(client, cluster, second, "switching", directory)
        finally:
            cluster.close()
            second.close()
    report(n, produced, consumed, switch_s)


def report(
    n: int,
    produced: dict[str, list[float]],
    consumed: dict[str, list[float]],
    switch_s: dict[str, float],
) -> None:
    med = {name: statistics.median(v) for name, v in produced.items() if v}
    cmed = {name: statistics.median(v) for name, v in consumed.items() if v}
    table = Table(title=f"{n} records of {SIZE} B, 3 brokers, 6 partitions RF 1, acks=all")
    for column in (
        "client",
        "produce msg/s",
        "vs kafka-python",
        "vs confluent",
        "consume msg/s",
        "vs kafka-python",
    ):
        table.add_column(column, justify="right" if column != "client" else "left")
    for name in PRODUCERS:
        p = med.get(name, float("nan"))
        c = cmed.get(name)
        table.add_row(
            name,
            f"{p:,.0f}",
            f"{p / med['kafka-python']:.2f}x",
            f"{p / med['confluent-kafka']:.2f}x",
            f"{c:,.0f}" if c else "",
            f"{c / cmed['kafka-python']:.2f}x" if c else "",
        )
    console.print(table)
    console.print(
        "rounds: " + "; ".join(f"{k} {[round(x) for x in v]}" for k, v in produced.items())
    )
    console.print(
        "consume rounds: " + "; ".join(f"{k} {[round(x) for x in v]}" for k, v in consumed.items())
    )
    if switch_s:
        t = Table(title="upstream switch to first record acknowledged on the new cluster")
        t.add_column("client")
        t.add_column("seconds", justify="right")
        for name, seconds in switch_s.items():
            t.add_row(name, f"{seconds:.2f}")
        console.print(t)


if __name__ == "__main__":
    main()
