"""The demo (`make demo`): the reference Spark pipeline on a 3-broker cluster, a leader killed.

ZooKeeper + 3 brokers; topics `clickstream` (6 partitions) and `clickstream-counts` (2), both
with replication factor 3 and min.insync.replicas 2. Spark (local[2]) runs the two streaming jobs
of `examples/clickstream_pipeline.py`; once they run, the generator produces click events at a
steady rate, and half-way through, after the counts job has read some of them, the leader of
clickstream partition 0 is killed with SIGKILL and restarted a few seconds later. At the end the
demo checks that the Parquet table's totals (per page, per country and per event-time minute)
equal the events acknowledged, with no window counted twice; and it reads the counts topic, which
the counts job writes through Kafka transactions (the exactly-once sink), with a read_committed
confluent-kafka consumer: every window once, none missing (`demo_topic_check`). It prints a
summary, writes `events_per_minute.png`, and fails when a check does not hold.

The wait for the table ends early, as a failure, when a query failed or when neither query has
run a micro-batch and the table has not grown for `stall_s` seconds.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from rich.console import Console
from rich.table import Table

from epochlog.cli.demo_topic_check import CountsCheck, check_counts, read_topic
from epochlog.client import Admin
from epochlog.node.local_cluster import LocalCluster

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clickstream_pipeline.py"
PARTITIONS = 6
COUNTS_PARTITIONS = 2


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
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # everything is on loopback
    from pyspark.sql import SparkSession

    from epochlog.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # stage bars garble the demo's lines
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


@dataclass
class DemoSettings:
    """How big the demo is. The defaults are `make demo`'s; tests use a short run."""

    events: int = 9000
    rate: float = 250.0
    kill_leader: bool = True
    trigger: str = "5 seconds"
    wait_s: float = 600.0  # longest wait for the table after the generator is done
    stall_s: float = 120.0  # no micro-batch and no table growth for this long: give up
    start_timeout_s: float = 300.0  # the jobs' first micro-batch (Spark's start on a busy box)


@dataclass
class TopicCheck:
    committed: CountsCheck  # the counts topic read with isolation.level=read_committed
    in_log: int  # its rows read with read_uncommitted (aborted attempts' rows too)


@dataclass
class _Bounce:
    leader: int
    killed_at: int | None = None  # events sent when the leader was killed
    rows_read_before: int = 0  # rows the counts job had read by then
    seconds: float | None = None  # killed until restarted and registered
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


def run(
    directory: Path,
    console: Console,
    settings: DemoSettings | None = None,
    spark: Any = None,
) -> bool:
    """Run the demo in `directory` (wiped first). A given SparkSession is used and left running;
    otherwise one is started and stopped."""
    settings = settings or DemoSettings()
    console.rule("[bold]epochlog demo: a Spark pipeline on 3 brokers, a leader killed mid-stream")
    pipeline = load_pipeline()
    work = directory / "spark-demo"
    if work.exists():
        shutil.rmtree(work)
    cluster = LocalCluster(work / "cluster", 3, zk_session_timeout_ms=4000)
    with console.status("starting ZooKeeper and 3 brokers ..."):
        cluster.start()
    console.print(f"cluster up: {cluster.bootstrap_servers}")
    try:
        own_spark = spark is None
        if own_spark:
            with console.status("starting Spark (local[2]) ..."):
                spark = start_spark()
        try:
            return _run(cluster, spark, pipeline, work, console, settings)
        finally:
            if own_spark:
                spark.stop()
    finally:
        with console.status("stopping the cluster ..."):
            cluster.close()


def _rows_read(query: Any) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


def _last_batch(query: Any) -> int:
    progress = query.lastProgress
    return -1 if progress is None else int(progress["batchId"])


def _failed(queries: list[Any]) -> str | None:
    for query in queries:
        if query.exception() is not None:
            return f"query {query.name} failed: {query.exception()}"
        if not query.isActive:
            return f"query {query.name} stopped"
    return None


