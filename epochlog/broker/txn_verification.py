"""KIP-890 part 1: a leader verifies a transactional write with the coordinator before it
appends (Kafka 3.9's `ReplicaManager.appendRecordsWithTransactionVerification` and
`AddPartitionsToTxnManager`), so a late write of a finished transaction cannot open a new one
that no marker will ever close (a hanging transaction: the LSO stuck, read_committed stalled).

How it works, sans-I/O. `plan_verification` looks at a Produce request's batches: a
transactional batch whose producer has no open transaction on that partition needs the
coordinator's word (with one open, the coordinator already had it). All the request's
partitions that need it go in one AddPartitionsToTxn v4 with VerifyOnly (the I/O is the
caller's, `TransactionVerifier`); `verification_errors` reads the answer;
`produce_error` turns the coordinator's error into what a Produce v3-11 client expects.
Between the question and the append a marker may end the transaction: the producer state's
verification guard (`ProducerStateManager.start_verification`) is cleared by every marker, and
an append whose guard is gone is INVALID_TXN_STATE, as Kafka's VerificationGuard.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import BatchHeader

TopicPartition = tuple[str, int]

VERIFY_REQUEST_VERSION = 4  # the first with VerifyOnly; the broker-to-coordinator form

# Coordinator answers an old client would not retry: NOT_ENOUGH_REPLICAS makes it retry the
# produce without a metadata refresh (Kafka 3.9 `ReplicaManager`, transaction version 1).
_RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
)


@dataclass(frozen=True, slots=True)
class VerificationPlan:
    """What a Produce request needs before its append: `partitions` to verify for the
    producer (empty: append at once); `refused` partitions answered with `error` instead."""

    producer_id: int = -1
    producer_epoch: int = -1
    partitions: tuple[TopicPartition, ...] = ()
    refused: dict[TopicPartition, tuple[ErrorCode, str]] = field(default_factory=dict)


def plan_verification(
    headers: Iterable[tuple[TopicPartition, BatchHeader | None]],
    has_open_transaction: Callable[[TopicPartition, int], bool | None],
) -> VerificationPlan:
    """Which partitions of a transactional Produce the coordinator must confirm.

    `headers`: each partition's first batch header (None: not a readable batch; the append
    path refuses it). `has_open_transaction(tp, producer_id)`: whether this leader's producer
    state has the producer's transaction open on `tp`; None when `tp` is not led here (the
    append path answers that). A request whose transactional batches carry more than one
    producer id is INVALID_PRODUCER_ID_MAPPING on those partitions, as Kafka."""
    transactional = [
        (tp, h) for tp, h in headers if h is not None and h.is_transactional and h.producer_id >= 0
    ]
    producers = {(h.producer_id, h.producer_epoch) for _, h in transactional}
    if len(producers) > 1:
        message = (
            f"transactional records of one Produce carry {len(producers)} producer id/epoch "
            f"pairs {sorted(producers)}; one is allowed"
        )
        error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        return VerificationPlan(refused={tp: (error, message) for tp, _ in transactional})
    if not producers:
        return VerificationPlan()
    producer_id, producer_epoch = producers.pop()
    partitions = tuple(
        tp for tp, _ in transactional if has_open_transaction(tp, producer_id) is False
    )
    return VerificationPlan(producer_id, producer_epoch, partitions)


def verify_request_body(
    request_class: Any,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> Any:
    """The AddPartitionsToTxn v4 body asking, without adding, whether `partitions` are in the
    producer's ongoing transaction (`request_class`: the message class)."""
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    R = request_class
    return R(
        transactions=[
            R.AddPartitionsToTxnTransaction(
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                verify_only=True,
                topics=[
                    R.AddPartitionsToTxnTopic(name=topic, partitions=sorted(indexes))
                    for topic, indexes in sorted(by_topic.items())
                ],
            )
        ]
    )


def verification_errors(
    response: Any, transactional_id: str, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, ErrorCode]:
    """The coordinator's verdict per partition (NONE: part of the transaction), as Kafka's
    AddPartitionsToTxnManager reads it: a top-level error for all; PRODUCER_FENCED is
    INVALID_PRODUCER_EPOCH (what producers expect there), TRANSACTION_ABORTABLE is
    INVALID_TXN_STATE (Produce before v12 cannot carry it); a partition left out of the answer
    is UNKNOWN_SERVER_ERROR."""
    wanted = list(partitions)
    top = ErrorCode(response.error_code)
    if top is not ErrorCode.NONE:
        return {tp: top for tp in wanted}
    answered: dict[TopicPartition, ErrorCode] = {}
    for result in response.results_by_transaction:
        if result.transactional_id != transactional_id:
            continue
        for topic in result.topic_results:
            for p in topic.results_by_partition:
                answered[(topic.name, p.partition_index)] = ErrorCode(p.partition_error_code)
    errors: dict[TopicPartition, ErrorCode] = {}
    for tp in wanted:
        error = answered.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
        if error is ErrorCode.PRODUCER_FENCED:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        elif error is ErrorCode.TRANSACTION_ABORTABLE:
            error = ErrorCode.INVALID_TXN_STATE
        errors[tp] = error
    return errors


def produce_error(error: ErrorCode, where: str) -> tuple[ErrorCode, str]:
    """A failed verification as the Produce partition's error and message (Kafka 3.9's
    translation for Produce v3-11)."""
    if error is ErrorCode.INVALID_TXN_STATE:
        return error, f"{where}: partition was not added to the transaction"
    if error in _RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
        return (
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"{where}: unable to verify the partition has been added to the transaction. "
            f"Underlying error: {error.name}",
        )
    return error, f"{where}: transaction verification failed with {error.name}"
