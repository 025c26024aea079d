"""The leader's ISR state machine: expand, shrink, the pending AlterPartition, fenced.

Theory of operation. A leader changes its ISR only by asking the controller (AlterPartition) and
has at most one change in flight per partition (Kafka's `PartitionState`: CommittedPartitionState,
PendingExpandIsr, PendingShrinkIsr). Everything that moves a partition between those states is
in this file; the rules that decide *whether* to propose (caught up, lagging, KIP-903 epochs) are
pure functions in `isr_rules`, and the replica manager does the I/O (sends the change through the
`AlterPartitionManager`, hands the answer back to `apply_alter_partition_answer`).

    phase            what the partition holds                  maximal ISR (HW, acks=all)
    COMMITTED        the controller's ISR, nothing in flight   the committed ISR
    PENDING_EXPAND   an expansion sent                         committed + the new member
    PENDING_SHRINK   a shrink sent                             committed (the removed count
                                                               until the controller agrees)
    FENCED           an answer said our view is stale          as the pending change it holds
                     (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, ...): nothing is proposed
                     until a LeaderAndIsr replaces the state

`TRANSITIONS` is the whole machine: phase -> event -> next phase. An event a phase does not
take is a bug in the caller and raises `IsrTransitionError` naming the partition, the event and
the phase. Two things are decided before the table is consulted, as Kafka does: an answer that no
longer applies (another change is pending, the epochs moved, this broker no longer leads, or its
phase does not take it: answers come from the network, so they are ignored, never raised) is
dropped by `answer_applies`, and a proposal is made only in COMMITTED (the expansion verdict's
"a change is in flight", the shrink check's guard).
The phase lives on the `Partition` (`isr_phase`) beside the change itself (`pending_isr`): both
change only here.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochlog.broker import isr_rules
from epochlog.broker.isr_rules import ExpandVerdict
from epochlog.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the partition imports this module for its phase
    from epochlog.broker.partition import Partition

log = logging.getLogger(__name__)


class IsrPhase(enum.Enum):
    COMMITTED = "committed"
    PENDING_EXPAND = "pending expansion"
    PENDING_SHRINK = "pending shrink"
    FENCED = "fenced"


class IsrEvent(enum.Enum):
    PROPOSE_EXPAND = "propose an expansion"
    PROPOSE_SHRINK = "propose a shrink"
    ANSWER_COMMIT = "the controller committed the change"
    ANSWER_REVERT = "the controller refused the change, nothing applied"
    ANSWER_RETRY = "the answer asks for the change again"
    ANSWER_FENCED = "the answer says the leader's view is stale"
    CONTROLLER_STATE = "a LeaderAndIsr replaced the state"
    STOP = "the replica stopped leading"


_P = IsrPhase
_E = IsrEvent
_RESET = {_E.CONTROLLER_STATE: _P.COMMITTED, _E.STOP: _P.COMMITTED}

TRANSITIONS: dict[IsrPhase, dict[IsrEvent, IsrPhase]] = {
    _P.COMMITTED: {
        _E.PROPOSE_EXPAND: _P.PENDING_EXPAND,
        _E.PROPOSE_SHRINK: _P.PENDING_SHRINK,
        **_RESET,
    },
    _P.PENDING_EXPAND: {
        _E.ANSWER_COMMIT: _P.COMMITTED,
        _E.ANSWER_REVERT: _P.COMMITTED,
        _E.ANSWER_RETRY: _P.PENDING_EXPAND,
        _E.ANSWER_FENCED: _P.FENCED,
        **_RESET,
    },
    _P.PENDING_SHRINK: {
        _E.ANSWER_COMMIT: _P.COMMITTED,
        _E.ANSWER_REVERT: _P.COMMITTED,
        _E.ANSWER_RETRY: _P.PENDING_SHRINK,
        _E.ANSWER_FENCED: _P.FENCED,
        **_RESET,
    },
    _P.FENCED: {
        # The fenced change is not sent again; an answer to it that still arrives (epochs
        # unchanged) is taken, a request to retry it is not.
        _E.ANSWER_COMMIT: _P.COMMITTED,
        _E.ANSWER_REVERT: _P.COMMITTED,
        _E.ANSWER_FENCED: _P.FENCED,
        **_RESET,
    },
}


class IsrTransitionError(RuntimeError):
    """An event the partition's ISR phase does not take."""


def next_phase(phase: IsrPhase, event: IsrEvent, partition_name: str = "?") -> IsrPhase:
    try:
        return TRANSITIONS[phase][event]
    except KeyError:
        raise IsrTransitionError(
            f"{partition_name}: the ISR state machine cannot take '{event.value}' in phase "
            f"{phase.name}"
        ) from None


