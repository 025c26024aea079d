"""Writing to a log with Spark: at-least-once batch and streaming writers.

As Spark's Kafka sink: every task produces its rows (value, key, headers, topic, partition,
timestamp; the topic option overrides the column; without a timestamp the record gets the time
its Arrow batch is encoded) with a cached idempotent sender (acks=all by default) and
returns only after every record is acknowledged, so a successful task lost nothing. A task that
fails after some records were acknowledged is re-executed and writes them again: duplicates are
possible, loss is not. For streaming writes without duplicates see `exactly_once`.

Speed: each Arrow batch Spark hands over is split by target partition (`rows.route_batch`) and
encoded into record batches by numpy (`arrow_records.encode_records`), which the sender
(`raw_clients.BatchSender`) produces in order per partition while the task encodes the next
Arrow batch; no record becomes a Python object unless it has headers.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from epochlog.spark.arrow_records import encode_records
from epochlog.spark.clients import batch_sender, forget_batch_sender
from epochlog.spark.options import SinkOptions
from epochlog.spark.rows import route_batch

MAX_PENDING_BATCHES = 64  # record batches (<= batch.size each) a task may have unacknowledged


@dataclass
class WrittenRecords(WriterCommitMessage):
    records: int


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row and wait for all acknowledgements; how many records."""
    sender = batch_sender(options.client)
    counts: dict[str, int] = {}
    sticky: dict[str, int] = {}

    def partition_count(topic: str) -> int:
        if topic not in counts:
            counts[topic] = sender.partition_count(topic)
        return counts[topic]

    written = 0
    pending: deque = deque()
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            now = int(time.time() * 1000)
            stamps = record_timestamps(batch, now)
            rows: list[np.ndarray] = []
            routed = route_batch(
                batch, options.topic, partition_count, sticky, sender.max_request_size, rows
            )
            for (tp, keys, values, headers), selected in zip(routed, rows, strict=True):
                encoded = encode_records(
                    keys,
                    values,
                    now if stamps is None else stamps[selected],
                    headers=headers,
                    max_batch_bytes=sender.max_batch_bytes,
                    compression=sender.compression,
                )
                pending.extend(sender.send(tp, encoded))
            written += batch.num_rows
            while len(pending) > MAX_PENDING_BATCHES:
                pending.popleft().result()
        while pending:
            pending.popleft().result()
    except BaseException:
        forget_batch_sender(options.client)  # it may hold this task's batches
        raise
    return written


def record_timestamps(batch: pa.RecordBatch, now: int) -> np.ndarray | None:
    """The records' timestamps (ms) from the sink's optional `timestamp` column, as Spark's
    Kafka sink; a null timestamp is `now`. None without the column."""
    names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    if "timestamp" not in names:
        return None
    micros = batch.column(names["timestamp"]).cast(pa.timestamp("us")).cast(pa.int64())
    ms = np.floor_divide(micros.fill_null(now * 1000).to_numpy(zero_copy_only=False), 1000)
    if (ms < 0).any():
        raise ValueError(f"column 'timestamp': {int(ms.min())} ms is before 1970 (Kafka refuses)")
    return ms


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
