"""Exactly-once streaming writes through Kafka transactions: tasks write, the driver commits.

How it works (the decisions here are sans-I/O; `txn_clients` does the wire exchange and
`exactly_once_writer` is the Spark writer that runs them):

1. Each write task of micro-batch N, Spark partition p, uses the transactional id
   `<prefix>-<p>` (`transactional_id`; prefix: the `transactionalIdPrefix` option, else
   `epochlog-spark-<sink id>`, the sink id a hash of the checkpoint location). The same id for
   every attempt and every batch of partition p, so that InitProducerId bumps the epoch: a
   retried task fences a zombie attempt (its produce and its EndTxn are refused), and whatever a
   failed attempt or a crashed run left open is aborted by the coordinator.
2. The task asks for the batch id last committed for p (`committed_batch`: an OffsetFetch of
   the group named like the transactional id, require_stable). If it is N or later, this batch's
   rows for p are already in the log (a driver that died half-way through step 4): the task
   writes nothing (`already_committed`). Otherwise it writes its rows to the partition leaders
   (AddPartitionsToTxn before the first batch to a partition, transactional Produce, acks=all),
   adds the group to its transaction (AddOffsetsToTxn) and commits the offset `N` with metadata
   naming the batch (TxnOffsetCommit, `marker_offsets`): the marker becomes visible exactly when
   the data does. It returns `TaskTransaction` (id, producer id, epoch) WITHOUT committing.
3. Rows never pass through the driver, and nothing needs shared storage.
4. The driver's `commit(messages, batchId)` sends EndTxn(commit) with each task's id, producer id
   and epoch to its transaction coordinator (`end_txn_action` says what each answer means). A
   fenced transaction (a newer attempt of the task ran) fails the commit: the batch fails, and a
   re-run writes the partition again. `abort` aborts the transactions it is given; pyspark hands
   it None messages, so open transactions are then aborted by the next attempt's InitProducerId
   or by the coordinator after transaction.timeout.ms.

Consumers that read with isolation.level=read_committed see each batch's rows once, all at once;
read_uncommitted consumers may also see the rows of aborted attempts, as with any Kafka
transactional producer. Speculative execution must stay off (Spark's default for streaming): a
speculative copy of a task fences the attempt whose message Spark may keep.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import WriterCommitMessage

from epochlog.protocol.errors import ErrorCode
from epochlog.spark.options import SinkOptions

MARKER_FORMAT = "epochlog-spark-batch"  # the committed offset metadata's "format" field


@dataclass
class TaskTransaction(WriterCommitMessage):
    """What a write task hands the driver: its open transaction, not yet committed."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    batch_id: int
    records: int
    already_committed: bool = False  # an earlier run committed this batch for this partition

    @property
    def needs_end(self) -> bool:
        """Whether the driver has a transaction to end (a task with no rows has none)."""
        return self.records > 0 and not self.already_committed


def sink_id(location: str) -> str:
    """A short stable id of the sink, from its checkpoint (or staging) location."""
    path = location.removeprefix("file://").removeprefix("file:")
    return hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:16]


def transactional_id_prefix(options: SinkOptions) -> str:
    if options.transactional_id_prefix is not None:
        return options.transactional_id_prefix
    assert options.sink_location is not None, "parse_sink_options requires one for exactly-once"
    return f"epochlog-spark-{sink_id(options.sink_location)}"


def transactional_id(prefix: str, partition_id: int) -> str:
    """One id per (sink, Spark partition): every attempt and batch of p shares it (see above)."""
    return f"{prefix}-{partition_id}"


def marker_offsets(topic: str, batch_id: int, sink: str) -> dict[tuple[str, int], tuple[int, str]]:
    """The offset commit that records batch `batch_id` as written: (topic, 0) -> (batch id,
    metadata). Kafka keys offsets by an existing topic-partition, so it is the first topic the
    task wrote to; the batch id is in the offset and, with the sink, in the metadata."""
    metadata = json.dumps({"format": MARKER_FORMAT, "batch": batch_id, "sink": sink})
    return {(topic, 0): (batch_id, metadata)}


def committed_batch(committed: Mapping[tuple[str, int], tuple[int, str | None]]) -> int | None:
    """The last batch id the group's committed offsets record (None: no batch yet). Offsets
    whose metadata is not ours are ignored."""
    found: int | None = None
    for offset, metadata in committed.values():
        try:
            data = json.loads(metadata or "")
        except json.JSONDecodeError:
            continue
        if not isinstance(data, dict) or data.get("format") != MARKER_FORMAT:
            continue
        batch = data.get("batch")
        if isinstance(batch, int) and batch == offset and (found is None or batch > found):
            found = batch
    return found


def already_committed(last_committed: int | None, batch_id: int) -> bool:
    return last_committed is not None and last_committed >= batch_id


class TxnAction(enum.Enum):
    """What to do with an answer of the transaction (or group) coordinator."""

    DONE = "done"
    RETRY = "retry after retry.backoff.ms"
    FIND_COORDINATOR = "look the coordinator up again, then retry"
    FENCED = "fenced: a newer attempt of the task took the transactional id"
    FAIL = "fail"


_TXN_ACTIONS = {
    ErrorCode.NONE: TxnAction.DONE,
    ErrorCode.CONCURRENT_TRANSACTIONS: TxnAction.RETRY,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: TxnAction.RETRY,
    ErrorCode.REQUEST_TIMED_OUT: TxnAction.RETRY,
    ErrorCode.NETWORK_EXCEPTION: TxnAction.RETRY,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: TxnAction.RETRY,
    ErrorCode.UNSTABLE_OFFSET_COMMIT: TxnAction.RETRY,
    ErrorCode.NOT_COORDINATOR: TxnAction.FIND_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: TxnAction.FIND_COORDINATOR,
    ErrorCode.PRODUCER_FENCED: TxnAction.FENCED,
    ErrorCode.INVALID_PRODUCER_EPOCH: TxnAction.FENCED,
    ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: TxnAction.FENCED,
}


def txn_action(error: ErrorCode) -> TxnAction:
    """Kafka's TransactionManager's reading of the coordinators' errors, as one table."""
    return _TXN_ACTIONS.get(error, TxnAction.FAIL)


class TransactionFencedError(RuntimeError):
    """A task's transaction was fenced by a newer attempt: this batch must be re-run."""
