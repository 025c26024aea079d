"""Exactly-once writes from `foreachBatch`: the way to write an aggregation's updates to a topic.

PySpark refuses `outputMode("update")` for a Python data source's streaming sink (its Python
streaming writers support append and complete only), so `df.writeStream.format("epochlog")` cannot
write the changed rows of a streaming aggregation. `foreachBatch` takes every output mode, and
hands the function each micro-batch's rows with the batch id:

    def write_counts(df, batch_id):
        write_batch_exactly_once(df.selectExpr("key", "CAST(count AS STRING) AS value"), batch_id,
                                 {"kafka.bootstrap.servers": servers, "topic": "counts",
                                  "transactionalIdPrefix": "counts-sink"})

    counts.writeStream.outputMode("update").foreachBatch(write_counts)
          .option("checkpointLocation", ckpt).start()

Same machinery as the exactly-once sink (`exactly_once`): the task of Spark partition p writes
its rows in a transaction of the id `<prefix>-<p>`, with the batch marker (batch N) committed in
the same transaction, and leaves it open; the driver commits every task's transaction. The tasks
run as one `mapInArrow` job over the batch's DataFrame (each returns its open transaction as a
JSON row), then this function, on the driver, sends the EndTxns. A batch Spark runs again after a
failure (the same batch id) writes nothing for the partitions whose marker already says N, and the
others' leftover transactions are aborted by their InitProducerId: read with
isolation.level=read_committed, each batch's rows are there once.

The prefix names the transactions and the markers, so it must stay the same across restarts of
one query and differ between sinks: `transactionalIdPrefix`, or `checkpointLocation` (the query's,
hashed as the sink does). Options are the sink's (`kafka.*`, `topic`, `transactionTimeoutMs`);
`deliveryGuarantee` is exactly-once here, and any other value is refused.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from epochlog.spark.exactly_once import TaskTransaction, transactional_id, transactional_id_prefix
from epochlog.spark.options import EXACTLY_ONCE, OptionError, SinkOptions, parse_sink_options

TRANSACTION_COLUMN = "transaction"  # the JSON of each task's TaskTransaction


@dataclasses.dataclass(frozen=True)
class BatchWritten:
    """What `write_batch_exactly_once` did for one batch."""

    batch_id: int
    records: int  # rows written (and committed) by this call
    partitions: int  # Spark partitions (tasks) of the batch
    already_committed: int  # tasks whose rows an earlier run of this batch id had committed


def foreach_batch_options(options: Mapping[str, str], columns: Mapping[str, str]) -> SinkOptions:
    """The sink options for a foreachBatch write, checked on the driver (OptionError names the
    option or column at fault)."""
    opts = {k.lower(): str(v) for k, v in options.items()}
    guarantee = opts.get("deliveryguarantee", EXACTLY_ONCE).strip().lower()
    if guarantee != EXACTLY_ONCE:
        raise OptionError(
            "deliveryGuarantee",
            f"{guarantee!r}: write_batch_exactly_once writes exactly-once; for at-least-once use "
            "df.write.format('epochlog')",
        )
    if not opts.get("transactionalidprefix") and not opts.get("checkpointlocation"):
        raise OptionError(
            "transactionalIdPrefix",
            "write_batch_exactly_once needs a transactionalIdPrefix (or the query's "
            "checkpointLocation) to name its transactions, the same on every restart",
        )
    opts["deliveryguarantee"] = EXACTLY_ONCE
    return parse_sink_options(opts, columns, streaming=True)


def task_transactions(rows: list[Any]) -> list[TaskTransaction]:
    """The collected rows of the write job, back into TaskTransactions."""
    return [TaskTransaction(**json.loads(row[TRANSACTION_COLUMN])) for row in rows]


def _write_task(
    options: SinkOptions, batch_id: int, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor side: this partition's rows in its transaction, left open; one row out, the
    transaction's JSON."""
    from pyspark import TaskContext

    from epochlog.spark.txn_clients import write_in_transaction

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("write_batch_exactly_once runs its writes in Spark tasks")
    prefix = transactional_id_prefix(options)
    txn = write_in_transaction(
        options, transactional_id(prefix, context.partitionId()), batch_id, prefix, batches
    )
    text = json.dumps(dataclasses.asdict(txn))
    yield pa.RecordBatch.from_pydict({TRANSACTION_COLUMN: [text]})


def write_batch_exactly_once(
    df: Any, batch_id: int, options: Mapping[str, str] | None = None, **more: str
) -> BatchWritten:
    """Write `df` (a foreachBatch micro-batch: Spark's Kafka sink columns, value required) to
    the topic exactly once for `batch_id`; returns once every task's transaction is committed.
    Options as a mapping and/or keyword arguments (module docstring)."""
    if not isinstance(batch_id, int) or batch_id < 0:
        raise ValueError(f"write_batch_exactly_once: batch_id {batch_id!r} is not an int >= 0")
    merged = {**(options or {}), **more}
    columns = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    sink = foreach_batch_options(merged, columns)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _write_task(sink, batch_id, batches)

    rows = df.mapInArrow(task, f"{TRANSACTION_COLUMN} string").collect()
    transactions = task_transactions(rows)
    from epochlog.spark.txn_clients import end_transactions

    end_transactions(sink.client, [t for t in transactions if t.needs_end], commit=True)
    return BatchWritten(
        batch_id=batch_id,
        records=sum(t.records for t in transactions if not t.already_committed),
        partitions=len(transactions),
        already_committed=sum(1 for t in transactions if t.already_committed),
    )
