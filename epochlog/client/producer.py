"""The asyncio producer: partitioning, batching, and the sender task.

How it works. `send()` picks the partition (explicit, murmur2 of the key, or sticky for records
without one; `partitioner`), waiting for the topic's metadata the first time (up to
`max.block.ms`), and appends the record to the `accumulator`, which batches by `batch.size` and
`linger.ms`. It returns a future that resolves to the record's `RecordMetadata` (or fails).

One sender task does the rest, in a loop: with idempotence it first obtains a producer id
(InitProducerId, to the least loaded broker) and, when a reset was requested, waits until nothing
is in flight and obtains a new one; it fails queued batches older than `delivery.timeout.ms`;
asks the accumulator which leaders have data ready; drains batches for those whose connection is
ready and which have fewer than `max.in.flight.requests.per.connection` requests in flight; and
sends one Produce request per leader (the highest version both sides support). Each response is
handled by its own task: per partition the error is classified (`idempotence.decide...`), the
batch is completed, re-queued for a retry after `retry.backoff.ms` (while `retries` and
`delivery.timeout.ms` allow), or failed; errors that invalidate metadata trigger a refresh, so a
retry goes to the new leader. With acks=0 nothing comes back and every record succeeds with
offset -1, as in Kafka. The loop sleeps until a new batch, a response, a connection or metadata
change, or the next linger or backoff deadline.

Errors surface as exceptions on the futures: `KafkaError` with the broker's code and the
partition, `MessageTooLargeError` for records over `max.request.size` (raised by `send()` at
once) or refused by the broker, `DeliveryTimeoutError` after `delivery.timeout.ms`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from time import time_ns
from typing import Any, NamedTuple

from epochlog.aio import wait_for
from epochlog.client.accumulator import DrainGate, OrderingGate, RecordAccumulator
from epochlog.client.config import Role, load_config
from epochlog.client.delivery import DeliveryFuture, complete_all, complete_batch
from epochlog.client.errors import (
    ClientClosedError,
    ClientError,
    DeliveryTimeoutError,
    IncompatibleBrokerError,
    KafkaError,
    MessageTooLargeError,
)
from epochlog.client.idempotence import (
    Action,
    IdempotenceManager,
    Verdict,
    decide_without_idempotence,
)
from epochlog.client.metadata import TopicPartition
from epochlog.client.network import NetworkClient
from epochlog.client.partitioner import StickyPartitioner, murmur2
from epochlog.client.producer_batch import ProducerBatch
from epochlog.client.transaction_manager import (
    TransactionManager,
)
from epochlog.client.transactional_sender import TransactionalSender, TransactionCalls
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import BATCH_HEADER_SIZE, record_size_upper_bound

log = logging.getLogger(__name__)

Bytes = bytes | bytearray | memoryview | str
HeadersArg = Mapping[str, Bytes | None] | Iterable[tuple[str, Bytes | None]] | None
DeliveryCallback = Callable[["RecordMetadata | None", "Exception | None"], None]
_KEY_HASH_CACHE = 65536  # keys whose murmur2 is remembered (pure-Python hashing is slow)
_PRODUCE_REQUEST_OVERHEAD = 256  # headers, topic name and array framing around the batches


class RecordMetadata(NamedTuple):
    """Where a record was written. offset is -1 when unknown (acks=0, or a duplicate).

    A named tuple (as in kafka-python): immutable, and built for every record acknowledged,
    which a frozen dataclass made five times as expensive."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class _BatchOutcome:
    """An acknowledged batch, which builds the RecordMetadata of its i-th record on demand."""

    __slots__ = ("topic", "partition", "base_offset", "log_append_time", "timestamps")

    def __init__(
        self,
        topic: str,
        partition: int,
        base_offset: int,
        log_append_time: int,
        batch: ProducerBatch,
    ) -> None:
        self.topic, self.partition = topic, partition
        self.base_offset, self.log_append_time = base_offset, log_append_time
        self.timestamps = batch.timestamps if log_append_time < 0 else None

    def result(self, index: int) -> RecordMetadata:
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        timestamp = self.timestamps[index] if self.timestamps is not None else self.log_append_time
        return RecordMetadata(self.topic, self.partition, offset, timestamp)


