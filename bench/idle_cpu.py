"""What an idle cluster burns: each broker's and ZooKeeper's CPU while nothing is produced.

A 3-broker local cluster (real ZooKeeper, real broker processes) with one topic of `--partitions`
partitions at RF 3 and a consumer group's offsets committed once (so `__consumer_offsets` exists
and its followers fetch too); after the brokers finish booting, every process's CPU time (utime +
stime from /proc/<pid>/stat) is read over `--seconds` of idleness. `--profile DIR` samples the
first broker with py-spy meanwhile.

Run: `.venv/bin/python bench/idle_cpu.py [--seconds 20] [--partitions 10] [--profile /tmp/p]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.produce_path import cpu_seconds, wait_quiet  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402


def prepare(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for attempt in range(3):
        # A CreateTopics sometimes goes unanswered for 30 s right after the cluster starts (seen
        # on main too); asking again gets it through.
        try:
            admin.create_topics([NewTopic("idle", partitions, 3)])["idle"].result(30)
            break
        except (TimeoutError, confluent_kafka.KafkaException):
            if attempt == 2:
                raise
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "idle-bench", "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition("idle", 0, 0)], asynchronous=False)
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the first broker")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="idle-cpu-") as directory,
        LocalCluster(directory, brokers=3) as cluster,
    ):
        prepare(cluster.bootstrap_servers, args.partitions)
        pids = {f"broker {b}": int(cluster.brokers[b].pid) for b in cluster.brokers}  # type: ignore[arg-type]
        if cluster.zk_pid is not None:
            pids["zookeeper"] = cluster.zk_pid
        wait_quiet(list(pids.values()))
        spy = None
        if args.profile is not None:
            from bench.profiling import PySpy

            args.profile.mkdir(parents=True, exist_ok=True)
            first = min(cluster.brokers)
            spy = PySpy(pids[f"broker {first}"], args.profile / f"idle-broker-{first}.txt")
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        time.sleep(args.seconds)
        after = {name: cpu_seconds(pid) for name, pid in pids.items()}
        share = {name: (after[name] - before[name]) / args.seconds for name in pids}
        print(
            "idle CPU (% of a core): "
            + ", ".join(f"{name} {100 * s:.2f}" for name, s in sorted(share.items()))
            + f"; brokers total {100 * sum(s for n, s in share.items() if n != 'zookeeper'):.2f}"
        )
        if spy is not None:
            path = spy.stop()
            print(f"  profile: {path}")


if __name__ == "__main__":
    main()
