"""Blocking facades over the asyncio clients: `Producer`, `Consumer`, `Admin`.

Each facade owns one background thread running an asyncio event loop, on which its asyncio
client lives; every method hands its work to that loop (`asyncio.run_coroutine_threadsafe`) and
waits for the result, so the asyncio client is only ever touched from its own loop and needs no
locks. `Producer.send` does not wait: it normalizes and size-checks the record in the caller's
thread (so a record over max.request.size raises at once), hands it to the loop and returns a
`concurrent.futures.Future` (a `DeliveryFuture`); delivery callbacks run on the loop thread, as
Kafka's Java producer runs them on its I/O thread, so they must be quick. When `buffer.memory`
is full, or 4096 records handed over are not yet taken by the loop, `send` blocks for up to
`max.block.ms`, as in Kafka.

The hand-over is a deque the caller extends and the loop empties, with one loop wakeup per
burst of sends (`call_soon_threadsafe` once, not per record) and no lock: the GIL makes each
extend atomic and orders the flag that says a wakeup is pending.

`Consumer`'s rebalance callbacks run in the application's thread, inside `poll()`, `close()`
or `unsubscribe()` (as confluent-kafka serves them from poll), not on the loop thread: a
callback may then call the consumer (`commit()` in `on_revoke` is the classic) without
deadlocking the loop it would wait on. The loop hands each callback over through a queue and
waits; the thread blocked in `poll()` runs it and hands back the result.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from epochlog.aio import wait_for
from epochlog.client.admin import AsyncAdmin, ClusterDescription, NewTopic, TopicDescription
from epochlog.client.admin_log_dirs import (
    LogDirDescription,
    ProducerState,
    TopicPartitionReplica,
    TopicPartitionsDescription,
)
from epochlog.client.admin_partitions import DeletedRecords, ElectionType, NewPartitions
from epochlog.client.admin_reassign import PartitionReassignment
from epochlog.client.admin_transactions import TransactionDescription, TransactionListing
from epochlog.client.consumer import AsyncConsumer, OffsetAndTimestamp, RebalanceCallback
from epochlog.client.delivery import DeliveryFuture
from epochlog.client.errors import ClientClosedError, KafkaError
from epochlog.client.fetch_decoder import ConsumerRecord
from epochlog.client.group_admin_protocol import GroupDescription, GroupListing
from epochlog.client.group_offsets import ConsumerGroupMetadata, OffsetAndMetadata
from epochlog.client.metadata import TopicPartition
from epochlog.client.producer import (
    AsyncProducer,
    Bytes,
    DeliveryCallback,
    HeadersArg,
    RecordMetadata,
    check_record_size,
    normalize_headers,
    to_bytes,
)
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.messages.pin_controller import PinStatus
from epochlog.protocol.records import BATCH_HEADER_SIZE

T = TypeVar("T")
_NO_HEADERS: tuple[()] = ()
_HANDOFF_RECORDS = 4096  # records handed over to the loop thread and not yet taken, at most
_HANDOFF_ENTRIES = 7 * _HANDOFF_RECORDS  # seven deque entries a record


class _LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self.ident = self._thread.ident

    def run(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(_await(coro), self.loop).result(timeout)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a plain function on the loop and return its result."""

        async def call() -> T:
            return fn(*args)

        return self.run(call())

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def _await(aw: Awaitable[T]) -> T:
    return await aw


def _start(name: str, factory: Callable[[], T]) -> tuple[_LoopThread, T]:
    thread = _LoopThread(name)
    try:
        client = thread.call(factory)
    except BaseException:
        thread.stop()
        raise
    return thread, client


