"""`epochlog transactions`: argument checks, Kafka's hanging-transaction filter, table layout,
and the admin client's transaction requests and answers (no cluster)."""

from __future__ import annotations

import argparse

import pytest

from epochlog.cli.common import CommandError
from epochlog.cli.main import build_parser
from epochlog.cli.transactions_cmd import (
    AbortSpec,
    OpenTransaction,
    abort_spec_at_offset,
    abort_spec_from_args,
    candidate_open_transactions,
    check_find_hanging_args,
    describe_row,
    format_table,
    hanging_rows,
    hanging_transactions,
    producer_row,
)
from epochlog.client.admin_log_dirs import ProducerState
from epochlog.client.admin_transactions import (
    TransactionDescription,
    abort_marker_request,
    find_transaction_coordinator_requests,
    list_transactions_request,
    read_abort_marker,
    read_describe_transactions,
    read_list_transactions,
)
from epochlog.client.errors import KafkaError
from epochlog.client.metadata import TopicPartition
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["transactions", *argv, "--bootstrap-server", "h:1"])


def producer(pid: int = 7, start: int = 40, last_ts: int = 0, coord: int = 3) -> ProducerState:
    return ProducerState(pid, 2, 11, last_ts, coord, start)


# --------------------------------------------------------------------------------- parsing


def test_abort_by_producer_needs_epoch_and_coordinator_epoch() -> None:
    with pytest.raises(CommandError, match="--start-offset .* or with --producer-id"):
        abort_spec_from_args(parse("abort", "--topic", "t", "--partition", "0"))
    with pytest.raises(CommandError, match="Missing required argument --producer-epoch"):
        abort_spec_from_args(
            parse("abort", "--topic", "t", "--partition", "0", "--producer-id", "5")
        )
    with pytest.raises(CommandError, match="Missing required argument --coordinator-epoch"):
        abort_spec_from_args(
            parse(
                "abort",
                "--topic",
                "t",
                "--partition",
                "0",
                "--producer-id",
                "5",
                "--producer-epoch",
                "1",
            )
        )
    spec = abort_spec_from_args(
        parse(
            "abort",
            "--topic",
            "t",
            "--partition",
            "2",
            "--producer-id",
            "5",
            "--producer-epoch",
            "1",
            "--coordinator-epoch",
            "-1",
        )
    )
    assert spec == AbortSpec("t", 2, 5, 1, 0)  # a never-marked producer's -1 is sent as 0


def test_abort_by_start_offset_finds_the_producer_with_that_open_transaction() -> None:
    assert (
        abort_spec_from_args(
            parse("abort", "--topic", "t", "--partition", "0", "--start-offset", "40")
        )
        is None
    )
    found = abort_spec_at_offset("t", 0, 40, [producer(6, start=-1), producer(7, start=40)])
    assert found == AbortSpec("t", 0, 7, 2, 3)
    with pytest.raises(
        CommandError, match="any open transactions starting at offset 41 on partition t-0"
    ):
        abort_spec_at_offset("t", 0, 41, [producer(7, start=40)])


def test_find_hanging_needs_a_scope_and_partition_needs_topic() -> None:
    with pytest.raises(CommandError, match="requires either --topic or --broker-id"):
        check_find_hanging_args(parse("find-hanging"))
    with pytest.raises(CommandError, match="--partition argument requires --topic"):
        check_find_hanging_args(parse("find-hanging", "--broker-id", "1", "--partition", "0"))
    with pytest.raises(CommandError, match="--max-transaction-timeout must be at least 0"):
        check_find_hanging_args(
            parse("find-hanging", "--topic", "t", "--max-transaction-timeout", "-1")
        )
    args = parse("find-hanging", "--broker-id", "1")
    check_find_hanging_args(args)
    assert args.max_transaction_timeout == 15


# -------------------------------------------------------------------------------- decisions


def description(partitions: list[tuple[str, int]]) -> TransactionDescription:
    return TransactionDescription(
        "tx", 1, "Ongoing", 7, 2, 60000, 1000, tuple(TopicPartition(*tp) for tp in partitions)
    )


def test_only_open_transactions_older_than_the_timeout_are_candidates() -> None:
    found = candidate_open_transactions(
        {
            ("t", 0): [producer(7, start=40, last_ts=0), producer(8, start=-1, last_ts=0)],
            ("t", 1): [producer(9, start=5, last_ts=99_500)],
        },
        now_ms=100_000,
        max_timeout_ms=1000,
    )
    assert [(c.topic, c.partition, c.producer.producer_id) for c in found] == [("t", 0, 7)]


