"""Spark data source throughput: rows/s through format("epochlog") next to Parquet.

In one SparkSession (local[2]) and one run, against a local 1-broker cluster:
- write: N rows (16-byte key, 100-byte value) from spark.range -> format("epochlog") batch write,
  next to the same rows written as Parquet;
- batch read: format("epochlog") -> noop sink, next to reading the Parquet files -> noop;
- streaming read: readStream format("epochlog") with Trigger.AvailableNow -> noop sink (wall
  time including query start), next to a streaming read of the Parquet files the same way
  (Spark's file source, AvailableNow, noop: the same query start); its ratio to the Parquet
  batch read is printed too;
- for reference, the floor of any Python batch source here: a source whose tasks hand Spark
  ready-made Arrow batches of the same rows in the source's schema (64k rows a batch, about one
  fetch's worth), read into noop like the others: no broker, no fetching, no decoding, only what
  Spark costs a Python data source (task start, the Arrow batches crossing to the JVM and turned
  into rows there);
- for reference, the floor of any Python sink here: the same rows written to a Python sink
  whose tasks take every Arrow batch Spark hands them and drop it (what Spark costs a Python
  data sink: the rows turned into Arrow and crossing to the Python worker); no encoding, no
  broker;
- for reference, the floor of any Python streaming source here: a source of one row, read the
  same way (the source runner process Spark starts per query, its pyspark imports, planning);
- steady-state streaming read: the rows/s of a streaming query's data micro-batches once it
  runs, without the one-time query start. format("epochlog") with maxOffsetsPerTrigger
  (--batch-rows, split over the partitions) next to Spark's file source over Parquet files of
  equal size with maxFilesPerTrigger giving the same rows per batch, both AvailableNow -> noop.
  From Spark's progress reports: the rows of the data batches after the first, over the wall
  time from the start of the second batch to the end of the last (progress timestamp +
  triggerExecution: everything Spark does for those batches, i.e. latestOffset, planning,
  tasks, fetching and decoding, taking the Arrow data in, the sink, the offset and commit log
  writes, and any gap between batches). The first data batch is left out: it pays the query's
  one-time costs (initialOffset, the source's first clients). Spark's own processedRowsPerSecond
  over the same batches (rows / triggerExecution) is printed next to it. The ratio depends on
  the rows per batch: Spark's per-batch work (offset and commit logs, planning, task launch)
  costs both sources about the same, the rows cost a Python source more (each row crosses from
  a Python worker to the JVM as Arrow and is turned into a Spark row there), so larger batches
  give a lower ratio (try --rows 1000000 --batch-rows 250000).
- end to end (--latency-seconds, 0 to skip): a running query (default trigger) reads a topic
  with format("epochlog") and writes its key and value to another topic with format("epochlog");
  a producer sends a record every 100 ms carrying its send time, and a consumer of the output
  topic takes, per record, the time from that send to the record's arrival there (one clock:
  everything runs on this machine). p50 / p90 / max over the records sent after the query's
  first batch (target: p50 < 2 s).
The CPU column is what every process on the machine used during a case (from /proc/stat,
user + system), next to the wall time: on 2 cores, Spark's local[2] tasks and the broker share
them, so the broker's own CPU (printed for the epochlog write, `server_cpu.cpu_seconds`) comes out
of the time Spark has. Each case runs `--repeat` times after a warm-up (a write, a batch read
and a streaming read of each of epochlog and Parquet, untimed: the first streaming query of a
session pays the JVM's warm-up of the streaming path, which no timed round should carry); the
table shows medians and ratios to the Parquet anchors (targets below the table). Timings are
reported, never asserted.

With --worker-python, all of Spark's Python workers run through `epochlog.spark.worker_python()`
(PYSPARK_PYTHON: pyspark imported from the installed package instead of compiled from
pyspark.zip in every process Spark starts, such as the source runner of each streaming query).
Without it, `register(spark)` does that for format("epochlog") (and the bench's floor sources)
alone, since PYSPARK_PYTHON here is this interpreter (`worker_interpreter.use_worker_script`).
`make bench-spark` runs `make setup` first, which compiles epochlog's bytecode (with
PYTHONDONTWRITEBYTECODE set, a process importing epochlog compiles it otherwise).

    .venv/bin/python bench/spark.py [--rows 500000] [--repeat 3] [--worker-python]
        [--batch-rows 100000] [--steady-only] [--latency-seconds 20]

--steady-only runs just the steady-state streaming cases (and their warm-up).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from epochlog.client import Admin  # noqa: E402
from epochlog.testing.cluster import LocalCluster  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import server_cpu  # noqa: E402


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def machine_cpu_seconds() -> float:
    """CPU seconds every process on the machine has used (user, nice, system, irq, softirq,
    steal: /proc/stat's first line)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields[:3]) + sum(fields[5:8])  # idle and iowait left out
    return busy / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument(
        "--worker-python",
        action="store_true",
        help="PYSPARK_PYTHON=epochlog.spark.worker_python() (pyspark not compiled from its zip)",
    )
    parser.add_argument(
        "--batch-rows",
        type=int,
        default=100_000,
        help="rows per micro-batch of the steady-state streaming cases (a divisor of --rows)",
    )
    parser.add_argument(
        "--steady-only", action="store_true", help="only the steady-state streaming cases"
    )
    parser.add_argument(
        "--latency-seconds",
        type=float,
        default=20.0,
        help="how long the end-to-end latency case produces (0: skip it)",
    )
    args = parser.parse_args()
    if args.batch_rows <= 0 or args.rows % args.batch_rows:
        parser.error(f"--batch-rows {args.batch_rows} must divide --rows {args.rows}")
    if args.batch_rows % args.partitions:
        parser.error(f"--batch-rows must be a multiple of --partitions {args.partitions}")
    if args.rows // args.batch_rows < 3:
        parser.error("--rows must be at least 3 x --batch-rows (the first batch is left out)")
    console = Console()
    if args.worker_python:
        from epochlog.spark.worker_python import worker_python

        os.environ["PYSPARK_PYTHON"] = worker_python()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    cluster = LocalCluster(work / "cluster", 1)
    with console.status("starting ZooKeeper and a broker ..."):
        cluster.start()
    try:
        return run(console, cluster, work, args)
    finally:
        cluster.close()


def arrow_floor_source(rows: int, partitions: int) -> type:
    """A Python batch source of `rows` rows (16-byte key, 100-byte value) in the epochlog
    source's schema, split over `partitions` tasks, whose tasks yield Arrow batches built from
    ready buffers: what any Python batch source costs here (module docstring)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    batch_rows = 65_536

    class ArrowFloorReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition: InputPartition):  # noqa: ANN201
            import numpy as np
            import pyarrow as pa

            from epochlog.spark.rows import arrow_schema

            schema = arrow_schema(False)
            share = rows // partitions + (partition.value < rows % partitions)

            def binary(width: int, n: int, fill: bytes) -> pa.Array:
                offsets = pa.py_buffer(np.arange(n + 1, dtype=np.int32) * width)
                return pa.Array.from_buffers(
                    pa.binary(), n, [None, offsets, pa.py_buffer(fill * n)]
                )

            for first in range(0, share, batch_rows):
                n = min(batch_rows, share - first)
                topic = pa.Array.from_buffers(
                    pa.string(),
                    n,
                    [
                        None,
                        pa.py_buffer(np.arange(n + 1, dtype=np.int32) * 5),
                        pa.py_buffer(b"floor" * n),
                    ],
                )
                yield pa.RecordBatch.from_arrays(
                    [
                        binary(16, n, b"0123456789abcdef"),
                        binary(100, n, b"x" * 100),
                        topic,
                        pa.array(np.full(n, partition.value, np.int32)),
                        pa.array(np.arange(first, first + n, dtype=np.int64)),
                        pa.array(
                            np.full(n, 1_700_000_000_000_000, np.int64),
                            pa.timestamp("us", tz="UTC"),
                        ),
                        pa.array(np.zeros(n, np.int32)),
                    ],
                    schema=schema,
                )

    class ArrowFloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_arrow_floor"

        def schema(self) -> str:
            from epochlog.spark.rows import source_schema_ddl

            return source_schema_ddl(False)

        def reader(self, schema: object) -> DataSourceReader:
            return ArrowFloorReader()

    return ArrowFloorSource


def dropping_sink() -> type:
    """A Python sink that takes every Arrow batch Spark hands its tasks and drops it: what any
    Python data sink costs here (module docstring)."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class DroppingWriter(DataSourceArrowWriter):
        def write(self, iterator):  # noqa: ANN001, ANN201
            rows = 0
            for batch in iterator:
                rows += batch.num_rows
            return WriterCommitMessage()

    class DroppingSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_dropping_sink"

        def writer(self, schema: object, overwrite: bool) -> DroppingWriter:
            return DroppingWriter()

    return DroppingSink


def one_row_source() -> type:
    """A Python streaming source of one row: what any Python source pays per query."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class OneRowReader(DataSourceStreamReader):
        def initialOffset(self) -> dict:
            return {"row": 0}

        def latestOffset(self) -> dict:
            return {"row": 1}

        def partitions(self, start: dict, end: dict) -> list[InputPartition]:
            return [] if start == end else [InputPartition(0)]

        def read(self, partition: InputPartition):  # noqa: ANN201
            yield (b"k", b"v")

    class OneRowSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_one_row"

        def schema(self) -> str:
            return "key binary, value binary"

        def streamReader(self, schema: object) -> DataSourceStreamReader:
            return OneRowReader()

    return OneRowSource


def run(console: Console, cluster: LocalCluster, work: Path, args: argparse.Namespace) -> int:
    from pyspark.sql import SparkSession

    from epochlog.spark import register
    from epochlog.spark.worker_interpreter import register_with_worker_python

    with console.status("starting Spark local[2] ..."):
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("bench-spark")
            .config("spark.ui.enabled", "false")
            .config("spark.python.authenticate.socketTimeout", "120s")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "2g")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        # The floors are registered as register() registers format("epochlog") (through
        # worker_python's script when the workers run this interpreter), so they measure what
        # Spark costs a Python source set up the same way.
        register_with_worker_python(spark, one_row_source())
        register_with_worker_python(spark, arrow_floor_source(args.rows, args.partitions))
        register_with_worker_python(spark, dropping_sink())
    bootstrap = cluster.bootstrap_servers
    n = args.rows
    # 16-byte key, 100-byte value: the same rows in every case
    key_value = (
        "binary(lpad(cast(id as string), 16, '0')) as key",
        "binary(concat(lpad(cast(id as string), 16, '0'), repeat('x', 84))) as value",
    )
    rows = spark.range(0, n, 1, args.partitions).selectExpr(*key_value)
    results: dict[str, list[float]] = {}
    # steady-state case -> per round: (rows, wall seconds, Spark's triggerExecution seconds) of
    # the data batches after the first
    steady: dict[str, list[tuple[int, float, float]]] = {}
    phases: dict[str, list[dict[str, float]]] = {}  # streaming case -> per-round phase totals
    topics = iter(range(1_000_000))

    def new_topic() -> str:
        name = f"bench-{next(topics)}"
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topic(name, args.partitions, 1)
        return name

    read_topic = new_topic()
    steady_topic = new_topic()
    parquet_dir = str(work / "parquet")
    # Parquet files for the steady-state stream: each holds batch_rows / partitions rows, so
    # maxFilesPerTrigger=partitions gives batches of batch_rows rows in `partitions` tasks.
    file_rows = args.batch_rows // args.partitions
    parquet_files_dir = str(work / "parquet-files")

    def write_log(topic: str) -> None:
        rows.write.format("epochlog").option("bootstrap.servers", bootstrap).option(
            "topic", topic
        ).mode("append").save()

    def write_parquet() -> None:
        rows.write.mode("overwrite").parquet(parquet_dir)

    def write_dropping_sink() -> None:
        rows.write.format("bench_dropping_sink").mode("append").save()

    def write_parquet_files() -> None:
        spark.range(0, n, 1, n // file_rows).selectExpr(*key_value).write.mode("overwrite").parquet(
            parquet_files_dir
        )

    def write_steady_topic() -> None:
        """The same rows, n / partitions in each partition (row i in partition i % partitions),
        so maxOffsetsPerTrigger splits every batch evenly (Kafka's split rounds down)."""
        spark.range(0, n, 1, args.partitions).selectExpr(
            *key_value,
            f"cast(id % {args.partitions} as int) as partition",
        ).write.format("epochlog").option("bootstrap.servers", bootstrap).option(
            "topic", steady_topic
        ).mode("append").save()

    def read_log() -> None:
        spark.read.format("epochlog").option("bootstrap.servers", bootstrap).option(
            "subscribe", read_topic
        ).load().write.format("noop").mode("overwrite").save()

    def read_arrow_floor() -> None:
        spark.read.format("bench_arrow_floor").load().write.format("noop").mode("overwrite").save()

    def read_parquet() -> None:
        spark.read.parquet(parquet_dir).write.format("noop").mode("overwrite").save()

    def record_phases(name: str, query: object, started: float) -> None:
        """Where a streaming query's time went: Spark's durationMs per phase summed over its
        micro-batches, and the wall time outside them (query start and stop)."""
        progress = query.recentProgress  # type: ignore[attr-defined]
        totals: dict[str, float] = {"batches": float(len(progress))}
        for p in progress:
            for phase, ms in p["durationMs"].items():
                totals[phase] = totals.get(phase, 0.0) + ms
        wall_ms = (time.perf_counter() - started) * 1000
        totals["outside batches"] = wall_ms - totals.get("triggerExecution", 0.0)
        totals["rows in batch 0"] = float(progress[0]["numInputRows"]) if progress else 0.0
        phases.setdefault(name, []).append(totals)

    def record_steady(name: str, query: object) -> None:
        """Rows and time of the data batches after the first (module docstring)."""
        batches = [p for p in query.recentProgress if p["numInputRows"]]  # type: ignore[attr-defined]
        if len(batches) != n // args.batch_rows:
            raise RuntimeError(
                f"{name}: {len(batches)} data batches "
                f"({[p['numInputRows'] for p in batches]}), expected {n // args.batch_rows}"
            )

        def started_at(p: dict) -> float:
            return datetime.datetime.fromisoformat(p["timestamp"]).timestamp()

        later = batches[1:]
        wall = (
            started_at(later[-1])
            + later[-1]["durationMs"]["triggerExecution"] / 1000
            - started_at(later[0])
        )
        spark_s = sum(p["durationMs"]["triggerExecution"] for p in later) / 1000
        rows_ = sum(p["numInputRows"] for p in later)
        steady.setdefault(name, []).append((rows_, wall, spark_s))

    def run_stream(name: str, source: Any, steady_state: bool = False) -> None:
        """One AvailableNow query of `source` (a streaming DataFrame) into the noop sink, query
        start included, its phases recorded under `name` (and with `steady_state`, the rows and
        time of its data batches after the first)."""
        started = time.perf_counter()
        query = (
            source.writeStream.format("noop")
            .option("checkpointLocation", str(work / f"ck-{time.monotonic_ns()}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        record_phases(name, query, started)
        if steady_state:
            record_steady(name, query)

    def stream_log() -> None:
        source = (
            spark.readStream.format("epochlog")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", read_topic)
            .option("startingOffsets", "earliest")
            .load()
        )
        run_stream("streaming read: epochlog (AvailableNow)", source)

    def stream_parquet() -> None:
        source = spark.readStream.schema(rows.schema).parquet(parquet_dir)
        run_stream("streaming read: Parquet (AvailableNow)", source)

    def stream_one_row() -> None:
        source = spark.readStream.format("bench_one_row").load()
        run_stream("streaming read: 1-row Python source (floor)", source)

    def steady_log() -> None:
        source = (
            spark.readStream.format("epochlog")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", steady_topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(args.batch_rows))
            .load()
        )
        run_stream(STEADY_LOG, source, steady_state=True)

    def steady_parquet() -> None:
        source = (
            spark.readStream.schema(rows.schema)
            .option("maxFilesPerTrigger", str(args.partitions))
            .parquet(parquet_files_dir)
        )
        run_stream(STEADY_PARQUET, source, steady_state=True)

    with console.status("filling the read topic and the Parquet files (warm-up) ..."):
        write_log(read_topic)
        write_parquet_files()
        write_steady_topic()
        if not args.steady_only:
            write_parquet()
            write_dropping_sink()
            read_log()
            read_parquet()
            read_arrow_floor()
            stream_parquet()
            stream_log()
        steady_parquet()
        steady_log()
        phases.clear()  # the warm-up's phases are not part of the table
        steady.clear()
    cases: list[tuple[str, Callable[[], None]]] = [
        ("write: Parquet", write_parquet),
        ("write: epochlog", lambda: write_log(new_topic())),
        (WRITE_FLOOR, write_dropping_sink),
        ("batch read: Parquet", read_parquet),
        ("batch read: epochlog", read_log),
        (BATCH_FLOOR, read_arrow_floor),
        ("streaming read: Parquet (AvailableNow)", stream_parquet),
        ("streaming read: epochlog (AvailableNow)", stream_log),
        ("streaming read: 1-row Python source (floor)", stream_one_row),
        (STEADY_PARQUET, steady_parquet),
        (STEADY_LOG, steady_log),
    ]
    if args.steady_only:
        cases = cases[-2:]
    broker_pid = next(iter(cluster.brokers.values())).pid
    assert broker_pid is not None
    cpu: dict[str, list[float]] = {}  # case -> the machine's CPU seconds per round
    broker_cpu: dict[str, list[float]] = {}  # case -> the broker's CPU seconds per round
    for round_ in range(args.repeat):
        for name, fn in cases:  # alternate the cases, so load changes hit them alike
            with console.status(f"round {round_ + 1}/{args.repeat}: {name} ..."):
                machine, broker = machine_cpu_seconds(), server_cpu.cpu_seconds([broker_pid])
                results.setdefault(name, []).append(timed(fn))
                cpu.setdefault(name, []).append(machine_cpu_seconds() - machine)
                broker_used = server_cpu.cpu_seconds([broker_pid]) - broker
                broker_cpu.setdefault(name, []).append(broker_used)
    latencies = end_to_end_latency(
        spark, bootstrap, new_topic, args.partitions, work, args.latency_seconds
    )
    spark.stop()

    def rate(name: str) -> float:
        if name in steady:
            return statistics.median(r / wall for r, wall, _ in steady[name])
        return n / statistics.median(results[name])

    anchors = {
        "write: epochlog": "write: Parquet",
        WRITE_FLOOR: "write: Parquet",
        "batch read: epochlog": "batch read: Parquet",
        BATCH_FLOOR: "batch read: Parquet",
        "streaming read: epochlog (AvailableNow)": "streaming read: Parquet (AvailableNow)",
        STEADY_LOG: STEADY_PARQUET,
    }
    workers = "worker_python()" if args.worker_python else "PYSPARK_PYTHON=sys.executable"
    table = Table(
        title=f"Spark data source, {n:,} rows of 116 bytes, local[2], 1 broker, {workers}"
    )
    n_batches = n // args.batch_rows
    table.add_column("case")
    table.add_column("rows/s (median)", justify="right")
    table.add_column("runs (s)", justify="right")
    table.add_column("vs Parquet", justify="right")
    table.add_column("CPU-s, all processes", justify="right")
    for name, _ in cases:
        ratio = f"{rate(name) / rate(anchors[name]):.2f}x" if name in anchors else "anchor"
        used = f"{statistics.median(cpu[name]):.2f}"
        if name in steady:  # the wall time of the data batches after the first
            runs = " ".join(f"{wall:.2f}" for _, wall, _ in steady[name])
            table.add_row(name, f"{rate(name):,.0f}", runs, ratio, used)
            continue
        runs = " ".join(f"{t:.2f}" for t in results[name])
        if "1-row" in name:  # one row: its time, not a rate, is the point
            table.add_row(name, "-", runs, "(1 row)", used)
            continue
        table.add_row(name, f"{rate(name):,.0f}", runs, ratio, used)
    console.print(table)
    if not args.steady_only:
        written = statistics.median(broker_cpu["write: epochlog"])
        console.print(
            f"writes: the broker used {written:.2f} CPU-s of the epochlog write's "
            f"{statistics.median(cpu['write: epochlog']):.2f} (median; "
            f"{os.cpu_count()} cores here, shared with Spark's tasks); a Python sink that "
            f"drops its rows writes at {rate(WRITE_FLOOR) / rate('write: Parquet'):.2f}x of "
            "Parquet: the most any Python sink gets"
        )
        console.print(
            "end-to-end streaming reads (AvailableNow) are wall time including query start "
            "(both pay it); the epochlog streaming read vs the Parquet batch read: "
            f"{rate('streaming read: epochlog (AvailableNow)') / rate('batch read: Parquet'):.2f}x"
        )
        floor = statistics.median(results["streaming read: 1-row Python source (floor)"])
        parquet_stream = statistics.median(results["streaming read: Parquet (AvailableNow)"])
        console.print(
            f"a 1-row Python streaming source takes {floor:.2f} s here: at best "
            f"{parquet_stream / floor:.2f}x of the Parquet streaming read for any Python source"
        )
    processed = {
        name: statistics.median(r / s for r, _, s in steady[name])
        for name in (STEADY_LOG, STEADY_PARQUET)
    }
    console.print(
        f"steady state: {n_batches} micro-batches of {args.batch_rows:,} rows per query "
        f"(maxOffsetsPerTrigger / maxFilesPerTrigger={args.partitions} of files of "
        f"{file_rows:,} rows); rate = rows of batches 2..{n_batches} over the wall time from "
        "the start of batch 2 to the end of the last, runs (s) = that wall time. Spark's "
        "processedRowsPerSecond over the same batches: epochlog "
        f"{processed[STEADY_LOG]:,.0f}, Parquet {processed[STEADY_PARQUET]:,.0f} rows/s = "
        f"{processed[STEADY_LOG] / processed[STEADY_PARQUET]:.2f}x"
    )
    if not args.steady_only:
        console.print(
            "a Python batch source handing Spark ready Arrow batches of the same rows reads at "
            f"{rate(BATCH_FLOOR) / rate('batch read: Parquet'):.2f}x of Parquet here: the most "
            "any Python batch source gets"
        )
    console.print(
        "targets (issue 18): batch read and write >= 0.8x Parquet, steady streaming read >= "
        "0.8x, AvailableNow read >= 0.5x, end to end p50 < 2 s"
    )
    keys = ["batches", "rows in batch 0", "outside batches", "triggerExecution"]
    keys += sorted({k for rounds in phases.values() for t in rounds for k in t} - set(keys))
    detail = Table(title="streaming reads: where the time went (ms, median of the rounds)")
    detail.add_column("phase")
    for name in phases:
        detail.add_column(name.removeprefix("streaming read: "), justify="right")
    for key in keys:
        cells = [statistics.median(t.get(key, 0.0) for t in phases[name]) for name in phases]
        detail.add_row(key, *(f"{c:,.0f}" for c in cells))
    console.print(detail)
    console.print(
        "phases are Spark's durationMs summed over a query's micro-batches; 'outside batches' "
        "is the wall time before the first and after the last (query start, source start-up)"
    )
    if latencies:
        ordered = sorted(latencies)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        console.print(
            f"end to end, produced -> in the sink topic, in a running query: p50 "
            f"{statistics.median(ordered):.2f} s, p90 {p90:.2f} s, "
            f"max {ordered[-1]:.2f} s over {len(ordered)} records (target: p50 < 2 s)"
        )
    console.print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def end_to_end_latency(
    spark: Any,
    bootstrap: str,
    new_topic: Callable[[], str],
    partitions: int,
    work: Path,
    seconds: float,
) -> list[float]:
    """Seconds from a record's send to its arrival in the sink topic of a running query,
    for every record sent after the query's first batch (module docstring)."""
    import threading

    from epochlog.client import Consumer, Producer

    if seconds <= 0:
        return []
    source_topic, sink_topic = new_topic(), new_topic()
    query = (
        spark.readStream.format("epochlog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", source_topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("epochlog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", sink_topic)
        .option("checkpointLocation", str(work / f"ck-latency-{time.monotonic_ns()}"))
        .start()
    )
    arrived: dict[bytes, float] = {}
    sent: dict[bytes, float] = {}
    done = threading.Event()

    def consume() -> None:
        with Consumer({"bootstrap.servers": bootstrap, "fetch.max.wait.ms": "10"}) as consumer:
            consumer.assign([(sink_topic, p) for p in range(partitions)])
            consumer.seek_to_beginning()
            while not done.is_set():
                for record in consumer.poll(0.1):
                    arrived.setdefault(record.key or b"", time.time())

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not query.recentProgress and time.monotonic() < deadline:
            time.sleep(0.1)  # the query has started and run its first (empty) batch
        with Producer({"bootstrap.servers": bootstrap, "linger.ms": "0"}) as producer:
            end = time.monotonic() + seconds
            i = 0
            while time.monotonic() < end:
                key = str(i).encode()
                sent[key] = time.time()
                producer.send(source_topic, b"x" * 100, key)
                producer.flush()
                i += 1
                time.sleep(0.1)
        deadline = time.monotonic() + 60
        while len(arrived) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        done.set()
        query.stop()
        reader.join(10)
    if len(arrived) < len(sent):
        raise RuntimeError(f"end to end: {len(sent) - len(arrived)} of {len(sent)} never arrived")
    return [arrived[k] - t for k, t in sent.items()]


BATCH_FLOOR = "batch read: Python source of ready Arrow batches (floor)"
WRITE_FLOOR = "write: Python sink that drops its rows (floor)"
STEADY_PARQUET = "steady streaming read: Parquet (maxFilesPerTrigger)"
STEADY_LOG = "steady streaming read: epochlog (maxOffsetsPerTrigger)"


if __name__ == "__main__":
    raise SystemExit(main())
