"""One partition hosted on this broker: its role, leader epoch, ISR, high watermark, followers.

A `Partition` wraps the partition's `PartitionLog` with what replication needs (Kafka's
`kafka.cluster.Partition`):

- role and epochs from the controller's LeaderAndIsr: leader id, leader epoch, partition epoch
  (the ZooKeeper version of the partition state), replicas and the ISR. `make_leader` records
  the new epoch in the leader epoch cache at the current log end offset (where the epoch
  starts), resets what it knows of the followers, and recomputes the HW; `make_follower` only
  records the new state (a replica fetcher then copies from the leader: the replica manager's
  `on_become_follower` hook). Either drops a pending ISR change.
- per-follower state (`ReplicaState`): log end and start offsets from its last fetch, the broker
  epoch it fetched with (KIP-903 compares it with the controller's), and the fetch times Kafka
  uses to decide whether it is caught up.
- the ISR: the committed one (`isr`, from LeaderAndIsr or an AlterPartition answer) and at most
  one pending change (`pending_isr`) in an `isr_phase`, which the state machine `isr_state`
  proposes and settles (rules in `isr_rules`; the replica manager sends it to the
  controller). `maximal_isr` is what the HW and acks=all respect while a change is pending.
- the high watermark: on the leader, min LEO over the maximal ISR and the caught-up eligible
  followers, frozen while the ISR is below min.insync.replicas (`isr_rules.leader_hw`), moved on
  every append, follower fetch and ISR change; on a follower, min(leader's HW, LEO). The replica
  manager checkpoints it.
- follower writes: `append_records_as_follower` (the leader's batches as they are) and the
  truncations a replica fetcher decides (`truncate_as_follower`, `truncate_fully_as_follower`).
- producer state for idempotent and transactional producers, consulted before each leader
  append and kept up to date by follower appends (a follower may become leader); transaction
  markers (`append_marker_as_leader`, WriteTxnMarkers) end transactions, and the last stable
  offset is min(first unstable offset, HW). A read_committed read stops at the LSO and carries
  the aborted transactions it overlaps.
- `storage_damage`: set when the log was found damaged and cut (issue 14); the replica then
  answers KAFKA_STORAGE_ERROR and refuses leadership until it becomes a follower.

The methods raise `PartitionError` (or storage errors, which carry their Kafka error code) and
return plain results; the replica manager turns moves of the HW or LEO into completions of
delayed produces and fetches.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from epochlog.broker import isr_rules, isr_state
from epochlog.broker import partition_rules as rules
from epochlog.broker.isr_rules import (
    BrokerView,
    EveryBrokerAlive,
    ExpandVerdict,
    ReplicationSettings,
)
from epochlog.broker.isr_state import IsrEvent, IsrPhase, PendingIsrChange
from epochlog.broker.producer_state import (
    AbortedTxn,
    ProducerStateManager,
    Verdict,
    last_sequence,
)
from epochlog.protocol.control_records import EndTxnMarker, build_marker_batch, read_marker
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import BatchHeader, iter_batches, parse_batch_header
from epochlog.storage import FileSlice, PartitionLog
from epochlog.storage.log import AppendInfo
from epochlog.storage.segment import TimestampAndOffset

UNKNOWN_OFFSET = -1
NO_LEADER = -1
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class PartitionError(Exception):
    """A per-partition failure with the Kafka error code to answer."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition's state as the controller sends it in LeaderAndIsr."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int = 0
    controller_epoch: int = 0
    is_new: bool = False


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower, from its fetches."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    broker_epoch: int = -1
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET

    def update(
        self,
        fetch_offset: int,
        log_start_offset: int,
        broker_epoch: int,
        leader_leo: int,
        now_ms: int,
    ) -> None:
        """Kafka's `Replica.updateFetchStateOrThrow`: a fetch at `fetch_offset` means the
        follower holds everything below it. It is caught up as of now if it reached the leader's
        LEO, or as of its previous fetch if it reached the LEO the leader had then."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.broker_epoch = broker_epoch
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_time_ms = now_ms


@dataclass(frozen=True, slots=True)
class LeaderAppendResult:
    first_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False
    high_watermark_moved: bool = False


@dataclass(slots=True)
class ReadResult:
    records: FileSlice
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    diverging_epoch: rules.DivergingEpoch | None = None
    last_stable_offset: int = -1
    # read_committed only: the aborted transactions the read's range overlaps
    aborted_transactions: list[AbortedTxn] | None = None


@dataclass(slots=True)
class Partition:
    topic: str
    index: int
    local_broker_id: int
    log: PartitionLog
    producer_state: ProducerStateManager
    high_watermark: int = 0
    leader_id: int = NO_LEADER
    leader_epoch: int = -1
    partition_epoch: int = -1
    controller_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    leader_epoch_start_offset: int = UNKNOWN_OFFSET
    remote_replicas: dict[int, ReplicaState] = field(default_factory=dict)
    pending_isr: PendingIsrChange | None = None
    isr_phase: IsrPhase = IsrPhase.COMMITTED  # with pending_isr, changed only by isr_state
    settings: ReplicationSettings = field(default_factory=ReplicationSettings)
    brokers: BrokerView = field(default_factory=EveryBrokerAlive)
    # Why this replica may not lead (its log was found damaged and cut: see the replica
    # manager's `on_log_damage`), until it becomes a follower and fetches from a leader.
    storage_damage: str | None = None

    def __post_init__(self) -> None:
        self.high_watermark = min(
            max(self.high_watermark, self.log.log_start_offset), self.log.log_end_offset
        )
        self.log.producer_snapshot_writer = self._write_producer_snapshot

    def use_moved_log(self, moved: PartitionLog) -> None:
        """Serve from `moved`, a copy of the log in another log dir (AlterReplicaLogDirs): it
        holds the same batches, so the same aborts, which a copy does not index itself."""
        for txn in self.log.all_aborted_transactions():
            moved.append_aborted_txn(txn)
        self.log = moved
        moved.producer_snapshot_writer = self._write_producer_snapshot

    def _write_producer_snapshot(self, offset: int) -> None:
        """The log rolled (or closes) at `offset`: the producer state covers what is below."""
        self.log.producer_snapshots.write(offset, self.producer_state.snapshot_entries())

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def topic_id(self) -> uuid.UUID | None:
        return self.log.topic_id

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR widened by a pending expansion (a pending shrink removes nobody
        yet): what the HW and acks=all respect."""
        return isr_state.maximal_isr(self.isr, self.pending_isr)

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of a transaction not yet settled below the HW, HW)."""
        hw = self.high_watermark
        first_unstable = self.producer_state.first_unstable_offset(hw)
        return hw if first_unstable is None else min(first_unstable, hw)

    # ------------------------------------------------------------------- role changes

    def make_leader(self, state: PartitionState, now_ms: int) -> bool:
        """Become (or stay) leader at `state.leader_epoch`; True if the HW moved."""
        was_leader = self.is_leader
        self._take_state(state)
        leo = self.log.log_end_offset
        self.leader_epoch_start_offset = leo
        self.log.leader_epoch_cache.assign(state.leader_epoch, leo)
        followers = [r for r in state.replicas if r != self.local_broker_id]
        known = self.remote_replicas
        self.remote_replicas = {}
        for replica in followers:
            if was_leader and replica in known:
                self.remote_replicas[replica] = known[replica]
            else:
                caught_up = now_ms if replica in state.isr else 0
                self.remote_replicas[replica] = ReplicaState(
                    replica, last_caught_up_time_ms=caught_up
                )
        return self.maybe_increment_high_watermark(now_ms)

    def make_follower(self, state: PartitionState) -> bool:
        """Follow `state.leader`; True if the leader or the leader epoch changed."""
        changed = state.leader != self.leader_id or state.leader_epoch != self.leader_epoch
        self._take_state(state)
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self.remote_replicas = {}
        return changed

    def _take_state(self, state: PartitionState) -> None:
        """The controller's state replaces ours, including any pending ISR change."""
        isr_state.reset(self, IsrEvent.CONTROLLER_STATE)
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)

    def stop_leading(self) -> None:
        """The replica stops (StopReplica): no longer leader or follower."""
        self.leader_id = NO_LEADER
        self.remote_replicas = {}
        isr_state.reset(self, IsrEvent.STOP)

    # ------------------------------------------------------------------ high watermark

    def _isr_eligible(self, replica: ReplicaState) -> bool:
        verdict = isr_rules.isr_eligible(
            alive=self.brokers.is_alive(replica.broker_id),
            kip903_enabled=self.settings.kip903_enabled,
            fetch_epoch=replica.broker_epoch,
            cached_epoch=self.brokers.broker_epoch(replica.broker_id),
        )
        return verdict is ExpandVerdict.EXPAND

    def maybe_increment_high_watermark(self, now_ms: int | None = None) -> bool:
        if not self.is_leader:
            return False
        now = _now_ms() if now_ms is None else now_ms
        leader_leo = self.log.log_end_offset
        maximal = self.maximal_isr
        holding = [
            UNKNOWN_OFFSET
            for r in maximal
            if r != self.local_broker_id and r not in self.remote_replicas
        ]
        lag = self.settings.replica_lag_time_max_ms
        for replica_id, replica in self.remote_replicas.items():
            if replica_id in maximal or (
                isr_rules.is_caught_up(
                    replica_leo=replica.log_end_offset,
                    last_caught_up_time_ms=replica.last_caught_up_time_ms,
                    leader_leo=leader_leo,
                    now_ms=now,
                    lag_time_max_ms=lag,
                )
                and self._isr_eligible(replica)
            ):
                holding.append(replica.log_end_offset)
        new_hw = isr_rules.leader_hw(
            current_hw=self.high_watermark,
            leader_leo=leader_leo,
            committed_isr_size=len(self.isr),
            replication_factor=max(len(self.replicas), 1),
            min_insync_replicas=self.settings.min_insync_replicas,
            holding_leos=holding,
        )
        if new_hw != self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def update_follower_high_watermark(self, leader_hw: int) -> bool:
        """A follower learns the leader's HW from a fetch response (replication)."""
        new_hw = rules.follower_high_watermark(leader_hw, self.log.log_end_offset)
        if new_hw != self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def update_follower_fetch_state(
        self,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int,
        broker_epoch: int,
        leader_leo: int,
        now_ms: int,
    ) -> bool:
        """Record a follower's fetch; True if the HW moved."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{self.name}: broker {replica_id} is not a replica (replicas {self.replicas})",
            )
        replica.update(fetch_offset, log_start_offset, broker_epoch, leader_leo, now_ms)
        return self.maybe_increment_high_watermark(now_ms)

    # --------------------------------------------------------------------------- writes

    def append_records_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        header: BatchHeader,
        required_acks: int,
        min_insync_replicas: int,
        now_ms: int,
        from_coordinator: bool = False,
    ) -> LeaderAppendResult:
        """Append one validated batch; `header` is its header as the producer sent it.
        `from_coordinator`: written by this broker's group coordinator for a producer's
        transaction (no sequence checks, `ProducerStateManager.check_batch`)."""
        if not self.is_leader:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{self.name}: this broker ({self.local_broker_id}) is not the leader "
                f"(leader {self.leader_id}, epoch {self.leader_epoch})",
            )
        if required_acks == -1 and not rules.enough_replicas(len(self.isr), min_insync_replicas):
            raise PartitionError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{self.name}: ISR {list(self.isr)} is smaller than min.insync.replicas "
                f"{min_insync_replicas}",
            )
        check = self.producer_state.check_batch(header, from_coordinator)
        if check.verdict is Verdict.REJECT:
            raise PartitionError(check.error, check.message)
        if check.verdict is Verdict.DUPLICATE:
            assert check.duplicate is not None
            return LeaderAppendResult(
                check.duplicate.first_offset,
                check.duplicate.last_offset,
                -1,
                self.log.log_start_offset,
                duplicate=True,
            )
        info = self.log.append_as_leader(records, self.leader_epoch, now_ms, validated=header)
        if header.producer_id >= 0:
            self.producer_state.record(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                last_sequence(header.base_sequence, header.last_offset_delta),
                info.first_offset,
                info.last_offset,
                now_ms,
                header.is_transactional,
            )
        moved = self.maybe_increment_high_watermark(now_ms)
        return LeaderAppendResult(
            info.first_offset,
            info.last_offset,
            info.log_append_time,
            info.log_start_offset,
            high_watermark_moved=moved,
        )

    def append_marker_as_leader(
        self, producer_id: int, producer_epoch: int, marker: EndTxnMarker, now_ms: int
    ) -> LeaderAppendResult:
        """Append a COMMIT or ABORT marker that ends the producer's transaction (WriteTxnMarkers,
        Kafka's AppendOrigin.COORDINATOR: no sequence, no producer batch checks)."""
        if not self.is_leader:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{self.name}: this broker ({self.local_broker_id}) is not the leader "
                f"(leader {self.leader_id}, epoch {self.leader_epoch})",
            )
        check = self.producer_state.check_marker(
            producer_id, producer_epoch, marker.coordinator_epoch
        )
        if check.verdict is Verdict.REJECT:
            raise PartitionError(check.error, check.message)
        records = build_marker_batch(producer_id, producer_epoch, marker, now_ms)
        info = self.log.append_as_leader(
            records, self.leader_epoch, now_ms, validated=parse_batch_header(records)
        )
        completed = self.producer_state.complete_txn(
            producer_id, producer_epoch, marker, info.first_offset, now_ms
        )
        if completed.aborted is not None:
            self.log.append_aborted_txn(completed.aborted)
        moved = self.maybe_increment_high_watermark(now_ms)
        return LeaderAppendResult(
            info.first_offset,
            info.last_offset,
            info.log_append_time,
            info.log_start_offset,
            high_watermark_moved=moved,
        )

    def append_records_as_follower(
        self, records: bytes | bytearray | memoryview, now_ms: int
    ) -> AppendInfo:
        """Append the leader's batches as they are (offsets, epochs) and track their producers,
        ending transactions at the leader's markers."""
        info = self.log.append_as_follower(records, now_ms)
        markers: dict[int, EndTxnMarker | None] = {}
        if any(header.is_control for header in info.headers):
            for position, header in iter_batches(records):
                if header.is_control:
                    markers[header.base_offset] = read_marker(records, position)
        for header in info.headers:
            if header.producer_id >= 0:
                completed = self.producer_state.record_batch(
                    header, now_ms, markers.get(header.base_offset)
                )
                if completed is not None and completed.aborted is not None:
                    self.log.append_aborted_txn(completed.aborted)
        return info

    def update_follower_log_start_offset(self, leader_log_start_offset: int) -> bool:
        """Follow the leader's log start offset, never past this replica's HW."""
        target = min(leader_log_start_offset, self.high_watermark)
        if target <= self.log.log_start_offset:
            return False
        return self.log.maybe_increment_log_start_offset(target, self.high_watermark)

    def truncate_as_follower(self, offset: int, now_ms: int) -> bool:
        """Remove everything at and after `offset`; True if data went. The epoch cache is cut at
        the new end even when no data goes: an epoch this broker started as leader without
        writing to it must not survive (it would make every fetch diverge)."""
        removed = self.log.truncate_to(offset)
        self.log.leader_epoch_cache.truncate_from_end(self.log.log_end_offset)
        if removed:
            rebuild_producer_state(self.producer_state, self.log, now_ms)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        return removed

    def truncate_fully_as_follower(self, offset: int, now_ms: int) -> None:
        """Throw the log away and restart it empty at `offset` (the leader's log start)."""
        self.log.truncate_fully_and_start_at(offset, now_ms)
        self.producer_state.rebuild((), now_ms)
        self.high_watermark = offset

    # ---------------------------------------------------------------------------- reads

    def _check_leader(self, current_leader_epoch: int, fetch_only_from_leader: bool) -> None:
        if fetch_only_from_leader and not self.is_leader:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{self.name}: this broker ({self.local_broker_id}) is not the leader",
            )
        error = rules.check_current_leader_epoch(current_leader_epoch, self.leader_epoch)
        if error is not ErrorCode.NONE:
            raise PartitionError(
                error,
                f"{self.name}: request leader epoch {current_leader_epoch}, "
                f"local leader epoch {self.leader_epoch}",
            )

    def read_records(
        self,
        *,
        fetch_offset: int,
        current_leader_epoch: int,
        last_fetched_epoch: int,
        max_bytes: int,
        min_one_batch: bool,
        up_to_high_watermark: bool,
        fetch_only_from_leader: bool = True,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> ReadResult:
        """Records for a consumer (up to the HW, or the LSO with read_committed, which also
        gets the aborted transactions in that range) or a follower (up to the LEO), or the
        point where the fetcher's log diverged from this one."""
        self._check_leader(current_leader_epoch, fetch_only_from_leader)
        hw = self.high_watermark
        lso = self.last_stable_offset
        log = self.log
        divergence = rules.check_divergence(
            last_fetched_epoch=last_fetched_epoch,
            fetch_offset=fetch_offset,
            epoch_end=log.end_offset_for_epoch(last_fetched_epoch)
            if last_fetched_epoch >= 0
            else (-1, -1),
            log_start_offset=log.log_start_offset,
        )
        if isinstance(divergence, ErrorCode):
            raise PartitionError(
                divergence,
                f"{self.name}: fetch at {fetch_offset} with last fetched epoch "
                f"{last_fetched_epoch} is out of range (log start {log.log_start_offset})",
            )
        if divergence is not None:
            return ReadResult(
                FileSlice.empty(), hw, log.log_start_offset, log.log_end_offset, divergence, lso
            )
        committed = up_to_high_watermark and isolation_level == READ_COMMITTED
        limit = (lso if committed else hw) if up_to_high_watermark else None
        records = log.read(fetch_offset, max_bytes, limit, min_one_batch)
        aborted = None
        if committed:
            # Bounded by the LSO rather than the last batch read: a superset, which consumers
            # match against the batches they get.
            aborted = log.collect_aborted_transactions(fetch_offset, lso)
        return ReadResult(
            records,
            hw,
            log.log_start_offset,
            log.log_end_offset,
            last_stable_offset=lso,
            aborted_transactions=aborted,
        )

    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        *,
        current_leader_epoch: int,
        is_client: bool,
        fetch_only_from_leader: bool,
        version: int,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> TimestampAndOffset | None:
        """ListOffsets: -1 latest (for clients the HW, or the LSO with read_committed; the LEO
        for replicas), -2 / -4 earliest, -3 the record with the max timestamp, else the first
        record at or after `timestamp` below the last fetchable offset. None: no such record."""
        self._check_leader(current_leader_epoch, fetch_only_from_leader)
        log = self.log
        if not is_client:
            last_fetchable = log.log_end_offset
        elif isolation_level == READ_COMMITTED:
            last_fetchable = self.last_stable_offset
        else:
            last_fetchable = self.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            error = rules.latest_offset_error(
                is_client=is_client,
                high_watermark=self.high_watermark,
                leader_epoch_start_offset=self.leader_epoch_start_offset,
                version=version,
            )
            if error is not ErrorCode.NONE:
                raise PartitionError(error, f"{self.name}: the high watermark is not known yet")
            return TimestampAndOffset(-1, last_fetchable, self.leader_epoch)
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = log.log_start_offset
            return TimestampAndOffset(-1, start, log.epoch_for_offset(start))
        if timestamp == MAX_TIMESTAMP:
            found = log.offset_of_max_timestamp()
        else:
            found = log.offset_for_timestamp(timestamp)
        if found is None or found.offset >= last_fetchable:
            return None
        return found

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) of `leader_epoch` in this log."""
        self._check_leader(current_leader_epoch, True)
        return self.log.end_offset_for_epoch(leader_epoch)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def rebuild_producer_state(
    state: ProducerStateManager,
    partition_log: PartitionLog,
    now_ms: int,
    from_snapshot: bool = True,
) -> int:
    """Restore the producer state and the aborted-transaction index from the log: load the
    log's usable producer snapshot (unless `from_snapshot` is False; see
    `PartitionLog.usable_producer_snapshot`) and replay the batch headers after it, reading only
    control batches whole for their markers. The aborts the replay meets are indexed again.
    Returns the batches replayed."""
    first_base = partition_log.segments[0].base_offset
    found = partition_log.usable_producer_snapshot() if from_snapshot else None
    start, saved = found if found is not None else (first_base, [])
    partition_log.drop_aborted_transactions_from(start)
    markers: dict[int, EndTxnMarker | None] = {}
    replayed = 0

    def headers() -> Iterator[BatchHeader]:
        nonlocal replayed
        for segment in partition_log.segments:
            if segment.next_offset <= start:
                continue
            begin = 0
            if segment.base_offset < start:
                at = segment.find_position(start)
                if at is None:
                    continue
                begin = at[0]
            for position, header in segment.iter_batches(begin):
                if header.is_control and header.producer_id >= 0:
                    markers[header.base_offset] = read_marker(segment.read_batch(position, header))
                replayed += 1
                yield header

    for aborted in state.rebuild(headers(), now_ms, markers, saved):
        partition_log.append_aborted_txn(aborted)
    return replayed
