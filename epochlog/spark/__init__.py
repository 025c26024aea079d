"""epochlog on Apache Spark: the PySpark data source `format("epochlog")`.

It mirrors Spark's built-in Kafka source and sink (same schema, same option names); see
`source` for the entry point and README.md for the reference pipeline. Needs pyspark >= 4.2
(admission control and Trigger.AvailableNow for Python sources) and pyarrow.
"""

from __future__ import annotations

from typing import Any

from epochlog.spark.source import EpochlogDataSource

__all__ = ["EpochlogDataSource", "register"]


def register(spark: Any) -> None:
    """Register format("epochlog") in this SparkSession."""
    spark.dataSource.register(EpochlogDataSource)
