"""Produce latency on a broker while its log cleaner compacts a large log, and while it does not.

One broker (its own ZooKeeper, a temp dir). A compacted topic `big` is filled with --records
updates of 100 B values over 10,000 keys (confluent-kafka, lz4 off) with min.compaction.lag.ms
holding the cleaner back for --lag-s seconds. Meanwhile and afterwards a probe producer sends one
100 B record at a time to another topic (acks=1, linger.ms 0, waiting for each delivery) and
times each round trip. The cleaner's pass windows are read from the broker's log lines
("cleaned offsets up to ..., N s"); as segments pass the lag one after another there are several.
The probes are split: before the first pass (the cleaner idle, the broker otherwise as busy) and
during the passes. Prints p50 / p99 / max per phase and the passes' MB/s.
A benchmark, not a timed test.

Run: `.venv/bin/python bench/compaction_latency.py [--records 1000000] [--lag-s 20]`.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka as ck  # noqa: E402

from epochlog.client import Admin  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402

PASS_LINE = re.compile(
    r"^(\S+ \S+) INFO .*big-0: cleaned offsets up to \d+: .*?([\d.]+) MB read.*, ([\d.]+) s "
)


def progress(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def fill(bootstrap: str, records: int) -> None:
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 16384, "acks": 1}
    )
    value = b"v" * 100
    for i in range(records):
        while True:
            try:
                producer.produce("big", key=b"key-%06d" % (i % 10_000), value=value)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 100_000 == 0:
            progress(f"filled {i} records")
    producer.flush(120)


def probe(bootstrap: str, stop: threading.Event, out: list[tuple[float, float]]) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    value = b"p" * 100
    while not stop.is_set():
        done = threading.Event()
        started = time.perf_counter()
        producer.produce(
            "probe", key=b"p", value=value, on_delivery=lambda e, m, done=done: done.set()
        )
        while not done.is_set():
            producer.poll(0.001)
        out.append((time.time(), (time.perf_counter() - started) * 1000))
        time.sleep(0.002)
    producer.flush(10)


def summary(latencies: list[float]) -> str:
    if len(latencies) < 2:
        return "(too few probes)"
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{len(ordered):6d} {statistics.median(ordered):8.2f} {p99:8.2f} {ordered[-1]:8.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--lag-s", type=int, default=20)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="epochlog-bench-cleaner-latency-"))
    cluster = LocalCluster(root, 1, broker_config={"log.cleaner.backoff.ms": 200})
    cluster.start()
    bootstrap = cluster.bootstrap_servers
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    try:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topic(
                "big",
                1,
                1,
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(32 << 20),
                    "min.compaction.lag.ms": str(args.lag_s * 1000),
                },
            )
            admin.create_topic("probe", 1, 1)
        prober = threading.Thread(target=probe, args=(bootstrap, stop, samples), daemon=True)
        prober.start()
        progress(f"filling {args.records} records (the cleaner waits {args.lag_s} s)")
        fill(bootstrap, args.records)
        filled_at = time.time()
        log = cluster.brokers[1].log_path
        progress("waiting for the cleaner's passes over the whole log")
        windows: list[tuple[float, float, float]] = []
        deadline = time.time() + args.lag_s + 300
        while time.time() < deadline:
            time.sleep(1)
            windows = []
            for line in log.read_text(errors="replace").splitlines():
                match = PASS_LINE.match(line)
                if match:
                    end = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    windows.append((end - float(match.group(3)), end, float(match.group(2))))
            # Done once every record has passed min.compaction.lag.ms and no pass came for 5 s.
            if windows and time.time() > max(filled_at + args.lag_s, windows[-1][1]) + 5:
                break
        time.sleep(2)
        stop.set()
        prober.join(30)
    finally:
        cluster.close()
        shutil.rmtree(root, ignore_errors=True)
    if not windows:
        print("the cleaner did not run within the wait")
        return
    idle = [ms for at, ms in samples if filled_at + 1 <= at < windows[0][0] - 0.5]
    busy = [ms for at, ms in samples if any(start <= at <= end for start, end, _ in windows)]
    seconds = sum(end - start for start, end, _ in windows)
    megabytes = sum(mb for _, _, mb in windows)
    print(
        f"\nproduce latency (ms), 1 broker, acks=1, one 100 B record at a time; the cleaner: "
        f"{len(windows)} passes, {megabytes:.0f} MB read in {seconds:.1f} s "
        f"({megabytes / seconds:.0f} MB/s)"
    )
    print(f"{'phase':26} {'probes':>6} {'p50':>8} {'p99':>8} {'max':>8}")
    print(f"{'cleaner idle (lag holds)':26} {summary(idle)}")
    print(f"{'cleaner cleaning':26} {summary(busy)}")


if __name__ == "__main__":
    main()
