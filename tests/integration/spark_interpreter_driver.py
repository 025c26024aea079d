"""A Spark driver for test_spark_worker_interpreter, run as a subprocess with its own environment
(PYSPARK_PYTHON and PATH are read when the SparkContext starts, so each case needs a fresh one).

    python spark_interpreter_driver.py <bootstrap> <topic>

Registers format("epochlog") with epochlog.spark.register, reads the topic in batch and prints
one JSON line: {"python": what the registration chose, "rows": n} or {"error": message}.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

from epochlog.spark.worker_interpreter import choose_for


def main(bootstrap: str, topic: str) -> None:
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import epochlog.spark

    chosen = choose_for(spark).python
    epochlog.spark.register(spark)
    try:
        df = (
            spark.read.format("epochlog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .load()
        )
        print(json.dumps({"python": chosen, "rows": df.count()}), flush=True)
    except Exception as e:  # the test reads the message
        print(json.dumps({"python": chosen, "error": str(e)}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
