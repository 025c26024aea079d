"""epochlog on Apache Spark: the PySpark data source `format("epochlog")`.

It mirrors Spark's built-in Kafka source and sink (same schema, same option names); see
`source` for the entry point and README.md for the reference pipeline. Needs pyspark >= 4.2
(admission control and Trigger.AvailableNow for Python sources) and pyarrow.

Optional, before the session starts: `os.environ["PYSPARK_PYTHON"] = worker_python()` spares
every Python process Spark starts (one per streaming query for a Python source) compiling
pyspark from its zip, about 1.2 s a query here (`worker_python`).
"""

from __future__ import annotations

from typing import Any

from epochlog.spark.options import parse_duration_ms
from epochlog.spark.source import EpochlogDataSource
from epochlog.spark.worker_python import worker_python

__all__ = ["EpochlogDataSource", "register", "worker_python"]


def register(spark: Any) -> None:
    """Register format("epochlog") in this SparkSession, with the session's
    spark.network.timeout as kafkaConsumer.pollTimeoutMs's default (as Spark's Kafka source)."""
    timeout = spark.conf.get("spark.network.timeout", None)
    if timeout is None:
        spark.dataSource.register(EpochlogDataSource)
        return
    ms = network_timeout_ms(timeout)
    # A class made here is pickled by value, so the timeout travels to Spark's Python workers.
    source = type("EpochlogDataSource", (EpochlogDataSource,), {"network_timeout_ms": ms})
    spark.dataSource.register(source)


def network_timeout_ms(text: str) -> int:
    """spark.network.timeout in milliseconds: a bare number is seconds, as in Spark."""
    value = str(text).strip()
    return parse_duration_ms("spark.network.timeout", value + "s" if value.isdigit() else value)
