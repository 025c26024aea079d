"""The exactly-once stream writer Spark calls: each task writes its rows in a transaction left
open (`txn_clients.write_in_transaction`), the driver ends them (`txn_clients.end_transactions`).
How and why: `exactly_once`."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from epochlog.spark.exactly_once import TaskTransaction, transactional_id, transactional_id_prefix
from epochlog.spark.options import SinkOptions
from epochlog.spark.txn_clients import end_transactions, write_in_transaction


class ExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskTransaction:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise RuntimeError("exactly-once writes run in Spark tasks (no TaskContext)")
        value = context.getLocalProperty("streaming.sql.batchId")
        if value is None:
            raise RuntimeError("exactly-once writes need a streaming query (no micro-batch id)")
        prefix = transactional_id_prefix(self.options)
        return write_in_transaction(
            self.options,
            transactional_id(prefix, context.partitionId()),
            int(value),
            prefix,
            iterator,
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        end_transactions(self.options.client, _open(messages), commit=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        end_transactions(self.options.client, _open(messages), commit=False)


def _open(messages: list[WriterCommitMessage | None]) -> list[TaskTransaction]:
    return [m for m in messages if isinstance(m, TaskTransaction) and m.needs_end]
