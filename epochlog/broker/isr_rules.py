"""The ISR rules of a partition leader, as pure functions (Kafka's `Partition`, fact sheet §4b).

- Pending changes: the state machine is `isr_state` (committed, pending expansion, pending
  shrink, fenced, and what an AlterPartition answer does); while a change waits, the *maximal*
  ISR is what the HW and acks=all must respect: an expansion counts the new member at once
  (KIP-497), a shrink keeps the members it removes until the controller agrees.
- Expansion (KIP-903). A follower may be proposed when no change is in flight, it is a replica
  not yet in the committed ISR, it is alive in the metadata cache, its log end offset has reached
  the HW and the start of the leader's current epoch, and (with the mechanism on) the broker
  epoch it sent in its latest Fetch equals the epoch the controller last told this leader for it.
  A fetch epoch from an earlier generation means the follower bounced since (it may have lost its
  disk), so it must wait until its new generation fetches. With the switch off, liveness alone
  decides, as in Kafka's ZooKeeper mode, and every NewIsrWithEpochs entry carries -1.
- Shrink. Members other than the leader that are not caught up (their LEO is not the leader's
  and they last reached the leader's LEO more than replica.lag.time.max.ms ago) are proposed for
  removal. The leader's own stalls do not count (`leader_stalled_ms`): lastCaughtUpTime moves
  only when the leader processes a fetch, so while its loop was blocked (applying a LeaderAndIsr
  for thousands of partitions, a long collection) every follower seemed to lag; a follower is
  out of sync only once it has had replica.lag.time.max.ms of the leader's *running* time to
  fetch, which also gives it its first fetch after a stall.
- HW (Kafka 3.9). Not advanced while the committed ISR is smaller than the effective
  min.insync.replicas (capped at the replication factor, so a topic with fewer replicas stays
  readable); otherwise min LEO over the leader, the maximal ISR, and replicas outside it that are
  caught up and eligible (they are about to join, so they must not miss committed data).
- acks=all. A waiting produce fails with NOT_ENOUGH_REPLICAS_AFTER_APPEND once the maximal ISR
  is below min.insync.replicas, and succeeds once the HW has passed its last offset.
- NewIsrWithEpochs: what an AlterPartition carries for each proposed member.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from epochlog.broker.partition_rules import leader_high_watermark
from epochlog.config.topic import min_insync_replicas_of
from epochlog.protocol.errors import ErrorCode

NO_BROKER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ReplicationSettings:
    """The broker settings the ISR rules read."""

    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30000
    kip903_enabled: bool = True


def replication_settings_for(
    base: ReplicationSettings, configs: Mapping[str, str]
) -> ReplicationSettings:
    """The broker's replication settings with the topic's min.insync.replicas, if it has one."""
    override = min_insync_replicas_of(configs)
    return base if override is None else dataclasses.replace(base, min_insync_replicas=override)


class BrokerView(Protocol):
    """What the leader knows of other brokers: the metadata cache."""

    def is_alive(self, broker_id: int) -> bool: ...

    def broker_epoch(self, broker_id: int) -> int: ...


class EveryBrokerAlive:
    """A stand-in view for a partition without a metadata cache (unit tests): every broker is
    alive with an unknown epoch."""

    def is_alive(self, broker_id: int) -> bool:
        return True

    def broker_epoch(self, broker_id: int) -> int:
        return NO_BROKER_EPOCH


class FollowerProgress(Protocol):
    """The leader's view of one follower (`partition.ReplicaState`)."""

    broker_id: int
    log_end_offset: int
    last_caught_up_time_ms: int
    broker_epoch: int


# --------------------------------------------------------------------------------- expansion


class ExpandVerdict(enum.Enum):
    EXPAND = "expand"
    CHANGE_IN_FLIGHT = "an ISR change is in flight"
    ALREADY_IN_ISR = "already in the ISR"
    NOT_A_REPLICA = "not a replica"
    NOT_ALIVE = "not alive in the metadata cache"
    STALE_FETCH_EPOCH = "fetch epoch differs from the controller's broker epoch"
    NOT_CAUGHT_UP = "not caught up"


def isr_eligible(
    *, alive: bool, kip903_enabled: bool, fetch_epoch: int, cached_epoch: int
) -> ExpandVerdict:
    """May this broker be (or wait to be) in the ISR at all? EXPAND when yes."""
    if not alive:
        return ExpandVerdict.NOT_ALIVE
    if kip903_enabled and fetch_epoch != cached_epoch:
        return ExpandVerdict.STALE_FETCH_EPOCH
    return ExpandVerdict.EXPAND


def is_follower_in_sync(
    *, follower_leo: int, high_watermark: int, leader_epoch_start_offset: int
) -> bool:
    """Caught up enough to join: at or past the HW and the start of the leader's epoch."""
    return (
        leader_epoch_start_offset >= 0
        and follower_leo >= high_watermark
        and follower_leo >= leader_epoch_start_offset
    )