class Producer:
    """A blocking producer; see `AsyncProducer` for behaviour and `send` for threading."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._thread, self._producer = _start("epochlog-producer", lambda: AsyncProducer(config))
        self.config = self._producer.config
        self._max_request_size: int = self.config["max.request.size"]
        self._buffer_memory: int = self.config["buffer.memory"]
        # Sends whose topic has no metadata yet, in order; one task appends them when it comes.
        # Only touched on the loop.
        self._waiting_sends: collections.deque[tuple] = collections.deque()
        self._waiting_task: asyncio.Task[None] | None = None
        self._max_block_ms: int = self.config["max.block.ms"]
        # key + value sizes below this cannot exceed max.request.size (see check_record_size)
        self._plain_room = self._max_request_size - BATCH_HEADER_SIZE - 26
        self._acc = self._producer._acc
        self._txn = self._producer._txn
        self._closed = False
        self._handoff: collections.deque[Any] = collections.deque()
        self._handoff_scheduled = False
        self._drained = threading.Event()
        try:
            self._thread.run(self._producer.start())
        except BaseException:
            self._thread.stop()
            raise

    @property
    def cluster_id(self) -> str | None:
        """The id of the cluster this client's metadata comes from (None before any)."""
        return self._producer.cluster_id

    @property
    def rebootstraps(self) -> int:
        """How many times this client went back to bootstrap.servers (KIP-899 / KIP-1102)."""
        return self._producer.rebootstraps

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def send(
        self,
        topic: str,
        value: Bytes | None = None,
        key: Bytes | None = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Queue a record; the future resolves on the loop thread when it is acknowledged.
        `on_delivery(metadata, error)` runs on the loop thread too."""
        if self._closed:
            raise ClientClosedError("producer is closed")
        if self._txn is not None:
            self._txn.check_send()
        if type(value) is bytes and (key is None or type(key) is bytes) and not headers:
            # the common case, checked inline: bytes in, no headers, far below the size limit
            if len(value) + (len(key) if key else 0) > self._plain_room:
                check_record_size(key, value, [], self._max_request_size)
            key_b, value_b, hdrs = key, value, _NO_HEADERS
        else:
            key_b, value_b = to_bytes(key, "key"), to_bytes(value, "value")
            hdrs = normalize_headers(headers)
            check_record_size(key_b, value_b, hdrs, self._max_request_size)
        if self._acc.buffered_bytes > self._buffer_memory:
            self._thread.run(self._producer.ready_for(topic))
        if len(self._handoff) >= _HANDOFF_ENTRIES and threading.get_ident() != self._thread.ident:
            self._wait_for_drain()
        result = DeliveryFuture()
        if on_delivery is not None:
            result.add_done_callback(_deliver_to(on_delivery))
        handoff = self._handoff
        # flat, seven entries a record: no tuple per record for the garbage collector to walk
        # (one extend is atomic under the GIL, and only the loop takes entries out)
        handoff.extend((topic, value_b, key_b, hdrs, partition, timestamp, result))
        if not self._handoff_scheduled:  # one loop wakeup per burst of sends, not per record
            self._handoff_scheduled = True
            self._thread.loop.call_soon_threadsafe(self._drain_handoff)
        return result

    def _wait_for_drain(self) -> None:
        """Wait (up to max.block.ms) until the loop has taken the records handed over.

        This bounds the records queued between the threads (as buffer.memory bounds the
        batches), and it lets the loop thread run: a caller sending in a tight loop otherwise
        keeps the GIL, the loop thread gets it once per switch interval (5 ms), and little is
        sent before flush()."""
        drained = self._drained
        deadline = time.monotonic() + self._max_block_ms / 1000
        while len(self._handoff) >= _HANDOFF_ENTRIES:
            drained.clear()
            if len(self._handoff) < _HANDOFF_ENTRIES:
                return
            if self._closed:
                raise ClientClosedError("producer is closed")
            if not drained.wait(0.05) and time.monotonic() > deadline:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"the producer's loop took no records for max.block.ms={self._max_block_ms}",
                )

    def _drain_handoff(self) -> None:
        """On the loop: append every record handed over since the last drain, in order.

        Lock-free (the GIL orders it): the flag is cleared before the deque is emptied, so a
        record appended before the clear is taken here and one appended after it schedules
        another drain (which may find nothing left)."""
        self._handoff_scheduled = False
        pop = self._handoff.popleft
        try_append = self._producer.try_append
        waiting = self._waiting_sends
        while True:
            try:
                topic = pop()
            except IndexError:
                break
            value, key, headers, partition, timestamp, result = (
                pop(),
                pop(),
                pop(),
                pop(),
                pop(),
                pop(),
            )
            if waiting:  # keep order behind sends still waiting for metadata
                self._send_later((topic, value, key, headers, partition, timestamp, result))
                continue
            try:
                if not try_append(topic, value, key, headers, partition, timestamp, result):
                    self._send_later((topic, value, key, headers, partition, timestamp, result))
            except Exception as exc:
                result.set_exception(exc)
        self._drained.set()

    def _send_later(self, item: tuple) -> None:
        """Queue a send behind the others waiting for metadata (keeping the order of sends)."""
        self._waiting_sends.append(item)
        if self._waiting_task is None or self._waiting_task.done():
            self._waiting_task = self._thread.loop.create_task(self._append_waiting())

    async def _append_waiting(self) -> None:
        producer = self._producer
        while self._waiting_sends:
            item = self._waiting_sends[0]
            try:
                await producer.ready_for(item[0])
            except Exception as exc:
                self._waiting_sends.popleft()
                item[-1].set_exception(exc)
                continue
            self._waiting_sends.popleft()
            try:
                producer.append(*item)
            except Exception as exc:
                item[-1].set_exception(exc)

    async def _settle_sends(self) -> None:
        """Wait for sends still waiting for their topic's metadata (so flush covers them)."""
        while self._waiting_task is not None and not self._waiting_task.done():
            await asyncio.shield(self._waiting_task)

    def send_and_wait(
        self,
        topic: str,
        value: Bytes | None = None,
        key: Bytes | None = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp: int | None = None,
        timeout: float | None = None,
    ) -> RecordMetadata:
        return self.send(topic, value, key, headers, partition, timestamp).result(timeout)

    def flush(self, timeout: float | None = None) -> None:
        async def flush() -> None:
            await wait_for(self._settle_sends(), timeout)
            await self._producer.flush(timeout)

        self._thread.run(flush())

    def partitions_for(self, topic: str) -> list[int]:
        return self._thread.run(self._producer.partitions_for(topic))

    # Transactions (`AsyncProducer`'s): the records handed to the loop are appended first, so
    # a commit covers every send made before it and an abort every send it should drop.

    def init_transactions(self, timeout: float | None = None) -> None:
        self._thread.run(self._producer.init_transactions(timeout))

    def begin_transaction(self) -> None:
        self._thread.call(self._producer.begin_transaction)

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata,
        timeout: float | None = None,
    ) -> None:
        async def send_offsets() -> None:
            await self._settle_sends()
            await self._producer.send_offsets_to_transaction(offsets, group_metadata, timeout)

        self._thread.run(send_offsets())

    def commit_transaction(self, timeout: float | None = None) -> None:
        async def commit() -> None:
            await self._settle_sends()
            await self._producer.commit_transaction(timeout)

        self._thread.run(commit())

    def abort_transaction(self, timeout: float | None = None) -> None:
        async def abort() -> None:
            await self._settle_sends()
            await self._producer.abort_transaction(timeout)

        self._thread.run(abort())

    def close(self, timeout: float | None = None) -> None:
        if self._thread.loop.is_closed():
            return

        async def close() -> None:
            try:
                await wait_for(self._settle_sends(), timeout)
            finally:
                await self._producer.close(timeout)

        try:
            self._thread.run(close())
        finally:
            self._thread.stop()
            self._closed = True


