"""The asyncio producer's facade: `send()` and the calls around it, over the accumulator and
the sender.

How it works. `send()` picks the partition (explicit, murmur2 of the key, or sticky for records
without one; `partitioner`), waiting for the topic's metadata the first time (up to
`max.block.ms`), and appends the record to the `accumulator`, which batches by `batch.size` and
`linger.ms`. It returns a future that resolves to the record's `RecordMetadata` (or fails).
The rest is the `sender`'s: draining ready batches into Produce requests, one task per request,
and applying to each answer the verdict of `retries` (complete, retry, split or fail);
`delivery` completes the records' futures. Idempotence (`idempotence`) and transactions
(`transaction_manager`, `transactional_sender`) plug in as the accumulator's drain gate.

Errors surface as exceptions on the futures: `KafkaError` with the broker's code and the
partition, `MessageTooLargeError` for records over `max.request.size` (raised by `send()` at
once) or refused by the broker, `DeliveryTimeoutError` after `delivery.timeout.ms`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterable, Mapping
from time import time_ns
from typing import Any

from epochlog.client.accumulator import DrainGate, OrderingGate, RecordAccumulator
from epochlog.client.config import Role, load_config
from epochlog.client.delivery import RecordMetadata
from epochlog.client.errors import ClientClosedError, KafkaError, MessageTooLargeError
from epochlog.client.idempotence import IdempotenceManager
from epochlog.client.metadata import TopicPartition
from epochlog.client.network import NetworkClient
from epochlog.client.partitioner import StickyPartitioner, murmur2
from epochlog.client.sender import Sender
from epochlog.client.transaction_manager import TransactionManager
from epochlog.client.transactional_sender import TransactionalSender, TransactionCalls
from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import BATCH_HEADER_SIZE, record_size_upper_bound

__all__ = ["AsyncProducer", "RecordMetadata", "check_record_size", "normalize_headers", "to_bytes"]


Bytes = bytes | bytearray | memoryview | str
HeadersArg = Mapping[str, Bytes | None] | Iterable[tuple[str, Bytes | None]] | None
DeliveryCallback = Callable[["RecordMetadata | None", "Exception | None"], None]
_KEY_HASH_CACHE = 65536  # keys whose murmur2 is remembered (pure-Python hashing is slow)


class _TopicState:
    """What the producer's append needs per topic, for one metadata snapshot: the partition
    count, a TopicPartition per partition (built once), and the sticky partition of keyless
    records (-1: ask the partitioner; reset when a batch of the topic closes)."""

    __slots__ = ("count", "tps", "sticky")

    def __init__(self, topic: str, count: int) -> None:
        self.count = count
        self.tps = [TopicPartition(topic, p) for p in range(count)]
        self.sticky = -1


def to_bytes(value: Bytes | None, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{what} must be bytes, str or None, not {type(value).__name__}")


def normalize_headers(headers: HeadersArg) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(str(k), to_bytes(v, f"header {k!r}")) for k, v in items]


def check_record_size(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]], limit: int
) -> None:
    size = BATCH_HEADER_SIZE + record_size_upper_bound(key, value, headers)
    if size > limit:
        raise MessageTooLargeError(
            f"record of about {size} bytes is larger than max.request.size={limit}"
        )


class AsyncProducer(TransactionCalls):
    """An asyncio Kafka producer; see the module docstring. Use `async with` or `close()`.
    The transaction calls (`init_transactions`, ...) come from `TransactionCalls`."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = load_config(Role.PRODUCER, config)
        c = self.config
        self._net = NetworkClient(c, allow_auto_topic_creation=True)
        self._max_request_size: int = c["max.request.size"]
        self._max_block_ms: int = c["max.block.ms"]
        self._buffer_memory: int = c["buffer.memory"]
        self._ignore_keys: bool = c["partitioner.ignore.keys"]
        self._partitioner = StickyPartitioner()
        self._wakeup = asyncio.Event()  # the sender's: the accumulator and the network set it
        self._acc = RecordAccumulator(
            batch_size=c["batch.size"],
            linger_ms=c["linger.ms"],
            compression=Compression.parse(c["compression.type"]),
            retry_backoff_ms=c["retry.backoff.ms"],
            on_batch_closed=self._batch_closed,
            wakeup=self._wakeup.set,
            clock=self._net.now_ms,
        )
        transactional_id: str | None = c["transactional.id"] or None
        self._txn: TransactionManager | None = None
        self._idem: IdempotenceManager | None = None
        gate: DrainGate
        if transactional_id is not None:
            self._txn = TransactionManager(transactional_id, c["transaction.timeout.ms"])
            self._idem = self._txn.sequences
            gate = self._txn
        else:
            self._idem = IdempotenceManager() if c["enable.idempotence"] else None
            max_in_flight = c["max.in.flight.requests.per.connection"]
            gate = self._idem or OrderingGate(guarantee_order=max_in_flight == 1)
        self._sender = Sender(c, self._net, self._acc, gate, self._idem, self._txn, self._wakeup)
        self._txn_sender: TransactionalSender | None = self._sender.transactional
        self._started = False
        self._new_future: Callable[[], asyncio.Future[Any]] = _create_future_on_running_loop
        self._closing = False
        self._counted_cluster: object = None
        self._topic_states: dict[str, _TopicState] = {}
        self._key_hashes: dict[bytes, int] = {}  # murmur2 of recent keys: keys repeat a lot

    @property
    def cluster_id(self) -> str | None:
        """The id of the cluster this client's metadata comes from (None before any)."""
        return self._net.cluster.cluster_id

    @property
    def rebootstraps(self) -> int:
        """How many times this client went back to bootstrap.servers (KIP-899 / KIP-1102)."""
        return self._net.rebootstraps

    @property
    def idempotent(self) -> bool:
        return self._idem is not None

    @property
    def buffered_bytes(self) -> int:
        return self._acc.buffered_bytes

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Start the network client and the sender (send() does this on first use)."""
        if self._closing:
            raise ClientClosedError("producer is closed")
        if not self._started:
            self._started = True
            self._net.add_listener(self._wakeup.set)
            self._net.add_cluster_id_listener(self._sender.cluster_changed)
            await self._net.start()
            loop = asyncio.get_running_loop()
            self._new_future = (
                functools.partial(asyncio.Future, loop=loop)  # loop.create_future, minus a frame
                if type(loop).create_future is asyncio.BaseEventLoop.create_future
                else loop.create_future
            )
            self._sender.start()

    # ---------------------------------------------------------------- sending

    async def send(
        self,
        topic: str,
        value: Bytes | None = None,
        key: Bytes | None = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue a record; the future resolves when it is acknowledged (per `acks`).

        Raises at once for a record over max.request.size, a partition the topic does not have,
        a topic whose metadata does not arrive within max.block.ms, or a closed producer."""
        key_b, value_b = to_bytes(key, "key"), to_bytes(value, "value")
        hdrs = normalize_headers(headers)
        check_record_size(key_b, value_b, hdrs, self._max_request_size)
        await self.ready_for(topic)
        return self.send_nowait(topic, value_b, key_b, hdrs, partition, timestamp, on_delivery)

    async def ready_for(self, topic: str) -> None:
        """Wait (up to max.block.ms) until a record for `topic` can be appended: the producer
        started, the topic's metadata known, and room in buffer.memory."""
        await self.start()
        if self._net.cluster.partition_count(topic) is None:
            await self._net.topic_metadata(topic, self._max_block_ms)
            self._connect_to_leaders(topic)
        if self._acc.buffered_bytes > self._buffer_memory:
            await self._wait_for_buffer()

    async def send_and_wait(
        self,
        topic: str,
        value: Bytes | None = None,
        key: Bytes | None = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordMetadata:
        return await (await self.send(topic, value, key, headers, partition, timestamp))

    def send_nowait(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: list[tuple[str, bytes | None]],
        partition: int | None = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """`send` for a started producer that already has the topic's metadata, with key, value
        and headers already normalized and size-checked; never waits."""
        fut: asyncio.Future[RecordMetadata] = self._new_future()
        if on_delivery is not None:
            fut.add_done_callback(_deliver_to(on_delivery))
        if not self.try_append(topic, value, key, headers, partition, timestamp, fut):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no metadata for {topic!r}")
        return fut

    def append(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: list[tuple[str, bytes | None]],
        partition: int | None,
        timestamp: int | None,
        handle: Any,
    ) -> None:
        """The core of `send_nowait`: append the record with `handle`, any object with the
        future methods done/set_result/set_exception/exception (the blocking facade passes a
        `DeliveryFuture`), which the sender completes."""
        if not self.try_append(topic, value, key, headers, partition, timestamp, handle):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no metadata for {topic!r}")

    def try_append(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: list[tuple[str, bytes | None]] | tuple[()],
        partition: int | None,
        timestamp: int | None,
        handle: Any,
    ) -> bool:
        """`append`, returning False (nothing done) when the topic has no metadata yet.

        This is the per-record hot path, so it is written flat: the topic's state is looked
        up once, the partition chosen, and the record handed to `RecordAccumulator.append`."""
        if self._closing:
            raise ClientClosedError("producer is closed")
        if self._sender.fatal is not None:
            raise self._sender.fatal
        cluster = self._net.cluster
        if cluster is not self._counted_cluster:  # partition counts, once per metadata snapshot
            self._counted_cluster, self._topic_states = cluster, {}
        state = self._topic_states.get(topic)
        if state is None:
            count = cluster.partition_count(topic)
            if count is None:
                return False
            state = self._topic_states[topic] = _TopicState(topic, count)
        count = state.count
        if partition is None:
            if key is not None and not self._ignore_keys:
                hashed = self._key_hashes.get(key)
                if hashed is None:
                    hashed = murmur2(key) & 0x7FFFFFFF  # partitioner.partition_for_key
                    if len(self._key_hashes) < _KEY_HASH_CACHE:
                        self._key_hashes[key] = hashed
                partition = hashed % count
            else:
                partition = state.sticky
                if partition < 0:  # the partitioner's choice holds until a batch closes
                    available = cluster.available_partitions(topic)
                    partition = self._partitioner.partition(topic, available, count)
                    state.sticky = partition
        elif not 0 <= partition < count:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {partition} of {topic!r}, which has partitions 0-{count - 1}",
            )
        if self._txn is not None and self._txn.add_partition(state.tps[partition]):
            self._wakeup.set()  # the sender adds it to the transaction
        if timestamp is None:
            timestamp = time_ns() // 1_000_000
        self._acc.append(state.tps[partition], timestamp, key, value, headers, handle)
        return True

    async def _wait_for_buffer(self) -> None:
        deadline = self._now() + self._max_block_ms
        while self._acc.buffered_bytes > self._buffer_memory:
            if self._now() >= deadline:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"buffer.memory={self._buffer_memory} still full after max.block.ms",
                )
            self._wakeup.set()
            await asyncio.sleep(0.005)

    async def partitions_for(self, topic: str) -> list[int]:
        await self.start()
        info = await self._net.topic_metadata(topic, self._max_block_ms)
        self._connect_to_leaders(topic)
        return sorted(info.partitions)

    def _connect_to_leaders(self, topic: str) -> None:
        """Start connecting to the leaders of `topic` now that its metadata is known, rather
        than when its first batch is ready: the records sent meanwhile need not wait for the
        connection handshakes (which a busy application's loop may take a while to run)."""
        cluster = self._net.cluster
        for partition in cluster.available_partitions(topic):
            leader = cluster.leader_for((topic, partition))
            if leader is not None:
                self._net.try_ready(leader)

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until it is acknowledged or failed."""
        unresolved = self._sender.unresolved_batches()
        handles = [_awaitable(h) for b in unresolved for h in b.handles[-1:]]
        if not handles:
            return
        self._acc.begin_flush()
        self._wakeup.set()
        try:
            done, pending = await asyncio.wait(handles, timeout=timeout)
            if pending:
                raise TimeoutError(f"{len(pending)} records still unacknowledged after {timeout}s")
        finally:
            self._acc.end_flush()

    async def close(self, timeout: float | None = None) -> None:
        """Flush (up to `timeout` seconds; None waits), then stop. Records still queued after
        the timeout fail with ClientClosedError."""
        if self._closing:
            return
        try:
            if self._started:
                with contextlib.suppress(TimeoutError):
                    await self.flush(timeout)
        finally:
            self._closing = True
            unsent = ClientClosedError("producer closed before the record was sent")
            await self._sender.close(unsent)
            await self._net.close()

    # ---------------------------------------------------------------- the sender's hooks

    def _now(self) -> float:
        return self._net.now_ms()

    def _batch_closed(self, tp: TopicPartition) -> None:
        cluster = self._net.cluster
        count = cluster.partition_count(tp.topic)
        if count:
            self._partitioner.on_batch_closed(
                tp.topic, tp.partition, cluster.available_partitions(tp.topic), count
            )
        state = self._topic_states.get(tp.topic)
        if state is not None:
            state.sticky = -1


def _create_future_on_running_loop() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


def _awaitable(handle: Any) -> asyncio.Future[Any]:
    if isinstance(handle, asyncio.Future):
        return handle
    return asyncio.wrap_future(handle)


def _deliver_to(callback: DeliveryCallback) -> Callable[[asyncio.Future[RecordMetadata]], None]:
    def done(fut: asyncio.Future[RecordMetadata]) -> None:
        if fut.cancelled():
            callback(None, ClientClosedError("send cancelled"))
        elif fut.exception() is not None:
            callback(None, fut.exception())  # type: ignore[arg-type]
        else:
            callback(fut.result(), None)

    return done
