"""The idempotent producer's sequence numbers and error decisions: sans-I/O.

How it works. With `enable.idempotence` the producer holds a producer id and epoch from
InitProducerId and numbers the records of each partition 0, 1, 2, ...; a batch carries the
sequence of its first record. The broker appends a batch only if its sequence follows the last
one it appended for that producer and partition, and recognises a resent batch it already has
(DUPLICATE_SEQUENCE_NUMBER), so retries neither duplicate nor reorder records.

`IdempotenceManager` is the accumulator's drain gate in that mode:
- a new batch gets its sequence when it is drained (`on_drain`), and may be drained only while
  the partition has fewer than 5 unresolved batches (the broker remembers the last 5);
- a batch being retried keeps its sequence and may go only when it is the partition's first
  unresolved batch, so retries reach the broker in order; batches behind it wait in the deque;
- `decide(batch, error, may_retry)` looks up what the verdict on a response needs from the
  sequences (does the batch carry a sequence of the current producer id, is it the next one the
  broker expects) and leaves the rules to `retries.decide_with_idempotence`;
  `resolve(batch, verdict)` applies the verdict: the batch is no longer unresolved, its last
  sequence is acknowledged, or (a batch that failed for good after getting a sequence leaves a
  gap no later batch can cross) a reset is requested.

A reset (`reset_pending`) stops all draining; once nothing is in flight the producer asks for a
new producer id (`set_producer_id`), every partition starts again at sequence 0, and queued
batches, retries first, are renumbered as they are drained. Without idempotence the producer uses
`accumulator.OrderingGate` and `retries.decide_without_idempotence`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from epochlog.client.metadata import TopicPartition
from epochlog.client.producer_batch import ProducerBatch
from epochlog.client.retries import Action, Verdict, decide_with_idempotence
from epochlog.protocol.errors import ErrorCode

MAX_UNRESOLVED_PER_PARTITION = 5


@dataclass
class PartitionSequences:
    next_sequence: int = 0
    last_acked: int = -1
    unresolved: list[int] = field(default_factory=list)  # base sequences, ascending


class IdempotenceManager:
    """Producer id, epoch and per-partition sequences; see the module docstring."""

    def __init__(self) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        self.reset_pending = False
        self._generation = 0  # bumped with every producer id, so old sequences are recognised
        self._partitions: dict[TopicPartition, PartitionSequences] = {}

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0 and not self.reset_pending

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.reset_pending = False
        self._generation += 1
        self._partitions.clear()

    def request_reset(self) -> None:
        self.reset_pending = True

    def sequences(self, tp: TopicPartition) -> PartitionSequences:
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = PartitionSequences()
        return state

    def _is_current(self, batch: ProducerBatch) -> bool:
        return batch.has_sequence and batch.sequence_generation == self._generation

    # ---------------------------------------------------------------- the drain gate

    def can_send(self, batch: ProducerBatch) -> bool:
        if not self.has_producer_id:
            return False
        state = self.sequences(batch.tp)
        if self._is_current(batch):
            return bool(state.unresolved) and state.unresolved[0] == batch.base_sequence
        return len(state.unresolved) < MAX_UNRESOLVED_PER_PARTITION

    def on_drain(self, batch: ProducerBatch) -> None:
        if self._is_current(batch):
            return
        state = self.sequences(batch.tp)
        batch.stamp(self.producer_id, self.producer_epoch, state.next_sequence)
        batch.sequence_generation = self._generation
        state.next_sequence = (state.next_sequence + batch.record_count) & 0x7FFFFFFF
        state.unresolved.append(batch.base_sequence)

    def on_complete(self, batch: ProducerBatch) -> None:
        pass  # the verdict (success, retry or failure) is applied by `resolve`

    # ---------------------------------------------------------------- responses

    def decide(self, batch: ProducerBatch, error: ErrorCode, may_retry: bool) -> Verdict:
        """The verdict on a batch's answer, given its sequence (`retries` holds the rules)."""
        current = self._is_current(batch)
        next_expected = current and batch.base_sequence == self.sequences(batch.tp).last_acked + 1
        return decide_with_idempotence(error, may_retry, current, next_expected)

    def resolve(self, batch: ProducerBatch, verdict: Verdict) -> None:
        """Apply a verdict to the sequence state (and request a reset if it says so)."""
        if verdict.reset_producer_id:
            self.request_reset()
        if not self._is_current(batch):
            return
        state = self.sequences(batch.tp)
        if verdict.action is Action.RETRY:
            return
        if batch.base_sequence in state.unresolved:
            state.unresolved.remove(batch.base_sequence)
        if verdict.action is Action.SUCCESS:
            state.last_acked = max(state.last_acked, batch.last_sequence)
        else:
            self.request_reset()
