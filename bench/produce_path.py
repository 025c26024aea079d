"""Broker CPU per record on the produce path: small batches (10 records), acks=all, RF 1 and 3.

A 3-broker local cluster (real ZooKeeper, real broker processes); one topic of one partition per
replication factor; confluent-kafka produces N records of 100 bytes with `linger.ms` 0 and
`batch.num.messages` 10, so every ProduceRequest carries one batch of (at most) 10 records. The
figure is the brokers' CPU time (utime + stime from /proc/<pid>/stat, all three brokers, followers'
fetches included) per record produced, and the leader's alone, measured over the timed run after
a warm-up. `--profile DIR` samples the leader with py-spy during the timed run and prints where its
time went (`bench/profiling.hotspots`).

The brokers run whatever `python -m epochlog._build` compiled (printed first); to compare, run
`python -m epochlog._build --clean` (pure Python) and build again.

Run: `.venv/bin/python bench/produce_path.py [--messages 100000] [--rf 3 1] [--profile /tmp/p]`.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.profiling import PySpy, hotspots  # noqa: E402
from epochlog import _build  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402

RECORD = b"x" * 100
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_times(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    return sum(cpu_times(pid))


def wait_quiet(pids: list[int], timeout_s: float = 60.0) -> None:
    """Until the brokers are idle: a started cluster answers before its brokers finish booting
    (about 0.75 s of CPU each), which must not count against the records."""
    deadline = time.monotonic() + timeout_s
    last = sum(cpu_seconds(pid) for pid in pids)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = sum(cpu_seconds(pid) for pid in pids)
        if now - last < 0.03:
            return
        last = now


def create_topic(bootstrap: str, name: str, rf: int) -> int:
    """Create a one-partition topic; returns its leader once every replica is in the ISR."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, rf)])[name].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and 0 in topic.partitions:
            partition = topic.partitions[0]
            if partition.leader >= 0 and len(partition.isrs) == rf:
                return int(partition.leader)
        time.sleep(0.2)
    raise RuntimeError(f"{name}: no leader with a full ISR within 60 s")


def produce(bootstrap: str, topic: str, count: int) -> tuple[float, int]:
    """Produce `count` records in batches of 10 (acks=all); returns the elapsed seconds and the
    number of ProduceRequests sent (librdkafka's statistics)."""
    requests = [0]

    def on_stats(text: str) -> None:
        stats = json.loads(text)
        requests[0] = sum(
            b.get("req", {}).get("Produce", 0) for b in stats.get("brokers", {}).values()
        )

    producer = confluent_kafka.Producer(
        {
            "statistics.interval.ms": 100,
            "stats_cb": on_stats,
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "batch.num.messages": 10,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    failures: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, RECORD, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed, first: {failures[0]}")
    time.sleep(0.25)
    producer.poll(0)  # the last statistics
    return elapsed, requests[0]


def measure(
    cluster: LocalCluster,
    rf: int,
    count: int,
    profile: Path | None,
    cprofile: Path | None,
    profile_follower: bool = False,
) -> None:
    bootstrap = cluster.bootstrap_servers
    topic = f"hot-rf{rf}"
    pids = {b: cluster.brokers[b].pid for b in cluster.brokers}
    wait_quiet([int(pid) for pid in pids.values()])  # type: ignore[arg-type]
    leader = create_topic(bootstrap, topic, rf)
    produce(bootstrap, topic, min(count // 5, 20_000))  # warm-up
    wait_quiet([int(pid) for pid in pids.values()])  # type: ignore[arg-type]
    spy = None
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
        spy = PySpy(int(pids[leader]), profile / f"leader-rf{rf}.txt")  # type: ignore[arg-type]
    profiled = leader
    if profile_follower and rf > 1:
        profiled = next(b for b in sorted(pids) if b != leader)  # may hold no replica: RF 3 only
    if cprofile is not None:
        os.kill(int(pids[profiled]), signal.SIGUSR2)  # type: ignore[arg-type]
        time.sleep(0.2)
    before = {b: cpu_times(int(pid)) for b, pid in pids.items()}  # type: ignore[arg-type]
    elapsed, requests = produce(bootstrap, topic, count)
    after = {b: cpu_times(int(pid)) for b, pid in pids.items()}  # type: ignore[arg-type]
    user = {b: after[b][0] - before[b][0] for b in pids}
    system = {b: after[b][1] - before[b][1] for b in pids}
    total_us = (sum(user.values()) + sum(system.values())) / count * 1e6
    leader_us = (user[leader] + system[leader]) / count * 1e6
    print(
        f"RF {rf}: {count} records in {requests} produce requests "
        f"({count / max(1, requests):.1f} a request), {count / elapsed:,.0f} msg/s; brokers' CPU "
        f"{total_us:.2f} us/record, leader {leader_us:.2f} us/record "
        f"({leader_us * count / max(1, requests):.0f} us per request); user/system per broker "
        + ", ".join(f"{b}: {user[b]:.2f}/{system[b]:.2f} s" for b in sorted(user))
    )
    if cprofile is not None:
        report_cprofile(int(pids[profiled]), cprofile, requests, rf)  # type: ignore[arg-type]
    if spy is not None:
        path = spy.stop()
        if path is not None:
            spots = hotspots(path, top=40)
            busy = max(1, spots.samples - spots.waiting)
            print(f"  leader profile: {spots.samples} samples, {spots.waiting} waiting")
            print("  self:")
            for name, n in spots.self_time:
                print(f"    {100 * n / busy:5.1f}%  {name}")
            print("  inclusive:")
            for name, n in spots.inclusive:
                print(f"    {100 * n / busy:5.1f}%  {name}")


def report_cprofile(pid: int, directory: Path, requests: int, rf: int) -> None:
    """Stop the profiled broker's cProfile (bench/cprofile_site), keep it as
    broker-<pid>-rf<rf>.prof and print its top functions."""
    path = directory / f"broker.{pid}"
    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    path = path.rename(directory / f"broker-{pid}-rf{rf}.prof")
    stats = pstats.Stats(str(path))
    total_calls = sum(v[1] for v in stats.stats.values())  # type: ignore[attr-defined]
    print(
        f"  profiled broker: {total_calls} calls, {total_calls / max(1, requests):.0f} "
        f"per produce request"
    )
    stats.sort_stats("tottime").print_stats(45)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rf", type=int, nargs="+", default=[3, 1])
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the leader")
    parser.add_argument("--cprofile", type=Path, default=None, help="cProfile the leader")
    parser.add_argument(
        "--follower", action="store_true", help="--cprofile a follower instead (RF 3)"
    )
    args = parser.parse_args()
    if args.cprofile is not None:
        args.cprofile.mkdir(parents=True, exist_ok=True)
        os.environ["EPOCHLOG_CPROFILE"] = str(args.cprofile.resolve() / "broker")
        site = str(Path(__file__).resolve().parent / "cprofile_site")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (site, os.environ.get("PYTHONPATH")) if p
        )
    compiled = [m for m in _build.COMPILED_MODULES if _build.loaded_compiled(m)]
    print(f"hot path: {len(compiled)} of {len(_build.COMPILED_MODULES)} modules compiled (mypyc)")
    with (
        tempfile.TemporaryDirectory(prefix="produce-path-") as directory,
        LocalCluster(directory, brokers=3) as cluster,
    ):
        for rf in args.rf:
            measure(cluster, rf, args.messages, args.profile, args.cprofile, args.follower)


if __name__ == "__main__":
    main()
