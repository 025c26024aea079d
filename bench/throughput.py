"""Produce and consume throughput with confluent-kafka: epochlog against librdkafka's mock cluster.

In one run, on the same machine, with the same client settings:
- epochlog: a local 3-broker cluster (real ZooKeeper, real broker processes, real disk);
- anchor 1: librdkafka's in-memory mock cluster (`shared/tools/librdkafka_mock_cluster.py`);
- anchor 2: a raw loopback socket pump (the machine's ceiling for moving bytes between processes).

Each target gets a 16-partition topic with replication factor 1 (`--rf` to change), and N
records of 100 bytes and of 1 KiB are produced with acks=all and read back with assign(). Runs
alternate between the targets and the table shows medians (the machine is shared and noisy);
a second table shows epochlog's produce rate over the mock's within each round, the two measured
one right after the other, so the spread of the ratio is visible.
Produce and consume rates are steady-state: produce is timed after one acknowledged warm-up
record per partition (a just-created topic's followers are still starting), consume from the
first records, after connections and offset lookups, with librdkafka allowed to prefetch
freely on both targets.
Two more columns tell whose pace the figures are: how busy the client's calling thread was and
how many cores the servers used; and a fetch-only consume (Kafka's fetch pattern, records counted
from CRC-checked batch headers, not decoded) reads the same records with a client that does
little per record, so that the servers' serving speed shows where the Python consumer loop
would hide it. The prefetched consume is the opposite: the consume() loop timed once librdkafka
holds every record, the client's ceiling with no server in it, which bounds what any server can
get from this client.
Targets from the issue: produce >= 1.0x the mock's msg/s, consume >= 2x the mock's msg/s.

Run: `.venv/bin/python bench/throughput.py [--messages 200000] [--rf 1]`.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from epochlog.processes import spawn  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402

MOCK = Path(__file__).resolve().parents[2] / "shared" / "tools" / "librdkafka_mock_cluster.py"
PARTITIONS = 16
MIB = 1 << 20
FETCH_ONLY_PASSES = 5
HEAD_START_S = 3.0  # long enough for librdkafka to prefetch a run's records from either target
console = Console(width=160)


def raw_pump_mb_s(total_bytes: int = 1 << 30, chunk: int = 1 << 20) -> float:
    """MB/s of one TCP stream over loopback between this process and a child process."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    reader = spawn(
        [
            sys.executable,
            "-c",
            "import socket,sys\n"
            f"s=socket.create_connection(('127.0.0.1',{port}))\n"
            "n=0\n"
            "while True:\n"
            "    b=s.recv(1<<20)\n"
            "    if not b: break\n"
            "    n+=len(b)\n"
            "print(n)\n",
        ],
        stdout=subprocess.PIPE,
    )
    conn, _ = server.accept()
    data = b"x" * chunk
    start = time.perf_counter()
    sent = 0
    while sent < total_bytes:
        conn.sendall(data)
        sent += chunk
    conn.shutdown(socket.SHUT_WR)
    received = int(reader.communicate()[0])
    elapsed = time.perf_counter() - start
    conn.close()
    server.close()
    assert received == sent
    return sent / elapsed / 1e6


class Run(NamedTuple):
    rate: float  # msg/s
    client_busy: float  # share of the wall time the client's calling thread was on a CPU
    server_cores: float  # CPU seconds the server processes used per wall second


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the processes so far (Linux /proc)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def produce(
    bootstrap: str, topic: str, n: int, size: int, progress: Progress, server_pids: list[int]
) -> Run:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    producer.list_topics(topic, timeout=10)  # metadata first: not timed
    value = os.urandom(size)
    # Warm-up, not timed, on both targets alike: one acknowledged record per partition, so the
    # clock measures steady state, not a just-created topic's followers starting to fetch.
    for partition in range(PARTITIONS):
        producer.produce(topic, value, partition=partition)
    if producer.flush(60):
        raise RuntimeError(f"warm-up records to {topic} were not acknowledged")
    task = progress.add_task(f"produce {size} B", total=n)
    failed = []
    delivered = [0]

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)
        delivered[0] += 1

    start, cpu_start = time.perf_counter(), time.thread_time()
    server_start = cpu_seconds(server_pids)
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value, key=str(i % 1000).encode(), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)
            progress.update(task, completed=delivered[0])
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    busy = (time.thread_time() - cpu_start) / elapsed
    server = (cpu_seconds(server_pids) - server_start) / elapsed
    progress.update(task, completed=n)
    if remaining or failed:
        raise RuntimeError(f"{remaining} undelivered, {len(failed)} failed: {failed[:3]}")
    return Run(n / elapsed, busy, server)


