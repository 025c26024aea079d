"""The blocking `Producer` facade (see `sync` for the threading model it shares).

Apart from `sync` so that a process that only consumes or administers (the Spark source's
driver side) does not import the producer and its batch building, transactions and compression.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from epochlog.aio import wait_for
from epochlog.client.delivery import DeliveryFuture
from epochlog.client.errors import ClientClosedError, KafkaError
from epochlog.client.group_offsets import ConsumerGroupMetadata, OffsetAndMetadata
from epochlog.client.loop_thread import start_on_loop_thread
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
from epochlog.protocol.records import BATCH_HEADER_SIZE

_NO_HEADERS: tuple[()] = ()
_HANDOFF_RECORDS = 4096  # records handed over to the loop thread and not yet taken, at most
_HANDOFF_ENTRIES = 7 * _HANDOFF_RECORDS  # seven deque entries a record


class Producer:
    """A blocking producer; see `AsyncProducer` for behaviour and `send` for threading."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._thread, self._producer = start_on_loop_thread(
            "epochlog-producer", lambda: AsyncProducer(config)
        )
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


def _deliver_to(
    callback: DeliveryCallback,
) -> Callable[[concurrent.futures.Future[RecordMetadata]], None]:
    def done(fut: concurrent.futures.Future[RecordMetadata]) -> None:
        error = fut.exception()
        callback(None if error is not None else fut.result(), error)  # type: ignore[arg-type]

    return done