class _TopicState:
    """What the producer's append needs per topic, for one metadata snapshot: the partition
    count, a TopicPartition per partition (built once), and per partition the open batch the
    last record went into (the fast path appends to it directly while it has room)."""

    __slots__ = ("count", "tps", "open")

    def __init__(self, topic: str, count: int) -> None:
        self.count = count
        self.tps = [TopicPartition(topic, p) for p in range(count)]
        self.open: list[ProducerBatch | None] = [None] * count


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
        self._acks: int = c["acks"]
        self._retries: int = c["retries"]
        self._delivery_timeout_ms: int = c["delivery.timeout.ms"]
        self._request_timeout_ms: int = c["request.timeout.ms"]
        self._max_request_size: int = c["max.request.size"]
        self._max_in_flight: int = c["max.in.flight.requests.per.connection"]
        self._max_block_ms: int = c["max.block.ms"]
        self._buffer_memory: int = c["buffer.memory"]
        self._ignore_keys: bool = c["partitioner.ignore.keys"]
        self._partitioner = StickyPartitioner()
        self._acc = RecordAccumulator(
            batch_size=c["batch.size"],
            linger_ms=c["linger.ms"],
            compression=Compression.parse(c["compression.type"]),
            retry_backoff_ms=c["retry.backoff.ms"],
            on_batch_closed=self._batch_closed,
        )
        self._transactional_id: str | None = c["transactional.id"] or None
        self._txn: TransactionManager | None = None
        self._txn_sender: TransactionalSender | None = None
        self._gate: DrainGate
        if self._transactional_id is not None:
            self._txn = TransactionManager(self._transactional_id, c["transaction.timeout.ms"])
            self._idem: IdempotenceManager | None = self._txn.sequences
            self._gate = self._txn
            self._txn_sender = TransactionalSender(
                self._txn, c, self._net, self._fail_queued, self._wake_sender
            )
        else:
            self._idem = IdempotenceManager() if c["enable.idempotence"] else None
            self._gate = self._idem or OrderingGate(guarantee_order=self._max_in_flight == 1)
        self._in_flight: dict[int, int] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._wakeup = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None
        self._new_future: Callable[[], asyncio.Future[Any]] = _create_future_on_running_loop
        self._closing = False
        self._fatal: Exception | None = None
        self._batch_size: int = c["batch.size"]
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
        if self._sender is None:
            self._net.add_listener(self._wakeup.set)
            self._net.add_cluster_id_listener(self._cluster_changed)
            await self._net.start()
            loop = asyncio.get_running_loop()
            self._new_future = (
                functools.partial(asyncio.Future, loop=loop)  # loop.create_future, minus a frame
                if type(loop).create_future is asyncio.BaseEventLoop.create_future
                else loop.create_future
            )
            self._sender = loop.create_task(self._run(), name="sender")

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
        up once, and a record without headers that fits in its partition's open batch is
        encoded straight into it (`ProducerBatch.try_append_plain`); anything else goes
        through `RecordAccumulator.append`."""
        if self._closing:
            raise ClientClosedError("producer is closed")
        if self._fatal is not None:
            raise self._fatal
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
                available = cluster.available_partitions(topic)
                partition = self._partitioner.partition(topic, available, count)
        elif not 0 <= partition < count:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {partition} of {topic!r}, which has partitions 0-{count - 1}",
            )
        if self._txn is not None and self._txn.add_partition(state.tps[partition]):
            self._wakeup.set()  # the sender adds it to the transaction
        if timestamp is None:
            timestamp = time_ns() // 1_000_000
        batch = state.open[partition]
        if batch is not None and batch.appendable and not headers:
            grown = batch.try_append_plain(timestamp, key, value, handle, self._batch_size)
            if grown > 0:
                self._acc.buffered_bytes += grown
                return True
            if grown < 0:  # it filled the batch: close it and tell the sender
                self._acc.buffered_bytes -= grown
                self._acc.close_batch(batch)
                state.open[partition] = None
                self._wakeup.set()
                return True
        batch = self._acc.append(
            state.tps[partition], timestamp, key, value, headers, handle, self._now()
        )
        state.open[partition] = batch if batch.appendable else None
        if len(batch.handles) == 1 or batch.data is not None:
            self._incomplete.add(batch)
            self._wakeup.set()  # a new batch (new linger deadline) or a full one
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
        handles = [_awaitable(h) for b in list(self._incomplete) for h in b.handles[-1:]]
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

    def _wake_sender(self) -> None:
        self._wakeup.set()

    def _fail_queued(self, error: Exception) -> None:
        """The transaction cannot commit: its records not yet sent fail now. A batch that was
        sent before (queued again for a retry) may or may not be in the log: its sequence is
        lost, so the abort must bump the epoch (KIP-360)."""
        for batch in self._acc.abort_all():
            if batch.has_sequence and self._idem is not None:
                self._idem.request_reset()
            self._fail(batch, error)
        for state in self._topic_states.values():
            state.open = [None] * state.count

    async def close(self, timeout: float | None = None) -> None:
        """Flush (up to `timeout` seconds; None waits), then stop. Records still queued after
        the timeout fail with ClientClosedError."""
        if self._closing:
            return
        try:
            if self._sender is not None:
                with contextlib.suppress(TimeoutError):
                    await self.flush(timeout)
        finally:
            self._closing = True
            for batch in self._acc.abort_all():
                self._fail(batch, ClientClosedError("producer closed before the record was sent"))
            if self._sender is not None:
                self._wakeup.set()
                self._sender.cancel()
                await asyncio.gather(self._sender, return_exceptions=True)
            if self._txn_sender is not None:
                await self._txn_sender.close()
            await self._net.close()

    # ---------------------------------------------------------------- the sender

    def _cluster_changed(self, old: str | None, new: str | None) -> None:
        """Metadata now names another cluster (after a rebootstrap or a proxy's switch): our
        producer id and sequences mean nothing there, so take a new id before sending more."""
        if self._idem is not None and self._txn is None:  # a transaction's coordinator decides
            self._idem.request_reset()
        self._wakeup.set()

    def _now(self) -> float:
        return self._net.now_ms()

    def _leader_of(self, tp: TopicPartition) -> int | None:
        return self._net.cluster.leader_for(tp)

    def _batch_closed(self, tp: TopicPartition) -> None:
        cluster = self._net.cluster
        count = cluster.partition_count(tp.topic)
        if count:
            self._partitioner.on_batch_closed(
                tp.topic, tp.partition, cluster.available_partitions(tp.topic), count
            )

    async def _run(self) -> None:
        # The loop also checks the flag because Python 3.11's wait_for can swallow a
        # cancellation that races with the wakeup it waits on.
        while not self._closing:
            self._wakeup.clear()
            try:
                wait_ms = await self._run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("producer sender iteration failed")
                wait_ms = 100.0
            if wait_ms > 0:
                with contextlib.suppress(TimeoutError):
                    await wait_for(self._wakeup.wait(), wait_ms / 1000)

    async def _run_once(self) -> float:
        """One pass of the sender; returns how long it may sleep (ms) absent a wakeup."""
        now = self._now()
        for batch in self._acc.expire(now, self._delivery_timeout_ms):
            expired = DeliveryTimeoutError(
                f"{batch.record_count} records for {batch.tp} not acknowledged within "
                f"delivery.timeout.ms={self._delivery_timeout_ms}"
            )
            if self._txn is not None:
                self._txn.on_batch_failed(batch, ErrorCode.REQUEST_TIMED_OUT, expired)
            self._fail(batch, expired)
            if self._idem is not None and batch.has_sequence:
                self._idem.request_reset()
        if self._txn_sender is not None:
            txn_wait = self._txn_sender.poll(now, bool(self._incomplete))
            if not self._txn.in_transaction:  # type: ignore[union-attr]
                return 1000.0 if txn_wait is None else txn_wait
            wait_ms = self._send_ready(now)
            return wait_ms if txn_wait is None else min(wait_ms, txn_wait)
        if self._idem is not None and not self._idem.has_producer_id:
            # at once, as Kafka's producer does, not when the first batch is ready
            if any(self._in_flight.values()) or self._fatal:
                return 1000.0
            return await self._init_producer_id()
        return self._send_ready(now)

    def _send_ready(self, now: float) -> float:
        """Send what is ready to nodes with room for another request; returns how long the
        sender may sleep (ms). Called by the sender, and by a response's handler as soon as it
        has freed a slot (a turn of the loop sooner than waking the sender).

        It drains again while nodes have room for more requests: the sender shares its loop
        with the application, which may give it a turn only now and then (a burst of
        send_nowait, or the blocking facade's caller holding the GIL), so one turn should send
        all that is ready, not one request per node. Not after a retry, though: retried and
        split batches go one request at a time, as before, so they cannot overtake one another.
        The drain gate holds everything back while idempotence waits for a producer id."""
        wait_ms = 1000.0
        for attempt in range(self._max_in_flight):
            check = self._acc.ready(now, self._leader_of)
            if attempt == 0 and check.unknown_leader_topics:
                self._net.want_topics(check.unknown_leader_topics)
                self._net.request_update()
            wait_ms = min(wait_ms, check.next_check_ms)
            sendable = []
            for node in check.nodes:
                if self._in_flight.get(node, 0) >= self._max_in_flight:
                    continue
                if self._net.try_ready(node) is None:
                    delay = self._net.connection_delay(node)
                    if delay != float("inf"):
                        wait_ms = min(wait_ms, max(delay, 1.0))
                    continue
                sendable.append(node)
            if not sendable:
                break
            drained = self._acc.drain(
                now,
                sendable,
                self._leader_of,
                self._max_request_size - _PRODUCE_REQUEST_OVERHEAD,
                self._gate,
            )
            if not drained:
                break
            retried = False
            for node, batches in drained.items():
                self._in_flight[node] = self._in_flight.get(node, 0) + 1
                asyncio.get_running_loop().create_task(
                    self._produce(node, batches), name=f"produce to node {node}"
                )
                retried = retried or any(b.attempts for b in batches)
            if retried:
                break
        return wait_ms

    async def _init_producer_id(self) -> float:
        """One InitProducerId attempt; returns how long to wait before the next one (ms).

        Retriable failures (no broker reachable, coordinator loading, ...) are retried for as
        long as it takes, queued records expiring by delivery.timeout.ms meanwhile; a broker
        without idempotence support or a non-retriable error is fatal for the producer."""
        assert self._idem is not None
        try:
            conn = await self._net.least_loaded_connection(self._request_timeout_ms)
            response = await conn.send(
                m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=2**31 - 1),
                api_key=ApiKey.INIT_PRODUCER_ID,
            )
        except IncompatibleBrokerError as exc:
            self._set_fatal(ClientError(f"idempotent producer not supported: {exc}"))
            return 0.0
        except ClientError as exc:
            log.debug("InitProducerId failed: %s", exc)
            return float(self.config["retry.backoff.ms"])
        error = ErrorCode.of(response.error_code)
        if error is ErrorCode.NONE:
            self._idem.set_producer_id(response.producer_id, response.producer_epoch)
            log.debug("producer id %d epoch %d", response.producer_id, response.producer_epoch)
            return 0.0
        if not error.retriable:
            self._set_fatal(KafkaError(error, "InitProducerId"))
            return 0.0
        return float(self.config["retry.backoff.ms"])

    def _set_fatal(self, error: Exception) -> None:
        self._fatal = error
        for batch in self._acc.abort_all():
            self._fail(batch, error)

    async def _produce(self, node: int, batches: list[ProducerBatch]) -> None:
        by_topic: dict[str, list[Any]] = {}
        for b in batches:
            by_topic.setdefault(b.tp.topic, []).append(
                m.ProduceRequest.PartitionProduceData(index=b.tp.partition, records=b.data)
            )
        request = m.ProduceRequest(
            transactional_id=self._transactional_id,
            acks=self._acks,
            timeout_ms=self._request_timeout_ms,
            topic_data=[
                m.ProduceRequest.TopicProduceData(name=t, partition_data=p)
                for t, p in by_topic.items()
            ],
        )
        try:
            conn = self._net.connection(node)
            if conn is None:
                raise ClientError(f"connection to node {node} is gone")
            response = await conn.send(
                request, api_key=ApiKey.PRODUCE, expect_response=self._acks != 0
            )
        except ClientError as exc:
            for b in batches:
                self._complete(b, ErrorCode.NETWORK_EXCEPTION, -1, -1, exc)
        else:
            results: dict[TopicPartition, Any] = {}
            if response is not None:
                for t in response.responses:
                    for p in t.partition_responses:
                        results[TopicPartition(t.name, p.index)] = p
            for b in batches:
                if response is None:  # acks=0
                    self._complete(b, ErrorCode.NONE, -1, -1, None)
                    continue
                p = results.get(b.tp)
                if p is None:
                    self._complete(
                        b,
                        ErrorCode.UNKNOWN_SERVER_ERROR,
                        -1,
                        -1,
                        ClientError(f"produce response from node {node} has no result for {b.tp}"),
                    )
                    continue
                if p.error_code == 0:  # the common case: no exception to build
                    self._complete(b, ErrorCode.NONE, p.base_offset, p.log_append_time_ms, None)
                    continue
                message = getattr(p, "error_message", None)
                exc = KafkaError(p.error_code, f"produce to {b.tp}", message)
                self._complete(b, exc.code, p.base_offset, p.log_append_time_ms, exc)
        finally:
            self._in_flight[node] -= 1
            if not self._closing and self._fatal is None:
                try:
                    self._send_ready(self._now())
                except Exception:
                    log.exception("sending after a response failed")  # the sender will retry
            self._wakeup.set()

    def _complete(
        self,
        batch: ProducerBatch,
        error: ErrorCode,
        base_offset: int,
        log_append_time: int,
        exc: Exception | None,
    ) -> None:
        self._gate.on_complete(batch)
        now = self._now()
        if (
            error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE)
            and batch.record_count > 1
            and not self._closing
        ):
            self._split(batch, now)
            return
        may_retry = (
            not self._closing
            and batch.attempts < self._retries
            and now - batch.created_ms < self._delivery_timeout_ms
        )
        if self._idem is not None:
            verdict = self._idem.decide(batch, error, may_retry)
            if self._txn is not None and verdict.reset_producer_id:
                # a lost sequence inside a transaction: no quiet new id; the abort bumps it
                verdict = Verdict(Action.FAIL, reset_producer_id=True)
            self._idem.resolve(batch, verdict)
        else:
            verdict = decide_without_idempotence(error, may_retry)
        self._net.handle_error_code(error)
        if verdict.action is Action.SUCCESS:
            if error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                base_offset = -1
            self._succeed(batch, base_offset, log_append_time)
        elif verdict.action is Action.RETRY:
            log.debug("retrying %s after %s", batch, error.name)
            self._acc.reenqueue(batch, now)
        else:
            if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
                exc = MessageTooLargeError(f"{batch.tp}: broker refused the batch: {exc}")
            elif error.retriable and now - batch.created_ms >= self._delivery_timeout_ms:
                exc = DeliveryTimeoutError(f"{batch.tp}: gave up after delivery.timeout.ms: {exc}")
            exc = exc or KafkaError(error, f"produce to {batch.tp}")
            if self._txn is not None:
                self._txn.on_batch_failed(batch, error, exc)
            self._fail(batch, exc)

    def _split(self, batch: ProducerBatch, now: float) -> None:
        """The broker refused a batch of several records as too large: retry its records in two
        halves, so an oversized record ends up alone and fails alone (Kafka's producer splits
        the same way). Its sequence numbers are given up, so idempotence takes a new id."""
        log.info("%s refused as too large; splitting it", batch)
        if self._idem is not None:
            self._idem.resolve(batch, Verdict(Action.FAIL, reset_producer_id=True))
        halves = batch.split()
        self._incomplete.discard(batch)
        self._incomplete.update(halves)
        self._acc.requeue_split(halves, now)

    def _succeed(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self._incomplete.discard(batch)
        topic, partition = batch.tp
        handles = batch.handles
        if handles and type(handles[0]) is DeliveryFuture:  # the blocking facade's futures
            # each builds its RecordMetadata when asked: most never are (a fire-and-forget
            # send, or a caller that only checks for errors)
            outcome = _BatchOutcome(topic, partition, base_offset, log_append_time, batch)
            complete_batch(handles, outcome)
            return
        n = len(handles)
        offsets = range(base_offset, base_offset + n) if base_offset >= 0 else repeat(-1, n)
        stamps = batch.timestamps if log_append_time < 0 else repeat(log_append_time, n)
        new = tuple.__new__  # RecordMetadata(...) without the named tuple's argument parsing
        fields = zip(repeat(topic, n), repeat(partition, n), offsets, stamps, strict=True)
        complete_all(handles, [new(RecordMetadata, f) for f in fields])

    def _fail(self, batch: ProducerBatch, exc: Exception) -> None:
        self._incomplete.discard(batch)
        for fut in batch.handles:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # marks it retrieved: a fire-and-forget send logs nothing


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