def expansion_verdict(
    *,
    replica_id: int,
    replicas: tuple[int, ...],
    committed_isr: tuple[int, ...],
    change_in_flight: bool,
    alive: bool,
    kip903_enabled: bool,
    fetch_epoch: int,
    cached_epoch: int,
    follower_leo: int,
    high_watermark: int,
    leader_epoch_start_offset: int,
) -> ExpandVerdict:
    """Kafka's maybeExpandIsr conditions, in its order, with KIP-903's epoch check."""
    if change_in_flight:
        return ExpandVerdict.CHANGE_IN_FLIGHT
    if replica_id in committed_isr:
        return ExpandVerdict.ALREADY_IN_ISR
    if replica_id not in replicas:
        return ExpandVerdict.NOT_A_REPLICA
    eligible = isr_eligible(
        alive=alive,
        kip903_enabled=kip903_enabled,
        fetch_epoch=fetch_epoch,
        cached_epoch=cached_epoch,
    )
    if eligible is not ExpandVerdict.EXPAND:
        return eligible
    if not is_follower_in_sync(
        follower_leo=follower_leo,
        high_watermark=high_watermark,
        leader_epoch_start_offset=leader_epoch_start_offset,
    ):
        return ExpandVerdict.NOT_CAUGHT_UP
    return ExpandVerdict.EXPAND


def expanded_isr(committed_isr: tuple[int, ...], replica_id: int) -> tuple[int, ...]:
    return (*committed_isr, replica_id)


# ------------------------------------------------------------------------------------ shrink


class LeaderStalls(Protocol):
    """How long the leader's loop was blocked in a window (`loop_stalls.LoopStalls`)."""

    def stalled_ms(self, since_ms: int, now_ms: int) -> int: ...


class NoStalls:
    """A leader that never stalls (unit tests, harnesses without a probe)."""

    def stalled_ms(self, since_ms: int, now_ms: int) -> int:
        return 0


NO_STALLS = NoStalls()


def is_caught_up(
    *,
    replica_leo: int,
    last_caught_up_time_ms: int,
    leader_leo: int,
    now_ms: int,
    lag_time_max_ms: int,
    leader_stalled_ms: int = 0,
) -> bool:
    """Kafka's ReplicaState.isCaughtUp: at the leader's LEO, or there within the lag time of
    the leader's running time (`leader_stalled_ms` of the window the leader could not serve)."""
    if replica_leo == leader_leo:
        return True
    return now_ms - last_caught_up_time_ms - leader_stalled_ms <= lag_time_max_ms


def out_of_sync_replicas(
    *,
    isr: tuple[int, ...],
    local_broker_id: int,
    followers: Mapping[int, FollowerProgress],
    leader_leo: int,
    now_ms: int,
    lag_time_max_ms: int,
    leader_stalls: LeaderStalls = NO_STALLS,
) -> tuple[int, ...]:
    """ISR members (not the leader) to propose for removal; the leader's stalls since a
    follower last caught up are not held against it."""
    out: list[int] = []
    for replica_id in isr:
        if replica_id == local_broker_id:
            continue
        follower = followers.get(replica_id)
        if follower is None:
            out.append(replica_id)
            continue
        last = follower.last_caught_up_time_ms
        if not is_caught_up(
            replica_leo=follower.log_end_offset,
            last_caught_up_time_ms=last,
            leader_leo=leader_leo,
            now_ms=now_ms,
            lag_time_max_ms=lag_time_max_ms,
            leader_stalled_ms=(
                0
                if now_ms - last <= lag_time_max_ms  # caught up anyway: no need to ask
                else leader_stalls.stalled_ms(last, now_ms)
            ),
        ):
            out.append(replica_id)
    return tuple(out)


def shrunk_isr(committed_isr: tuple[int, ...], removed: Iterable[int]) -> tuple[int, ...]:
    gone = set(removed)
    return tuple(r for r in committed_isr if r not in gone)


# ------------------------------------------------------------------------------- high watermark


def effective_min_isr(min_insync_replicas: int, replication_factor: int) -> int:
    return max(1, min(min_insync_replicas, replication_factor))


def leader_hw(
    *,
    current_hw: int,
    leader_leo: int,
    committed_isr_size: int,
    replication_factor: int,
    min_insync_replicas: int,
    holding_leos: Iterable[int],
) -> int:
    """The leader's new HW. `holding_leos`: the LEOs of the followers that hold it back (in the
    maximal ISR, or caught up and eligible)."""
    if committed_isr_size < effective_min_isr(min_insync_replicas, replication_factor):
        return current_hw
    return leader_high_watermark(current_hw, leader_leo, holding_leos)


def delayed_produce_status(
    *, high_watermark: int, required_offset: int, maximal_isr_size: int, min_insync_replicas: int
) -> ErrorCode | None:
    """A waiting acks=all produce: its final error, or None to keep waiting."""
    if maximal_isr_size < min_insync_replicas:
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    if high_watermark >= required_offset:
        return ErrorCode.NONE
    return None


# ------------------------------------------------------------------------------- AlterPartition


def isr_with_epochs(
    *,
    proposed_isr: tuple[int, ...],
    local_broker_id: int,
    local_broker_epoch: int,
    fetch_epochs: Mapping[int, int],
    kip903_enabled: bool,
) -> list[tuple[int, int]]:
    """NewIsrWithEpochs: (broker id, epoch) per member; the leader's own epoch, each follower's
    epoch from its latest fetch (-1 if none); all -1 with the mechanism off."""
    if not kip903_enabled:
        return [(r, NO_BROKER_EPOCH) for r in proposed_isr]
    return [
        (r, local_broker_epoch if r == local_broker_id else fetch_epochs.get(r, NO_BROKER_EPOCH))
        for r in proposed_isr
    ]
