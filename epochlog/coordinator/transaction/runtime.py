"""The transaction coordinator's runtime: the I/O around the sans-I/O shards (Kafka's
TransactionStateManager loading and appending, and the hand-off to the marker channel).

How it works. A broker runs one `TransactionCoordinatorShard` per `__transaction_state`
partition it leads, with the partition's leader epoch as the coordinator epoch. `elected` loads
it (reads the partition from its start, replays every record, then `loaded()`, which may ask for
the markers a predecessor left unwritten); meanwhile its ids get COORDINATOR_LOAD_IN_PROGRESS.
`resigned` drops it: timers cancelled, marker deliveries stopped, requests for its ids answered
NOT_COORDINATOR (the client finds the coordinator again).

Each request is one call on the shard with a fresh handle; the call returns `Effects`. The
runtime appends their records (acks=all, through `TransactionLog`), then answers the handle's
reply, then replays the records, then hands each `WriteMarkers` to the `MarkerWriter`; when a
delivery reports every marker written, `markers_written` completes the transaction (another
record). A failed append calls `append_failed` and answers the reply with the append's error.
Timers are `loop.call_at` handles, one per shard timer key.

The shard allocates producer ids synchronously; ids come from ZooKeeper blocks asynchronously,
so InitProducerId takes one id before it calls the shard (`_prefetched`); one it does not use is
skipped, which only leaves a gap.

The two coordinators do not import each other (tests/unit/test_layering.py), so this repeats
the group runtime's shape: `CoordinatorError`, `EncodedRecord`, the load loop and the timer
plumbing are written twice (the group runtime also coalesces appends, which transactions, one
record per call, do not need).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from epochlog.coordinator.common import CoordinatorError, EncodedRecord
from epochlog.coordinator.transaction.operations import (
    AddPartitionsReply,
    Effects,
    ErrorReply,
    InitProducerId,
    InitProducerIdReply,
    TimerKey,
    TxnConfig,
    WriteMarkers,
)
from epochlog.coordinator.transaction.records import TransactionRecord
from epochlog.coordinator.transaction.shard import TransactionCoordinatorShard
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.java_hash import java_string_hash, java_utils_abs

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
LOAD_RETRY_BACKOFF_S = 0.2
LOAD_RETRY_MAX_BACKOFF_S = 5.0
# How long AddPartitionsToTxn / AddOffsetsToTxn for a transaction still being completed waits
# for its Complete record before answering CONCURRENT_TRANSACTIONS (Kafka's leader-side
# verification retries that error for up to add.partitions.to.txn.retry.backoff.max.ms, 100).
COMPLETION_WAIT_S = 0.1


class TransactionLog(Protocol):
    """What the runtime needs of the partition layer."""

    async def append(self, partition: int, records: Sequence[EncodedRecord]) -> None:
        """Append as leader of `__transaction_state` partition `partition`, return once the
        records are committed (acks=all); raise `CoordinatorError` when that fails."""
        ...

    def read(self, partition: int) -> AsyncIterator[EncodedRecord]:
        """Every record of the partition, from its start to its end, in offset order."""
        ...


class RecordCodec(Protocol):
    def encode(self, record: TransactionRecord) -> EncodedRecord: ...

    def decode(self, key: bytes, value: bytes | None) -> TransactionRecord | None: ...


class MarkerWriter(Protocol):
    async def write(self, markers: WriteMarkers, still_current: Callable[[], bool]) -> bool:
        """Write the markers to every partition's leader, retrying until written; True when
        all are written, False when fenced or once `still_current()` turns False."""
        ...


class ProducerIds(Protocol):
    async def next_producer_id(self) -> int: ...


def partition_for_transactional_id(transactional_id: str, partitions: int) -> int:
    """Kafka's `Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount`."""
    return java_utils_abs(java_string_hash(transactional_id)) % partitions


@dataclass
class _Partition:
    partition: int
    shard: TransactionCoordinatorShard
    loaded: bool = False
    timers: dict[TimerKey, asyncio.TimerHandle] = field(default_factory=dict)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    # transactional id -> futures of calls waiting for its markers and Complete record
    completion_waiters: dict[str, list[asyncio.Future[None]]] = field(default_factory=dict)