# ------------------------------------------------------------------------- the pending change


class IsrChangeKind(enum.Enum):
    EXPAND = "expand"
    SHRINK = "shrink"


@dataclass(frozen=True, eq=False, slots=True)
class PendingIsrChange:
    """An ISR change sent (or about to be sent) to the controller. Compared by identity: an
    answer applies only to the very change it answers."""

    kind: IsrChangeKind
    committed_isr: tuple[int, ...]
    proposed_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.proposed_isr if self.kind is IsrChangeKind.EXPAND else self.committed_isr


def maximal_isr(
    committed_isr: tuple[int, ...], pending: PendingIsrChange | None
) -> tuple[int, ...]:
    return committed_isr if pending is None else pending.maximal_isr


class AlterOutcome(enum.Enum):
    COMMIT = "commit"  # take the controller's state
    REVERT = "revert"  # back to the last committed ISR, no retry
    WAIT = "wait"  # fenced: stay pending until a LeaderAndIsr replaces the state
    RETRY = "retry"  # send the same change again


_REVERT = frozenset({ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED})
_WAIT = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NEW_LEADER_ELECTED,
    }
)
_ANSWER_EVENT = {
    AlterOutcome.COMMIT: _E.ANSWER_COMMIT,
    AlterOutcome.REVERT: _E.ANSWER_REVERT,
    AlterOutcome.WAIT: _E.ANSWER_FENCED,
    AlterOutcome.RETRY: _E.ANSWER_RETRY,
}


def alter_partition_outcome(error: ErrorCode) -> AlterOutcome:
    """What a partition does with its AlterPartition answer (Kafka's handleAlterPartitionError):
    INELIGIBLE_REPLICA and OPERATION_NOT_ATTEMPTED revert (the controller guarantees nothing was
    applied); errors that mean "your view is stale" fence; anything else is retried."""
    if error is ErrorCode.NONE:
        return AlterOutcome.COMMIT
    if error in _REVERT:
        return AlterOutcome.REVERT
    if error in _WAIT:
        return AlterOutcome.WAIT
    return AlterOutcome.RETRY


def answer_applies(
    *,
    sent: PendingIsrChange,
    current_pending: PendingIsrChange | None,
    is_leader: bool,
    current_leader_epoch: int,
    current_partition_epoch: int,
    answer_leader_epoch: int | None = None,
    answer_partition_epoch: int | None = None,
    phase: IsrPhase | None = None,
    event: IsrEvent | None = None,
) -> bool:
    """An answer is applied only to the change still pending, in a phase that takes it, on a
    leader whose epochs have not moved; a successful answer also must not carry an older
    leader epoch or partition epoch."""
    if current_pending is not sent or not is_leader:
        return False
    if phase is not None and event is not None and event not in TRANSITIONS[phase]:
        return False  # from the network, not our bug: ignored, not raised
    if sent.leader_epoch != current_leader_epoch or sent.partition_epoch != current_partition_epoch:
        return False
    if answer_leader_epoch is not None and answer_leader_epoch != current_leader_epoch:
        return False
    return answer_partition_epoch is None or answer_partition_epoch >= current_partition_epoch


# ----------------------------------------------------------------------- on a Partition


def _enter(partition: Partition, event: IsrEvent, pending: PendingIsrChange | None) -> None:
    partition.isr_phase = next_phase(partition.isr_phase, event, partition.name)
    partition.pending_isr = pending


def reset(partition: Partition, event: IsrEvent = IsrEvent.CONTROLLER_STATE) -> None:
    """The controller's state replaced ours, or the replica stopped: nothing pending."""
    _enter(partition, event, None)


def maybe_expand_isr(partition: Partition, replica_id: int) -> PendingIsrChange | None:
    """After a fetch of `replica_id`: propose adding it if it may join (KIP-903)."""
    replica = partition.remote_replicas.get(replica_id)
    if not partition.is_leader or replica is None:
        return None
    brokers = partition.brokers
    verdict = isr_rules.expansion_verdict(
        replica_id=replica_id,
        replicas=partition.replicas,
        committed_isr=partition.isr,
        change_in_flight=partition.isr_phase is not IsrPhase.COMMITTED,
        alive=brokers.is_alive(replica_id),
        kip903_enabled=partition.settings.kip903_enabled,
        fetch_epoch=replica.broker_epoch,
        cached_epoch=brokers.broker_epoch(replica_id),
        follower_leo=replica.log_end_offset,
        high_watermark=partition.high_watermark,
        leader_epoch_start_offset=partition.leader_epoch_start_offset,
    )
    if verdict is ExpandVerdict.STALE_FETCH_EPOCH:
        log.debug(
            "%s: broker %d stays out of the ISR: fetch epoch %d, controller's epoch %d",
            partition.name,
            replica_id,
            replica.broker_epoch,
            brokers.broker_epoch(replica_id),
        )
    if verdict is not ExpandVerdict.EXPAND:
        return None
    change = PendingIsrChange(
        IsrChangeKind.EXPAND,
        partition.isr,
        isr_rules.expanded_isr(partition.isr, replica_id),
        partition.leader_epoch,
        partition.partition_epoch,
    )
    _enter(partition, IsrEvent.PROPOSE_EXPAND, change)
    log.info(
        "%s: expanding the ISR from %s to %s", partition.name, partition.isr, change.proposed_isr
    )
    return change