def test_a_transaction_hangs_unless_its_coordinator_counts_the_partition() -> None:
    on_t0 = OpenTransaction("t", 0, producer(7))
    on_t1 = OpenTransaction("t", 1, producer(7))
    unknown = OpenTransaction("t", 0, producer(8))
    not_found = OpenTransaction("t", 0, producer(9))
    hanging = hanging_transactions(
        [on_t0, on_t1, unknown, not_found],
        {7: "tx", 9: "gone"},
        {"tx": description([("t", 0)]), "gone": None},
    )
    assert hanging == [on_t1, unknown, not_found]


def test_tables_are_kafkas_pretty_print_with_its_columns() -> None:
    assert format_table(("A", "Bee"), [["xyz", "1"]]) == "A  \tBee\t\nxyz\t1  \t"
    assert hanging_rows([OpenTransaction("t", 0, producer(7, start=40, last_ts=0))], 180_000) == [
        ["t", "0", "7", "2", "3", "40", "0", "3"]
    ]
    assert describe_row(description([("t", 0), ("t", 1)]), now_ms=1500) == [
        "1",
        "tx",
        "7",
        "2",
        "Ongoing",
        "60000",
        "1000",
        "500",
        "t-0,t-1",
    ]
    idle = TransactionDescription("tx", 1, "Empty", 7, 2, 60000, -1, ())
    assert describe_row(idle, now_ms=1500)[6:8] == ["None", "None"]
    assert producer_row(producer(start=-1)) == ["7", "2", "3", "11", "0", "None"]


# ------------------------------------------------------------------- admin requests/answers


def test_transaction_coordinators_are_found_with_key_type_1() -> None:
    (batched,) = find_transaction_coordinator_requests(["a", "b"], 4)
    assert (batched.key_type, batched.coordinator_keys) == (1, ["a", "b"])
    single = find_transaction_coordinator_requests(["a", "b"], 3)
    assert [(r.key, r.key_type) for r in single] == [("a", 1), ("b", 1)]


def test_list_transactions_uses_v1_only_for_a_duration_filter() -> None:
    request, version = list_transactions_request(["Ongoing"], [7], -1)
    assert version == 0
    assert (request.state_filters, request.producer_id_filters) == (["Ongoing"], [7])
    request, version = list_transactions_request([], [], 60_000)
    assert (version, request.duration_filter) == (1, 60_000)
    R = m.ListTransactionsResponse
    ok = R(
        error_code=0,
        transaction_states=[
            R.TransactionState(transactional_id="tx", producer_id=7, transaction_state="Ongoing")
        ],
    )
    (listing,) = read_list_transactions(ok, 2)
    assert (
        listing.transactional_id,
        listing.producer_id,
        listing.state,
        listing.coordinator_id,
    ) == (
        "tx",
        7,
        "Ongoing",
        2,
    )
    with pytest.raises(KafkaError, match="broker 2"):
        read_list_transactions(R(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), 2)


def test_describe_transactions_answers_per_id() -> None:
    R = m.DescribeTransactionsResponse
    response = R(
        transaction_states=[
            R.TransactionState(
                error_code=0,
                transactional_id="tx",
                transaction_state="Ongoing",
                transaction_timeout_ms=60000,
                transaction_start_time_ms=5,
                producer_id=7,
                producer_epoch=2,
                topics=[R.TopicData(topic="t", partitions=[1, 0])],
            ),
            R.TransactionState(
                error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactional_id="no"
            ),
        ]
    )
    answers = read_describe_transactions(response, 3)
    assert answers["no"] is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    tx = answers["tx"]
    assert isinstance(tx, TransactionDescription)
    assert tx.partitions == (TopicPartition("t", 0), TopicPartition("t", 1))
    assert (tx.coordinator_id, tx.state, tx.producer_id) == (3, "Ongoing", 7)


def test_abort_is_a_write_txn_markers_abort_for_one_partition() -> None:
    request = abort_marker_request("t", 4, 7, 2, 3)
    (marker,) = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result) == (7, 2, False)
    assert marker.coordinator_epoch == 3
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("t", [4])]
    R = m.WriteTxnMarkersResponse
    response = R(
        markers=[
            R.WritableTxnMarkerResult(
                producer_id=7,
                topics=[
                    R.WritableTxnMarkerTopicResult(
                        name="t",
                        partitions=[
                            R.WritableTxnMarkerPartitionResult(
                                partition_index=4,
                                error_code=ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                            )
                        ],
                    )
                ],
            )
        ]
    )
    assert read_abort_marker(response, "t", 4, 7) is ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert read_abort_marker(response, "t", 5, 7) is ErrorCode.UNKNOWN_SERVER_ERROR
