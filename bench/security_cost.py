"""What TLS and SASL cost: produce and consume throughput over SASL_SSL (SCRAM-SHA-512) against
PLAINTEXT, in one run (issue 21, item 7).

One 3-broker local cluster with two client listeners: PLAINTEXT and SASL_SSL (a test CA's
certificates, SCRAM-SHA-512 credentials set with `epochlog users scram set`). A topic of 6
partitions, replication factor 3 (the brokers replicate over PLAINTEXT, so the figure is the
client-facing cost). confluent-kafka produces N records of 100 bytes (acks=all, linger.ms 5:
large batches) and reads them back with assign(); rounds alternate plaintext and SASL_SSL so that
noise from other work on the machine falls on both alike. The table gives each protocol's
median and the ratio SASL_SSL / PLAINTEXT, with the brokers' CPU per record.

Run: `.venv/bin/python bench/security_cost.py [--messages 200000] [--rounds 3]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.produce_path import cpu_seconds, wait_quiet  # noqa: E402
from epochlog import _build  # noqa: E402
from epochlog.cli.main import main as epochlog_main  # noqa: E402
from epochlog.security.certs import CertificateAuthority  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402

RECORD = b"x" * 100
PARTITIONS = 6
USER, PASSWORD = "bench", "bench-secret"
console = Console()


def create_topic(cluster: LocalCluster, name: str) -> None:
    """PARTITIONS partitions, RF 3, every replica in the ISR before the timed run."""
    from epochlog.client import Admin

    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(name, PARTITIONS, 3)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = admin.describe_topics([name]).get(name)
            if found is not None and all(
                p.leader >= 0 and len(p.isr) == 3 for p in found.partitions
            ):
                return
            time.sleep(0.2)
    raise RuntimeError(f"{name}: no full ISR within 60 s")


def client_config(cluster: LocalCluster, protocol: str, ca: CertificateAuthority) -> dict:
    if protocol == "PLAINTEXT":
        return {"bootstrap.servers": cluster.bootstrap_servers}
    return {
        "bootstrap.servers": cluster.listener_bootstrap("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca.ca_file),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": USER,
        "sasl.password": PASSWORD,
    }


def produce(config: dict[str, Any], topic: str, count: int) -> float:
    """Records per second of `count` records, acks=all, large batches."""
    producer = confluent_kafka.Producer(
        {**config, "acks": "all", "linger.ms": 5, "queue.buffering.max.messages": 1_000_000}
    )
    failures: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, RECORD, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) != 0 or failures:
        raise RuntimeError(f"produce failed: {failures[:1]}")
    return count / (time.perf_counter() - started)


def consume(config: dict[str, Any], topic: str, count: int) -> float:
    """Records per second reading `count` records from the beginning with assign()."""
    consumer = confluent_kafka.Consumer(
        {**config, "group.id": "bench-security", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen = 0
    started = time.perf_counter()
    deadline = started + 300
    try:
        while seen < count:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"consumed {seen} of {count} in 300 s")
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error() is None:
                    seen += 1
        return count / (time.perf_counter() - started)
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    compiled = sum(_build.loaded_compiled(m) for m in _build.COMPILED_MODULES)
    console.print(f"compiled modules: {compiled}/{len(_build.COMPILED_MODULES)}")
    with tempfile.TemporaryDirectory(prefix="security-cost-") as directory:
        ca = CertificateAuthority.create(Path(directory) / "ca")
        broker_cert = ca.issue("broker")
        cluster = LocalCluster(
            Path(directory) / "cluster",
            3,
            extra_listeners=("SASL_SSL",),
            broker_config={
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "ssl.keystore.location": str(broker_cert.keystore),
                "ssl.truststore.location": str(ca.ca_file),
            },
        )
        cluster.start()
        try:
            pids = [int(b.pid) for b in cluster.brokers.values() if b.pid is not None]
            status = epochlog_main(
                ["users", "scram", "set", "--user", USER, "--mechanism", "SCRAM-SHA-512",
                 "--password", PASSWORD, "--bootstrap-server", cluster.bootstrap_servers]
            )  # fmt: skip
            if status != 0:
                raise RuntimeError("epochlog users scram set failed")
            time.sleep(1)  # the credential's change notification reaches every broker
            results: dict[str, list[tuple[float, float, float]]] = {
                "PLAINTEXT": [],
                "SASL_SSL": [],
            }
            for rnd in range(args.rounds):
                for protocol in results:
                    topic = f"bench-{protocol.lower()}-{rnd}"
                    create_topic(cluster, topic)
                    config = client_config(cluster, protocol, ca)
                    wait_quiet(pids)
                    before = sum(cpu_seconds(pid) for pid in pids)
                    produced = produce(config, topic, args.messages)
                    consumed = consume(config, topic, args.messages)
                    cpu_us = (sum(cpu_seconds(pid) for pid in pids) - before) / args.messages
                    results[protocol].append((produced, consumed, cpu_us * 1e6))
                    console.print(
                        f"round {rnd + 1} {protocol:<10} produce {produced:>10,.0f}/s  "
                        f"consume {consumed:>10,.0f}/s  brokers {cpu_us * 1e6:6.2f} µs CPU/record"
                    )
        finally:
            cluster.close()
    medians = {
        protocol: tuple(statistics.median(r[i] for r in rows) for i in range(3))
        for protocol, rows in results.items()
    }
    table = Table(title=f"{args.messages:,} records of 100 B, RF 3, medians of {args.rounds}")
    for column in ("", "produce msg/s", "consume msg/s", "brokers µs CPU/record"):
        table.add_column(column, justify="right")
    for protocol, (p, c, cpu) in medians.items():
        table.add_row(protocol, f"{p:,.0f}", f"{c:,.0f}", f"{cpu:.2f}")
    plain, secure = medians["PLAINTEXT"], medians["SASL_SSL"]
    table.add_row(
        "SASL_SSL / PLAINTEXT",
        f"{secure[0] / plain[0]:.2f}x",
        f"{secure[1] / plain[1]:.2f}x",
        f"{secure[2] / plain[2]:.2f}x",
    )
    console.print(table)


if __name__ == "__main__":
    main()
