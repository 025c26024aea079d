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
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import BatchHeader

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

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


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

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def active_producers(self) -> list[ProducerEntry]:
        """Every producer the partition remembers, by producer id (DescribeProducers)."""
        return [self._entries[pid] for pid in sorted(self._entries)]

    # ------------------------------------------------------------------------- decisions

    def check(
        self, producer_id: int, producer_epoch: int, first_seq: int, last_seq: int
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
        return _APPEND

    def check_batch(self, header: BatchHeader) -> SequenceCheck:
        return self.check(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            last_sequence(header.base_sequence, header.last_offset_delta),
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
    ) -> None:
        """A batch of this producer is in the log at [first_offset, last_offset]."""
        if producer_id < 0:
            return
        entry = self._entries.get(producer_id)
        if entry is None or producer_epoch > entry.epoch:
            entry = ProducerEntry(producer_id, producer_epoch)
            self._entries[producer_id] = entry
        elif producer_epoch < entry.epoch:
            return  # an older epoch's batch (replayed from the log): nothing to learn from it
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset))
        while len(entry.batches) > self.max_batches:
            entry.batches.popleft()
        entry.last_timestamp = max(entry.last_timestamp, timestamp)

    def record_batch(self, header: BatchHeader, timestamp: int) -> None:
        """Record a batch as stamped in the log (its header carries the assigned offsets)."""
        if header.producer_id < 0 or header.is_control:
            return
        self.record(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            last_sequence(header.base_sequence, header.last_offset_delta),
            header.base_offset,
            header.last_offset,
            timestamp,
        )

    def rebuild(self, headers: Iterable[BatchHeader], now_ms: int) -> None:
        """Forget everything and replay the producer fields of the log's batches, in order."""
        self._entries.clear()
        for header in headers:
            if header.producer_id >= 0:
                self.record_batch(header, now_ms)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Drop producers idle for `expiration_ms` (producer.id.expiration.ms); how many."""
        expired = [
            pid
            for pid, entry in self._entries.items()
            if now_ms - entry.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self._entries[pid]
        return len(expired)
