"""Idempotent producers: per partition, what each producer id last wrote, to catch retries.

How it works. For each producer id the partition keeps the producer epoch and the metadata of
its last five batches (first and last sequence, first and last offset): an idempotent producer
has at most five batches in flight per partition, so a retry is always among them. Before a
leader append, `check` decides from the batch header alone (Kafka 3.x rules, `ProducerAppendInfo`):

- no producer id (-1): not idempotent, append.
- unknown producer id: append, whatever the sequence. Kafka accepts it because the producer's
  state may have gone with retention (or DeleteRecords); its entry starts with this batch.
- epoch older than the producer's: INVALID_PRODUCER_EPOCH.
- same epoch, and the batch's (first, last) sequence equals a cached batch's: a duplicate. The
  caller appends nothing and answers NONE with the cached batch's offsets (Kafka does not return
  DUPLICATE_SEQUENCE_NUMBER for an exact duplicate).
- same epoch, first sequence is not the last sequence + 1 (wrapping after 2^31-1 to 0):
  OUT_OF_ORDER_SEQUENCE_NUMBER.
- newer epoch: the sequence must restart at 0, else OUT_OF_ORDER_SEQUENCE_NUMBER.

After a successful append the caller `record`s the batch with its assigned offsets. On startup
`rebuild` replays the producer fields of every batch header in the log (headers only, the
records are not read), so a restarted broker still recognises a retry of a batch it wrote before
the restart. Entries idle for producer.id.expiration.ms are dropped by `remove_expired`; a rebuilt
entry counts as active at rebuild time, so it survives at least that long after a restart.

Transactions (Kafka's `ProducerStateManager` ongoing and unreplicated transactions). A
producer's first transactional batch opens its transaction at that batch's offset; a commit or
abort marker (a control batch, `check_marker` first on a leader) ends it. A marker from an older
producer epoch is INVALID_PRODUCER_EPOCH, one from an older coordinator epoch than the last
marker's TRANSACTION_COORDINATOR_FENCED; a non-transactional batch while the producer's
transaction is open is INVALID_TXN_STATE. An ended transaction stays unstable until the high
watermark passes its marker (so the LSO never runs ahead of what the ISR holds); the first
unstable offset is the smallest first offset of an open or unreplicated transaction, and the
partition's LSO is min(that, HW). Every abort yields an `AbortedTxn` (the entry of Kafka's
`.txnindex`: producer id, first offset, marker offset, and the LSO when it was written), which
the caller indexes in the log (`storage/txn_index.py`) for read_committed fetches. `rebuild`
replays markers too (the caller reads each control batch's marker) and returns the aborts it met.
KIP-890: `start_verification` gives the guard of a leader's question to the coordinator; a
marker (or the producer's transaction opening) clears it, and `verification_holds` says whether
a confirmed write may still open the transaction (Kafka's VerificationGuard).

Snapshots (Kafka's `.snapshot`, `storage/producer_snapshot.py`): `snapshot_entries` gives each
producer's epoch, last batch, coordinator epoch and open transaction; `rebuild` can start from
such a snapshot and replay only the batches after it. As in Kafka only a producer's last batch
survives a snapshot (a retry of an older one of its five is then out of sequence).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from epochlog.protocol.control_records import EndTxnMarker
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import BatchHeader
from epochlog.storage.producer_snapshot import ProducerSnapshotEntry
from epochlog.storage.txn_index import AbortedTxn

__all__ = ["AbortedTxn", "ProducerStateManager"]

MAX_BATCHES_PER_PRODUCER = 5
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=deque)
    last_timestamp: int = -1
    coordinator_epoch: int = -1  # of the last marker written for this producer
    current_txn_first_offset: int = -1  # -1: no open transaction

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by the marker at `last_offset`; `aborted` is its index entry."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    aborted: AbortedTxn | None = None


class Verdict(enum.Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    verdict: Verdict
    error: ErrorCode = ErrorCode.NONE
    message: str = ""
    duplicate: BatchMetadata | None = None


_APPEND = SequenceCheck(Verdict.APPEND)


def in_sequence(last_seq: int, next_first_seq: int) -> bool:
    return next_first_seq == last_seq + 1 or (last_seq == INT32_MAX and next_first_seq == 0)


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    return (first_seq + last_offset_delta) & INT32_MAX


class ProducerStateManager:
    """The producer state of one partition; `name` (topic-partition) only labels messages."""

    def __init__(self, name: str, max_batches: int = MAX_BATCHES_PER_PRODUCER) -> None:
        self.name = name
        self.max_batches = max_batches
        self._entries: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._unreplicated: list[CompletedTxn] = []  # ended, marker not yet below the HW
        # KIP-890: producer id -> the guard of a verification under way; a marker clears it
        self._verification_guards: dict[int, object] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def active_producers(self) -> list[ProducerEntry]:
        """Every producer the partition remembers, by producer id (DescribeProducers)."""
        return [self._entries[pid] for pid in sorted(self._entries)]

    def has_open_transaction(self, producer_id: int) -> bool:
        return producer_id in self._ongoing

    def start_verification(self, producer_id: int) -> object:
        """A leader is about to ask the coordinator about this producer's transaction (KIP-890):
        the guard that a marker for the producer clears meanwhile (Kafka's VerificationGuard)."""
        guard = self._verification_guards.get(producer_id)
        if guard is None:
            guard = self._verification_guards[producer_id] = object()
        return guard

    def verification_holds(self, producer_id: int, guard: object) -> bool:
        """Whether a verified write may open the producer's transaction: no marker ended a
        transaction of the producer since `guard` was given (or one is open anyway)."""
        if producer_id in self._ongoing:
            return True
        return self._verification_guards.get(producer_id) is guard

    # ------------------------------------------------------------------------- decisions

    def check(
        self,
        producer_id: int,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        is_transactional: bool = False,
    ) -> SequenceCheck:
        """What to do with a leader append of a batch with these producer fields."""
        if producer_id < 0:
            return _APPEND
        entry = self._entries.get(producer_id)
        if entry is None:
            return _APPEND
        if producer_epoch < entry.epoch:
            return SequenceCheck(
                Verdict.REJECT,
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"{self.name}: producer {producer_id} has epoch {producer_epoch}, "
                f"older than the last seen epoch {entry.epoch}",
            )
        if producer_epoch > entry.epoch:
            if first_seq != 0:
                return SequenceCheck(
                    Verdict.REJECT,
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"{self.name}: producer {producer_id} starts epoch {producer_epoch} at "
                    f"sequence {first_seq}; a new epoch starts at 0",
                )
            return _APPEND
        duplicate = entry.find_duplicate(first_seq, last_seq)
        if duplicate is not None:
            return SequenceCheck(Verdict.DUPLICATE, duplicate=duplicate)
        if not in_sequence(entry.last_seq, first_seq):
            return SequenceCheck(
                Verdict.REJECT,
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"{self.name}: producer {producer_id} epoch {producer_epoch} sent sequence "
                f"{first_seq}, expected {(entry.last_seq + 1) & INT32_MAX}",
            )
        return self._check_txn_state(entry, is_transactional)

    def _check_txn_state(self, entry: ProducerEntry, is_transactional: bool) -> SequenceCheck:
        if not is_transactional and entry.current_txn_first_offset >= 0:
            return SequenceCheck(
                Verdict.REJECT,
                ErrorCode.INVALID_TXN_STATE,
                f"{self.name}: producer {entry.producer_id} sent a non-transactional batch while "
                f"its transaction from offset {entry.current_txn_first_offset} is open",
            )
        return _APPEND

    def check_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> SequenceCheck:
        """Whether a leader may append a commit or abort marker for this producer."""
        entry = self._entries.get(producer_id)
        if entry is None:
            return _APPEND
        if producer_epoch < entry.epoch:
            return SequenceCheck(
                Verdict.REJECT,
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"{self.name}: marker for producer {producer_id} has epoch {producer_epoch}, "
                f"older than the last seen epoch {entry.epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            return SequenceCheck(
                Verdict.REJECT,
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"{self.name}: marker for producer {producer_id} has coordinator epoch "
                f"{coordinator_epoch}, older than the last marker's {entry.coordinator_epoch}",
            )
        return _APPEND

    def check_batch(self, header: BatchHeader, from_coordinator: bool = False) -> SequenceCheck:
        """`from_coordinator`: a batch the group coordinator writes for a producer's
        TxnOffsetCommit (Kafka's AppendOrigin.COORDINATOR): only an older producer epoch is
        refused; sequences are the client's business on its own partitions, not here."""
        if from_coordinator:
            entry = self._entries.get(header.producer_id)
            if entry is not None and header.producer_epoch < entry.epoch:
                return SequenceCheck(
                    Verdict.REJECT,
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                    f"{self.name}: producer {header.producer_id} has epoch "
                    f"{header.producer_epoch}, older than the last seen epoch {entry.epoch}",
                )
            return _APPEND
        return self.check(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            last_sequence(header.base_sequence, header.last_offset_delta),
            header.is_transactional,
        )

    # --------------------------------------------------------------------------- updates

    def record(
        self,
        producer_id: int,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
        is_transactional: bool = False,
    ) -> None:
        """A batch of this producer is in the log at [first_offset, last_offset]."""
        if producer_id < 0:
            return
        entry = self._entry_for_epoch(producer_id, producer_epoch)
        if entry is None:
            return  # an older epoch's batch (replayed from the log): nothing to learn from it
        if is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self._ongoing[producer_id] = first_offset
            self._verification_guards.pop(producer_id, None)
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset))
        while len(entry.batches) > self.max_batches:
            entry.batches.popleft()
        entry.last_timestamp = max(entry.last_timestamp, timestamp)

    def _entry_for_epoch(self, producer_id: int, producer_epoch: int) -> ProducerEntry | None:
        """The producer's entry at `producer_epoch` (a newer epoch starts a new sequence but
        keeps the open transaction and coordinator epoch); None for an older epoch."""
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, producer_epoch)
            self._entries[producer_id] = entry
        elif producer_epoch > entry.epoch:
            entry = ProducerEntry(
                producer_id,
                producer_epoch,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_first_offset=entry.current_txn_first_offset,
            )
            self._entries[producer_id] = entry
        elif producer_epoch < entry.epoch:
            return None
        return entry

    def record_batch(
        self, header: BatchHeader, timestamp: int, marker: EndTxnMarker | None = None
    ) -> CompletedTxn | None:
        """Record a batch as stamped in the log (its header carries the assigned offsets); a
        control batch ends the producer's transaction with `marker` (its decoded record)."""
        if header.producer_id < 0:
            return None
        if header.is_control:
            if marker is None:
                return None  # a control batch that ends no transaction
            return self.complete_txn(
                header.producer_id, header.producer_epoch, marker, header.base_offset, timestamp
            )
        self.record(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            last_sequence(header.base_sequence, header.last_offset_delta),
            header.base_offset,
            header.last_offset,
            timestamp,
            header.is_transactional,
        )
        return None

    def complete_txn(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: EndTxnMarker,
        marker_offset: int,
        timestamp: int,
    ) -> CompletedTxn:
        """The marker at `marker_offset` ends the producer's transaction (Kafka writes a marker
        even when none is open here: the transaction then spans the marker alone)."""
        entry = self._entry_for_epoch(producer_id, producer_epoch)
        if entry is None:  # replayed marker of an older epoch: still ends what it ended then
            entry = self._entries[producer_id]
        first = entry.current_txn_first_offset
        first = marker_offset if first < 0 else first
        entry.current_txn_first_offset = -1
        self._verification_guards.pop(producer_id, None)
        entry.coordinator_epoch = max(entry.coordinator_epoch, marker.coordinator_epoch)
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        self._ongoing.pop(producer_id, None)
        aborted = None
        if not marker.is_commit:
            others = [o for o in self._ongoing.values()] + [
                t.first_offset for t in self._unreplicated if t.producer_id != producer_id
            ]
            last_stable = min(others) if others else marker_offset + 1
            aborted = AbortedTxn(producer_id, first, marker_offset, last_stable)
        completed = CompletedTxn(producer_id, first, marker_offset, aborted is not None, aborted)
        self._unreplicated.append(completed)
        return completed

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction that is open or whose marker is not yet
        below `high_watermark`; None when every transaction is settled."""
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]
        firsts = list(self._ongoing.values())
        firsts.extend(t.first_offset for t in self._unreplicated)
        return min(firsts) if firsts else None

    def rebuild(
        self,
        headers: Iterable[BatchHeader],
        now_ms: int,
        markers: Mapping[int, EndTxnMarker | None] | None = None,
        snapshot: Iterable[ProducerSnapshotEntry] = (),
    ) -> list[AbortedTxn]:
        """Forget everything, load `snapshot` (the state before the first header) and replay the
        producer fields of the log's batches, in order; `markers` holds each control batch's
        marker by its offset. Returns the aborted transactions the replay ended."""
        self._entries.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        for saved in snapshot:
            self._load_entry(saved, now_ms)
        found = markers if markers is not None else {}  # may fill while headers are read
        aborted: list[AbortedTxn] = []
        for header in headers:
            if header.producer_id >= 0:
                completed = self.record_batch(header, now_ms, found.get(header.base_offset))
                if completed is not None and completed.aborted is not None:
                    aborted.append(completed.aborted)
        return aborted

    def _load_entry(self, saved: ProducerSnapshotEntry, now_ms: int) -> None:
        """A snapshot's entry; it counts as active now, as a replayed one does."""
        entry = ProducerEntry(
            saved.producer_id,
            saved.producer_epoch,
            last_timestamp=now_ms,
            coordinator_epoch=saved.coordinator_epoch,
            current_txn_first_offset=saved.current_txn_first_offset,
        )
        if saved.last_sequence >= 0 and saved.last_offset >= 0:
            first_seq = (saved.last_sequence - saved.offset_delta) & INT32_MAX
            entry.batches.append(
                BatchMetadata(
                    first_seq,
                    saved.last_sequence,
                    saved.last_offset - saved.offset_delta,
                    saved.last_offset,
                )
            )
        self._entries[saved.producer_id] = entry
        if saved.current_txn_first_offset >= 0:
            self._ongoing[saved.producer_id] = saved.current_txn_first_offset

    def snapshot_entries(self) -> list[ProducerSnapshotEntry]:
        """Every producer's state as a snapshot holds it (Kafka's field meanings), by id."""
        out: list[ProducerSnapshotEntry] = []
        for pid in sorted(self._entries):
            entry = self._entries[pid]
            last = entry.batches[-1] if entry.batches else None
            out.append(
                ProducerSnapshotEntry(
                    producer_id=pid,
                    producer_epoch=entry.epoch,
                    last_sequence=last.last_seq if last else -1,
                    last_offset=last.last_offset if last else -1,
                    offset_delta=last.last_offset - last.first_offset if last else 0,
                    timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_first_offset=entry.current_txn_first_offset,
                )
            )
        return out

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Drop producers idle for `expiration_ms` (producer.id.expiration.ms); how many."""
        expired = [
            pid
            for pid, entry in self._entries.items()
            if now_ms - entry.last_timestamp >= expiration_ms
            and entry.current_txn_first_offset < 0  # an open transaction keeps its producer
        ]
        for pid in expired:
            del self._entries[pid]
        return len(expired)
