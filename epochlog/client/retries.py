"""The producer's retry decisions: what a produce answer means for its batch. Sans-I/O.

How it works (Kafka's Sender.completeBatch / canRetry and TransactionManager's sequence rules,
in one place). Every partition of a Produce response, or the failure to get one, comes here as
an error code with the batch it answers, and `decide_produce` returns a `Verdict`: succeed, retry
(after `retry.backoff.ms`, which the accumulator applies on reenqueue), split, or fail; and
whether the producer id must be reset because a sequence is lost. The sender applies it.

The error -> rule table `PRODUCE_ERROR_RULES` names the codes that are not decided by
retriability alone; every other code is retried when Kafka's exception for it is a
RetriableException (`ErrorCode.retriable`, Kafka's own table) and the budget allows:
- NONE succeeds; DUPLICATE_SEQUENCE_NUMBER succeeds too with idempotence (the broker has the
  batch already; its offset is unknown, so the records get -1);
- MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE split a batch of several records into halves, so an
  oversized record ends up alone and fails alone (its sequences are given up: reset);
- OUT_OF_ORDER_SEQUENCE_NUMBER is retried; if the batch was the next one the broker should have
  taken (a real gap, not a batch behind an unresolved one) the producer id is reset;
- UNKNOWN_PRODUCER_ID (the broker lost our state) is retried after a reset.

The budget (`RetryPolicy.may_retry`): not closing, fewer than `retries` attempts, and younger
than `delivery.timeout.ms`. A batch with a sequence that fails for good leaves a gap no later
batch can cross, so it asks for a reset too; inside a transaction a reset is never quiet (a
lost sequence makes the transaction abortable, and the abort bumps the epoch: KIP-360), so the
batch fails. `failure` builds the exception the records' futures get.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from epochlog.client.errors import DeliveryTimeoutError, KafkaError, MessageTooLargeError
from epochlog.client.producer_batch import ProducerBatch
from epochlog.protocol.errors import ErrorCode


class Action(enum.Enum):
    SUCCESS = "success"
    RETRY = "retry"
    SPLIT = "split"
    FAIL = "fail"


@dataclass(frozen=True)
class Verdict:
    action: Action
    reset_producer_id: bool = False


class Rule(enum.Enum):
    """How a produce error code is decided (codes not in the table: `BY_RETRIABILITY`)."""

    SUCCESS = "success"
    DUPLICATE = "succeeds with idempotence, offset unknown"
    TOO_LARGE = "split a batch of several records, else fail"
    OUT_OF_ORDER = "retry; reset the producer id if it is a real gap"
    UNKNOWN_PRODUCER = "retry after a reset of the producer id"
    BY_RETRIABILITY = "retry if retriable (Kafka's RetriableException) and in budget"


PRODUCE_ERROR_RULES: dict[ErrorCode, Rule] = {
    ErrorCode.NONE: Rule.SUCCESS,
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER: Rule.DUPLICATE,
    ErrorCode.MESSAGE_TOO_LARGE: Rule.TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE: Rule.TOO_LARGE,
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: Rule.OUT_OF_ORDER,
    ErrorCode.UNKNOWN_PRODUCER_ID: Rule.UNKNOWN_PRODUCER,
}


def rule_for(error: ErrorCode) -> Rule:
    return PRODUCE_ERROR_RULES.get(error, Rule.BY_RETRIABILITY)


@dataclass(frozen=True)
class RetryPolicy:
    """The retry budget: `retries` and `delivery.timeout.ms`."""

    retries: int
    delivery_timeout_ms: float

    def may_retry(self, batch: ProducerBatch, now: float, closing: bool = False) -> bool:
        return (
            not closing
            and batch.attempts < self.retries
            and now - batch.created_ms < self.delivery_timeout_ms
        )

    def timed_out(self, batch: ProducerBatch, now: float) -> bool:
        return now - batch.created_ms >= self.delivery_timeout_ms

    def expired(self, batch: ProducerBatch) -> DeliveryTimeoutError:
        """The error of a queued batch removed by `RecordAccumulator.expire`."""
        return DeliveryTimeoutError(
            f"{batch.record_count} records for {batch.tp} not acknowledged within "
            f"delivery.timeout.ms={self.delivery_timeout_ms:g}"
        )

    def failure(
        self, batch: ProducerBatch, error: ErrorCode, exc: Exception | None, now: float
    ) -> Exception:
        """The exception a batch that failed for good gives its records."""
        if rule_for(error) is Rule.TOO_LARGE:
            return MessageTooLargeError(f"{batch.tp}: broker refused the batch: {exc}")
        if error.retriable and self.timed_out(batch, now):
            return DeliveryTimeoutError(f"{batch.tp}: gave up after delivery.timeout.ms: {exc}")
        return exc or KafkaError(error, f"produce to {batch.tp}")


def decide_without_idempotence(error: ErrorCode, may_retry: bool) -> Verdict:
    """A batch without sequence numbers: success, retry while retriable, or failure."""
    if error is ErrorCode.NONE:
        return Verdict(Action.SUCCESS)
    if error.retriable and may_retry:
        return Verdict(Action.RETRY)
    return Verdict(Action.FAIL)


def decide_with_idempotence(
    error: ErrorCode, may_retry: bool, current_sequence: bool, next_expected: bool
) -> Verdict:
    """A batch of an idempotent producer. `current_sequence`: it carries a sequence of the
    current producer id; `next_expected`: its base sequence follows the last acknowledged one
    (so an OUT_OF_ORDER_SEQUENCE_NUMBER for it is a real gap)."""
    rule = rule_for(error)
    if rule is Rule.SUCCESS or rule is Rule.DUPLICATE:
        return Verdict(Action.SUCCESS)
    if rule is Rule.OUT_OF_ORDER and may_retry:
        return Verdict(Action.RETRY, reset_producer_id=current_sequence and next_expected)
    if rule is Rule.UNKNOWN_PRODUCER and may_retry:
        return Verdict(Action.RETRY, reset_producer_id=current_sequence)
    if error.retriable and may_retry:
        return Verdict(Action.RETRY)
    return Verdict(Action.FAIL, reset_producer_id=current_sequence)


class SequenceState(Protocol):
    """What `decide_produce` asks of idempotence (`IdempotenceManager` answers)."""

    def decide(self, batch: ProducerBatch, error: ErrorCode, may_retry: bool) -> Verdict: ...


def decide_produce(
    batch: ProducerBatch,
    error: ErrorCode,
    may_retry: bool,
    closing: bool,
    sequences: SequenceState | None,
    transactional: bool,
) -> Verdict:
    """The verdict on one batch's answer; see the module docstring."""
    if rule_for(error) is Rule.TOO_LARGE and batch.record_count > 1 and not closing:
        return Verdict(Action.SPLIT, reset_producer_id=sequences is not None)
    if sequences is None:
        return decide_without_idempotence(error, may_retry)
    verdict = sequences.decide(batch, error, may_retry)
    if transactional and verdict.reset_producer_id:
        # a lost sequence inside a transaction: no quiet new id; the abort bumps it
        return Verdict(Action.FAIL, reset_producer_id=True)
    return verdict
