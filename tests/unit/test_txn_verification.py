"""KIP-890 part 1 decisions: which transactional writes a leader verifies with the coordinator,
how it reads the coordinator's answer, what the producer is told, and the guard a marker
clears between the question and the append."""

from __future__ import annotations

import pytest

from epochlog.broker.producer_state import ProducerStateManager
from epochlog.broker.txn_verification import (
    plan_verification,
    produce_error,
    verification_errors,
    verify_request_body,
)
from epochlog.config.broker import BrokerConfig
from epochlog.config.dynamic import BrokerLayers, ConfigChange, ConfigRequestError, broker_alter
from epochlog.protocol import messages as m
from epochlog.protocol.control_records import ControlType, EndTxnMarker
from epochlog.protocol.errors import ErrorCode as E
from epochlog.protocol.records import RecordBatchBuilder, parse_batch_header

A, B = ("t", 0), ("t", 1)


def header(pid: int = 7, epoch: int = 0, transactional: bool = True):
    builder = RecordBatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=transactional
    )
    builder.append(1_700_000_000_000, None, b"v")
    return parse_batch_header(builder.build(), 0)


def test_a_transactional_write_without_an_open_transaction_is_verified() -> None:
    plan = plan_verification([(A, header()), (B, header())], lambda tp, pid: tp == B)
    assert (plan.producer_id, plan.producer_epoch) == (7, 0)
    assert plan.partitions == (A,)
    assert plan.refused == {}


def test_non_transactional_unreadable_and_foreign_partitions_are_not_verified() -> None:
    plan = plan_verification(
        [(A, header(transactional=False)), (B, None), (("u", 0), header())],
        lambda tp, pid: None,  # not led here: the append path answers NOT_LEADER
    )
    assert plan.partitions == ()


def test_two_producers_in_one_request_are_invalid_producer_id_mapping() -> None:
    plan = plan_verification([(A, header(pid=7)), (B, header(pid=8))], lambda tp, pid: False)
    assert plan.partitions == ()
    assert {tp: error for tp, (error, _) in plan.refused.items()} == {
        A: E.INVALID_PRODUCER_ID_MAPPING,
        B: E.INVALID_PRODUCER_ID_MAPPING,
    }


def test_the_request_is_add_partitions_v4_verify_only_and_round_trips() -> None:
    body = verify_request_body(m.AddPartitionsToTxnRequest, "tx", 7, 3, [B, A, ("u", 2)])
    (txn,) = body.transactions
    assert (txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.verify_only) == (
        "tx",
        7,
        3,
        True,
    )
    assert [(t.name, t.partitions) for t in txn.topics] == [("t", [0, 1]), ("u", [2])]
    decoded = m.AddPartitionsToTxnRequest.decode(body.encode(4), 4)
    assert decoded.transactions[0].verify_only is True


def response(errors: dict[tuple[str, int], E], top: E = E.NONE, txn_id: str = "tx"):
    R = m.AddPartitionsToTxnResponse
    return R(
        error_code=top,
        results_by_transaction=[
            R.AddPartitionsToTxnResult(
                transactional_id=txn_id,
                topic_results=[
                    R.AddPartitionsToTxnTopicResult(
                        name=topic,
                        results_by_partition=[
                            R.AddPartitionsToTxnPartitionResult(
                                partition_index=index, partition_error_code=error
                            )
                        ],
                    )
                    for (topic, index), error in errors.items()
                ],
            )
        ],
    )


def test_coordinator_answers_are_read_as_kafkas_add_partitions_manager() -> None:
    answer = response({A: E.NONE, B: E.TRANSACTION_ABORTABLE})
    assert verification_errors(answer, "tx", [A, B]) == {A: E.NONE, B: E.INVALID_TXN_STATE}
    fenced = response({A: E.PRODUCER_FENCED})
    assert verification_errors(fenced, "tx", [A]) == {A: E.INVALID_PRODUCER_EPOCH}
    assert verification_errors(response({}, top=E.NOT_COORDINATOR), "tx", [A, B]) == {
        A: E.NOT_COORDINATOR,
        B: E.NOT_COORDINATOR,
    }
    other_txn = response({A: E.NONE}, txn_id="other")
    assert verification_errors(other_txn, "tx", [A]) == {A: E.UNKNOWN_SERVER_ERROR}


def test_retriable_coordinator_errors_reach_old_producers_as_not_enough_replicas() -> None:
    for error in (
        E.NETWORK_EXCEPTION,
        E.COORDINATOR_LOAD_IN_PROGRESS,
        E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_COORDINATOR,
        E.CONCURRENT_TRANSACTIONS,
    ):
        code, message = produce_error(error, "t-0")
        assert code is E.NOT_ENOUGH_REPLICAS
        assert error.name in message
    assert produce_error(E.INVALID_TXN_STATE, "t-0") == (
        E.INVALID_TXN_STATE,
        "t-0: partition was not added to the transaction",
    )
    assert produce_error(E.INVALID_PRODUCER_EPOCH, "t-0")[0] is E.INVALID_PRODUCER_EPOCH


def test_a_marker_between_question_and_append_voids_the_verification() -> None:
    state = ProducerStateManager("t-0")
    state.record(7, 0, 0, 0, 0, 0, 1, is_transactional=True)
    guard = state.start_verification(7)
    assert state.verification_holds(7, guard)  # open transaction: nothing to fear
    state.complete_txn(7, 0, EndTxnMarker(ControlType.COMMIT, 0), 1, 2)
    assert not state.has_open_transaction(7)
    assert not state.verification_holds(7, guard)
    fresh = state.start_verification(7)
    assert state.verification_holds(7, fresh)
    state.record(7, 0, 1, 1, 2, 2, 3, is_transactional=True)  # the verified write opens it
    assert state.has_open_transaction(7)


def test_the_switch_is_a_dynamic_broker_config_defaulting_to_on() -> None:
    static = BrokerConfig({"broker.id": 1, "zookeeper.connect": "zk:2181"})
    assert static["transaction.partition.verification.enable"] is True
    layers = BrokerLayers(static)
    stored = broker_alter(
        {},
        [ConfigChange("transaction.partition.verification.enable", "false")],
        incremental=True,
        layers=layers,
        per_broker=False,
    )
    assert stored == {"transaction.partition.verification.enable": "false"}
    layers.cluster_default = stored
    assert layers.effective()["transaction.partition.verification.enable"] is False
    with pytest.raises(ConfigRequestError, match="transaction.partition.verification.enable"):
        broker_alter(
            {},
            [ConfigChange("transaction.partition.verification.enable", "maybe")],
            incremental=True,
            layers=layers,
            per_broker=False,
        )
