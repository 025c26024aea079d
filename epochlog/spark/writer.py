"""Writing to a log with Spark: at-least-once batch and streaming writers.

As Spark's Kafka sink: every task produces its rows (value, key, headers, topic, partition;
the topic option overrides the column) with a cached idempotent producer (acks=all) and returns
only after every record is acknowledged, so a successful task lost nothing. A task that fails
after some records were acknowledged is re-executed and writes them again: duplicates are
possible, loss is not. For streaming writes without duplicates see `exactly_once`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from epochlog.spark.clients import BulkProducer, wait_acked
from epochlog.spark.options import SinkOptions
from epochlog.spark.rows import batch_to_records

FLUSH_EVERY_RECORDS = 200_000  # bounds the acknowledgement futures a task holds


@dataclass
class WrittenRecords(WriterCommitMessage):
    records: int


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row and wait for all acknowledgements; how many records."""
    producer = BulkProducer.cached(options.client)
    written = 0
    futures: list = []
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            futures.extend(producer.send_all(batch_to_records(batch, options.topic)))
            if len(futures) >= FLUSH_EVERY_RECORDS:
                producer.flush()
                written += len(wait_acked(futures))
                futures = []
        producer.flush()
        written += len(wait_acked(futures))
    except BaseException:
        BulkProducer.forget(options.client)  # its buffers may hold this task's records
        raise
    return written


class EpochlogBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
        return WrittenRecords(produce_batches(self.options, iterator))


class EpochlogStreamWriter(DataSourceStreamArrowWriter):
    """At-least-once streaming writes (Spark's Kafka sink semantics)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
        return WrittenRecords(produce_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass
