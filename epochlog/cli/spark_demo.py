"""The Spark demo (`make demo`): the reference pipeline on a 3-broker cluster, a leader killed.

ZooKeeper + 3 brokers; topics `clickstream` (6 partitions) and `clickstream-counts`, both with
replication factor 3 and min.insync.replicas 2. Spark (local[2]) runs the two streaming jobs of
`examples/clickstream_pipeline.py` while the generator produces events at a steady rate; half-way
through, the leader of clickstream partition 0 is killed with SIGKILL and restarted a few
seconds later. At the end the demo checks that the Parquet table's totals (per page and per
country) equal the number of events acknowledged, with no window counted twice, prints a
summary, writes `events_per_minute.png`, and fails when the check does not hold.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from rich.console import Console
from rich.table import Table

from epochlog.client import Admin
from epochlog.testing.cluster import LocalCluster

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clickstream_pipeline.py"
PARTITIONS = 6


def load_pipeline() -> ModuleType:
    spec = importlib.util.spec_from_file_location("clickstream_pipeline", EXAMPLE)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"the reference pipeline is missing: {EXAMPLE}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_spark(app: str = "epochlog-demo") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from epochlog.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def run(
    directory: Path,
    console: Console,
    events: int = 9000,
    rate: float = 250.0,
    kill_leader: bool = True,
    wait_s: float = 600.0,
) -> bool:
    console.rule("[bold]epochlog demo: a Spark pipeline on 3 brokers, a leader killed mid-stream")
    pipeline = load_pipeline()
    work = directory / "spark-demo"
    if work.exists():
        import shutil

        shutil.rmtree(work)
    cluster = LocalCluster(work / "cluster", 3, zk_session_timeout_ms=4000)
    with console.status("starting ZooKeeper and 3 brokers ..."):
        cluster.start()
    console.print(f"cluster up: {cluster.bootstrap_servers}")
    try:
        with console.status("starting Spark (local[2]) ..."):
            spark = start_spark()
        try:
            return _run(cluster, spark, pipeline, work, console, events, rate, kill_leader, wait_s)
        finally:
            spark.stop()
    finally:
        with console.status("stopping the cluster ..."):
            cluster.close()


def _run(
    cluster: LocalCluster,
    spark: Any,
    pipeline: ModuleType,
    work: Path,
    console: Console,
    events: int,
    rate: float,
    kill_leader: bool,
    wait_s: float,
) -> bool:
    bootstrap = cluster.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        for topic, parts in ((pipeline.EVENTS_TOPIC, PARTITIONS), (pipeline.COUNTS_TOPIC, 2)):
            admin.create_topic(topic, parts, 3, {"min.insync.replicas": "2"})
        leader = (
            admin.describe_topics([pipeline.EVENTS_TOPIC])[pipeline.EVENTS_TOPIC]
            .partitions[0]
            .leader
        )
    table = str(work / "counts-table")
    started = time.monotonic()
    counts_job = pipeline.start_counts_job(spark, bootstrap, str(work / "ckpt-counts"))
    table_job = pipeline.start_table_job(spark, bootstrap, table, str(work / "ckpt-table"))
    generator = pipeline.ClickGenerator(bootstrap, events, rate)
    bounce: dict[str, float] = {}

    def bouncer() -> None:
        while generator.sent < events // 2 and not generator.done.is_set():
            time.sleep(0.05)
        t0 = time.monotonic()
        cluster.kill_broker(leader)
        bounce["killed_at"] = generator.sent
        time.sleep(3)
        cluster.start_broker(leader)
        bounce["seconds"] = time.monotonic() - t0

    if kill_leader:
        threading.Thread(target=bouncer, daemon=True).start()

    def progress(sent: int, acked: int) -> None:
        state = "all brokers up"
        if "killed_at" in bounce:
            state = (
                f"broker {leader} killed" if "seconds" not in bounce else f"broker {leader} back"
            )
        console.print(f"  events sent {sent:>6,}  acknowledged {acked:>6,}  ({state})")

    generator.run(PARTITIONS, progress)
    produced = generator.acked
    console.print(f"generator done: {produced:,} events acknowledged; waiting for the table ...")
    deadline = time.monotonic() + wait_s
    totals = pipeline.table_totals(spark, table)
    while time.monotonic() < deadline and (
        totals["page"] < produced or totals["country"] < produced
    ):
        for query in (counts_job, table_job):
            if query.exception() is not None:
                console.print(f"[red]query {query.name} failed: {query.exception()}[/]")
                deadline = 0
        time.sleep(2)
        totals = pipeline.table_totals(spark, table)
    elapsed = time.monotonic() - started
    for query in (counts_job, table_job):
        progress_log = query.recentProgress
        if progress_log:
            took = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress_log]
            console.print(
                f"query {query.name}: {len(progress_log)} recent micro-batches, "
                f"{sum(took) / len(took):.1f} s each on average"
            )
        query.stop()
    chart = work / "events_per_minute.png"
    pipeline.write_chart(chart, dict(generator.acked_per_minute), totals["per_minute"])

    summary = Table(title="Spark pipeline summary")
    summary.add_column("what")
    summary.add_column("value", justify="right")
    summary.add_row("events produced (acks=all)", f"{produced:,}")
    summary.add_row("failed deliveries", f"{len(generator.failed):,}")
    summary.add_row("counted in Parquet, per page", f"{totals['page']:,}")
    summary.add_row("counted in Parquet, per country", f"{totals['country']:,}")
    summary.add_row("windows written twice", f"{totals['repeated']:,}")
    if kill_leader:
        summary.add_row(
            f"leader of clickstream-0 (broker {leader}) killed -9, restarted after",
            f"{bounce.get('seconds', 0):.1f} s",
        )
    summary.add_row("pipeline wall time", f"{elapsed:.0f} s")
    console.print(summary)
    minutes = Table(title="events per event-time minute")
    minutes.add_column("minute (UTC)")
    minutes.add_column("produced", justify="right")
    minutes.add_column("in Parquet", justify="right")
    for minute in sorted(set(generator.acked_per_minute) | set(totals["per_minute"])):
        minutes.add_row(
            time.strftime("%H:%M", time.gmtime(minute / 1000)),
            f"{generator.acked_per_minute.get(minute, 0):,}",
            f"{totals['per_minute'].get(minute, 0):,}",
        )
    console.print(minutes)
    console.print(f"chart: {chart}")
    ok = (
        totals["page"] == produced
        and totals["country"] == produced
        and totals["repeated"] == 0
        and produced == generator.events
        and not generator.failed
        and dict(generator.acked_per_minute) == totals["per_minute"]
    )
    if ok:
        console.print(
            "[bold green]OK[/]: every event was counted exactly once (Parquet totals = produced)."
        )
    else:
        console.print("[bold red]FAILED[/]: the Parquet totals differ from the events produced.")
    return ok
