"""The transaction coordinator shard's inputs and outputs as plain values: requests and replies
(the handlers will translate every wire version to and from these), the `Effects` each call
returns, markers to write, and the timer keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from epochlog.coordinator.transaction.records import TransactionRecord
from epochlog.protocol.errors import ErrorCode

E = ErrorCode


@dataclass(frozen=True)
class TxnConfig:
    """Kafka's broker settings for transactions, with Kafka's defaults."""

    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms
    abort_timed_out_interval_ms: int = 10_000  # ...abort.timed.out.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3_600_000  # ...remove.expired.transaction.cleanup.interval.ms
    offsets_topic_partitions: int = 50  # offsets.topic.num.partitions (AddOffsetsToTxn)
    # epochlog.test.txn.fencing.enabled (tests only): off, an older producer epoch is accepted
    # by AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and KIP-890 verification (a zombie writes)
    fence_producer_epochs: bool = True


@dataclass(frozen=True)
class InitProducerId:
    transactional_id: str
    timeout_ms: int
    expected_producer_id: int = -1  # InitProducerId v3+ (KIP-360): -1 = none given
    expected_producer_epoch: int = -1


@dataclass(frozen=True)
class InitProducerIdReply:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class AddPartitions:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]
    verify_only: bool = False  # AddPartitionsToTxn v4+ from a broker (KIP-890)


@dataclass(frozen=True)
class AddPartitionsReply:
    transactional_id: str
    errors: dict[tuple[str, int], ErrorCode]


@dataclass(frozen=True)
class AddOffsets:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass(frozen=True)
class EndTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


@dataclass(frozen=True)
class ErrorReply:
    """AddOffsetsToTxn's and EndTxn's answer: one error code."""

    error: ErrorCode


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    topics: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionListing:
    unknown_state_filters: tuple[str, ...]
    transactions: tuple[ListedTransaction, ...]


@dataclass(frozen=True)
class WriteMarkers:
    """Write a commit or abort marker for this producer to each partition (WriteTxnMarkers to
    their leaders, retried until written), then tell the shard: `markers_written`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[tuple[str, int], ...]


TimerKey = tuple[Any, ...]
ABORT_TIMED_OUT_TIMER: TimerKey = ("abort-timed-out",)
EXPIRE_IDS_TIMER: TimerKey = ("expire-transactional-ids",)


@dataclass
class Effects:
    """What a call asks of the runtime, in order: append `records` (acks=all), then send
    `replies` (request handle, reply), then `replay` the records, then send `markers`; `timers`
    maps a timer key to its new deadline. If the append fails, the runtime calls
    `append_failed(records)` and answers the replies' handles with its own error instead."""

    records: list[TransactionRecord] = field(default_factory=list)
    replies: list[tuple[Any, Any]] = field(default_factory=list)
    markers: list[WriteMarkers] = field(default_factory=list)
    timers: dict[TimerKey, int | None] = field(default_factory=dict)

    def reply(self, handle: Any, value: Any) -> None:
        self.replies.append((handle, value))
