"""The producer's retry decisions, driven directly: the error table, the budget, splits, and
what idempotence and transactions change."""

from __future__ import annotations

import pytest

from epochlog.client.errors import DeliveryTimeoutError, KafkaError, MessageTooLargeError
from epochlog.client.idempotence import IdempotenceManager
from epochlog.client.metadata import TopicPartition
from epochlog.client.producer_batch import ProducerBatch
from epochlog.client.retries import (
    PRODUCE_ERROR_RULES,
    Action,
    RetryPolicy,
    Rule,
    Verdict,
    decide_produce,
    decide_with_idempotence,
    rule_for,
)
from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import ErrorCode

TP = TopicPartition("t", 0)


def batch(records: int = 1, created_ms: float = 0.0) -> ProducerBatch:
    b = ProducerBatch(TP, Compression.NONE, created_ms)
    for i in range(records):
        b.append(i, None, b"v%d" % i, (), object())
    return b


def test_codes_outside_the_table_are_decided_by_kafkas_retriability() -> None:
    assert rule_for(ErrorCode.NOT_LEADER_OR_FOLLOWER) is Rule.BY_RETRIABILITY
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER not in PRODUCE_ERROR_RULES
    retry = decide_produce(batch(), ErrorCode.NOT_LEADER_OR_FOLLOWER, True, False, None, False)
    assert retry == Verdict(Action.RETRY)
    fail = decide_produce(batch(), ErrorCode.INVALID_RECORD, True, False, None, False)
    assert fail == Verdict(Action.FAIL)  # InvalidRecordException is not a RetriableException


def test_a_retriable_error_out_of_budget_fails() -> None:
    verdict = decide_produce(batch(), ErrorCode.NOT_ENOUGH_REPLICAS, False, False, None, False)
    assert verdict.action is Action.FAIL


@pytest.mark.parametrize("error", [ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE])
def test_a_batch_of_several_records_refused_as_too_large_is_split(error: ErrorCode) -> None:
    assert decide_produce(batch(3), error, True, False, None, False) == Verdict(Action.SPLIT)
    # its sequences are given up: idempotence takes a new id
    split = decide_produce(batch(3), error, True, False, IdempotenceManager(), False)
    assert split == Verdict(Action.SPLIT, reset_producer_id=True)


def test_a_single_record_too_large_fails_and_nothing_splits_while_closing() -> None:
    alone = decide_produce(batch(1), ErrorCode.MESSAGE_TOO_LARGE, True, False, None, False)
    assert alone.action is Action.FAIL
    closing = decide_produce(batch(3), ErrorCode.MESSAGE_TOO_LARGE, False, True, None, False)
    assert closing.action is Action.FAIL


def test_a_duplicate_sequence_succeeds_only_with_idempotence() -> None:
    plain = decide_produce(batch(), ErrorCode.DUPLICATE_SEQUENCE_NUMBER, True, False, None, False)
    assert plain.action is Action.FAIL
    idem = IdempotenceManager()
    verdict = decide_produce(batch(), ErrorCode.DUPLICATE_SEQUENCE_NUMBER, True, False, idem, False)
    assert verdict == Verdict(Action.SUCCESS)


def test_sequence_errors_reset_only_for_a_current_sequence_that_is_a_real_gap() -> None:
    oos = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert decide_with_idempotence(oos, True, True, True) == Verdict(Action.RETRY, True)
    assert decide_with_idempotence(oos, True, True, False) == Verdict(Action.RETRY, False)
    assert decide_with_idempotence(oos, True, False, False) == Verdict(Action.RETRY, False)
    unknown = ErrorCode.UNKNOWN_PRODUCER_ID
    assert decide_with_idempotence(unknown, True, True, False) == Verdict(Action.RETRY, True)
    # out of budget, a batch with a current sequence leaves a gap: it fails and resets
    assert decide_with_idempotence(oos, False, True, True) == Verdict(Action.FAIL, True)
    assert decide_with_idempotence(oos, False, False, False) == Verdict(Action.FAIL, False)


def test_inside_a_transaction_a_lost_sequence_fails_the_batch_instead_of_a_quiet_reset() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    b = batch()
    idem.on_drain(b)  # sequence 0 of the current id: the next one the broker expects
    oos = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert decide_produce(b, oos, True, False, idem, False) == Verdict(Action.RETRY, True)
    assert decide_produce(b, oos, True, False, idem, True) == Verdict(Action.FAIL, True)


def test_the_budget_counts_attempts_age_and_closing() -> None:
    policy = RetryPolicy(retries=2, delivery_timeout_ms=1000)
    b = batch(created_ms=0)
    assert policy.may_retry(b, 999)
    assert not policy.may_retry(b, 1000)  # delivery.timeout.ms reached
    assert not policy.may_retry(b, 10, closing=True)
    b.attempts = 2
    assert not policy.may_retry(b, 10)


def test_failures_name_the_partition_and_why() -> None:
    policy = RetryPolicy(retries=5, delivery_timeout_ms=1000)
    b = batch(created_ms=0)
    too_large = policy.failure(b, ErrorCode.MESSAGE_TOO_LARGE, None, 10)
    assert isinstance(too_large, MessageTooLargeError) and str(too_large).startswith("t-0: ")
    timed_out = policy.failure(b, ErrorCode.NOT_ENOUGH_REPLICAS, None, 1000)
    assert isinstance(timed_out, DeliveryTimeoutError)
    given = KafkaError(ErrorCode.INVALID_RECORD, "produce to t-0")
    assert policy.failure(b, ErrorCode.INVALID_RECORD, given, 10) is given
    built = policy.failure(b, ErrorCode.INVALID_RECORD, None, 10)
    assert isinstance(built, KafkaError) and built.code is ErrorCode.INVALID_RECORD
    expired = policy.expired(batch(3))
    assert isinstance(expired, DeliveryTimeoutError)
    assert "3 records" in str(expired) and "delivery.timeout.ms=1000" in str(expired)
