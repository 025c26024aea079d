"""The producer's record accumulator: per-partition batches and when to send them. Sans-I/O.

How it works (Kafka's RecordAccumulator, simplified). `append` adds a record to the last open
batch of its partition, or closes that batch and opens a new one when the record would take it
past `batch.size` (a record bigger than `batch.size` gets a batch of its own). Each record carries
an opaque handle (the producer's future) that the sender completes later. It is the producer's
per-record path: a record without headers goes straight into the open batch's buffer
(`ProducerBatch.try_append_plain`). `wakeup` tells the sender when a batch was started (a new
linger deadline) or filled, and `on_batch_closed` the sticky partitioner when one closed.

`ready(now, leader_of)` says which leaders have a partition worth sending: its first batch is
closed (full, or another batch queued behind it), has lingered `linger.ms`, or a flush is under
way; a batch waiting to be retried is held until its `retry.backoff.ms` has passed. It also
returns when to look again and which topics have partitions without a known leader.

`drain(now, nodes, leader_of, max_request_size, gate)` takes, for each node, at most one batch
per partition (the first of its deque), in a rotating partition order so no partition starves,
until `max.request.size` is reached (the first batch always goes). The `gate` decides per batch
whether it may go now (idempotence ordering, in-flight limits) and is told when it goes, which is
where sequence numbers are assigned. Draining closes the batch: its bytes are built once, and
`ProducerBatch.stamp` patches producer id, epoch and base sequence into the header (recomputing
the CRC) so a retry under a new producer id needs no rebuild.

`reenqueue` puts a batch to be retried back at the front of its deque, ordered by base sequence;
`expire` removes the batches that have outlived `delivery.timeout.ms`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from epochlog.client.metadata import TopicPartition
from epochlog.client.producer_batch import ProducerBatch
from epochlog.protocol.compression import Compression
from epochlog.protocol.records import Header, record_size_upper_bound


def _nothing() -> None:
    pass


def _no_clock() -> float:
    raise ValueError("RecordAccumulator.append needs `now` when the accumulator has no clock")


class DrainGate(Protocol):
    """Decides whether a batch may be sent now, and hears when it is sent and answered."""

    def can_send(self, batch: ProducerBatch) -> bool: ...

    def on_drain(self, batch: ProducerBatch) -> None: ...

    def on_complete(self, batch: ProducerBatch) -> None: ...


class OrderingGate:
    """The gate without idempotence: every batch may go, except that with
    max.in.flight.requests.per.connection = 1 a partition with a batch in flight is muted until
    it is answered (Kafka's guaranteeMessageOrder), so a retry cannot overtake a later batch."""

    def __init__(self, guarantee_order: bool) -> None:
        self.guarantee_order = guarantee_order
        self.muted: set[TopicPartition] = set()

    def can_send(self, batch: ProducerBatch) -> bool:
        return batch.tp not in self.muted

    def on_drain(self, batch: ProducerBatch) -> None:
        if self.guarantee_order:
            self.muted.add(batch.tp)

    def on_complete(self, batch: ProducerBatch) -> None:
        self.muted.discard(batch.tp)


@dataclass
class ReadyCheck:
    nodes: set[int] = field(default_factory=set)
    next_check_ms: float = float("inf")  # delay until something may become ready
    unknown_leader_topics: set[str] = field(default_factory=set)


class RecordAccumulator:
    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: float,
        compression: Compression = Compression.NONE,
        retry_backoff_ms: float = 100,
        on_batch_closed: Callable[[TopicPartition], None] | None = None,
        wakeup: Callable[[], None] = _nothing,
        clock: Callable[[], float] = _no_clock,
    ) -> None:
        """`on_batch_closed` hears of every batch closed (the sticky partitioner moves on);
        `wakeup` is called when the sender should look again: a batch was started (a new
        linger deadline) or filled by an append. `clock` dates batches appended without
        `now`."""
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.compression = compression
        self.retry_backoff_ms = retry_backoff_ms
        self._on_batch_closed = on_batch_closed
        self._wakeup = wakeup
        self._clock = clock
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._drain_index: dict[int, int] = {}
        self._flushes = 0
        self.buffered_bytes = 0  # estimated bytes of batches not yet drained

    # ---------------------------------------------------------------- append

    def append(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header | tuple[str, bytes | None]],
        handle: Any,
        now: float | None = None,
    ) -> ProducerBatch:
        """Add one record; returns the batch it went into. `now` (the clock's, if None) dates
        a new batch. The producer's per-record path, hence flat: a record without headers
        that fits in its partition's open batch is encoded straight into it
        (`ProducerBatch.try_append_plain`)."""
        dq = self._batches.get(tp)
        if dq:
            last = dq[-1]
            if last.appendable and not headers:
                grown = last.try_append_plain(timestamp, key, value, handle, self.batch_size)
                if grown > 0:
                    self.buffered_bytes += grown
                    return last
                if grown < 0:  # it filled the batch: close it and tell the sender
                    self.buffered_bytes -= grown
                    self._close(last)
                    self._wakeup()
                    return last
        elif dq is None:
            dq = self._batches[tp] = deque()
        if headers:
            size = record_size_upper_bound(key, value, headers)
        else:  # the same bound, inline for the common case
            size = 26 + (len(key) if key else 0) + (len(value) if value else 0)
        last = dq[-1] if dq else None
        if last is not None and last.data is None:
            before = last.size
            if not last.handles or before + size <= self.batch_size:
                last.append(timestamp, key, value, headers, handle)
                after = last.size
                self.buffered_bytes += after - before
                if after >= self.batch_size:
                    self._close(last)
                    self._wakeup()
                return last
            self._close(last)
        batch = ProducerBatch(tp, self.compression, self._clock() if now is None else now)
        batch.append(timestamp, key, value, headers, handle)
        self.buffered_bytes += batch.size
        dq.append(batch)
        if batch.size >= self.batch_size:
            self._close(batch)
        self._wakeup()  # a new linger deadline, or a full batch
        return batch

    def _close(self, batch: ProducerBatch) -> None:
        if not batch.is_closed:
            before = batch.size
            batch.close()
            self.buffered_bytes += batch.size - before
            if self._on_batch_closed is not None:
                self._on_batch_closed(batch.tp)

    # ---------------------------------------------------------------- ready and drain

    def begin_flush(self) -> None:
        self._flushes += 1

    def end_flush(self) -> None:
        self._flushes -= 1

    def ready(self, now: float, leader_of: Callable[[TopicPartition], int | None]) -> ReadyCheck:
        check = ReadyCheck()
        for tp, dq in self._batches.items():
            if not dq:
                continue
            leader = leader_of(tp)
            if leader is None:
                check.unknown_leader_topics.add(tp.topic)
                continue
            if leader in check.nodes:
                continue
            first = dq[0]
            if first.attempts > 0 and now < first.retry_at_ms:
                check.next_check_ms = min(check.next_check_ms, first.retry_at_ms - now)
                continue
            full = len(dq) > 1 or first.is_closed
            waited = now - (first.retry_at_ms if first.attempts > 0 else first.created_ms)
            lingered = waited >= self.linger_ms
            if full or lingered or self._flushes > 0 or first.attempts > 0:
                check.nodes.add(leader)
            else:
                check.next_check_ms = min(check.next_check_ms, self.linger_ms - waited)
        return check

    def drain(
        self,
        now: float,
        nodes: Iterable[int],
        leader_of: Callable[[TopicPartition], int | None],
        max_request_size: int,
        gate: DrainGate,
    ) -> dict[int, list[ProducerBatch]]:
        by_node: dict[int, list[TopicPartition]] = {}
        wanted = set(nodes)
        for tp, dq in self._batches.items():
            if dq:
                leader = leader_of(tp)
                if leader in wanted:
                    by_node.setdefault(leader, []).append(tp)
        out: dict[int, list[ProducerBatch]] = {}
        for node, tps in by_node.items():
            start = self._drain_index.get(node, 0) % len(tps)
            taken: list[ProducerBatch] = []
            size = 0
            for i in range(len(tps)):
                tp = tps[(start + i) % len(tps)]
                dq = self._batches[tp]
                first = dq[0]
                if first.attempts > 0 and now < first.retry_at_ms:
                    continue
                if not gate.can_send(first):
                    continue
                self._close(first)
                if taken and size + first.size > max_request_size:
                    self._drain_index[node] = (start + i) % len(tps)
                    break
                dq.popleft()
                self.buffered_bytes -= first.size
                gate.on_drain(first)
                taken.append(first)
                size += first.size
            else:
                self._drain_index[node] = start + 1
            if taken:
                out[node] = taken
        return out

    # ---------------------------------------------------------------- retries and expiry

    def reenqueue(self, batch: ProducerBatch, now: float) -> None:
        """Put a batch to be retried back among the queued ones in record order (so in
        base-sequence order too): before the batches created after it, after a split's halves
        holding earlier records (a later batch answered after a split must not overtake
        them)."""
        batch.attempts += 1
        batch.retry_at_ms = now + self.retry_backoff_ms
        self.buffered_bytes += batch.size
        self._insert_in_order(batch)

    def _insert_in_order(self, batch: ProducerBatch) -> None:
        dq = self._batches.setdefault(batch.tp, deque())
        i = 0
        while i < len(dq) and dq[i].order < batch.order:
            i += 1
        dq.insert(i, batch)

    def expire(self, now: float, delivery_timeout_ms: float) -> list[ProducerBatch]:
        """Remove and return the queued batches created more than delivery.timeout.ms ago."""
        expired: list[ProducerBatch] = []
        for dq in self._batches.values():
            while dq and now - dq[0].created_ms >= delivery_timeout_ms:
                batch = dq.popleft()
                batch.appendable = False
                self.buffered_bytes -= batch.size
                expired.append(batch)
        return expired

    def requeue_split(self, halves: list[ProducerBatch], now: float) -> None:
        """Put the halves of a split batch back among the queued ones in record order (at the
        front, unless earlier records wait there too), to be sent after `retry.backoff.ms`."""
        for half in halves:
            half.retry_at_ms = now + self.retry_backoff_ms
            half.attempts = max(half.attempts, 1)
            self.buffered_bytes += half.size
            self._insert_in_order(half)

    def abort_all(self) -> list[ProducerBatch]:
        """Remove and return every queued batch (closing without flushing)."""
        batches = [b for dq in self._batches.values() for b in dq]
        for batch in batches:
            batch.appendable = False
        self._batches.clear()
        self.buffered_bytes = 0
        return batches

    def has_queued(self) -> bool:
        return any(self._batches.values())

    def queued_batches(self) -> list[ProducerBatch]:
        """Every queued batch (open, closed, or back for a retry), in no particular order."""
        return [b for dq in self._batches.values() for b in dq]

    def queued(self, tp: TopicPartition) -> Sequence[ProducerBatch]:
        return tuple(self._batches.get(tp, ()))
