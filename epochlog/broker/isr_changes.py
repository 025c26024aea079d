"""Proposing and settling a leader's ISR changes on a `Partition` (Kafka's maybeExpandIsr,
maybeShrinkIsr, handleAlterPartitionError).

The rules are `isr_rules`; these functions apply them to a partition's state and record the one
pending change. They do no I/O: the replica manager sends the change to the controller (through
the `AlterPartitionManager`) and hands the answer to `apply_alter_partition_answer`.
"""

from __future__ import annotations

import logging

from epochlog.broker import isr_rules
from epochlog.broker.isr_rules import (
    AlterOutcome,
    ExpandVerdict,
    IsrChangeKind,
    PendingIsrChange,
)
from epochlog.broker.partition import Partition
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


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
        change_in_flight=partition.pending_isr is not None,
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
    partition.pending_isr = change
    log.info(
        "%s: expanding the ISR from %s to %s", partition.name, partition.isr, change.proposed_isr
    )
    return change


def maybe_shrink_isr(
    partition: Partition, now_ms: int, leader_stalls: isr_rules.LeaderStalls = isr_rules.NO_STALLS
) -> PendingIsrChange | None:
    """Propose removing the ISR members that lag more than replica.lag.time.max.ms of the
    leader's running time (its loop's stalls not counted)."""
    if not partition.is_leader or partition.pending_isr is not None:
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
    partition.pending_isr = change
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
    outcome = isr_rules.alter_partition_outcome(error)
    committing = outcome is AlterOutcome.COMMIT
    if not isr_rules.answer_applies(
        sent=change,
        current_pending=partition.pending_isr,
        is_leader=partition.is_leader,
        current_leader_epoch=partition.leader_epoch,
        current_partition_epoch=partition.partition_epoch,
        answer_leader_epoch=leader_epoch if committing else None,
        answer_partition_epoch=partition_epoch if committing else None,
    ):
        log.debug("%s: ignoring an AlterPartition answer (%s)", partition.name, error.name)
        return None, False
    if committing:
        assert partition_epoch is not None
        partition.isr = tuple(isr)
        partition.partition_epoch = partition_epoch
        partition.pending_isr = None
        log.info(
            "%s: the ISR is now %s (partition epoch %d)",
            partition.name,
            partition.isr,
            partition_epoch,
        )
    elif outcome is AlterOutcome.REVERT:
        partition.pending_isr = None
        log.info(
            "%s: ISR change to %s refused with %s; back to %s",
            partition.name,
            change.proposed_isr,
            error.name,
            partition.isr,
        )
    else:
        log.info(
            "%s: ISR change to %s answered %s (%s)",
            partition.name,
            change.proposed_isr,
            error.name,
            outcome.value,
        )
    return outcome, partition.maybe_increment_high_watermark(now_ms)
