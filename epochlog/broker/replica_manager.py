"""The partitions this broker hosts, and everything that changes them as a group.

The replica manager owns the `Partition` objects (created on the first LeaderAndIsr that names
this broker, from the log on disk or a new one), applies the controller's LeaderAndIsr and
StopReplica to them, and runs the broker's background work:

- high-watermark checkpoints (`replication-offset-checkpoint`, through the log manager) every
  replica.high.watermark.checkpoint.interval.ms and on shutdown, of the hosted partitions only,
  as Kafka does; but never before this broker has applied the first LeaderAndIsr of its current
  generation (broker epoch). Before that no partition is hosted, so a checkpoint would erase
  every HW on disk; a crash right after would make the broker truncate to 0 (KAFKA-7235). The
  guard is the mechanism switch `epochlog.test.hw.checkpoint.guard.enabled`.
- retention every log.retention.check.interval.ms (never past the HW) with the expiry of idle
  producer ids, and the recovery-point and log-start-offset checkpoints
  (log.flush.offset.checkpoint.interval.ms, log.flush.start.offset.checkpoint.interval.ms).
- the two purgatories: delayed produces (acks=all) wait for the HW, delayed fetches (long-poll)
  for data. Any move of a partition's LEO, HW, ISR or role calls `check_and_complete` with its
  key.
- the leader's ISR (KIP-903): every follower fetch is recorded (`record_follower_fetch`), which
  may move the HW and propose an expansion; every replica.lag.time.max.ms / 2 the lagging members
  are proposed for removal (`shrink_isrs`). Proposals go to the controller through the
  `alter_partition_manager` (set by the broker), carrying this broker's epoch and the followers'
  fetch epochs; its answers settle them (`isr_state.apply_alter_partition_answer`).

Damage (issue 14): a log whose batch headers do not parse where the log says a batch starts is
never served and never fails more than its own partition. The first LeaderAndIsr that hosts a
partition walks every batch header of its log anyway (the producer-state rebuild), so damage left
on disk when the broker was down is found there; a read whose index walk meets damage reports it
through `on_log_damage`. Either way the log is cut before the damaged batch, as crash recovery
would (`PartitionLog.recover_from_damage`). A replica whose log lost data that way refuses to
lead (KAFKA_STORAGE_ERROR for that partition in the LeaderAndIsr answer, the request's other
partitions applied) until it becomes a follower and fetches the rest from the new leader; a leader
that finds damage gives up leadership and asks the controller to resend its LeaderAndIsr
(`on_storage_event`, a log-dir event notification), whose answer then names the partition.

Log-dir failure (KIP-112): an I/O error while a log is written, read or checkpointed
(`on_io_error`) takes its log dir offline in the log manager, which tells `_on_log_dir_offline`:
the dir's partitions stop (their fetchers go, waiting produces answer NOT_LEADER_OR_FOLLOWER)
and answer KAFKA_STORAGE_ERROR to Produce, Fetch and LeaderAndIsr, and the controller is
notified, so its resent LeaderAndIsr takes those replicas offline and moves their leadership.
Every epochlog.log.dir.probe.interval.ms an offline dir is probed (`log_dirs.probe_dir`); once
usable it is reloaded and the controller notified again: its answers then take the replicas back
as followers, which rejoin the ISR through KIP-903 once caught up. Kafka needs a restart here.

The produce and fetch paths themselves live in `appends` and `reads`. The replica fetchers attach
through the hooks `on_become_follower(partitions)`, `on_become_leader(partitions)` and
`on_stop_replicas(keys)`; `live_leaders` keeps the leader endpoints LeaderAndIsr named.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from epochlog.broker import isr_state
from epochlog.broker.alter_partition_manager import (
    RETRY_BACKOFF_MS,
    AlterPartitionItem,
    PartitionAnswer,
)
from epochlog.broker.collaborators import BrokerEpochHolder
from epochlog.broker.control_rules import (
    LeaderAndIsrAction,
    leader_and_isr_verdict,
    stop_replica_verdict,
)
from epochlog.broker.delayed import DelayedOperationPurgatory, Scheduler
from epochlog.broker.isr_rules import ReplicationSettings, replication_settings_for
from epochlog.broker.isr_state import AlterOutcome, PendingIsrChange
from epochlog.broker.loop_stalls import LoopStalls, run_probe
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.broker.partition import (
    Partition,
    PartitionError,
    PartitionState,
    rebuild_producer_state,
)
from epochlog.broker.producer_state import ProducerStateManager
from epochlog.broker.replica_mover import ReplicaMover
from epochlog.broker.replication_quotas import ReplicationQuotas
from epochlog.config.broker import INT64_MAX, BrokerConfig
from epochlog.config.topic import (
    log_config_for,
    validate_topic_configs,
)
from epochlog.faults import NO_FAULTS, WALL_CLOCK, FaultInjector
from epochlog.metrics.process_stats import STATS
from epochlog.metrics.traffic import TopicTraffic
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.schema import ZERO_UUID
from epochlog.storage import LogConfig, LogManager, PartitionLog, StorageError
from epochlog.storage.checkpoint import (
    DeferrableEpochCheckpoint,
    deferred_checkpoints,
    write_deferred,
)
from epochlog.storage.errors import LogDamageError
from epochlog.storage.files import collected_durable_writes, durable_batch, sync_file_systems
from epochlog.storage.log_dirs import probe_dir
from epochlog.storage.log_manager import open_planned_logs

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def now_ms() -> int:
    # WALL_CLOCK.offset_ms is 0 unless a test's clock-jump rule sets it (faults.py)
    return time.time_ns() // 1_000_000 + WALL_CLOCK.offset_ms


def known_topic_id(value: uuid.UUID | None) -> uuid.UUID | None:
    return None if value is None or value == ZERO_UUID else value


# Partitions applied per step of a LeaderAndIsr or StopReplica: a step of 200 new partitions
# holds the loop for tens of milliseconds (their files are made in a worker thread).
APPLY_STEP_PARTITIONS = 200


@dataclasses.dataclass
class _ApplyTally:
    """What one LeaderAndIsr did, across its steps."""

    results: list[tuple[str, uuid.UUID | None, int, ErrorCode]] = dataclasses.field(
        default_factory=list
    )
    leaders: int = 0
    followers: int = 0


class IsrChangeSender(Protocol):
    """Where ISR changes go (the `AlterPartitionManager`); False: one is already queued."""

    def submit(self, item: AlterPartitionItem, delay_ms: int = 0) -> bool: ...


class ReplicaManager:
    def __init__(
        self,
        *,
        broker_id: int,
        config: BrokerConfig,
        log_manager: LogManager,
        metadata_cache: MetadataCache,
        epoch_holder: BrokerEpochHolder,
        schedule: Scheduler | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.epoch_holder = epoch_holder
        self.partitions: dict[TopicPartition, Partition] = {}
        self.produce_purgatory = DelayedOperationPurgatory("produce", schedule)
        self.fetch_purgatory = DelayedOperationPurgatory("fetch", schedule)
        # DeleteRecords waiting for the followers' log start offsets (broker/delete_records.py)
        self.delete_records_purgatory = DelayedOperationPurgatory("delete-records", schedule)
        # Messages and bytes in and out per topic (metrics.port set; None: not counted)
        self.traffic: TopicTraffic | None = None
        self._log_start_checkpoint_pending = False
        self.controller_epoch = -1
        self.min_insync_replicas: int = config["min.insync.replicas"]
        self.settings = ReplicationSettings(
            min_insync_replicas=self.min_insync_replicas,
            replica_lag_time_max_ms=config["replica.lag.time.max.ms"],
            kip903_enabled=config.enabled("epochlog.test.kip903.enabled"),
        )
        # Replication throttles (KIP-73): the fetch path and the replica fetchers consult them.
        self.replication_quotas = ReplicationQuotas(broker_id)
        self._apply_replication_rates(config)
        self.on_become_follower: Callable[[list[Partition]], None] | None = None
        self.on_become_leader: Callable[[list[Partition]], None] | None = None
        self.on_stop_replicas: Callable[[list[TopicPartition]], None] | None = None
        self.faults: FaultInjector = NO_FAULTS  # tests: injected storage errors
        # Asks the controller to resend this broker's LeaderAndIsr (a log-dir event
        # notification): called when a led partition's log was found damaged.
        self.on_storage_event: Callable[[], None] | None = None
        self.alter_partition_manager: IsrChangeSender | None = None
        # The topic's configs (ZooKeeper's /config/topics/<t> on a real broker), read when a
        # partition's log is created; none in the in-process harnesses.
        self.topic_configs: Callable[[str], Mapping[str, str]] = lambda topic: {}
        self._configs_of_request: dict[str, Mapping[str, str]] = {}  # one read per topic
        # The overrides each hosted topic's partitions were built with, kept so that a broker
        # config change can rebuild them (dynamic configs).
        self._overrides_in_use: dict[str, Mapping[str, str]] = {}
        self.live_leaders: dict[int, tuple[str, int]] = {}
        self._guard_hw_checkpoint = config.enabled("epochlog.test.hw.checkpoint.guard.enabled")
        # The broker epoch in force when the last LeaderAndIsr was applied (None: never).
        self._leader_and_isr_generation: int | None = None
        self._stored_hws: dict[TopicPartition, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._checkpoint_writes: set[asyncio.Task[int]] = set()
        self._appended: set[TopicPartition] = set()  # led partitions whose fetches are to wake
        self._hw_moved: set[TopicPartition] = set()  # HWs moved by follower fetches, to act on
        # The loop's own stalls (a probe task feeds it): the ISR check does not count them
        # against followers, and the figures report them.
        self.loop_stalls = LoopStalls(horizon_ms=2 * self.settings.replica_lag_time_max_ms)
        # Replicas moving to another log dir (AlterReplicaLogDirs).
        self.replica_mover = ReplicaMover(
            log_manager, self, is_cleaning=log_manager.cleaner.is_cleaning
        )
        log_manager.on_dir_offline = self._on_log_dir_offline
        min_free = config["epochlog.log.dir.min.free.bytes"]
        self._dir_min_free_bytes: int = min_free if min_free >= 0 else config["log.segment.bytes"]

    # ----------------------------------------------------------------------- lookups

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def partition_or_error(self, topic: str, partition: int) -> Partition:
        """The hosted partition, else NOT_LEADER_OR_FOLLOWER when the cluster has it elsewhere
        and UNKNOWN_TOPIC_OR_PARTITION when nobody does (Kafka's getPartitionOrError)."""
        found = self.partitions.get((topic, partition))
        if found is not None:
            if found.storage_damage is not None:
                raise PartitionError(
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    f"{found.name} on broker {self.broker_id}: {found.storage_damage}",
                )
            return found
        if self.log_manager.is_offline(topic, partition):
            raise PartitionError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"{topic}-{partition}: its log dir on broker {self.broker_id} is offline",
            )
        if self.metadata_cache.contains(topic, partition):
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{topic}-{partition} is not hosted on broker {self.broker_id}",
            )
        raise PartitionError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic-partition {topic}-{partition}"
        )

    def hosted_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log the hosted replica serves (None: not hosted, or damaged)."""
        found = self.partitions.get((topic, partition))
        return found.log if found is not None and found.storage_damage is None else None

    def use_moved_log(self, topic: str, partition: int, moved: PartitionLog) -> None:
        """The replica's log moved to another log dir: serve it from there."""
        self.partitions[(topic, partition)].use_moved_log(moved)

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        name = self.metadata_cache.topic_name(topic_id)
        if name is not None:
            return name
        for partition in self.partitions.values():
            if partition.topic_id == topic_id:
                return partition.topic
        return None

    def topic_id_for_name(self, topic: str) -> uuid.UUID | None:
        topic_id = self.metadata_cache.topic_id(topic)
        if topic_id is not None:
            return topic_id
        for partition in self.partitions.values():
            if partition.topic == topic and partition.topic_id is not None:
                return partition.topic_id
        return None

    # ----------------------------------------------------------------- notifications

    def on_leader_append(self, key: TopicPartition, high_watermark_moved: bool) -> None:
        """The LEO of a led partition moved (and maybe its HW). Fetches waiting for it (the
        followers') are woken once the loop's current step is done, so that one answer carries
        every append of that step (all partitions of a request, and the requests that came in
        the same read) instead of a round trip each."""
        if high_watermark_moved:
            self.produce_purgatory.check_and_complete(key)
        if not self.fetch_purgatory.watching(key):
            return  # no fetch is parked on it: nothing to wake, no callback to schedule
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # driven without a loop (unit tests): at once
            self.fetch_purgatory.check_and_complete(key)
            return
        if not self._appended:
            loop.call_soon(self._wake_fetches)
        self._appended.add(key)

    def _wake_fetches(self) -> None:
        appended, self._appended = self._appended, set()
        self.fetch_purgatory.check_and_complete_keys(appended)

    def on_high_watermark_moved(self, key: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.check_and_complete(key)

    def _on_partition_changed(self, key: TopicPartition) -> None:
        """Role change or removal: waiting operations re-check (and fail if not leader)."""
        self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.check_and_complete(key)
        self.delete_records_purgatory.check_and_complete(key)

    def _on_partitions_changed(self, keys: list[TopicPartition]) -> None:
        """`_on_partition_changed` for many at once: each waiting operation re-checks once. A
        follower's fetch waits on thousands of partitions; re-tried per changed partition, a
        step of a LeaderAndIsr read all of them hundreds of times over (a fifth of a broker's
        time in the steps after creating 10,000 partitions)."""
        if not keys:
            return
        self.produce_purgatory.check_and_complete_keys(keys)
        self.fetch_purgatory.check_and_complete_keys(keys)
        self.delete_records_purgatory.check_and_complete_keys(keys)

    def on_log_start_moved(self, partition: Partition) -> None:
        """The partition's log start offset moved (DeleteRecords on the leader, a follower
        copying its leader's): segments wholly below it go now, and the log dir's
        log-start-offset-checkpoint is rewritten once this loop step is done (one write for
        every partition moved in it), so the new start survives a crash."""
        try:
            partition.log.delete_segments_below_log_start(partition.high_watermark, now_ms())
        except OSError as exc:
            self.on_io_error(partition.key, exc)
        if self._log_start_checkpoint_pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # driven without a loop (unit tests): at once
            self.log_manager.checkpoint_log_start_offsets()
            return
        self._log_start_checkpoint_pending = True

        def checkpoint() -> None:
            self._log_start_checkpoint_pending = False
            self.log_manager.checkpoint_log_start_offsets()

        loop.call_soon(checkpoint)

    # ------------------------------------------------------------------------- ISR

    def record_follower_fetch(
        self,
        partition: Partition,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int,
        broker_epoch: int,
        leader_leo: int,
        now: int,
    ) -> None:
        """A follower fetched (no divergence): record it, maybe move the HW (waking delayed
        produces and fetches), maybe propose adding it to the ISR."""
        moved = partition.update_follower_fetch_state(
            replica_id, fetch_offset, log_start_offset, broker_epoch, leader_leo, now
        )
        change = isr_state.maybe_expand_isr(partition, replica_id)
        if change is not None:
            self._send_isr_change(partition, change)
        if moved:
            self._hw_moved_by_fetch(partition.key)
        if self.delete_records_purgatory.watching(partition.key):
            self.delete_records_purgatory.check_and_complete(partition.key)

    def _hw_moved_by_fetch(self, key: TopicPartition) -> None:
        """Delayed operations re-check once the loop's current step is done: a follower's fetch
        moves the HW of each of its partitions in turn, and a produce waiting on several of them
        was re-tried after each (all partitions of every waiting request, per partition of the
        fetch) where one re-try after the last one completes it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # driven without a loop (unit tests): at once
            self.on_high_watermark_moved(key)
            return
        if not self._hw_moved:
            loop.call_soon(self._complete_hw_moves)
        self._hw_moved.add(key)

    def _complete_hw_moves(self) -> None:
        moved, self._hw_moved = self._hw_moved, set()
        self.produce_purgatory.check_and_complete_keys(moved)
        self.fetch_purgatory.check_and_complete_keys(moved)

    def shrink_isrs(self, now: int | None = None) -> int:
        """Propose removing lagging followers from every led partition; proposals made."""
        now = now_ms() if now is None else now
        proposed = 0
        for partition in list(self.partitions.values()):
            change = isr_state.maybe_shrink_isr(partition, now, self.loop_stalls)
            if change is not None:
                proposed += 1
                self._send_isr_change(partition, change)
        return proposed

    def _send_isr_change(
        self, partition: Partition, change: PendingIsrChange, delay_ms: int = 0
    ) -> None:
        sender = self.alter_partition_manager
        topic_id = partition.topic_id
        if sender is None or topic_id is None:
            log.warning(
                "%s: cannot send an ISR change (no controller channel or topic id)", partition.name
            )
            self._on_isr_answer(
                partition, change, PartitionAnswer(ErrorCode.OPERATION_NOT_ATTEMPTED)
            )
            return
        key = partition.key
        item = AlterPartitionItem(
            key=key,
            topic_id=topic_id,
            leader_epoch=change.leader_epoch,
            partition_epoch=change.partition_epoch,
            isr_with_epochs=isr_state.isr_with_epochs(partition, change, self.epoch_holder.epoch),
            on_answer=lambda answer: self._on_isr_answer(partition, change, answer),
            still_wanted=lambda: (
                partition.pending_isr is change and self.partitions.get(key) is partition
            ),
        )
        if not sender.submit(item, delay_ms):
            self._on_isr_answer(
                partition, change, PartitionAnswer(ErrorCode.OPERATION_NOT_ATTEMPTED)
            )

    def _on_isr_answer(
        self, partition: Partition, change: PendingIsrChange, answer: PartitionAnswer
    ) -> None:
        isr_before = len(partition.isr)
        outcome, _ = isr_state.apply_alter_partition_answer(
            partition,
            change,
            answer.error,
            now_ms(),
            leader_epoch=answer.leader_epoch,
            isr=answer.isr,
            partition_epoch=answer.partition_epoch,
        )
        if outcome is AlterOutcome.RETRY:
            self._send_isr_change(partition, change, RETRY_BACKOFF_MS)
        if outcome is not None:
            STATS.count_isr_change(isr_before, len(partition.isr))  # IsrShrinks/IsrExpands
            # The ISR (or the HW) changed: acks=all produces re-check min.insync.replicas.
            self.on_high_watermark_moved(partition.key)

    # ------------------------------------------------------------------------ damage

    def on_log_damage(self, partition: Partition, damage: LogDamageError) -> None:
        """A read of `partition` met damage: cut the log there, and if this broker led it, give
        up leadership (waiting produces answer NOT_LEADER_OR_FOLLOWER) and ask the controller
        to move it; the replica refuses to lead until it follows someone."""
        if self.partitions.get(partition.key) is not partition:
            return
        log.error("%s: damaged log found by a read: %s", partition.name, damage)
        self._repair(partition, damage)
        if partition.is_leader:
            partition.storage_damage = f"its log was damaged and cut: {damage}"
            partition.stop_leading()
            self._on_partition_changed(partition.key)
            if self.on_storage_event is not None:
                self.on_storage_event()

    def on_io_error(self, key: TopicPartition, error: OSError) -> None:
        """An I/O error on the partition's log: its log dir goes offline."""
        self.log_manager.handle_io_error(self.log_manager.dir_of(*key), error)

    def _on_log_dir_offline(self, log_dir: object, keys: list[TopicPartition]) -> None:
        stopped: list[TopicPartition] = []
        for key in keys:
            partition = self.partitions.pop(key, None)
            if partition is None:
                continue
            partition.stop_leading()
            self._stored_hws[key] = partition.high_watermark
            stopped.append(key)
        for key in stopped:
            self._on_partition_changed(key)
        if stopped and self.on_stop_replicas is not None:
            self.on_stop_replicas(stopped)
        if self.on_storage_event is not None:
            self.on_storage_event()

    def probe_offline_dirs(self) -> list[object]:
        """Reload every offline log dir that is usable again; the dirs brought back."""
        back: list[object] = []
        for log_dir, reason in list(self.log_manager.offline_dirs.items()):
            injected = self.faults.storage_error(self.broker_id)  # tests: the disk still fails
            problem = str(injected) if injected else probe_dir(log_dir, self._dir_min_free_bytes)
            if problem is not None:
                log.debug("log dir %s still offline (%s): %s", log_dir, reason, problem)
                continue
            try:
                self.log_manager.reload_dir(log_dir)
            except OSError as exc:
                log.warning("log dir %s is not usable yet: %s", log_dir, exc)
                continue
            back.append(log_dir)
        if back and self.on_storage_event is not None:
            self.on_storage_event()
        return back

    def _repair(self, partition: Partition, damage: LogDamageError) -> int:
        cut = repair_damaged_log(partition.producer_state, partition.log, damage, now_ms())
        partition.high_watermark = min(partition.high_watermark, partition.log_end_offset)
        return cut

    # ---------------------------------------------------------------- LeaderAndIsr

    def apply_leader_and_isr(
        self, request: Any, version: int
    ) -> list[tuple[str, uuid.UUID | None, int, ErrorCode]]:
        """Apply the partitions of a LeaderAndIsr whose broker and controller epochs passed, in
        one step (tests, small requests). Returns (topic, topic id, partition, error) per
        partition, in request order. The broker uses `apply_leader_and_isr_in_steps`."""
        entries = self._begin_leader_and_isr(request, version)
        tally = _ApplyTally()
        # Leader-epoch checkpoints are written after the answer, off the loop (see
        # DeferrableEpochCheckpoint); other files written here share one file-system sync.
        with durable_batch(), deferred_checkpoints() as deferred:
            changed, followers = self._apply_entries(entries, now_ms(), tally)
        self._finish_step(changed, followers, deferred)
        return self._end_leader_and_isr(tally)

    async def apply_leader_and_isr_in_steps(
        self, request: Any, version: int, step_size: int = APPLY_STEP_PARTITIONS
    ) -> list[tuple[str, uuid.UUID | None, int, ErrorCode]]:
        """`apply_leader_and_isr` without holding the loop: `step_size` partitions at a time,
        their new logs created in a worker thread, their files made durable by one sync per
        step (in a worker thread too), the loop free to serve between steps. Each step is
        complete before the next (its partitions lead or follow, fetchers started), as if the
        controller had sent several requests; the answer goes once every step is done."""
        entries = self._begin_leader_and_isr(request, version)
        tally = _ApplyTally()
        for start in range(0, len(entries), step_size):
            step = entries[start : start + step_size]
            plans = self.log_manager.plan_new_logs(self._new_log_specs(step))
            with collected_durable_writes() as dirs, deferred_checkpoints() as deferred:
                if plans:
                    await asyncio.to_thread(open_planned_logs, plans)
                self.log_manager.adopt_planned_logs(plans)
                changed, followers = self._apply_entries(step, now_ms(), tally)
            if dirs:
                await asyncio.to_thread(sync_file_systems, dirs)
            self._finish_step(changed, followers, deferred)
            await asyncio.sleep(0)  # let the loop serve between steps
        return self._end_leader_and_isr(tally)

    def _begin_leader_and_isr(self, request: Any, version: int) -> list[tuple[str, Any, Any]]:
        """Take the request's controller epoch and live leaders; its (topic, topic id, partition
        state) entries in request order."""
        self.controller_epoch = max(self.controller_epoch, request.controller_epoch)
        self._configs_of_request.clear()
        for leader in getattr(request, "live_leaders", ()):
            self.live_leaders[leader.broker_id] = (leader.host_name, leader.port)
        entries: list[tuple[str, Any, Any]] = []
        for topic_state in request.topic_states:
            topic = topic_state.topic_name
            topic_id = known_topic_id(
                getattr(topic_state, "topic_id", None) if version >= 5 else None
            )
            if topic_id is None:
                topic_id = self.metadata_cache.topic_id(topic)
            entries.extend((topic, topic_id, state) for state in topic_state.partition_states)
        return entries

    def _new_log_specs(
        self, entries: Iterable[tuple[str, Any, Any]]
    ) -> list[tuple[str, int, uuid.UUID | None, LogConfig]]:
        """The partitions of `entries` that name this broker and have no log yet."""
        specs: list[tuple[str, int, uuid.UUID | None, LogConfig]] = []
        for topic, topic_id, state in entries:
            index = state.partition_index
            if (topic, index) in self.partitions or self.broker_id not in state.replicas:
                continue
            if self.log_manager.get_log(topic, index) is not None:
                continue
            config = log_config_for(self.log_manager.default_config, self._topic_configs(topic))
            specs.append((topic, index, topic_id, config))
        return specs

    def _apply_entries(
        self, entries: Iterable[tuple[str, Any, Any]], now: int, tally: _ApplyTally
    ) -> tuple[list[Partition], list[Partition]]:
        changed: list[Partition] = []
        followers: list[Partition] = []
        for topic, topic_id, state in entries:
            index = state.partition_index
            error = self._apply_partition_state(
                topic, index, topic_id, state, now, changed, followers
            )
            tally.results.append((topic, topic_id, index, error))
        tally.leaders += sum(1 for p in changed if p.is_leader)
        tally.followers += len(followers)
        return changed, followers

    def _finish_step(
        self,
        changed: list[Partition],
        followers: list[Partition],
        deferred: set[DeferrableEpochCheckpoint],
    ) -> None:
        """After the step's files are durable: waiting operations re-check, fetchers move."""
        self._on_partitions_changed([partition.key for partition in changed])
        leaders = [p for p in changed if p.is_leader]
        if leaders and self.on_become_leader is not None:
            self.on_become_leader(leaders)
        if followers and self.on_become_follower is not None:
            self.on_become_follower(followers)
        if deferred:
            self.write_deferred_checkpoints(deferred)

    def _end_leader_and_isr(
        self, tally: _ApplyTally
    ) -> list[tuple[str, uuid.UUID | None, int, ErrorCode]]:
        # One line per request, not per partition: a failover moves thousands at once.
        results = tally.results
        log.info(
            "LeaderAndIsr: leader of %d, follower of %d, %d refused (of %d)",
            tally.leaders,
            tally.followers,
            sum(1 for *_, error in results if error is not ErrorCode.NONE),
            len(results),
        )
        self._leader_and_isr_generation = self.epoch_holder.epoch
        return results

    def write_deferred_checkpoints(self, checkpoints: Iterable[DeferrableEpochCheckpoint]) -> None:
        """Write epoch checkpoints deferred by a request, in a worker thread (see
        DeferrableEpochCheckpoint for why that is safe)."""
        pending = list(checkpoints)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # driven without a loop (unit tests): write them now
            write_deferred(pending)
            return
        task = loop.create_task(asyncio.to_thread(write_deferred, pending))
        self._checkpoint_writes.add(task)
        task.add_done_callback(self._checkpoint_writes.discard)

    def _apply_partition_state(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID | None,
        state: Any,
        now: int,
        changed: list[Partition],
        followers: list[Partition],
    ) -> ErrorCode:
        partition = self.partitions.get((topic, index))
        if partition is None and self.log_manager.is_offline(topic, index):
            log.debug("LeaderAndIsr for %s-%d: its log dir is offline", topic, index)
            return ErrorCode.KAFKA_STORAGE_ERROR
        if (
            partition is not None
            and partition.storage_damage is not None
            and state.leader == self.broker_id
        ):
            log.warning(
                "%s: refusing leadership at epoch %d: %s",
                partition.name,
                state.leader_epoch,
                partition.storage_damage,
            )
            return ErrorCode.KAFKA_STORAGE_ERROR
        if partition is not None:
            local_epoch, local_topic_id = partition.leader_epoch, partition.topic_id
        else:
            existing = self.log_manager.get_log(topic, index)
            local_epoch, local_topic_id = -1, existing.topic_id if existing else None
        verdict = leader_and_isr_verdict(
            local_broker_id=self.broker_id,
            local_leader_epoch=local_epoch,
            local_topic_id=local_topic_id,
            request_topic_id=topic_id,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            replicas=tuple(state.replicas),
        )
        if verdict.error is not ErrorCode.NONE:
            # Debug only: a new controller resends every partition, and most are refused as not
            # newer; apply_leader_and_isr logs the count.
            log.debug(
                "LeaderAndIsr for %s-%d (leader epoch %d, local %d): %s",
                topic,
                index,
                state.leader_epoch,
                local_epoch,
                verdict.error.name,
            )
            return verdict.error
        try:
            if partition is None:
                partition = self._create_partition(topic, index, topic_id, now)
            elif topic_id is not None:
                partition.log.assign_topic_id(topic_id)
            new_state = PartitionState(
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=tuple(state.isr),
                replicas=tuple(state.replicas),
                partition_epoch=state.partition_epoch,
                controller_epoch=state.controller_epoch,
                is_new=bool(getattr(state, "is_new", False)),
            )
            if verdict.action is LeaderAndIsrAction.BECOME_LEADER:
                if partition.storage_damage is not None:
                    log.warning(
                        "%s: refusing leadership at epoch %d: %s",
                        partition.name,
                        state.leader_epoch,
                        partition.storage_damage,
                    )
                    return ErrorCode.KAFKA_STORAGE_ERROR
                partition.make_leader(new_state, now)
                log.debug("%s: leader at epoch %d", partition.name, state.leader_epoch)
            elif verdict.action is LeaderAndIsrAction.BECOME_FOLLOWER:
                partition.storage_damage = None  # the leader's data replaces what was cut
                partition.make_follower(new_state)
                followers.append(partition)
                log.debug(
                    "%s: follower of %d at epoch %d",
                    partition.name,
                    state.leader,
                    state.leader_epoch,
                )
        except StorageError as exc:
            log.warning("LeaderAndIsr for %s-%d failed: %s", topic, index, exc)
            return exc.error_code
        changed.append(partition)
        return ErrorCode.NONE

    def _topic_configs(self, topic: str) -> Mapping[str, str]:
        """The topic's configs, or none (the broker's defaults) when they cannot be used: the
        controller validated them, so a failure here is a store problem, logged, not fatal."""
        cached = self._configs_of_request.get(topic)
        if cached is not None:
            return cached
        try:
            configs = self.topic_configs(topic)
            validate_topic_configs(configs)
        except Exception as exc:
            log.warning("topic %s: using the broker's defaults, its configs failed: %s", topic, exc)
            configs = {}
        self._configs_of_request[topic] = configs
        self._overrides_in_use[topic] = configs
        self.replication_quotas.apply_topic_config(topic, configs)
        return configs

    # ------------------------------------------------------------------ dynamic configs

    def apply_topic_config(self, topic: str, overrides: Mapping[str, str]) -> int:
        """A topic config change (ZooKeeper notification): every partition of the topic on
        this broker gets the new log config (retention, segments, cleaner, max.message.bytes
        from the next append or pass) and min.insync.replicas. Returns the partitions changed."""
        try:
            validate_topic_configs(overrides)
        except Exception as exc:
            log.warning("topic %s: config change ignored, it does not validate: %s", topic, exc)
            return 0
        self._overrides_in_use[topic] = dict(overrides)
        self.replication_quotas.apply_topic_config(topic, overrides)
        return self._rebuild(p for p in self.partitions.values() if p.topic == topic)

    def apply_broker_config(self, config: BrokerConfig, log_defaults: LogConfig) -> int:
        """A dynamic broker config change: new log defaults and min.insync.replicas for every
        partition whose topic does not override them. Returns the partitions rebuilt."""
        self.config = config
        self.min_insync_replicas = config["min.insync.replicas"]
        self.settings = dataclasses.replace(
            self.settings, min_insync_replicas=self.min_insync_replicas
        )
        self.log_manager.default_config = log_defaults
        self._apply_replication_rates(config)
        return self._rebuild(self.partitions.values())

    def _apply_replication_rates(self, config: BrokerConfig) -> None:
        self.replication_quotas.apply_rates(
            config["leader.replication.throttled.rate"],
            config["follower.replication.throttled.rate"],
        )

    def _rebuild(self, partitions: Iterable[Partition]) -> int:
        count = 0
        for partition in partitions:
            overrides = self._overrides_in_use.get(partition.topic, {})
            partition.log.config = log_config_for(self.log_manager.default_config, overrides)
            partition.settings = replication_settings_for(self.settings, overrides)
            count += 1
        return count

    def _create_partition(
        self, topic: str, index: int, topic_id: uuid.UUID | None, now: int
    ) -> Partition:
        key = (topic, index)
        overrides = self._topic_configs(topic)
        log_ = self.log_manager.get_or_create_log(
            topic, index, topic_id, log_config_for(self.log_manager.default_config, overrides)
        )
        state = ProducerStateManager(f"{topic}-{index}")
        cut = load_producer_state(state, log_, now)
        partition = Partition(
            topic,
            index,
            self.broker_id,
            log_,
            state,
            high_watermark=self._stored_hws.get(key, 0),
            settings=replication_settings_for(self.settings, overrides),
            brokers=self.metadata_cache,
        )
        if cut:
            partition.storage_damage = f"recovery from damage cut {cut} bytes of its log"
        self.partitions[key] = partition
        resumed = self.log_manager.resumed_moves.pop(key, None)
        if resumed is not None and resumed in self.log_manager.online_dirs:
            log.info("%s-%d: resuming its move to %s", topic, index, resumed)
            self.replica_mover.start(topic, index, resumed)
        return partition

    # ------------------------------------------------------------------ StopReplica

    def stop_replicas(
        self, entries: Iterable[tuple[str, int, int, bool]]
    ) -> list[tuple[str, int, ErrorCode]]:
        """Stop (topic, partition, request leader epoch, delete) replicas; error per entry."""
        results: list[tuple[str, int, ErrorCode]] = []
        stopped: list[TopicPartition] = []
        for topic, index, request_epoch, delete in entries:
            key = (topic, index)
            partition = self.partitions.get(key)
            error = stop_replica_verdict(
                local_leader_epoch=partition.leader_epoch if partition else None,
                request_leader_epoch=request_epoch,
            )
            if error is not ErrorCode.NONE:
                results.append((topic, index, error))
                continue
            if partition is not None:
                del self.partitions[key]
                partition.stop_leading()
                self._stored_hws[key] = partition.high_watermark
                stopped.append(key)
            try:
                if delete:
                    self._stored_hws.pop(key, None)
                    if self.log_manager.delete_log(topic, index):
                        log.info("deleted the log of %s-%d", topic, index)
            except OSError as exc:
                log.warning("cannot delete the log of %s-%d: %s", topic, index, exc)
                results.append((topic, index, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            results.append((topic, index, ErrorCode.NONE))
        self._on_partitions_changed(stopped)
        if stopped and self.on_stop_replicas is not None:
            self.on_stop_replicas(stopped)
        return results

    async def stop_replicas_in_steps(
        self,
        entries: Iterable[tuple[str, int, int, bool]],
        step_size: int = APPLY_STEP_PARTITIONS,
    ) -> list[tuple[str, int, ErrorCode]]:
        """`stop_replicas` a step at a time, each step's deletions made durable by one sync
        (in a worker thread) and the loop free to serve between steps."""
        pending = list(entries)
        results: list[tuple[str, int, ErrorCode]] = []
        for start in range(0, len(pending), step_size):
            with collected_durable_writes() as dirs:
                results.extend(self.stop_replicas(pending[start : start + step_size]))
            if dirs:
                await asyncio.to_thread(sync_file_systems, dirs)
            await asyncio.sleep(0)
        return results

    # --------------------------------------------------------- high-watermark checkpoints

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {key: p.high_watermark for key, p in self.partitions.items()}

    @property
    def hw_checkpoint_allowed(self) -> bool:
        """KAFKA-7235 guard: only after the first LeaderAndIsr of the current generation."""
        if not self._guard_hw_checkpoint:
            return True
        return self._leader_and_isr_generation == self.epoch_holder.epoch

    def checkpoint_high_watermarks(self) -> bool:
        """Write replication-offset-checkpoint of the hosted partitions; False if skipped."""
        if not self.hw_checkpoint_allowed:
            return False
        self.log_manager.write_high_watermarks(self.high_watermarks())
        return True

    def run_retention(self, now: int | None = None) -> int:
        """One retention pass and producer-id expiry (aborted transactions go with the segment
        holding their marker); segments deleted."""
        now = now_ms() if now is None else now
        deleted = self.log_manager.cleanup_logs(now, self.high_watermarks())
        expiration = self.config["producer.id.expiration.ms"]
        for partition in self.partitions.values():
            partition.producer_state.remove_expired(now, expiration)
        return deleted

    # -------------------------------------------------------------------- lifecycle

    def startup(self) -> None:
        """Read the HW checkpoint (the log manager must have loaded) and start the tasks."""
        self._stored_hws = self.log_manager.read_high_watermarks()
        self._tasks.append(
            asyncio.get_running_loop().create_task(
                run_probe(self.loop_stalls), name="loop-stall-probe"
            )
        )
        self._start_task(
            "hw-checkpoint",
            self.config["replica.high.watermark.checkpoint.interval.ms"],
            self.checkpoint_high_watermarks,
        )
        self._start_task(
            "retention", self.config["log.retention.check.interval.ms"], self.run_retention
        )
        self._start_task(
            "isr-expiration",
            max(1, self.settings.replica_lag_time_max_ms // 2),
            self.shrink_isrs,
        )
        self._start_task(
            "recovery-point-checkpoint",
            self.config["log.flush.offset.checkpoint.interval.ms"],
            self.log_manager.checkpoint_recovery_points,
        )
        self._start_task(
            "log-start-offset-checkpoint",
            self.config["log.flush.start.offset.checkpoint.interval.ms"],
            self.log_manager.checkpoint_log_start_offsets,
        )
        flush_check_ms = self.config["log.flush.scheduler.interval.ms"]
        if flush_check_ms < INT64_MAX:  # Kafka's default: no log flusher, replication is enough
            self._start_task(
                "log-flusher", flush_check_ms, lambda: self.log_manager.flush_dirty_logs(now_ms())
            )
        self._start_task(
            "log-dir-probe",
            self.config["epochlog.log.dir.probe.interval.ms"],
            self.probe_offline_dirs,
        )

    def _start_task(self, name: str, interval_ms: int, work: Callable[[], object]) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000.0)
                try:
                    work()
                except Exception:
                    log.exception("background task %s failed", name)

        self._tasks.append(asyncio.get_running_loop().create_task(loop(), name=name))

    async def shutdown(self) -> None:
        """Stop the tasks, answer every waiting operation, checkpoint the HWs (if allowed)."""
        await self.replica_mover.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._checkpoint_writes:
            await asyncio.gather(*self._checkpoint_writes, return_exceptions=True)
        self.produce_purgatory.complete_all()
        self.fetch_purgatory.complete_all()
        self.delete_records_purgatory.complete_all()
        try:
            self.checkpoint_high_watermarks()
        except OSError as exc:
            log.warning("cannot write the high watermark checkpoint: %s", exc)


def load_producer_state(state: ProducerStateManager, partition_log: PartitionLog, now: int) -> int:
    """Rebuild the producer state from every batch header of the log, cutting the log at any
    damage the walk meets (it is the walk that finds damage a clean open did not look for).
    Returns the bytes cut (0: the log was sound)."""
    cut = 0
    while True:
        try:
            rebuild_producer_state(state, partition_log, now)
            return cut
        except LogDamageError as damage:
            removed = partition_log.recover_from_damage(damage)
            if not removed:
                raise  # nothing left to cut: do not walk the same damage again
            cut += removed


def repair_damaged_log(
    state: ProducerStateManager, partition_log: PartitionLog, damage: LogDamageError, now: int
) -> int:
    """Cut the log before `damage` and rebuild the producer state; returns the bytes cut."""
    removed = partition_log.recover_from_damage(damage)
    with contextlib.suppress(LogDamageError):  # a later walk (the next read) meets it again
        rebuild_producer_state(state, partition_log, now)
    return removed