def _run(
    cluster: LocalCluster,
    spark: Any,
    pipeline: ModuleType,
    work: Path,
    console: Console,
    settings: DemoSettings,
) -> bool:
    bootstrap = cluster.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        for topic, parts in (
            (pipeline.EVENTS_TOPIC, PARTITIONS),
            (pipeline.COUNTS_TOPIC, COUNTS_PARTITIONS),
        ):
            admin.create_topic(topic, parts, 3, {"min.insync.replicas": "2"})
        leader = (
            admin.describe_topics([pipeline.EVENTS_TOPIC])[pipeline.EVENTS_TOPIC]
            .partitions[0]
            .leader
        )
    table = str(work / "counts-table")
    started = time.monotonic()
    # The JVM looks a query's formats up in the calling thread's active session.
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    counts_job = pipeline.start_counts_job(
        spark, bootstrap, str(work / "ckpt-counts"), settings.trigger
    )
    table_job = pipeline.start_table_job(
        spark, bootstrap, table, str(work / "ckpt-table"), settings.trigger
    )
    queries = [counts_job, table_job]
    try:
        return _drive(
            cluster, spark, pipeline, work, console, settings, queries, table, leader, started
        )
    finally:
        for query in queries:
            query.stop()


def _drive(
    cluster: LocalCluster,
    spark: Any,
    pipeline: ModuleType,
    work: Path,
    console: Console,
    settings: DemoSettings,
    queries: list[Any],
    table: str,
    leader: int,
    started: float,
) -> bool:
    counts_job, table_job = queries
    bootstrap = cluster.bootstrap_servers
    with console.status("waiting for the streaming jobs' first micro-batch ..."):
        deadline = time.monotonic() + settings.start_timeout_s
        while any(q.lastProgress is None for q in queries):
            problem = _failed(queries)
            if problem is None and time.monotonic() > deadline:
                problem = f"no micro-batch within {settings.start_timeout_s:.0f} s"
            if problem is not None:
                console.print(f"[bold red]FAILED[/]: {problem}")
                return False
            time.sleep(0.5)
    console.print(f"streaming jobs running after {time.monotonic() - started:.0f} s")

    generator = pipeline.ClickGenerator(bootstrap, settings.events, settings.rate)
    bounce = _Bounce(leader)

    def bouncer() -> None:
        try:
            while generator.sent < settings.events // 2 and not generator.done.is_set():
                time.sleep(0.05)
            # Mid-stream: the counts job has read events, and more keep coming.
            wait_until = time.monotonic() + 60
            while _rows_read(counts_job) == 0 and time.monotonic() < wait_until:
                time.sleep(0.2)
            bounce.rows_read_before = _rows_read(counts_job)
            t0 = time.monotonic()
            cluster.kill_broker(leader)
            bounce.killed_at = generator.sent
            time.sleep(3)
            cluster.start_broker(leader)
            bounce.seconds = time.monotonic() - t0
        except Exception as exc:  # reported in the summary; the check then fails
            bounce.error = repr(exc)
        finally:
            bounce.done.set()

    if settings.kill_leader:
        threading.Thread(target=bouncer, name="leader-bouncer", daemon=True).start()

    def progress(sent: int, acked: int) -> None:
        state = "all brokers up"
        if bounce.killed_at is not None:
            state = f"broker {leader} back" if bounce.seconds else f"broker {leader} killed"
        console.print(
            f"  sent {sent:>6,}  acked {acked:>6,}  {state:<15}  micro-batches: counts "
            f"{_last_batch(counts_job)}, table {_last_batch(table_job)}"
        )

    generator.run(PARTITIONS, progress)
    produced = generator.acked
    if settings.kill_leader:
        bounce.done.wait(120)
    console.print(f"generator done: {produced:,} events acknowledged; waiting for the table ...")
    totals, problem = _wait_for_table(spark, pipeline, console, settings, queries, table, produced)
    elapsed = time.monotonic() - started
    with console.status(f"reading {pipeline.COUNTS_TOPIC} with confluent-kafka ..."):
        topic = TopicCheck(
            committed=check_counts(read_topic(bootstrap, pipeline.COUNTS_TOPIC, "read_committed")),
            in_log=len(read_topic(bootstrap, pipeline.COUNTS_TOPIC, "read_uncommitted")),
        )
    for query in queries:
        progress_log = query.recentProgress
        if progress_log:
            took = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress_log]
            console.print(
                f"query {query.name}: {len(progress_log)} recent micro-batches, "
                f"{sum(took) / len(took):.1f} s each on average"
            )
    chart = work / "events_per_minute.png"
    pipeline.write_chart(chart, dict(generator.acked_per_minute), totals["per_minute"])
    _print_summary(console, settings, generator, totals, bounce, elapsed, chart, topic)
    committed = topic.committed
    checks = {
        "every event acknowledged": produced == settings.events and not generator.failed,
        "per-page total = produced": totals["page"] == produced,
        "per-country total = produced": totals["country"] == produced,
        "no window written twice": totals["repeated"] == 0,
        "per-minute counts = produced": dict(generator.acked_per_minute) == totals["per_minute"],
        "counts topic read committed: every window once, none missing": committed.exactly_once(
            produced, generator.acked_per_minute
        ),
    }
    if settings.kill_leader:
        checks["leader killed mid-stream and back"] = (
            bounce.error is None and bounce.seconds is not None and bounce.rows_read_before > 0
        )
    failed = [name for name, ok in checks.items() if not ok]
    if problem:
        console.print(f"[red]{problem}[/]")
    if not failed and problem is None:
        console.print(
            "[bold green]OK[/]: every event was counted exactly once (Parquet totals = produced; "
            f"{pipeline.COUNTS_TOPIC} read committed: every window once)."
        )
        return True
    console.print(f"[bold red]FAILED[/]: {'; '.join(failed) or problem}")
    return False