class Consumer:
    """A blocking consumer; see `AsyncConsumer`. Rebalance callbacks get this object and run in
    the thread that calls `poll()` (see the module docstring)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._thread, self._consumer = _start("epochlog-consumer", lambda: AsyncConsumer(config))
        self.config = self._consumer.config
        # callbacks handed over by the loop: (callback, partitions, future) or a wake-up token
        self._handoff: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._consumer.run_callback = self._callback_in_caller
        try:
            self._thread.run(self._consumer.start())
        except BaseException:
            self._thread.stop()
            raise

    @property
    def cluster_id(self) -> str | None:
        """The id of the cluster this client's metadata comes from (None before any)."""
        return self._consumer.cluster_id

    @property
    def rebootstraps(self) -> int:
        """How many times this client went back to bootstrap.servers (KIP-899 / KIP-1102)."""
        return self._consumer.rebootstraps

    @property
    def member_id(self) -> str:
        return self._consumer.member_id

    @property
    def generation_id(self) -> int:
        return self._consumer.generation_id

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self._thread.call(self._consumer.group_metadata)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def _callback_in_caller(
        self, callback: RebalanceCallback, partitions: list[TopicPartition]
    ) -> None:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._handoff.put((callback, partitions, done))
        await asyncio.wrap_future(done)

    def _run_serving(self, coro: Awaitable[T]) -> T:
        """Run `coro` on the loop, running rebalance callbacks here meanwhile."""
        if threading.get_ident() == self._thread.ident:
            raise RuntimeError("a blocking Consumer method was called on its own loop thread")
        result = asyncio.run_coroutine_threadsafe(_await(coro), self._thread.loop)
        token = object()
        result.add_done_callback(lambda _: self._handoff.put(token))
        while True:
            item = self._handoff.get()
            if item is token:
                return result.result()
            if isinstance(item, tuple):
                callback, partitions, done = item
                try:
                    callback(self, partitions)
                except BaseException as exc:
                    done.set_exception(exc)
                else:
                    done.set_result(None)
            # else: the token of an earlier call that returned without it; ignore

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._thread.call(self._consumer.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._thread.call(self._consumer.assignment)

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        *,
        pattern: str | None = None,
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        topic_list = (
            None if topics is None else [topics] if isinstance(topics, str) else list(topics)
        )

        def subscribe() -> None:
            self._consumer.subscribe(
                topic_list,
                pattern=pattern,
                on_assign=on_assign,
                on_revoke=on_revoke,
                on_lost=on_lost,
            )

        self._thread.call(subscribe)

    def unsubscribe(self) -> None:
        self._run_serving(self._consumer.unsubscribe())

    def subscription(self) -> set[str]:
        return self._thread.call(self._consumer.subscription)

    def commit(
        self,
        offsets: Mapping[tuple[str, int], int | OffsetAndMetadata] | None = None,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._thread.run(self._consumer.commit(offsets, timeout))

    def commit_async(
        self, offsets: Mapping[tuple[str, int], int | OffsetAndMetadata] | None = None
    ) -> concurrent.futures.Future[None]:
        """Commit in the background; the future holds the outcome (resolved on the loop)."""
        result: concurrent.futures.Future[None] = concurrent.futures.Future()

        def copy(task: asyncio.Task[None]) -> None:
            if task.cancelled():
                result.cancel()
            elif task.exception() is not None:
                result.set_exception(task.exception())  # type: ignore[arg-type]
            else:
                result.set_result(None)

        def start() -> None:
            self._consumer.commit_async(offsets).add_done_callback(copy)

        self._thread.call(start)
        return result

    def committed(
        self, partitions: Iterable[tuple[str, int]], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._thread.run(self._consumer.committed(list(partitions), timeout))

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        self._thread.call(self._consumer.seek, tp, offset)

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        parts = None if partitions is None else list(partitions)
        self._thread.call(self._consumer.seek_to_beginning, parts)

    def seek_to_end(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        parts = None if partitions is None else list(partitions)
        self._thread.call(self._consumer.seek_to_end, parts)

    def position(self, tp: tuple[str, int], timeout: float | None = None) -> int:
        return self._thread.run(self._consumer.position(tp, timeout))

    def offsets_for_times(
        self, timestamps: Mapping[tuple[str, int], int], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._thread.run(self._consumer.offsets_for_times(dict(timestamps), timeout))

    def beginning_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return self._thread.run(self._consumer.beginning_offsets(list(partitions), timeout))

    def end_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return self._thread.run(self._consumer.end_offsets(list(partitions), timeout))

    def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Records, waiting up to `timeout` seconds; rebalance callbacks run here."""
        return self._run_serving(self._consumer.poll(timeout))

    def close(self) -> None:
        if self._thread.loop.is_closed():
            return
        try:
            self._run_serving(self._consumer.close())
        finally:
            self._thread.stop()


class Admin:
    """A blocking admin client; see `AsyncAdmin`."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._thread, self._admin = _start("epochlog-admin", lambda: AsyncAdmin(config))
        self.config = self._admin.config

    @property
    def cluster_id(self) -> str | None:
        """The id of the cluster this client's metadata comes from (None before any)."""
        return self._admin.cluster_id

    @property
    def rebootstraps(self) -> int:
        """How many times this client went back to bootstrap.servers (KIP-899 / KIP-1102)."""
        return self._admin.rebootstraps

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def describe_configs(self, resources: Any, **options: Any) -> Any:
        return self._thread.run(self._admin.describe_configs(resources, **options))

    def alter_configs(self, configs: Any, **options: Any) -> None:
        self._thread.run(self._admin.alter_configs(configs, **options))

    def incremental_alter_configs(self, ops: Any, **options: Any) -> None:
        self._thread.run(self._admin.incremental_alter_configs(ops, **options))

    def describe_client_quotas(self, components: Any = (), **options: Any) -> Any:
        return self._thread.run(self._admin.describe_client_quotas(components, **options))

    def alter_client_quotas(self, alterations: Any, **options: Any) -> None:
        self._thread.run(self._admin.alter_client_quotas(alterations, **options))

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        self._thread.run(
            self._admin.create_topic(name, partitions, replication_factor, configs, timeout=timeout)
        )

    def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> dict[str, KafkaError | None]:
        return self._thread.run(
            self._admin.create_topics(list(topics), validate_only=validate_only, timeout=timeout)
        )

    def delete_topic(self, name: str, *, timeout: float | None = None) -> None:
        self._thread.run(self._admin.delete_topic(name, timeout=timeout))

    def delete_topics(
        self, names: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, KafkaError | None]:
        return self._thread.run(self._admin.delete_topics(list(names), timeout=timeout))

    def list_topics(
        self, *, include_internal: bool = False, timeout: float | None = None
    ) -> list[str]:
        return self._thread.run(
            self._admin.list_topics(include_internal=include_internal, timeout=timeout)
        )

    def describe_topics(
        self, names: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, TopicDescription]:
        return self._thread.run(self._admin.describe_topics(list(names), timeout=timeout))

    def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        return self._thread.run(self._admin.describe_cluster(timeout=timeout))

    def pin_controller(
        self,
        broker_id: int | None = None,
        *,
        auto: bool = False,
        allow_absent: bool = False,
        timeout: float | None = None,
    ) -> PinStatus:
        return self._thread.run(
            self._admin.pin_controller(
                broker_id, auto=auto, allow_absent=allow_absent, timeout=timeout
            )
        )

    def unpin_controller(self, *, timeout: float | None = None) -> PinStatus:
        return self._thread.run(self._admin.unpin_controller(timeout=timeout))

    def describe_controller_pin(self, *, timeout: float | None = None) -> PinStatus:
        return self._thread.run(self._admin.describe_controller_pin(timeout=timeout))

    # ---------------------------------------------------------------- reassignments (KIP-455)

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[tuple[str, int], Sequence[int] | None],
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        return self._thread.run(
            self._admin.alter_partition_reassignments(dict(reassignments), timeout=timeout)
        )

    def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        parts = None if partitions is None else list(partitions)
        return self._thread.run(self._admin.list_partition_reassignments(parts, timeout=timeout))

    # ---------------------------------------------------------------- consumer groups

    def list_groups(
        self, states: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> list[GroupListing]:
        parts = None if states is None else list(states)
        return self._thread.run(self._admin.list_groups(parts, timeout=timeout))

    def describe_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, GroupDescription]:
        return self._thread.run(self._admin.describe_groups(list(group_ids), timeout=timeout))

    def delete_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, KafkaError | None]:
        return self._thread.run(self._admin.delete_groups(list(group_ids), timeout=timeout))

    def delete_group(self, group_id: str, *, timeout: float | None = None) -> None:
        self._thread.run(self._admin.delete_group(group_id, timeout=timeout))

    def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        parts = None if partitions is None else list(partitions)
        return self._thread.run(self._admin.list_group_offsets(group_id, parts, timeout=timeout))

    def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
        *,
        timeout: float | None = None,
    ) -> None:
        self._thread.run(self._admin.alter_group_offsets(group_id, dict(offsets), timeout=timeout))

    def delete_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[tuple[str, int]],
        *,
        timeout: float | None = None,
    ) -> None:
        self._thread.run(
            self._admin.delete_group_offsets(group_id, list(partitions), timeout=timeout)
        )

    def list_offsets(
        self, query: Mapping[tuple[str, int], int], *, timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        return self._thread.run(self._admin.list_offsets(dict(query), timeout=timeout))

    def log_end_offsets(
        self, partitions: Iterable[tuple[str, int]], *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return self._thread.run(self._admin.log_end_offsets(list(partitions), timeout=timeout))

    def log_start_offsets(
        self, partitions: Iterable[tuple[str, int]], *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return self._thread.run(self._admin.log_start_offsets(list(partitions), timeout=timeout))

    # ---------------------------------------------------------------- partitions

    def create_partitions(
        self,
        topics: Mapping[str, int | NewPartitions],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> dict[str, KafkaError | None]:
        return self._thread.run(
            self._admin.create_partitions(
                dict(topics), validate_only=validate_only, timeout=timeout
            )
        )

    def delete_records(
        self, offsets: Mapping[tuple[str, int], int], *, timeout: float | None = None
    ) -> dict[TopicPartition, DeletedRecords]:
        return self._thread.run(self._admin.delete_records(dict(offsets), timeout=timeout))

    def elect_leaders(
        self,
        election_type: ElectionType | int,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        parts = None if partitions is None else list(partitions)
        return self._thread.run(self._admin.elect_leaders(election_type, parts, timeout=timeout))

    # Log dirs, producers and paginated topic descriptions (see `admin_log_dirs`).

    def describe_log_dirs(
        self, brokers: Iterable[int] | None = None, *, timeout: float | None = None
    ) -> dict[int, dict[str, LogDirDescription]]:
        return self._thread.run(
            self._admin.describe_log_dirs(
                None if brokers is None else list(brokers), timeout=timeout
            )
        )

    def alter_replica_log_dirs(
        self, assignments: Mapping[TopicPartitionReplica, str], *, timeout: float | None = None
    ) -> dict[TopicPartitionReplica, KafkaError | None]:
        return self._thread.run(
            self._admin.alter_replica_log_dirs(dict(assignments), timeout=timeout)
        )

    def describe_producers(
        self,
        partitions: Iterable[tuple[str, int]],
        *,
        broker_id: int | None = None,
        timeout: float | None = None,
    ) -> dict[TopicPartition, list[ProducerState]]:
        return self._thread.run(
            self._admin.describe_producers(
                [TopicPartition(*tp) for tp in partitions], broker_id=broker_id, timeout=timeout
            )
        )

    # Transactions (KIP-664, see `admin_transactions`).

    def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, TransactionDescription]:
        return self._thread.run(
            self._admin.describe_transactions(list(transactional_ids), timeout=timeout)
        )

    def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = -1,
        timeout: float | None = None,
    ) -> list[TransactionListing]:
        return self._thread.run(
            self._admin.list_transactions(
                states=list(states),
                producer_ids=list(producer_ids),
                duration_ms=duration_ms,
                timeout=timeout,
            )
        )

    def abort_transaction(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        timeout: float | None = None,
    ) -> None:
        self._thread.run(
            self._admin.abort_transaction(
                topic, partition, producer_id, producer_epoch, coordinator_epoch, timeout=timeout
            )
        )

    def describe_topic_partitions(
        self,
        topics: Iterable[str] | None = None,
        *,
        page_size: int = 2000,
        timeout: float | None = None,
    ) -> dict[str, TopicPartitionsDescription]:
        return self._thread.run(
            self._admin.describe_topic_partitions(
                None if topics is None else list(topics), page_size=page_size, timeout=timeout
            )
        )

    def close(self) -> None:
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.run(self._admin.close())
        finally:
            self._thread.stop()


def _deliver_to(
    callback: DeliveryCallback,
) -> Callable[[concurrent.futures.Future[RecordMetadata]], None]:
    def done(fut: concurrent.futures.Future[RecordMetadata]) -> None:
        error = fut.exception()
        callback(None if error is not None else fut.result(), error)  # type: ignore[arg-type]

    return done
