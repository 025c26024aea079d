"""What the metrics cost on the produce path: produce throughput and broker CPU per record with
metrics on (`metrics.port` set: every request timed, messages and bytes counted per topic) and
off (`metrics.port=-1`: nothing timed or counted), in one run.

Two local clusters side by side (real ZooKeeper each, one broker each, so the figure is the
broker's own cost and not replication's), one with metrics, one without; a one-partition topic
on each; confluent-kafka produces records of 100 bytes in batches of 10 (`linger.ms` 0,
`batch.num.messages` 10, acks=all): many small requests, the case where per-request overhead
shows most. Rounds alternate off, on, off, on ... so that noise from other work on the machine
falls on both alike; the table gives the median of each and the ratio on/off. A scrape of the
metered broker at the end shows the counters it kept.

Run: `.venv/bin/python bench/metrics_cost.py [--messages 50000] [--rounds 3]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.produce_path import cpu_seconds, create_topic, produce, wait_quiet  # noqa: E402
from epochlog import _build  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402


def run_round(cluster: LocalCluster, topic: str, count: int) -> tuple[float, float]:
    """(records per second, broker CPU microseconds per record) of one timed run."""
    pid = int(cluster.brokers[1].pid)  # type: ignore[arg-type]
    wait_quiet([pid])
    before = cpu_seconds(pid)
    elapsed, _requests = produce(cluster.bootstrap_servers, topic, count)
    return count / elapsed, (cpu_seconds(pid) - before) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    compiled = sum(_build.loaded_compiled(m) for m in _build.COMPILED_MODULES)
    print(f"compiled modules: {compiled}/{len(_build.COMPILED_MODULES)}")
    with tempfile.TemporaryDirectory(prefix="metrics-cost-") as directory:
        clusters = {
            "off": LocalCluster(Path(directory) / "off", 1, broker_config={"metrics.port": -1}),
            "on": LocalCluster(Path(directory) / "on", 1),
        }
        try:
            for cluster in clusters.values():
                cluster.start()
                create_topic(cluster.bootstrap_servers, "cost", 1)
                produce(cluster.bootstrap_servers, "cost", min(args.messages // 5, 10_000))
            assert clusters["off"].metrics_endpoints() == {}
            results: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
            for round_index in range(args.rounds):
                for name in ("off", "on"):
                    rate, cpu_us = run_round(clusters[name], "cost", args.messages)
                    results[name].append((rate, cpu_us))
                    print(
                        f"round {round_index + 1} metrics {name:>3}: {rate:9,.0f} records/s, "
                        f"{cpu_us:6.2f} us CPU/record"
                    )
            rate = {n: statistics.median(r for r, _ in rs) for n, rs in results.items()}
            cpu = {n: statistics.median(c for _, c in rs) for n, rs in results.items()}
            print()
            print(f"{'metrics':<10}{'records/s':>12}{'us CPU/record':>16}")
            for name in ("off", "on"):
                print(f"{name:<10}{rate[name]:>12,.0f}{cpu[name]:>16.2f}")
            print(f"{'on/off':<10}{rate['on'] / rate['off']:>12.3f}{cpu['on'] / cpu['off']:>16.3f}")
            endpoint = clusters["on"].metrics_endpoints()[1]
            time.sleep(0.5)
            with urllib.request.urlopen(endpoint, timeout=10) as answer:
                text = answer.read().decode()
            kept = [
                line
                for line in text.splitlines()
                if line.startswith("kafka_server_brokertopicmetrics_messagesin_total")
                or line.startswith('kafka_network_requestmetrics_totaltimems{request="Produce"')
            ]
            print(f"\nscraped from {endpoint}:")
            for line in kept:
                print(f"  {line}")
        finally:
            for cluster in clusters.values():
                cluster.close()


if __name__ == "__main__":
    main()