def _wait_for_table(
    spark: Any,
    pipeline: ModuleType,
    console: Console,
    settings: DemoSettings,
    queries: list[Any],
    table: str,
    produced: int,
) -> tuple[dict[str, Any], str | None]:
    """Until the table holds every event; the totals, and why the wait ended early if it did."""
    deadline = time.monotonic() + settings.wait_s
    last_change = time.monotonic()
    seen: tuple[Any, ...] = ()
    last_report = 0.0
    totals = pipeline.table_totals(spark, table)
    while totals["page"] < produced or totals["country"] < produced:
        problem = _failed(queries)
        if problem is not None:
            return totals, problem
        now = time.monotonic()
        state = (totals["page"], totals["country"], *(_last_batch(q) for q in queries))
        if state != seen:
            seen, last_change = state, now
        elif now - last_change > settings.stall_s:
            return totals, (
                f"no micro-batch and no new counts for {settings.stall_s:.0f} s; the table "
                f"holds {totals['page']:,} of {produced:,} events"
            )
        if now > deadline:
            return totals, f"the table holds {totals['page']:,} of {produced:,} events"
        if now - last_report > 10:
            last_report = now
            console.print(
                f"  table: {totals['page']:,} of {produced:,} events counted (micro-batches: "
                f"counts {_last_batch(queries[0])}, table {_last_batch(queries[1])})"
            )
        time.sleep(1)
        totals = pipeline.table_totals(spark, table)
    return totals, None


def _print_summary(
    console: Console,
    settings: DemoSettings,
    generator: Any,
    totals: dict[str, Any],
    bounce: _Bounce,
    elapsed: float,
    chart: Path,
    topic: TopicCheck,
) -> None:
    produced = generator.acked
    summary = Table(title="Spark pipeline summary")
    summary.add_column("what")
    summary.add_column("value", justify="right")
    summary.add_row("events produced (acks=all)", f"{produced:,} of {settings.events:,}")
    summary.add_row("failed deliveries", f"{len(generator.failed):,}")
    summary.add_row("counted in Parquet, per page", f"{totals['page']:,}")
    summary.add_row("counted in Parquet, per country", f"{totals['country']:,}")
    summary.add_row("windows written twice", f"{totals['repeated']:,}")
    committed = topic.committed
    summary.add_row("counts topic read committed (confluent-kafka)", f"{committed.rows:,} rows")
    summary.add_row("  per page", f"{committed.totals['page']:,}")
    summary.add_row("  per country", f"{committed.totals['country']:,}")
    summary.add_row("  windows read twice", f"{committed.repeated:,}")
    summary.add_row("  rows in the log (read_uncommitted)", f"{topic.in_log:,}")
    if settings.kill_leader:
        summary.add_row("leader of clickstream-0 killed -9", f"broker {bounce.leader}")
        if bounce.error is not None:
            summary.add_row("  the kill or restart failed", bounce.error)
        else:
            summary.add_row("  events sent when killed", f"{bounce.killed_at or 0:,}")
            summary.add_row("  events Spark had read by then", f"{bounce.rows_read_before:,}")
            summary.add_row("  restarted and registered after", f"{bounce.seconds or 0:.1f} s")
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
