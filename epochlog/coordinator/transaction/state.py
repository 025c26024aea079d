"""A transactional id's metadata and the one table of its state transitions.

How it works. Kafka's transaction coordinator moves each transactional id through eight states:

    Empty / CompleteCommit / CompleteAbort --AddPartitions--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
    Ongoing --EndTxn(abort), timeout--> PrepareAbort --markers written--> CompleteAbort
    Ongoing --InitProducerId, timeout (epoch bump)--> PrepareEpochFence --> PrepareAbort
    Empty / CompleteCommit / CompleteAbort --InitProducerId--> Empty (new epoch)
    Empty / CompleteCommit / CompleteAbort --transactional.id.expiration.ms--> Dead

`VALID_PREVIOUS_STATES` is that picture as data (Kafka's `TransactionState.validPreviousStates`);
`check_transition` refuses anything else with an error naming the id and both states.
PrepareEpochFence is never written: it is the pending state while the bumped epoch's PrepareAbort
is appended. Every other state is persisted by its byte in TransactionLogValue.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MaxValue


class TxnState(enum.Enum):
    """Kafka's name for each state and its byte in TransactionLogValue."""

    EMPTY = ("Empty", 0)
    ONGOING = ("Ongoing", 1)
    PREPARE_COMMIT = ("PrepareCommit", 2)
    PREPARE_ABORT = ("PrepareAbort", 3)
    COMPLETE_COMMIT = ("CompleteCommit", 4)
    COMPLETE_ABORT = ("CompleteAbort", 5)
    DEAD = ("Dead", 6)
    PREPARE_EPOCH_FENCE = ("PrepareEpochFence", 7)

    @property
    def kafka_name(self) -> str:
        return self.value[0]

    @property
    def byte(self) -> int:
        return self.value[1]

    @classmethod
    def from_byte(cls, byte: int) -> TxnState:
        for state in cls:
            if state.byte == byte:
                return state
        raise ValueError(f"TransactionLogValue: unknown TransactionStatus {byte}")

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return next((s for s in cls if s.kafka_name == name), None)


_S = TxnState
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}

COMPLETED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
PREPARED = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT})


class IllegalTxnTransitionError(Exception):
    def __init__(self, transactional_id: str, current: TxnState, target: TxnState) -> None:
        super().__init__(
            f"transactional id {transactional_id!r} cannot move from {current.kafka_name} to "
            f"{target.kafka_name} (it may be entered only from "
            f"{', '.join(sorted(s.kafka_name for s in VALID_PREVIOUS_STATES[target]))})"
        )


def check_transition(transactional_id: str, current: TxnState, target: TxnState) -> None:
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalTxnTransitionError(transactional_id, current, target)


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch for fencing: at Short.MaxValue - 1 a new producer id is due."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True)
class TxnMetadata:
    """What `__transaction_state` holds for one transactional id (TransactionLogValue), plus
    `last_producer_epoch`, which Kafka keeps in memory only (-1 after a load) to recognise a
    retried InitProducerId (KIP-360)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int  # -1 unless a transaction has begun
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
