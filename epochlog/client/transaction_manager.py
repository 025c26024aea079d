"""The transactional producer's state machine: Kafka's TransactionManager, sans-I/O.

How it works. A producer with `transactional.id` owns one `TransactionManager`. The user's calls
(`initialize`, `begin`, `send_offsets`, `commit`, `abort`) move it through the eight states of
`VALID_PREVIOUS_STATES` (Kafka's `TransactionManager.State.isTransitionValid`) and queue the
requests they need; each call that waits for the coordinator returns a `TxnOperation` the shell
completes. The sender shell asks `next_call(batches_pending)` for the one transactional request
to send now (one at a time, as Kafka's sender), sends it to the transaction coordinator (or the
group coordinator for TxnOffsetCommit), and feeds the answer to `on_response`, which applies
Kafka's error rules and says what the shell does next (`Next`):

- retriable (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION,
  a lost connection): the same call again after retry.backoff.ms;
- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE: look the coordinator up again, then retry;
- fatal (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH from the coordinator, TRANSACTIONAL_ID_
  AUTHORIZATION_FAILED, INVALID_TXN_STATE, anything unexpected): FATAL_ERROR, for good: every
  call but close fails with that error;
- abortable (a produce that failed, TOPIC/GROUP_AUTHORIZATION_FAILED, a group that rebalanced
  under TxnOffsetCommit): ABORTABLE_ERROR; only `abort()` leaves it.

Partitions: `add_partition` (called by send) collects partitions new to the transaction, and one
AddPartitionsToTxn carries all collected so far; a batch may be drained only once its partition
is in the transaction (`can_send`, the accumulator's drain gate, which also stamps the producer
id, epoch and sequence through the wrapped `IdempotenceManager` and marks the batch
transactional). EndTxn waits until no batch of the transaction is left unresolved; a transaction
that added nothing ends without one, as in Kafka.

KIP-360: a produce failure (as in Kafka, any one before the commit or abort began, and any that
loses a partition's sequence: UNKNOWN_PRODUCER_ID, an OUT_OF_ORDER_SEQUENCE gap, a batch that
expired after it was sent) makes the error abortable and asks for an epoch bump; after the
abort's EndTxn the manager sends InitProducerId with the current producer id and epoch, gets
the next epoch, and every partition's sequence restarts at 0.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.group_offsets import ConsumerGroupMetadata, OffsetAndMetadata
from epochlog.client.idempotence import IdempotenceManager
from epochlog.client.metadata import TopicPartition
from epochlog.client.producer_batch import ProducerBatch
from epochlog.protocol.errors import ErrorCode


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
# For each state, the states it may be entered from (FATAL_ERROR from any).
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset({S.READY, S.ABORTABLE_ERROR}),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset(
        {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}
    ),
    S.FATAL_ERROR: frozenset(TxnState),
}

# Errors of the coordinator's answers, in Kafka's TxnRequestHandler classes.
RETRIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
REFIND_COORDINATOR = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
FATAL = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,  # from the coordinator it means fenced
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.INVALID_TRANSACTION_TIMEOUT,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    }
)
ABORTABLE = frozenset(
    {
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.TRANSACTION_ABORTABLE,
    }
)
# Abortable, and the producer's sequences are lost: the abort bumps the epoch (KIP-360).
NEEDS_EPOCH_BUMP = frozenset({ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_ID_MAPPING})
# A produce error that is fatal for a transactional producer; any other failure is abortable
# (Kafka's TransactionManager.maybeTransitionToErrorState).
FATAL_FOR_PRODUCE = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)


class TransactionStateError(ClientError):
    """A call the transaction's current state does not allow (Kafka's IllegalStateException)."""


class TransactionAbortedError(ClientError):
    """A record of a transaction that was aborted before the record was sent (Kafka's
    TransactionAbortedException)."""


class Target(enum.Enum):
    TRANSACTION_COORDINATOR = "transaction coordinator"
    GROUP_COORDINATOR = "group coordinator"


class Next(enum.Enum):
    """What the shell does after a transactional response."""

    CONTINUE = "continue"  # done with that call; ask for the next one now
    RETRY = "retry"  # the same call again after retry.backoff.ms
    REFIND_COORDINATOR = "refind coordinator"  # forget the call's coordinator, then retry


class TxnOperation:
    """The outcome of one user call, completed by the manager; the shell waits on it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.done = False
        self.error: Exception | None = None
        self._callbacks: list[Callable[[TxnOperation], None]] = []

    def add_done_callback(self, callback: Callable[[TxnOperation], None]) -> None:
        if self.done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def complete(self, error: Exception | None = None) -> None:
        if self.done:
            return
        self.done, self.error = True, error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def __repr__(self) -> str:
        status = "pending" if not self.done else f"failed: {self.error}" if self.error else "done"
        return f"TxnOperation({self.name}, {status})"