def maybe_shrink_isr(
    partition: Partition, now_ms: int, leader_stalls: isr_rules.LeaderStalls = isr_rules.NO_STALLS
) -> PendingIsrChange | None:
    """Propose removing the ISR members that lag more than replica.lag.time.max.ms of the
    leader's running time (its loop's stalls not counted)."""
    if not partition.is_leader or partition.isr_phase is not IsrPhase.COMMITTED:
        return None
    out = isr_rules.out_of_sync_replicas(
        isr=partition.isr,
        local_broker_id=partition.local_broker_id,
        followers=partition.remote_replicas,
        leader_leo=partition.log_end_offset,
        now_ms=now_ms,
        lag_time_max_ms=partition.settings.replica_lag_time_max_ms,
        leader_stalls=leader_stalls,
    )
    if not out:
        return None
    change = PendingIsrChange(
        IsrChangeKind.SHRINK,
        partition.isr,
        isr_rules.shrunk_isr(partition.isr, out),
        partition.leader_epoch,
        partition.partition_epoch,
    )
    _enter(partition, IsrEvent.PROPOSE_SHRINK, change)
    log.info(
        "%s: shrinking the ISR from %s to %s (out of sync: %s; HW %d, LEO %d)",
        partition.name,
        partition.isr,
        change.proposed_isr,
        out,
        partition.high_watermark,
        partition.log_end_offset,
    )
    return change


def isr_with_epochs(
    partition: Partition, change: PendingIsrChange, local_broker_epoch: int
) -> list[tuple[int, int]]:
    """NewIsrWithEpochs for `change`: the leader's epoch and each follower's fetch epoch."""
    return isr_rules.isr_with_epochs(
        proposed_isr=change.proposed_isr,
        local_broker_id=partition.local_broker_id,
        local_broker_epoch=local_broker_epoch,
        fetch_epochs={r: s.broker_epoch for r, s in partition.remote_replicas.items()},
        kip903_enabled=partition.settings.kip903_enabled,
    )


def apply_alter_partition_answer(
    partition: Partition,
    change: PendingIsrChange,
    error: ErrorCode,
    now_ms: int,
    *,
    leader_epoch: int | None = None,
    isr: tuple[int, ...] = (),
    partition_epoch: int | None = None,
) -> tuple[AlterOutcome | None, bool]:
    """Settle `change` with the controller's answer. Returns (what was done, or None when the
    answer no longer applies; whether the HW moved)."""
    outcome = alter_partition_outcome(error)
    event = _ANSWER_EVENT[outcome]
    committing = outcome is AlterOutcome.COMMIT
    if not answer_applies(
        sent=change,
        current_pending=partition.pending_isr,
        is_leader=partition.is_leader,
        current_leader_epoch=partition.leader_epoch,
        current_partition_epoch=partition.partition_epoch,
        answer_leader_epoch=leader_epoch if committing else None,
        answer_partition_epoch=partition_epoch if committing else None,
        phase=partition.isr_phase,
        event=event,
    ):
        log.debug("%s: ignoring an AlterPartition answer (%s)", partition.name, error.name)
        return None, False
    if committing:
        assert partition_epoch is not None
        partition.isr = tuple(isr)
        partition.partition_epoch = partition_epoch
        _enter(partition, event, None)
        log.info(
            "%s: the ISR is now %s (partition epoch %d)",
            partition.name,
            partition.isr,
            partition_epoch,
        )
    elif outcome is AlterOutcome.REVERT:
        _enter(partition, event, None)
        log.info(
            "%s: ISR change to %s refused with %s; back to %s",
            partition.name,
            change.proposed_isr,
            error.name,
            partition.isr,
        )
    else:
        _enter(partition, event, change)
        log.info(
            "%s: ISR change to %s answered %s (%s)",
            partition.name,
            change.proposed_isr,
            error.name,
            outcome.value,
        )
    return outcome, partition.maybe_increment_high_watermark(now_ms)
