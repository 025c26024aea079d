"""The group coordinator's runtime: the I/O around the sans-I/O shards (Kafka's
CoordinatorRuntime).

How it works. A broker runs one shard per `__consumer_offsets` partition it leads. The runtime
owns them: when the broker becomes leader of an offsets partition it loads the shard (reads the
partition from its start, replays every record, then `loaded`); meanwhile requests for its groups
get COORDINATOR_LOAD_IN_PROGRESS. When the broker stops leading it, the shard is dropped, its
timers cancelled and every request waiting on it answered NOT_COORDINATOR; requests for groups of
a partition the broker does not lead get NOT_COORDINATOR too, and the client looks the
coordinator up again.

Each request is one call on the shard, which returns `Effects`. The runtime appends their records
to the partition through `OffsetsPartitions.append` (acks=all: it returns once the records are
replicated as the partition requires), then resolves the replies, then replays the records into
the shard. A JoinGroup or SyncGroup that must wait for the rest of its group gets a future keyed
by a handle the shard keeps; a later call or timer resolves it. Timers are `loop.call_at`
handles keyed like the shard's timer keys, one per key.

Offsets committed in a transaction go out in a batch of their own, transactional and stamped
with the producer's id and epoch (`OffsetsPartitions.append`'s `producer`), so the partition's
producer state holds the transaction open until its marker. Loading reads those records back
with their producer id (`TransactionalRecord`) and the markers as `TxnMarkerRecord`; a marker
written while the shard is loaded reaches it through `transaction_completed`, which the node
calls once WriteTxnMarkers has replicated it.

All of this runs on the broker's event loop, one shard call at a time: the shard never locks.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from epochlog.coordinator.common import CoordinatorError, EncodedRecord
from epochlog.coordinator.group.operations import (
    Effects,
    GroupConfig,
    JoinGroupReply,
    SyncGroupReply,
    TimerKey,
)
from epochlog.coordinator.group.records import (
    GroupRecord,
    OffsetCommitRecord,
    TxnMarkerRecord,
)
from epochlog.coordinator.group.shard import GroupCoordinatorShard
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.java_hash import java_string_hash, java_utils_abs

log = logging.getLogger(__name__)

T = TypeVar("T")
OFFSETS_TOPIC = "__consumer_offsets"

TxnProducer = tuple[int, int]  # producer id, producer epoch of a transactional batch


@dataclass(frozen=True)
class TransactionalRecord:
    """A record read back from a producer's transactional batch."""

    key: bytes
    value: bytes | None
    producer_id: int


# What reading a partition yields: ordinary records, transactional ones, and the markers that
# end transactions (control batches).
LoggedRecord = EncodedRecord | TransactionalRecord | TxnMarkerRecord


class OffsetsPartitions(Protocol):
    """What the runtime needs of the partition layer, and nothing more."""

    async def append(
        self,
        partition: int,
        records: Sequence[EncodedRecord],
        producer: TxnProducer | None = None,
    ) -> None:
        """Append as the leader of `__consumer_offsets` partition `partition` and return once
        the records are committed (acks=all); raise `CoordinatorError` when that fails. With
        `producer`, the batch is that producer's transactional batch."""
        ...

    def read(self, partition: int) -> AsyncIterator[LoggedRecord]:
        """Every record of the partition, from its start to its end, in offset order."""
        ...


class RecordCodec(Protocol):
    def encode(self, record: GroupRecord) -> EncodedRecord: ...

    def decode(self, key: bytes, value: bytes | None) -> GroupRecord | None: ...


