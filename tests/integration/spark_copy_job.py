"""A Spark driver of its own for the sink's failure tests: copies one topic to another.

    python tests/integration/spark_copy_job.py MASTER BOOTSTRAP SOURCE SINK CHECKPOINT FORMAT \\
        [option=value ...]

Reads SOURCE from the earliest offsets (maxOffsetsPerTrigger=60), writes its values to SINK
with FORMAT (`epochlog`, or `epochlog_faulty` with the fault options of spark_fixtures) and
deliveryGuarantee=exactly-once, trigger availableNow, on CHECKPOINT. It exits 0 when the query
ended normally and 1 when it failed. A process of its own because a test kills it (the driver
dies) or needs a master the tests' shared session does not have (`local[2,2]`: a failed task
is retried).
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    master, bootstrap, source, sink, checkpoint, fmt, *rest = argv
    from tests.integration.spark_fixtures import start_spark

    spark = start_spark(master)
    writer = (
        spark.readStream.format("epochlog")  # type: ignore[attr-defined]
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "60")
        .load()
        .selectExpr("value")
        .writeStream.format(fmt)
        .option("bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("deliveryGuarantee", "exactly-once")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
    )
    for option in rest:
        key, _, value = option.partition("=")
        writer = writer.option(key, value)
    query = writer.start()
    try:
        query.awaitTermination()
    except Exception as exc:  # StreamingQueryException: the query failed
        print(f"query failed: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
