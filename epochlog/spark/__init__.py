"""epochlog on Apache Spark: the PySpark data source `format("epochlog")`.

It mirrors Spark's built-in Kafka source and sink (same schema, same option names); see
`source` for the entry point and README.md for the reference pipeline. Needs pyspark >= 4.2
(admission control and Trigger.AvailableNow for Python sources) and pyarrow.

`register(spark)` runs the source's Python processes through `worker_python()`'s script when
they run the driver's own interpreter, sparing each (one per streaming query for a Python
source) compiling pyspark from its zip, about 1 s a query here. For all of Spark's Python
workers (UDFs too), before the session starts: `os.environ["PYSPARK_PYTHON"] = worker_python()`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from epochlog.spark.options import parse_duration_ms
from epochlog.spark.source import EpochlogDataSource
from epochlog.spark.worker_python import worker_python

if TYPE_CHECKING:
    from epochlog.spark.foreach_batch import BatchWritten

__all__ = ["EpochlogDataSource", "register", "worker_python", "write_batch_exactly_once"]


def register(spark: Any) -> None:
    """Register format("epochlog") in this SparkSession, with the session's
    spark.network.timeout as kafkaConsumer.pollTimeoutMs's default (as Spark's Kafka source).
    With no PYSPARK_PYTHON set and a `python3` on PATH that is not this interpreter (a
    virtualenv's python run without activating it), the source's workers run this interpreter
    (`worker_interpreter`); when they run the driver's interpreter, they run it through
    `worker_python()`'s script (pyspark from its bytecode)."""
    from epochlog.spark.worker_interpreter import register_with_worker_python

    source: type[EpochlogDataSource] = EpochlogDataSource
    timeout = spark.conf.get("spark.network.timeout", None)
    if timeout is not None:
        # A class made here is pickled by value, so the timeout travels to Spark's workers.
        source = type(
            "EpochlogDataSource",
            (EpochlogDataSource,),
            {"network_timeout_ms": network_timeout_ms(timeout)},
        )
    choice = register_with_worker_python(spark, source)
    logging.getLogger(__name__).info("format('epochlog') registered: %s", choice.reason)


def network_timeout_ms(text: str) -> int:
    """spark.network.timeout in milliseconds: a bare number is seconds, as in Spark."""
    value = str(text).strip()
    return parse_duration_ms("spark.network.timeout", value + "s" if value.isdigit() else value)


def write_batch_exactly_once(
    df: Any, batch_id: int, options: dict[str, str] | None = None, **more: str
) -> BatchWritten:
    """foreachBatch's way to write any output mode (update included) to a topic exactly once by
    batch id; see `foreach_batch` (imported on use: it needs pyarrow)."""
    from epochlog.spark.foreach_batch import write_batch_exactly_once as write

    return write(df, batch_id, options, **more)
