"""The exactly-once sink's decisions (`epochlog/spark/exactly_once.py`), without I/O."""

from __future__ import annotations

import json

from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder, decode_batch, stamp_producer
from epochlog.spark.exactly_once import (
    TaskTransaction,
    TxnAction,
    already_committed,
    committed_batch,
    marker_offsets,
    sink_id,
    transactional_id,
    transactional_id_prefix,
    txn_action,
)
from epochlog.spark.options import EXACTLY_ONCE, parse_sink_options

BOOT = {"bootstrap.servers": "h:9092"}


def sink(**options: str):  # noqa: ANN201
    return parse_sink_options(
        {**BOOT, "topic": "t", "deliveryguarantee": EXACTLY_ONCE, **options},
        {"value": "binary"},
        streaming=True,
    )


def test_every_attempt_and_batch_of_a_partition_shares_one_transactional_id() -> None:
    prefix = transactional_id_prefix(sink(checkpointlocation="/ck/q1"))
    assert prefix == f"epochlog-spark-{sink_id('/ck/q1')}"
    assert transactional_id(prefix, 3) == transactional_id(prefix, 3) == f"{prefix}-3"
    assert transactional_id(prefix, 3) != transactional_id(prefix, 4)
    other = transactional_id_prefix(sink(checkpointlocation="/ck/q2"))
    assert other != prefix  # two queries never fence each other
    assert transactional_id_prefix(sink(checkpointlocation="/x", transactionalidprefix="p")) == "p"
    # stagingLocation, the old scheme's option, still names the sink
    assert transactional_id_prefix(sink(checkpointlocation="/x", staginglocation="/s")).endswith(
        sink_id("/s")
    )


def test_the_batch_marker_reads_back_as_its_batch() -> None:
    marker = marker_offsets("out", 12, "s")
    assert list(marker) == [("out", 0)]
    assert committed_batch(marker) == 12
    assert committed_batch({}) is None
    assert committed_batch({("out", 0): (5, "not json"), ("x", 0): (9, None)}) is None
    forged = json.dumps({"format": "epochlog-spark-batch", "batch": 4})
    assert committed_batch({("out", 0): (7, forged)}) is None  # offset and metadata disagree
    both = {**marker_offsets("a", 3, "s"), **marker_offsets("b", 8, "s")}
    assert committed_batch(both) == 8


def test_a_batch_already_committed_is_skipped_and_a_newer_one_written() -> None:
    assert not already_committed(None, 0)
    assert already_committed(4, 4) and already_committed(5, 4)
    assert not already_committed(3, 4)


def test_only_open_transactions_with_rows_reach_the_driver_s_end_txn() -> None:
    assert TaskTransaction("t-0", 1, 0, 2, 10).needs_end
    assert not TaskTransaction("t-0", 1, 0, 2, 0).needs_end
    assert not TaskTransaction("t-0", 1, 0, 2, 0, already_committed=True).needs_end


def test_coordinator_answers_map_to_kafka_s_transaction_manager_actions() -> None:
    assert txn_action(ErrorCode.NONE) is TxnAction.DONE
    assert txn_action(ErrorCode.CONCURRENT_TRANSACTIONS) is TxnAction.RETRY
    assert txn_action(ErrorCode.UNSTABLE_OFFSET_COMMIT) is TxnAction.RETRY
    assert txn_action(ErrorCode.NOT_COORDINATOR) is TxnAction.FIND_COORDINATOR
    assert txn_action(ErrorCode.COORDINATOR_NOT_AVAILABLE) is TxnAction.FIND_COORDINATOR
    assert txn_action(ErrorCode.PRODUCER_FENCED) is TxnAction.FENCED
    assert txn_action(ErrorCode.INVALID_PRODUCER_EPOCH) is TxnAction.FENCED
    assert txn_action(ErrorCode.INVALID_TXN_STATE) is TxnAction.FAIL
    assert txn_action(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) is TxnAction.FAIL


def test_stamped_batches_are_transactional_only_when_asked() -> None:
    builder = RecordBatchBuilder()
    builder.append(1, b"k", b"v", [])
    raw = builder.build()
    plain = decode_batch(stamp_producer(raw, 7, 2, 0))
    txn = decode_batch(stamp_producer(raw, 7, 2, 0, transactional=True))  # CRC checked
    assert not plain.header.is_transactional
    assert txn.header.is_transactional and not txn.header.is_control
    assert (txn.header.producer_id, txn.header.producer_epoch) == (7, 2)
    assert [r.value for r in txn.records] == [b"v"]