@dataclass
class InitProducerIdCall:
    producer_id: int = -1  # the current id and epoch when bumping (KIP-360), else -1
    producer_epoch: int = -1
    target: Target = Target.TRANSACTION_COORDINATOR
    priority: int = 0


@dataclass
class AddPartitionsCall:
    partitions: frozenset[TopicPartition]
    target: Target = Target.TRANSACTION_COORDINATOR
    priority: int = 1


@dataclass
class AddOffsetsCall:
    offsets: dict[TopicPartition, OffsetAndMetadata]
    group: ConsumerGroupMetadata
    operation: TxnOperation
    target: Target = Target.TRANSACTION_COORDINATOR
    priority: int = 1


@dataclass
class TxnOffsetCommitCall:
    offsets: dict[TopicPartition, OffsetAndMetadata]  # those not yet committed
    group: ConsumerGroupMetadata
    operation: TxnOperation
    target: Target = Target.GROUP_COORDINATOR
    priority: int = 2


@dataclass
class EndTxnCall:
    committed: bool
    target: Target = Target.TRANSACTION_COORDINATOR
    priority: int = 3


TxnCall = InitProducerIdCall | AddPartitionsCall | AddOffsetsCall | TxnOffsetCommitCall | EndTxnCall


class TransactionalSequences(IdempotenceManager):
    """The idempotent sequences of a transactional producer: a lost sequence does not take a
    new producer id quietly (`request_reset`); it asks the transaction for an epoch bump."""

    def __init__(self) -> None:
        super().__init__()
        self.bump_requested = False

    def request_reset(self) -> None:
        super().request_reset()
        self.bump_requested = True

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        super().set_producer_id(producer_id, producer_epoch)
        self.bump_requested = False


@dataclass
class _Transaction:
    """What the current transaction holds."""

    partitions: set[TopicPartition] = field(default_factory=set)  # added by the coordinator
    new_partitions: set[TopicPartition] = field(default_factory=set)  # to add
    adding: frozenset[TopicPartition] = frozenset()  # in the AddPartitionsToTxn in flight
    offsets_sent: bool = False  # AddOffsetsToTxn succeeded at least once

    @property
    def started(self) -> bool:
        return bool(self.partitions or self.adding or self.offsets_sent)