def partition_for_group(group_id: str, partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`."""
    return java_utils_abs(java_string_hash(group_id)) % partitions


LOAD_RETRY_BACKOFF_S = 0.2
LOAD_RETRY_MAX_BACKOFF_S = 5.0
# Records of calls waiting while an append is in flight go out together in the next one, up to
# this many bytes (one batch, well under message.max.bytes).
MAX_COALESCED_BYTES = 512 * 1024


@dataclass
class _Partition:
    partition: int
    shard: GroupCoordinatorShard
    loaded: bool = False
    timers: dict[TimerKey, asyncio.TimerHandle] = field(default_factory=dict)
    load_task: asyncio.Task[None] | None = None
    # Appends waiting for the one in flight: (records, the transactional producer or None,
    # future completed when they are committed)
    queued: deque[tuple[list[EncodedRecord], TxnProducer | None, asyncio.Future[None]]] = field(
        default_factory=deque
    )
    appending: bool = False


class GroupCoordinatorRuntime:
    def __init__(
        self,
        partitions: OffsetsPartitions,
        codec: RecordCodec,
        partition_count: int,
        config: GroupConfig | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.partitions = partitions
        self.codec = codec
        self.partition_count = partition_count
        self.config = config or GroupConfig()
        self.clock_ms = clock_ms
        self._owned: dict[int, _Partition] = {}
        self._waiting: dict[int, tuple[int, asyncio.Future[Any]]] = {}  # handle -> partition
        self._handles = itertools.count(1)

    # ------------------------------------------------------------------ leadership

    def partition_of(self, group_id: str) -> int:
        return partition_for_group(group_id, self.partition_count)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def elected(self, partition: int) -> None:
        """This broker now leads the offsets partition: load its groups."""
        if partition in self._owned:
            return
        owned = self._owned[partition] = _Partition(partition, GroupCoordinatorShard(self.config))
        owned.load_task = asyncio.get_running_loop().create_task(
            self._load(partition, owned), name=f"load __consumer_offsets-{partition}"
        )

    def resigned(self, partition: int) -> None:
        """This broker no longer leads the partition: drop its groups, answer what waits."""
        owned = self._owned.pop(partition, None)
        if owned is None:
            return
        if owned.load_task is not None and not owned.load_task.done():
            owned.load_task.cancel()
        for handle in owned.timers.values():
            handle.cancel()
        for handle, (where, future) in list(self._waiting.items()):
            if where == partition:
                del self._waiting[handle]
                if not future.done():
                    future.set_exception(CoordinatorError(ErrorCode.NOT_COORDINATOR))
        log.info("unloaded __consumer_offsets-%d", partition)

    async def close(self) -> None:
        for partition in list(self._owned):
            self.resigned(partition)

    async def _load(self, partition: int, owned: _Partition) -> None:
        """Replay the partition into the shard; a read that fails (the log moved under it, a
        storage error) is tried again from the start on a fresh shard while this broker still
        leads the partition, so no partition stays loading for good."""
        started = time.monotonic()
        backoff_s = LOAD_RETRY_BACKOFF_S
        while self._owned.get(partition) is owned:
            count = 0
            try:
                async for item in self.partitions.read(partition):
                    record = self._decode(item)
                    if record is not None:
                        owned.shard.replay(record)
                        count += 1
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "loading __consumer_offsets-%d failed (%s: %s); trying again in %.1f s",
                    partition,
                    type(exc).__name__,
                    exc,
                    backoff_s,
                )
                owned.shard = GroupCoordinatorShard(self.config)
                await asyncio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, LOAD_RETRY_MAX_BACKOFF_S)
        if self._owned.get(partition) is not owned:
            return
        owned.loaded = True
        self._apply(partition, owned, owned.shard.loaded(self.clock_ms()))
        log.info(
            "loaded __consumer_offsets-%d: %d records, %d groups in %.2f s",
            partition,
            count,
            len(owned.shard.groups),
            time.monotonic() - started,
        )

    def _decode(self, item: LoggedRecord) -> GroupRecord | None:
        if isinstance(item, TxnMarkerRecord):
            return item
        if isinstance(item, TransactionalRecord):
            record = self.codec.decode(item.key, item.value)
            if isinstance(record, OffsetCommitRecord):
                return replace(record, producer_id=item.producer_id)
            return record
        key, value = item
        return self.codec.decode(key, value)

    def transaction_completed(self, partition: int, producer_id: int, committed: bool) -> None:
        """The producer's COMMIT or ABORT marker is written and replicated in the offsets
        partition (Kafka's GroupCoordinator.onTransactionCompleted). A shard still loading
        reads the marker from the log instead; one not here has nothing to complete."""
        owned = self._owned.get(partition)
        if owned is None or not owned.loaded:
            return
        owned.shard.replay(TxnMarkerRecord(producer_id, committed))

    def _shard_of(self, group_id: str) -> tuple[int, _Partition]:
        partition = self.partition_of(group_id)
        owned = self._owned.get(partition)
        if owned is None:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        if not owned.loaded:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return partition, owned

    # ------------------------------------------------------------------ calls

    async def call(
        self, group_id: str, operation: Callable[[GroupCoordinatorShard, int], tuple[T, Effects]]
    ) -> T:
        """Run `operation(shard, now)` for the group's shard; its result is returned once its
        effects' records are committed."""
        return await self.start_call(group_id, operation)

    def start_call(
        self, group_id: str, operation: Callable[[GroupCoordinatorShard, int], tuple[T, Effects]]
    ) -> asyncio.Future[T]:
        """`call`, begun now: the operation runs and its records are queued for appending
        before this returns, so calls started one after the other commit in that order (a
        connection's pipelined OffsetCommits). The future fails with CoordinatorError as
        `call` raises it."""
        loop = asyncio.get_running_loop()
        try:
            partition, owned = self._shard_of(group_id)
        except CoordinatorError as exc:
            failed: asyncio.Future[T] = loop.create_future()
            failed.set_exception(exc)
            return failed
        result, effects = operation(owned.shard, self.clock_ms())
        self._set_timers(partition, owned, effects)
        if not effects.records:
            self._deliver(effects.replies)
            done: asyncio.Future[T] = loop.create_future()
            done.set_result(result)
            return done
        appended = self._enqueue(
            owned, [self.codec.encode(r) for r in effects.records], _producer_of(effects.records)
        )

        async def committed() -> T:
            await self._commit(partition, owned, effects, raise_on_failure=True, appended=appended)
            return result

        return loop.create_task(committed())

    def read(self, group_id: str, operation: Callable[[GroupCoordinatorShard], T]) -> T:
        """A read that changes nothing (OffsetFetch, DescribeGroups)."""
        _, owned = self._shard_of(group_id)
        return operation(owned.shard)

    async def call_with_reply(
        self,
        group_id: str,
        operation: Callable[[GroupCoordinatorShard, Any, int], Effects],
    ) -> Any:
        """Run an operation whose reply may come later (JoinGroup, SyncGroup): the shard is
        given a handle and the reply arrives through some call's or timer's effects."""
        partition, owned = self._shard_of(group_id)
        handle = next(self._handles)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[handle] = (partition, future)
        try:
            self._apply(partition, owned, operation(owned.shard, handle, self.clock_ms()))
            return await future
        finally:
            self._waiting.pop(handle, None)

    def shards(self) -> list[GroupCoordinatorShard]:
        """The loaded shards (ListGroups asks every one)."""
        return [p.shard for p in self._owned.values() if p.loaded]

    # ------------------------------------------------------------------ effects

    def _apply(self, partition: int, owned: _Partition, effects: Effects) -> None:
        """Carry out effects without waiting: timers now, records and replies in a task."""
        self._set_timers(partition, owned, effects)
        if effects.records:
            asyncio.get_running_loop().create_task(self._commit(partition, owned, effects))
        else:
            self._deliver(effects.replies)

    async def _commit(
        self,
        partition: int,
        owned: _Partition,
        effects: Effects,
        raise_on_failure: bool = False,
        appended: asyncio.Future[None] | None = None,
    ) -> None:
        """Append the effects' records (or wait for `appended`, their append already queued),
        then reply and replay; a failed append fails the replies instead."""
        if appended is None:
            appended = self._enqueue(
                owned,
                [self.codec.encode(r) for r in effects.records],
                _producer_of(effects.records),
            )
        try:
            await appended
        except Exception as exc:
            error = exc.error if isinstance(exc, CoordinatorError) else ErrorCode.NOT_COORDINATOR
            log.warning(
                "__consumer_offsets-%d: appending %d records failed (%s)",
                partition,
                len(effects.records),
                exc,
            )
            owned.shard.append_failed(effects.records)
            self._deliver([(h, _failed(reply, error)) for h, reply in effects.replies])
            if raise_on_failure:
                raise CoordinatorError(error, str(exc)) from exc
            return
        self._deliver(effects.replies)
        if self._owned.get(partition) is owned:
            for record in effects.records:
                owned.shard.replay(record)

    def _enqueue(
        self, owned: _Partition, records: list[EncodedRecord], producer: TxnProducer | None
    ) -> asyncio.Future[None]:
        """Queue `records` for appending, together with those of every call that arrives while
        an append is in flight (a group commit, as Kafka's coordinator runtime does): one batch
        and one replication round for many commits. Calls' records keep their order; a batch
        holds the records of one transactional producer, or only non-transactional ones."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        future.add_done_callback(_retrieve)  # a failed call may have nobody awaiting it
        owned.queued.append((records, producer, future))
        if not owned.appending:
            owned.appending = True
            loop.create_task(self._drain(owned.partition, owned))
        return future

    async def _drain(self, partition: int, owned: _Partition) -> None:
        try:
            while owned.queued:
                batch, size = [], 0
                producer = owned.queued[0][1]
                while (
                    owned.queued
                    and owned.queued[0][1] == producer
                    and (not batch or size < MAX_COALESCED_BYTES)
                ):
                    records, _, future = owned.queued.popleft()
                    batch.append((records, future))
                    size += sum(len(k) + len(v or b"") for k, v in records)
                try:
                    await self.partitions.append(
                        partition, [r for records, _ in batch for r in records], producer
                    )
                except Exception as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                else:
                    for _, future in batch:
                        if not future.done():
                            future.set_result(None)
        finally:
            owned.appending = False

    def _deliver(self, replies: list[tuple[Any, Any]]) -> None:
        for handle, reply in replies:
            waiting = self._waiting.pop(handle, None)
            if waiting is not None and not waiting[1].done():
                waiting[1].set_result(reply)

    def _set_timers(self, partition: int, owned: _Partition, effects: Effects) -> None:
        loop = asyncio.get_running_loop()
        for key, deadline in effects.timers.items():
            old = owned.timers.pop(key, None)
            if old is not None:
                old.cancel()
            if deadline is None:
                continue
            delay = max(0.0, (deadline - self.clock_ms()) / 1000)
            owned.timers[key] = loop.call_at(loop.time() + delay, self._fire, partition, owned, key)

    def _fire(self, partition: int, owned: _Partition, key: TimerKey) -> None:
        owned.timers.pop(key, None)
        if self._owned.get(partition) is not owned:
            return
        self._apply(partition, owned, owned.shard.on_timer(key, self.clock_ms()))


def _producer_of(records: Sequence[GroupRecord]) -> TxnProducer | None:
    """The transactional producer whose batch these records go in (the shard returns one
    producer's records per call), or None."""
    for record in records:
        if isinstance(record, OffsetCommitRecord) and record.is_transactional:
            return record.producer_id, record.producer_epoch
    return None


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _failed(reply: Any, error: ErrorCode) -> Any:
    """The reply a waiting member gets when the records its answer depended on were lost."""
    if isinstance(reply, (JoinGroupReply, SyncGroupReply)):
        return replace(reply, error=error)
    return reply