class TransactionCoordinatorRuntime:
    def __init__(
        self,
        log_: TransactionLog,
        codec: RecordCodec,
        markers: MarkerWriter,
        producer_ids: ProducerIds,
        partition_count: int,
        config: TxnConfig | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.log = log_
        self.codec = codec
        self.markers = markers
        self.producer_ids = producer_ids
        self.partition_count = partition_count
        self.config = config or TxnConfig()
        self.clock_ms = clock_ms
        self._owned: dict[int, _Partition] = {}
        self._prefetched: list[int] = []
        self._handles = itertools.count(1)

    # ------------------------------------------------------------------ leadership

    def partition_of(self, transactional_id: str) -> int:
        return partition_for_transactional_id(transactional_id, self.partition_count)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def elected(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads the partition at `leader_epoch`: load its transactions."""
        owned = self._owned.get(partition)
        if owned is not None:
            if owned.shard.coordinator_epoch == leader_epoch:
                return
            self.resigned(partition)  # a new epoch: reload, fencing our own older markers
        owned = self._owned[partition] = _Partition(partition, self._new_shard(leader_epoch))
        self._spawn(owned, self._load(owned), f"load {TRANSACTION_STATE_TOPIC}-{partition}")

    def resigned(self, partition: int) -> None:
        owned = self._owned.pop(partition, None)
        if owned is None:
            return
        for handle in owned.timers.values():
            handle.cancel()
        for task in list(owned.tasks):
            task.cancel()
        log.info("unloaded %s-%d", TRANSACTION_STATE_TOPIC, partition)

    async def close(self) -> None:
        for partition in list(self._owned):
            self.resigned(partition)

    def _new_shard(self, coordinator_epoch: int) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(self._take_producer_id, coordinator_epoch, self.config)

    def _take_producer_id(self) -> int:
        if not self._prefetched:
            raise RuntimeError("transaction coordinator: no producer id was taken in advance")
        return self._prefetched.pop()

    def _spawn(self, owned: _Partition, work: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(work, name=name)
        owned.tasks.add(task)
        task.add_done_callback(owned.tasks.discard)
        task.add_done_callback(_log_failure)

    async def _load(self, owned: _Partition) -> None:
        started = time.monotonic()
        backoff_s = LOAD_RETRY_BACKOFF_S
        while True:
            count = 0
            try:
                async for key, value in self.log.read(owned.partition):
                    record = self.codec.decode(key, value)
                    if record is not None:
                        owned.shard.replay(record)
                        count += 1
                break
            except Exception as exc:
                log.warning(
                    "loading %s-%d failed (%s: %s); trying again in %.1f s",
                    TRANSACTION_STATE_TOPIC,
                    owned.partition,
                    type(exc).__name__,
                    exc,
                    backoff_s,
                )
                owned.shard = self._new_shard(owned.shard.coordinator_epoch)
                await asyncio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, LOAD_RETRY_MAX_BACKOFF_S)
        owned.loaded = True
        log.info(
            "loaded %s-%d: %d records, %d transactional ids in %.2f s (coordinator epoch %d)",
            TRANSACTION_STATE_TOPIC,
            owned.partition,
            count,
            len(owned.shard.transactions),
            time.monotonic() - started,
            owned.shard.coordinator_epoch,
        )
        self._apply(owned, owned.shard.loaded(self.clock_ms()))

    def _shard_for(self, transactional_id: str) -> _Partition:
        owned = self._owned.get(self.partition_of(transactional_id))
        if owned is None:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        if not owned.loaded:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return owned

    # ------------------------------------------------------------------ calls

    async def init_producer_id(self, request: InitProducerId) -> InitProducerIdReply:
        self._shard_for(request.transactional_id)  # fail fast, before taking an id
        try:
            producer_id = await self.producer_ids.next_producer_id()
        except Exception as exc:  # ZooKeeper unreachable: the client retries
            log.warning("cannot allocate a producer id: %s", exc)
            raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from exc
        self._prefetched[:] = [producer_id]
        try:
            reply: InitProducerIdReply = await self.call(
                request.transactional_id,
                lambda shard, handle, now: shard.init_producer_id(request, handle, now),
            )
        finally:
            self._prefetched.clear()
        return reply

    async def call(
        self,
        transactional_id: str,
        operation: Callable[[TransactionCoordinatorShard, Any, int], Effects],
        after_completion: bool = False,
    ) -> Any:
        """Run `operation(shard, handle, now)` on the id's shard; return the reply it gives
        `handle`, once the call's records are committed. Raises CoordinatorError when the shard
        is not here or not loaded.

        `after_completion`: when the id's previous transaction is still being completed
        (prepared, markers on their way), wait up to COMPLETION_WAIT_S for its Complete record
        first. The client would otherwise get CONCURRENT_TRANSACTIONS and retry after its
        backoff (librdkafka and the Java producer: 20 ms), which is most of a short
        transaction's time; the answer after the wait is the one its retry would get."""
        owned = self._shard_for(transactional_id)
        if after_completion and owned.shard.completing(transactional_id):
            await self._completion_of(owned, transactional_id)
            owned = self._shard_for(transactional_id)
        handle = next(self._handles)
        effects = operation(owned.shard, handle, self.clock_ms())
        replies = await self._carry_out(owned, effects)
        for answered, reply in replies:
            if answered == handle:
                return reply
        raise RuntimeError(f"transaction coordinator: no reply for {transactional_id!r}")

    async def _completion_of(self, owned: _Partition, transactional_id: str) -> None:
        """Return once the id's marker delivery ends (completed, abandoned or stopped), or
        after COMPLETION_WAIT_S."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = owned.completion_waiters.setdefault(transactional_id, [])
        waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), COMPLETION_WAIT_S)
        except TimeoutError:
            pass
        finally:
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                owned.completion_waiters.pop(transactional_id, None)

    def _wake_completion_waiters(self, owned: _Partition, transactional_id: str) -> None:
        for waiter in owned.completion_waiters.pop(transactional_id, []):
            if not waiter.done():
                waiter.set_result(None)

    def read(self, transactional_id: str) -> TransactionCoordinatorShard:
        """The loaded shard of the id, for reads (DescribeTransactions)."""
        return self._shard_for(transactional_id).shard

    def shards(self) -> tuple[list[TransactionCoordinatorShard], bool]:
        """The loaded shards, and whether any owned partition is still loading."""
        loaded = [p.shard for p in self._owned.values() if p.loaded]
        return loaded, len(loaded) < len(self._owned)

    # ------------------------------------------------------------------ effects

    def _apply(self, owned: _Partition, effects: Effects) -> None:
        """Carry out effects nobody waits for (timers, loads, completed markers)."""
        if effects.records or effects.markers:
            self._spawn(owned, self._carry_out(owned, effects), "transaction effects")
        else:
            self._set_timers(owned, effects)

    async def _carry_out(self, owned: _Partition, effects: Effects) -> list[tuple[Any, Any]]:
        """Append, then the replies, then replay, then start the markers; the replies (or, when
        the append failed, the replies carrying its error) are returned."""
        self._set_timers(owned, effects)
        if effects.records:
            try:
                await self.log.append(
                    owned.partition, [self.codec.encode(r) for r in effects.records]
                )
            except Exception as exc:
                error = (
                    exc.error if isinstance(exc, CoordinatorError) else ErrorCode.NOT_COORDINATOR
                )
                log.warning(
                    "%s-%d: appending %d records failed (%s)",
                    TRANSACTION_STATE_TOPIC,
                    owned.partition,
                    len(effects.records),
                    exc,
                )
                owned.shard.append_failed(effects.records)
                return [(h, _failed(reply, error)) for h, reply in effects.replies]
            if self._owned.get(owned.partition) is not owned:
                # resigned while appending: the new leader's load has these records
                return [
                    (h, _failed(reply, ErrorCode.NOT_COORDINATOR)) for h, reply in effects.replies
                ]
            for record in effects.records:
                owned.shard.replay(record)
        for markers in effects.markers:
            self._spawn(
                owned,
                self._deliver_markers(owned, markers),
                f"markers {markers.transactional_id}",
            )
        return effects.replies

    async def _deliver_markers(self, owned: _Partition, markers: WriteMarkers) -> None:
        try:
            await self._complete(owned, markers)
        finally:  # completed, abandoned or cancelled: waiting calls go on (and see which)
            self._wake_completion_waiters(owned, markers.transactional_id)

    async def _complete(self, owned: _Partition, markers: WriteMarkers) -> None:
        def still_current() -> bool:
            return self._owned.get(owned.partition) is owned

        written = await self.markers.write(markers, still_current)
        if not written or not still_current():
            log.info(
                "markers of %r (producer %d epoch %d) abandoned",
                markers.transactional_id,
                markers.producer_id,
                markers.producer_epoch,
            )
            return
        effects = owned.shard.markers_written(
            markers.transactional_id, markers.producer_id, markers.producer_epoch, self.clock_ms()
        )
        await self._carry_out(owned, effects)

    def _set_timers(self, owned: _Partition, effects: Effects) -> None:
        loop = asyncio.get_running_loop()
        for key, deadline in effects.timers.items():
            old = owned.timers.pop(key, None)
            if old is not None:
                old.cancel()
            if deadline is None:
                continue
            delay = max(0.0, (deadline - self.clock_ms()) / 1000)
            owned.timers[key] = loop.call_at(loop.time() + delay, self._fire, owned, key)

    def _fire(self, owned: _Partition, key: TimerKey) -> None:
        owned.timers.pop(key, None)
        if self._owned.get(owned.partition) is not owned:
            return
        self._apply(owned, owned.shard.on_timer(key, self.clock_ms()))


def _failed(reply: Any, error: ErrorCode) -> Any:
    """The reply a caller gets when the records its answer depended on were not appended."""
    if isinstance(reply, InitProducerIdReply):
        return InitProducerIdReply(error)
    if isinstance(reply, AddPartitionsReply):
        return replace(reply, errors=dict.fromkeys(reply.errors, error))
    if isinstance(reply, ErrorReply):
        return ErrorReply(error)
    return reply


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s failed", task.get_name(), exc_info=task.exception())
