"""The reference pipeline: clickstream events -> per-minute counts -> a topic and a Parquet table.

    events (JSON: id, event_time ms, page, country, user) on topic `clickstream`
      -> job 1, `counts`: parse, watermark on event time, count per page and per country in
         1-minute event-time windows; each closed window's counts go to topic
         `clickstream-counts` with deliveryGuarantee=exactly-once
      -> job 2, `table`: read `clickstream-counts` and append it to a Parquet table
         (Spark's file sink: exactly-once through its own metadata log)

So the Parquet table sees every count once even when a broker dies or a query restarts, and
its totals equal the number of events produced. Windows are emitted in append mode once the
watermark passes them; the generator ends with one far-future "__end__" event per partition,
which moves the watermark past every real window. The marker is dropped only after the
`explode` of its dimensions: Spark's optimizer pushes a filter that does not name the event-time
column below the watermark (PushPredicateThroughNonJoin), so a `page != "__end__"` filter right
after `withWatermark` would hide the markers from it and the last windows would never close.

Run it against any cluster (local mode or a Spark cluster, unchanged):

    spark-submit --py-files dist/epochlog.zip examples/clickstream_pipeline.py \\
        --bootstrap-servers HOST:9092 --dir /shared/pipeline --generate 20000
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

EVENTS_TOPIC = "clickstream"
COUNTS_TOPIC = "clickstream-counts"
PAGES = ["/", "/search", "/cart", "/checkout", "/product/1", "/product/2"]
COUNTRIES = ["NL", "DE", "FR", "US", "BR", "JP"]
END_PAGE = "__end__"
WATERMARK = "3 minutes"
WINDOW = "1 minute"
TABLE_SCHEMA = "window_start long, dimension string, value string, count long"


# ------------------------------------------------------------------------------ generator


class ClickGenerator:
    """Produces `events` clickstream events at `rate` per second with the epochlog client.

    Event time runs `speedup` times faster than the wall clock (with up to 5 s of jitter), so a
    short run spans several 1-minute windows. `acked_per_minute` counts acknowledged events per
    event-time minute (ms of the minute's start), the ground truth the table is checked against.
    """

    def __init__(
        self, bootstrap: str, events: int, rate: float, speedup: float = 12.0, seed: int = 7
    ) -> None:
        self.bootstrap = bootstrap
        self.events = events
        self.rate = rate
        self.speedup = speedup
        self.random = random.Random(seed)
        self.acked = 0
        self.failed: list[str] = []
        self.acked_per_minute: Counter[int] = Counter()
        self.sent = 0
        self.last_event_ms = 0
        self._lock = threading.Lock()
        self.done = threading.Event()

    def run(self, partitions: int, progress: Callable[[int, int], None] | None = None) -> None:
        from epochlog.client import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 10})
        start_wall = time.time()
        base_ms = int(start_wall * 1000) // 60_000 * 60_000  # windows line up with minutes
        try:
            for i in range(self.events):
                offset_ms = (i / self.rate) * self.speedup * 1000
                jitter = self.random.uniform(-5000, 0) if i > self.rate else 0
                event_ms = int(base_ms + offset_ms + jitter)
                self.last_event_ms = max(self.last_event_ms, event_ms)
                event = {
                    "id": i,
                    "event_time": event_ms,
                    "page": self.random.choice(PAGES),
                    "country": self.random.choice(COUNTRIES),
                    "user": f"user-{self.random.randrange(500)}",
                }
                producer.send(
                    EVENTS_TOPIC,
                    json.dumps(event).encode(),
                    key=event["user"].encode(),
                    on_delivery=self._on_delivery(event_ms),
                )
                self.sent = i + 1
                pause = start_wall + (i + 1) / self.rate - time.time()
                if pause > 0:
                    time.sleep(pause)
                if progress is not None and i % max(1, int(self.rate)) == 0:
                    progress(self.sent, self.acked)
            producer.flush(120)
            end_ms = self.last_event_ms + 10 * 60_000  # closes every real window
            for p in range(partitions):
                end = {
                    "id": -1,
                    "event_time": end_ms,
                    "page": END_PAGE,
                    "country": END_PAGE,
                    "user": "",
                }
                producer.send(EVENTS_TOPIC, json.dumps(end).encode(), partition=p)
            producer.flush(120)
        finally:
            producer.close()
            self.done.set()

    def _on_delivery(self, event_ms: int) -> Callable[[Any, Any], None]:
        def done(metadata: Any, error: Any) -> None:
            with self._lock:
                if error is not None:
                    self.failed.append(str(error))
                else:
                    self.acked += 1
                    self.acked_per_minute[event_ms // 60_000 * 60_000] += 1

        return done


# ------------------------------------------------------------------------------ the jobs


def start_counts_job(
    spark: Any, bootstrap: str, checkpoint: str, trigger: str = "5 seconds"
) -> Any:
    """Job 1: events -> windowed counts per page and per country -> COUNTS_TOPIC, exactly once."""
    source = (
        spark.readStream.format("epochlog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", EVENTS_TOPIC)
        .option("startingOffsets", "earliest")
        .load()
    )
    return (
        windowed_counts(source)
        .writeStream.format("epochlog")
        .queryName("counts")
        .outputMode("append")
        .option("bootstrap.servers", bootstrap)
        .option("topic", COUNTS_TOPIC)
        .option("deliveryGuarantee", "exactly-once")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=trigger)
        .start()
    )


def windowed_counts(source: Any) -> Any:
    """Events (a streaming DataFrame with the JSON event in `value`) -> one row per closed
    (1-minute window, dimension, value): key "dimension|value|window start s", value JSON."""
    from pyspark.sql import functions as F

    events = (
        source.select(
            F.from_json(
                F.col("value").cast("string"),
                "id long, event_time long, page string, country string, user string",
            ).alias("e")
        )
        .select("e.*")
        .withColumn("ts", F.timestamp_millis("event_time"))
        .withWatermark("ts", WATERMARK)
    )
    dimensions = events.select(
        "ts",
        F.explode(
            F.array(
                F.struct(F.lit("page").alias("dimension"), F.col("page").alias("value")),
                F.struct(F.lit("country").alias("dimension"), F.col("country").alias("value")),
            )
        ).alias("d"),
    ).select("ts", "d.dimension", "d.value")
    # Not pushed below the watermark: it names a column the explode makes (module docstring).
    dimensions = dimensions.where(F.col("value") != END_PAGE)
    counts = dimensions.groupBy(F.window("ts", WINDOW), "dimension", "value").count()
    out = counts.select(
        F.concat_ws(
            "|", "dimension", "value", F.col("window.start").cast("long").cast("string")
        ).alias("key"),
        F.to_json(
            F.struct(
                (F.col("window.start").cast("long") * 1000).alias("window_start"),
                "dimension",
                "value",
                "count",
            )
        ).alias("value"),
    )
    return out


def start_table_job(
    spark: Any, bootstrap: str, table: str, checkpoint: str, trigger: str = "5 seconds"
) -> Any:
    """Job 2: COUNTS_TOPIC -> the Parquet table (window_start, dimension, value, count)."""
    from pyspark.sql import functions as F

    return (
        spark.readStream.format("epochlog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", COUNTS_TOPIC)
        .option("startingOffsets", "earliest")
        .load()
        .select(
            F.from_json(
                F.col("value").cast("string"),
                TABLE_SCHEMA,
            ).alias("c")
        )
        .select("c.*")
        .writeStream.format("parquet")
        .queryName("table")
        .option("path", table)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=trigger)
        .start()
    )


def table_totals(spark: Any, table: str) -> dict[str, Any]:
    """What the Parquet table holds: totals per dimension, per minute, and repeated keys."""
    if not (Path(table) / "_spark_metadata").exists():
        return {"page": 0, "country": 0, "per_minute": {}, "repeated": 0, "by_value": {}}
    df = spark.read.schema(TABLE_SCHEMA).parquet(table)
    rows = df.collect()
    totals: Counter[str] = Counter()
    per_minute: Counter[int] = Counter()
    by_value: Counter[tuple[str, str]] = Counter()
    keys: Counter[tuple[int, str, str]] = Counter()
    for r in rows:
        totals[r.dimension] += r["count"]
        by_value[(r.dimension, r.value)] += r["count"]
        keys[(r.window_start, r.dimension, r.value)] += 1
        if r.dimension == "page":
            per_minute[r.window_start] += r["count"]
    return {
        "page": totals["page"],
        "country": totals["country"],
        "per_minute": dict(per_minute),
        "repeated": sum(n - 1 for n in keys.values() if n > 1),
        "by_value": dict(by_value),
    }


def write_chart(path: Path, produced: dict[int, int], counted: dict[int, int]) -> None:
    """A PNG bar chart of events per event-time minute: counted by the pipeline vs produced."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = sorted(set(produced) | set(counted))
    labels = [time.strftime("%H:%M", time.gmtime(m / 1000)) for m in minutes]
    xs = range(len(minutes))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar([x - 0.2 for x in xs], [produced.get(m, 0) for m in minutes], 0.4, label="produced")
    ax.bar([x + 0.2 for x in xs], [counted.get(m, 0) for m in minutes], 0.4, label="in Parquet")
    ax.set_xticks(list(xs), labels, rotation=45)
    ax.set_xlabel("event-time minute (UTC)")
    ax.set_ylabel("events")
    ax.set_title("clickstream events per minute")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ------------------------------------------------------------------------------ stand-alone


def ensure_topics(bootstrap: str, partitions: int = 6, replication_factor: int = -1) -> None:
    """Create the pipeline's topics if they do not exist yet (-1: the brokers' default)."""
    from epochlog.client import Admin

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        existing = set(admin.list_topics())
        for topic, count in ((EVENTS_TOPIC, partitions), (COUNTS_TOPIC, 2)):
            if topic not in existing:
                admin.create_topic(topic, count, replication_factor)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--dir", required=True, help="checkpoints and the Parquet table")
    parser.add_argument("--generate", type=int, default=0, help="also produce N events")
    parser.add_argument("--rate", type=float, default=300.0)
    parser.add_argument("--partitions", type=int, default=6, help="of a new events topic")
    parser.add_argument("--replication-factor", type=int, default=-1, help="of new topics")
    parser.add_argument("--trigger", default="5 seconds", help="micro-batch interval")
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait for totals")
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    from epochlog.spark import register

    spark = SparkSession.builder.appName("clickstream").getOrCreate()
    register(spark)
    ensure_topics(args.bootstrap_servers, args.partitions, args.replication_factor)
    root = Path(args.dir)
    table = str(root / "counts-table")
    counts = start_counts_job(
        spark, args.bootstrap_servers, str(root / "ckpt-counts"), args.trigger
    )
    tables = start_table_job(
        spark, args.bootstrap_servers, table, str(root / "ckpt-table"), args.trigger
    )
    generator = ClickGenerator(args.bootstrap_servers, args.generate, args.rate)
    if args.generate:
        generator.run(partitions=args.partitions)
    deadline = time.monotonic() + args.wait
    totals = table_totals(spark, table)
    while time.monotonic() < deadline and totals["page"] < generator.acked:
        for query in (counts, tables):
            if query.exception() is not None:
                raise RuntimeError(f"query {query.name} failed") from query.exception()
        time.sleep(2)
        totals = table_totals(spark, table)
    counts.stop()
    tables.stop()
    context = spark.sparkContext
    print(
        json.dumps(
            {
                "master": context.master,
                # block managers: the driver's and one per executor (local mode: the driver's)
                "executors": max(1, context._jsc.sc().getExecutorMemoryStatus().size() - 1),
                "produced": generator.acked,
                "page": totals["page"],
                "country": totals["country"],
                "repeated": totals["repeated"],
                "per_minute_equal": {str(k): v for k, v in totals["per_minute"].items()}
                == {str(k): v for k, v in generator.acked_per_minute.items()},
            }
        )
    )
    ok = totals["page"] == totals["country"] == generator.acked and not totals["repeated"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