class TransactionManager:
    """See the module docstring. `sequences` is the producer's drain gate."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int) -> None:
        if not transactional_id:
            raise ValueError("a TransactionManager needs a transactional.id")
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.sequences = TransactionalSequences()
        self.state = TxnState.UNINITIALIZED
        self.last_error: Exception | None = None
        self._txn = _Transaction()
        self._calls: list[TxnCall] = []
        self._in_flight: TxnCall | None = None
        self._init_op: TxnOperation | None = None
        self._end_op: TxnOperation | None = None
        self._end_committed = False

    # ---------------------------------------------------------------- state

    def _transition(self, target: TxnState, error: Exception | None = None) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise TransactionStateError(
                f"transactional.id {self.transactional_id!r}: invalid transition from "
                f"{self.state.value} to {target.value}"
            )
        if error is not None:
            self.last_error = error
        self.state = target

    def _require(self, what: str, *states: TxnState) -> None:
        if self.state is TxnState.FATAL_ERROR:
            raise TransactionStateError(
                f"cannot {what}: the producer is in FATAL_ERROR: {self.last_error}"
            ) from self.last_error
        if self.state not in states:
            expected = " or ".join(s.value for s in states)
            cause = f" ({self.last_error})" if self.state is TxnState.ABORTABLE_ERROR else ""
            raise TransactionStateError(
                f"cannot {what} in state {self.state.value}{cause}; it needs {expected}"
            ) from (self.last_error if self.state is TxnState.ABORTABLE_ERROR else None)

    @property
    def producer_id(self) -> int:
        return self.sequences.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.sequences.producer_epoch

    @property
    def in_transaction(self) -> bool:
        return self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION)

    @property
    def fails_queued_batches(self) -> bool:
        """Queued batches that were never sent fail now (Kafka's abortUndrainedBatches)."""
        return self.state in (
            TxnState.ABORTABLE_ERROR,
            TxnState.ABORTING_TRANSACTION,
            TxnState.FATAL_ERROR,
        )

    # ---------------------------------------------------------------- the user's calls

    def initialize(self) -> TxnOperation:
        """init_transactions(): a producer id and epoch for the transactional id, fencing any
        older producer with the same id. Calling it again while it is under way returns the
        same operation (the user's wait may have timed out)."""
        if self._init_op is not None and self.state is TxnState.INITIALIZING:
            return self._init_op
        self._require("initialize transactions", TxnState.UNINITIALIZED)
        self._transition(TxnState.INITIALIZING)
        self._init_op = TxnOperation("init_transactions")
        self._calls.append(InitProducerIdCall())
        return self._init_op

    def begin(self) -> None:
        self._require("begin a transaction", TxnState.READY)
        self._transition(TxnState.IN_TRANSACTION)
        self._txn = _Transaction()

    def check_send(self) -> None:
        """Raise at once for a send outside a transaction (the blocking producer appends on
        its loop later; Kafka's send raises in the caller)."""
        if self.state is not TxnState.IN_TRANSACTION:
            self._require("send", TxnState.IN_TRANSACTION)

    def add_partition(self, tp: TopicPartition) -> bool:
        """A record for `tp` is being sent: the transaction must take the partition in.
        True when `tp` is new to it (the sender should add it)."""
        txn = self._txn
        if self.state is TxnState.IN_TRANSACTION:
            if tp in txn.partitions or tp in txn.adding or tp in txn.new_partitions:
                return False
            txn.new_partitions.add(tp)
            return True
        self._require("send", TxnState.IN_TRANSACTION)
        return False

    def send_offsets(
        self,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        group: ConsumerGroupMetadata,
    ) -> TxnOperation:
        self._require("send offsets to a transaction", TxnState.IN_TRANSACTION)
        if not group.group_id:
            raise ValueError("send_offsets_to_transaction needs a consumer group's metadata")
        operation = TxnOperation(f"send_offsets_to_transaction({group.group_id})")
        if not offsets:
            operation.complete()
            return operation
        self._calls.append(AddOffsetsCall(dict(offsets), group, operation))
        return operation

    def commit(self) -> TxnOperation:
        if self._end_op is not None and self._end_committed and not self._end_op.done:
            return self._end_op
        self._require("commit a transaction", TxnState.IN_TRANSACTION)
        self._transition(TxnState.COMMITTING_TRANSACTION)
        return self._begin_end(committed=True)

    def abort(self) -> TxnOperation:
        if self._end_op is not None and not self._end_committed and not self._end_op.done:
            return self._end_op
        self._require("abort a transaction", TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR)
        cause = f": {self.last_error}" if self.state is TxnState.ABORTABLE_ERROR else ""
        self._transition(
            TxnState.ABORTING_TRANSACTION,
            TransactionAbortedError(f"transaction aborted before the record was sent{cause}"),
        )
        # What was queued for this transaction is dropped: the offsets it would have sent fail.
        for call in self._calls:
            if isinstance(call, AddOffsetsCall | TxnOffsetCommitCall):
                call.operation.complete(TransactionAbortedError("the transaction was aborted"))
        self._calls = [c for c in self._calls if not isinstance(c, AddOffsetsCall)]
        self._calls = [c for c in self._calls if not isinstance(c, TxnOffsetCommitCall)]
        self._txn.new_partitions.clear()
        return self._begin_end(committed=False)

    def _begin_end(self, committed: bool) -> TxnOperation:
        self._end_op = TxnOperation("commit_transaction" if committed else "abort_transaction")
        self._end_committed = committed
        self._calls.append(EndTxnCall(committed))
        return self._end_op

    # ---------------------------------------------------------------- produce results

    def on_batch_failed(self, batch: ProducerBatch, error: ErrorCode, exc: Exception) -> None:
        """A batch of the transaction failed for good: the transaction cannot commit."""
        if self.state is TxnState.FATAL_ERROR:
            return
        if error in FATAL_FOR_PRODUCE:
            self.fatal(exc)
            return
        completing = self.state in (
            TxnState.COMMITTING_TRANSACTION,
            TxnState.ABORTING_TRANSACTION,
        )
        if batch.has_sequence or not completing:
            # its sequence is gone for good; and, as Kafka, any failure before the commit or
            # abort began bumps the epoch at the abort
            self.sequences.bump_requested = True
        self.abortable(exc)

    def abortable(self, error: Exception) -> None:
        if self.state in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING_TRANSACTION,
            TxnState.ABORTABLE_ERROR,
            TxnState.INITIALIZING,
        ):
            self._transition(TxnState.ABORTABLE_ERROR, error)
            # the commit (and any offsets) under way cannot succeed any more
            for call in self._calls:
                if isinstance(call, AddOffsetsCall | TxnOffsetCommitCall):
                    call.operation.complete(error)
            self._calls = [c for c in self._calls if not isinstance(c, EndTxnCall | AddOffsetsCall)]
            self._calls = [c for c in self._calls if not isinstance(c, TxnOffsetCommitCall)]
            self._txn.new_partitions.clear()
            if self._end_op is not None:  # a commit, or an abort whose epoch bump failed
                self._end_op.complete(error)
            if self._init_op is not None:
                self._init_op.complete(error)
        elif self.state is TxnState.ABORTING_TRANSACTION:
            self.last_error = error  # the abort goes on; the batch's future says why

    def fatal(self, error: Exception) -> None:
        self._transition(TxnState.FATAL_ERROR, error)
        for call in self._calls:
            if isinstance(call, AddOffsetsCall | TxnOffsetCommitCall):
                call.operation.complete(error)
        self._calls.clear()
        for op in (self._init_op, self._end_op):
            if op is not None:
                op.complete(error)

    # ---------------------------------------------------------------- the drain gate

    def can_send(self, batch: ProducerBatch) -> bool:
        return (
            self.in_transaction
            and batch.tp in self._txn.partitions
            and self.sequences.can_send(batch)
        )

    def on_drain(self, batch: ProducerBatch) -> None:
        batch.transactional = True  # before the stamp, which writes the attribute bit
        self.sequences.on_drain(batch)

    def on_complete(self, batch: ProducerBatch) -> None:
        self.sequences.on_complete(batch)

    # ---------------------------------------------------------------- the sender's side

    def next_call(self, batches_pending: bool) -> TxnCall | None:
        """The transactional request to send now, if any; None while one is in flight.

        `batches_pending`: some batch of the transaction is still queued or unresolved, so
        EndTxn waits (a commit must cover every record sent in it)."""
        if self._in_flight is not None or self.state is TxnState.FATAL_ERROR:
            return None
        txn = self._txn
        if txn.new_partitions and self.in_transaction:
            txn.adding = frozenset(txn.new_partitions)
            txn.new_partitions.clear()
            self._calls.append(AddPartitionsCall(txn.adding))
        if not self._calls:
            return None
        call = min(self._calls, key=lambda c: c.priority)
        if isinstance(call, EndTxnCall):
            if batches_pending or txn.adding:
                return None
            if not txn.started:  # nothing was added: no EndTxn, as Kafka's producer
                self._calls.remove(call)
                self._end_completed()
                return self.next_call(batches_pending)
        self._calls.remove(call)
        self._in_flight = call
        return call

    def on_response(self, call: TxnCall, result: TxnResult) -> Next:
        """The answer to `call` (the one `next_call` returned); see the module docstring."""
        assert call is self._in_flight, (call, self._in_flight)
        self._in_flight = None
        if self.state is TxnState.FATAL_ERROR:
            return Next.CONTINUE
        if result.transport_error is not None:  # no answer: the coordinator may have moved
            return self._again(call, Next.REFIND_COORDINATOR)
        if isinstance(call, InitProducerIdCall):
            return self._init_result(call, result)
        if isinstance(call, AddPartitionsCall):
            return self._add_partitions_result(call, result)
        if isinstance(call, AddOffsetsCall):
            return self._add_offsets_result(call, result)
        if isinstance(call, TxnOffsetCommitCall):
            return self._offset_commit_result(call, result)
        return self._end_result(call, result)

    def _again(self, call: TxnCall, next_step: Next) -> Next:
        if isinstance(call, AddPartitionsCall):  # it goes again with any added meanwhile
            self._txn.new_partitions |= call.partitions
            self._txn.adding = frozenset()
        else:
            self._calls.append(call)
        return next_step

    def _classify(self, call: TxnCall, error: ErrorCode, what: str) -> Next | None:
        """The common rules; None when `error` is NONE or needs the caller's own handling."""
        if error is ErrorCode.NONE:
            return None
        if error in REFIND_COORDINATOR:
            return self._again(call, Next.REFIND_COORDINATOR)
        if error in RETRIABLE:
            return self._again(call, Next.RETRY)
        exc = KafkaError(error, f"{what} for transactional.id {self.transactional_id!r}")
        if error in NEEDS_EPOCH_BUMP:
            self.sequences.bump_requested = True
            self._drop(call, exc)
            self.abortable(exc)
        elif error in ABORTABLE:
            self._drop(call, exc)
            self.abortable(exc)
        else:  # FATAL, and whatever Kafka's client calls unexpected
            self._drop(call, exc)
            self.fatal(exc)
        return Next.CONTINUE

    def _drop(self, call: TxnCall, exc: Exception) -> None:
        if isinstance(call, AddPartitionsCall):
            self._txn.adding = frozenset()
        elif isinstance(call, AddOffsetsCall | TxnOffsetCommitCall):
            call.operation.complete(exc)

    def _init_result(self, call: InitProducerIdCall, result: TxnResult) -> Next:
        step = self._classify(call, result.error, "InitProducerId")
        if step is not None:
            return step
        self.sequences.set_producer_id(result.producer_id, result.producer_epoch)
        self._transition(TxnState.READY)
        self.last_error = None
        if self._init_op is not None:
            self._init_op.complete()
            self._init_op = None
        if self._end_op is not None:  # a KIP-360 bump after an abort: the abort is done now
            self._end_op.complete()
            self._end_op = None
        return Next.CONTINUE

    def _add_partitions_result(self, call: AddPartitionsCall, result: TxnResult) -> Next:
        errors = {tp: e for tp, e in result.partition_errors.items() if e is not ErrorCode.NONE}
        # OPERATION_NOT_ATTEMPTED: another partition failed; these go again with it
        real = {tp: e for tp, e in errors.items() if e is not ErrorCode.OPERATION_NOT_ATTEMPTED}
        worst = _worst(real.values()) if real else result.error
        if worst is ErrorCode.NONE and not errors:
            self._txn.partitions |= call.partitions
            self._txn.adding = frozenset()
            return Next.CONTINUE
        if worst is ErrorCode.NONE:
            worst = ErrorCode.OPERATION_NOT_ATTEMPTED
        failed = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(real or errors))
        step = self._classify(call, worst, f"AddPartitionsToTxn ({failed})")
        return step if step is not None else Next.CONTINUE

    def _add_offsets_result(self, call: AddOffsetsCall, result: TxnResult) -> Next:
        step = self._classify(call, result.error, f"AddOffsetsToTxn (group {call.group.group_id})")
        if step is not None:
            return step
        self._txn.offsets_sent = True
        self._calls.append(TxnOffsetCommitCall(dict(call.offsets), call.group, call.operation))
        return Next.CONTINUE

    def _offset_commit_result(self, call: TxnOffsetCommitCall, result: TxnResult) -> Next:
        errors = {tp: e for tp, e in result.partition_errors.items() if e is not ErrorCode.NONE}
        for tp in list(call.offsets):
            if tp in result.partition_errors and tp not in errors:
                del call.offsets[tp]  # committed: a retry carries only the others
        if not errors:
            call.operation.complete()
            return Next.CONTINUE
        worst = _worst(errors.values())
        what = f"TxnOffsetCommit (group {call.group.group_id})"
        step = self._classify(call, worst, what)
        return step if step is not None else Next.CONTINUE

    def _end_result(self, call: EndTxnCall, result: TxnResult) -> Next:
        step = self._classify(call, result.error, "EndTxn")
        if step is not None:
            return step
        self._end_completed()
        return Next.CONTINUE

    def _end_completed(self) -> None:
        """The transaction is over: READY, or INITIALIZING for a KIP-360 bump after an abort
        (its operation completes when the new epoch arrives)."""
        self._txn = _Transaction()
        if self.state is TxnState.ABORTING_TRANSACTION and self.sequences.bump_requested:
            self._transition(TxnState.INITIALIZING)
            self._calls.append(InitProducerIdCall(self.producer_id, self.producer_epoch))
            return
        self._transition(TxnState.READY)
        self.last_error = None
        if self._end_op is not None:
            self._end_op.complete()
            self._end_op = None


@dataclass(frozen=True)
class TxnResult:
    """A transactional response as the manager reads it."""

    error: ErrorCode = ErrorCode.NONE
    partition_errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    producer_id: int = -1
    producer_epoch: int = -1
    transport_error: Exception | None = None


def _rank(error: ErrorCode) -> int:
    if error in ABORTABLE or error in NEEDS_EPOCH_BUMP:
        return 1
    if error in REFIND_COORDINATOR:
        return 2
    if error in RETRIABLE:
        return 3
    return 0  # fatal, or unexpected (which Kafka's client treats as fatal)


def _worst(errors: Iterable[ErrorCode]) -> ErrorCode:
    """The error that decides a response with several: fatal before abortable before the
    coordinator's move before retriable."""
    return min(errors, key=_rank)