def consume(
    bootstrap: str,
    topic: str,
    n: int,
    size: int,
    progress: Progress,
    server_pids: list[int],
    head_start_s: float = 0.0,
) -> Run:
    """msg/s of confluent-kafka's consume() loop. With a head start, librdkafka's fetcher
    threads have the records in the client's queue before the clock starts: the server has
    nothing left to do, and the figure is the client's own ceiling (server cores ~0 show it)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 1048576,
            # let librdkafka prefetch freely (its default pauses at 100k queued messages)
            "queued.min.messages": 1_000_000,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(PARTITIONS)
        ]
    )
    if head_start_s:
        time.sleep(head_start_s)
    label = "prefetched" if head_start_s else "consume"
    task = progress.add_task(f"{label} {size} B", total=n)
    seen = 0
    start, cpu_start = time.perf_counter(), time.thread_time()
    server_start = cpu_seconds(server_pids)
    first = 0  # steady state: the clock runs from the first records (connections are set up)
    while seen < n:
        batch = consumer.consume(num_messages=10000, timeout=1.0)
        for message in batch:
            if message.error() is None:
                seen += 1
        if batch and not first:
            first, start, cpu_start = seen, time.perf_counter(), time.thread_time()
            server_start = cpu_seconds(server_pids)
        progress.update(task, completed=seen)
        if time.perf_counter() - start > 300:
            raise RuntimeError(f"consumed only {seen} of {n} in 300 s")
    elapsed = time.perf_counter() - start
    busy = (time.thread_time() - cpu_start) / elapsed
    server = (cpu_seconds(server_pids) - server_start) / elapsed
    consumer.close()
    return Run((n - first) / elapsed, busy, server)


def consume_fetch_only(
    bootstrap: str, topic: str, n: int, server_pids: list[int], passes: int = FETCH_ONLY_PASSES
) -> Run:
    """msg/s a client that does not decode records gets: the server's pace, not the client's.

    Kafka clients' way of fetching (one Fetch in flight per broker, each for all the partitions
    it leads, `fetch.max.bytes` 50 MiB, `max.partition.fetch.bytes` 1 MiB, fetch.max.wait 500 ms)
    with epochlog's protocol codec; each batch is CRC-checked and its records counted from its
    header instead of decoded one by one. The topic's n records are read `passes` times from the
    beginning (one pass is too short to time well); connections are opened before the clock
    starts, and a pass ends when its n-th record has arrived."""
    import asyncio

    from epochlog.client import BrokerConnection
    from epochlog.protocol import messages as m
    from epochlog.protocol.api import ApiKey
    from epochlog.protocol.records import iter_batches

    metadata = confluent_kafka.Producer({"bootstrap.servers": bootstrap}).list_topics(
        topic, timeout=10
    )
    led: dict[int, list[int]] = {}
    for partition, info in sorted(metadata.topics[topic].partitions.items()):
        led.setdefault(info.leader, []).append(partition)
    addresses = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
    offsets: dict[int, int] = {}
    seen = [0]

    async def fetch_from(
        conn: BrokerConnection, partitions: list[int], done: asyncio.Event
    ) -> None:
        version = min(12, conn.version_for(ApiKey.FETCH))  # topic names: the mock's too
        while not done.is_set():
            request = m.FetchRequest(
                replica_id=-1,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=52428800,
                topics=[
                    m.FetchRequest.FetchTopic(
                        topic=topic,
                        partitions=[
                            m.FetchRequest.FetchPartition(
                                partition=p, fetch_offset=offsets[p], partition_max_bytes=MIB
                            )
                            for p in partitions
                        ],
                    )
                ],
            )
            response = await conn.send(request, api_key=ApiKey.FETCH, version=version)
            for topic_data in response.responses:
                for data in topic_data.partitions:
                    if data.error_code:
                        raise RuntimeError(f"fetch from {conn}: error {data.error_code}")
                    for _, header in iter_batches(data.records or b"", verify=True):
                        if header.base_offset >= offsets[data.partition_index]:
                            seen[0] += header.records_count
                            offsets[data.partition_index] = header.next_offset
            if seen[0] >= n:
                done.set()

    async def run() -> float:
        conns = {
            node: BrokerConnection(*addresses[node], node_id=node, client_id="bench-fetch-only")
            for node in led
        }
        try:
            await asyncio.gather(*(conn.connect() for conn in conns.values()))
            elapsed = 0.0
            for _ in range(passes):
                offsets.update(dict.fromkeys(metadata.topics[topic].partitions, 0))
                seen[0] = 0
                done = asyncio.Event()
                start = time.perf_counter()
                tasks = [
                    asyncio.create_task(fetch_from(conns[node], ps, done))
                    for node, ps in led.items()
                ]
                await asyncio.wait_for(done.wait(), 300)
                elapsed += time.perf_counter() - start
                # Fetches still waiting for more data end by max wait (not cancelled: a broker
                # answers a connection's requests in order, so the next pass would wait for them).
                await asyncio.gather(*tasks)
                if seen[0] < n:
                    raise RuntimeError(f"fetched only {seen[0]} of {n}")
            return elapsed
        finally:
            await asyncio.gather(*(conn.close() for conn in conns.values()))

    cpu_start, server_start = time.process_time(), cpu_seconds(server_pids)
    elapsed = asyncio.run(run())
    return Run(
        n * passes / elapsed,
        (time.process_time() - cpu_start) / elapsed,
        (cpu_seconds(server_pids) - server_start) / elapsed,
    )


def start_mock(rf: int) -> tuple[subprocess.Popen[str], str]:
    process = spawn(
        [sys.executable, str(MOCK), "3", "bench-0", str(PARTITIONS), str(rf)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    bootstrap = process.stdout.readline().strip()
    return process, bootstrap


def median_run(runs: list[Run]) -> Run:
    """The run with the median rate, the lower one of an even count (its CPU figures with it)."""
    return sorted(runs, key=lambda r: r.rate)[(len(runs) - 1) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rf", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5, help="runs per target (median shown)")
    args = parser.parse_args()
    n = args.messages
    sizes = (100, 1024)
    # The mock keeps at most 5 MiB per partition: 1 KiB runs stay under that.
    counts = {100: n, 1024: min(n, 60_000)}

    console.print("[dim]measuring the raw loopback pump ...[/dim]")
    pump = raw_pump_mb_s()

    runs: dict[tuple[str, int], list[tuple[Run, Run, Run, Run]]] = {}
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

            for rep in range(args.repeat):  # alternate the targets: noise hits both alike
                for size in sizes:
                    count = counts[size]
                    # a fresh mock each time: its topic then holds exactly this run's records
                    mock, mock_bootstrap = start_mock(args.rf)
                    try:
                        pids = [mock.pid]
                        p = produce(mock_bootstrap, "bench-0", count, size, progress, pids)
                        c = consume(mock_bootstrap, "bench-0", count, size, progress, pids)
                        f = consume_fetch_only(mock_bootstrap, "bench-0", count, pids)
                        h = consume(
                            mock_bootstrap, "bench-0", count, size, progress, pids, HEAD_START_S
                        )
                        runs.setdefault(("librdkafka mock", size), []).append((p, c, f, h))
                    finally:
                        mock.send_signal(signal.SIGTERM)
                        mock.wait()
                    topic = f"bench-{size}-{rep}"
                    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
                        admin.create_topic(topic, PARTITIONS, args.rf)
                    pids = [b.pid for b in cluster.brokers.values() if b.pid is not None]
                    p = produce(cluster.bootstrap_servers, topic, count, size, progress, pids)
                    c = consume(cluster.bootstrap_servers, topic, count, size, progress, pids)
                    f = consume_fetch_only(cluster.bootstrap_servers, topic, count, pids)
                    h = consume(
                        cluster.bootstrap_servers, topic, count, size, progress, pids, HEAD_START_S
                    )
                    runs.setdefault(("epochlog", size), []).append((p, c, f, h))
        finally:
            cluster.close()
    results = {
        key: tuple(median_run([run[i] for run in values]) for i in range(4))
        for key, values in runs.items()
    }

    table = Table(
        title=f"confluent-kafka {confluent_kafka.__version__} (librdkafka "
        f"{confluent_kafka.libversion()[0]}), median of {args.repeat} runs: "
        f"{counts[100]:,} x 100 B and {counts[1024]:,} x 1 KiB records, acks=all, "
        f"RF {args.rf}, {PARTITIONS} partitions"
    )
    for column in (
        "target",
        "record",
        "produce msg/s",
        "produce MB/s",
        "consume msg/s",
        "consume MB/s",
        "produce vs mock",
        "consume vs mock",
        "consume vs pump",
        "fetch-only consume msg/s",
        "fetch-only vs mock",
        "prefetched consume msg/s",
        "client busy P / C",
        "server cores P / C",
    ):
        table.add_column(column, justify="left" if column in ("target", "record") else "right")
    for (target, size), (p, c, f, h) in results.items():
        mock_p, mock_c, mock_f, _ = results[("librdkafka mock", size)]
        table.add_row(
            target,
            f"{size} B",
            f"{p.rate:,.0f}",
            f"{p.rate * size / 1e6:,.1f}",
            f"{c.rate:,.0f}",
            f"{c.rate * size / 1e6:,.1f}",
            f"{p.rate / mock_p.rate:.2f}x",
            f"{c.rate / mock_c.rate:.2f}x",
            f"{c.rate * size / 1e6 / pump:.3f}",
            f"{f.rate:,.0f}",
            f"{f.rate / mock_f.rate:.2f}x",
            f"{h.rate:,.0f}",
            f"{p.client_busy:.0%} / {c.client_busy:.0%}",
            f"{p.server_cores:.2f} / {c.server_cores:.2f}",
        )
    table.add_row(
        "raw loopback pump",
        "1 MiB chunks",
        "",
        f"{pump:,.0f}",
        "",
        f"{pump:,.0f}",
        "",
        "",
        "1.000",
        "",
        "",
        "",
        "",
        "",
    )
    console.print(table)
    console.print(
        "[dim]targets (RF 1): produce >= 1.0x mock msg/s; consume >= 2x mock msg/s. P / C: "
        "produce / consume. client busy: the share of the wall time the Python thread calling "
        "produce()/consume() was on a CPU (near 100%: the client, not the server, sets the pace); "
        "server cores: CPU seconds per second of the mock process or the 3 broker processes. "
        "fetch-only: Kafka's fetch pattern with records counted from CRC-checked batch headers "
        "instead of decoded, so the server, not a Python consumer loop, sets the pace. "
        f"prefetched: the same consume() loop timed after a {HEAD_START_S:.0f} s head start in "
        "which librdkafka has fetched every record: the client's own ceiling, no server in it. "
        f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores[/dim]"
    )
    # Each round runs the mock and epochlog one right after the other: the ratio within a
    # round sees the same machine; the spread across rounds is the machine's noise.
    paired = Table(title="produce, epochlog / mock within each round")
    paired.add_column("record")
    for rep in range(args.repeat):
        paired.add_column(f"round {rep + 1}", justify="right")
    paired.add_column("median", justify="right")
    for size in sizes:
        ratios = [
            ours[0].rate / mock[0].rate
            for ours, mock in zip(
                runs[("epochlog", size)], runs[("librdkafka mock", size)], strict=True
            )
        ]
        paired.add_row(
            f"{size} B",
            *(f"{r:.2f}x" for r in ratios),
            f"{statistics.median(ratios):.2f}x",
        )
    console.print(paired)
    for size in sizes:
        target = 2 * results[("librdkafka mock", size)][1].rate
        ceiling = max(results[(t, size)][3].rate for t in ("librdkafka mock", "epochlog"))
        console.print(
            f"{size} B: the consume target (2x the mock) is {target:,.0f} msg/s; this client's "
            f"consume() loop drains prefetched records at {ceiling:,.0f} msg/s at most "
            f"({target / ceiling:.2f}x of it)"
        )


if __name__ == "__main__":
    main()
