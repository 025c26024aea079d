"""The executor-side clients of the data source: fetch raw record batches, send built ones.

`Consumer` and `AsyncProducer` hand records over one Python object at a time, which is what
made the source and sink slow; these two move whole record batches and leave records to
`arrow_records`' numpy codec. Each runs on its own event-loop thread over a `NetworkClient`
(connections, metadata, rebootstrap), and is cached per Python worker (`clients._cached`).

`RangeFetcher.fetch(tp, offset)`: one Fetch of one partition from its leader; the caller gets
the raw records bytes, the error code and the offsets the broker reported. Connection errors and
errors that mean the leader moved refresh metadata, and are returned as retriable, so the
reader backs off and fetches again (it follows a leader kill). Fetches go over a connection of
their own per leader, a `FramedConnection` (the replica fetchers' connection: responses read by
a `BufferedProtocol` straight into their frame's memory, decoded as they complete), not over the
`NetworkClient`'s stream-reader connections, which copied each fetched byte about three times and
paused and resumed the socket every 128 KiB of a multi-MiB response (those were ~0.1 us of the
~0.2 us CPU per 116-byte record the fetches cost a Spark worker; the `NetworkClient` keeps the
metadata).

`BatchSender.send(tp, batches)`: produces already-built batches to one partition, in order, and
returns a future that is done when every one is acknowledged per `acks` (or failed). Each
partition has one batch in flight at a time, partitions go in parallel. With idempotence (the
default, as the producer's) the sender holds a producer id and numbers each partition's records,
so a retry after a lost response is recognised by the broker (DUPLICATE_SEQUENCE_NUMBER) instead
of written twice; UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER take a new producer id (a
record may then be written twice: at-least-once). Retriable errors (leader moved, connection
lost, timeouts) are retried after retry.backoff.ms within delivery.timeout.ms and `retries`; a
batch the broker finds too large is split in two and retried, as Kafka's producer does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import ssl
import threading
import time
from collections import deque
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from epochlog.aio import wait_for
from epochlog.client.config import Role, load_config
from epochlog.client.errors import (
    ClientError,
    DeliveryTimeoutError,
    IncompatibleBrokerError,
    KafkaError,
    MessageTooLargeError,
    NodeNotReadyError,
)
from epochlog.client.framed_connection import MAX_RESPONSE_BYTES, FramedConnection
from epochlog.client.metadata import ZERO_UUID
from epochlog.client.network import NetworkClient
from epochlog.client.sasl import SaslLogin
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.framing import FramePool, FrameReader
from epochlog.protocol.records import RecordBatchBuilder, decode_batch, stamp_producer
from epochlog.spark.arrow_records import EncodedBatch

log = logging.getLogger(__name__)
T = TypeVar("T")


class _LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        async def wrapped() -> T:
            return await coro

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop)

    def run(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
            self.loop.close()


# ------------------------------------------------------------------------------ fetching


class _FetchConnection(FramedConnection):
    """A `FramedConnection` whose frame pool keeps two buffers of `response_bytes`: fetch
    responses reach max.partition.fetch.bytes (8 MiB by default here, past the pool's default
    4 MiB cap), and a fresh buffer per response costs page faults."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int,
        client_id: str | None,
        request_timeout_ms: int,
        response_bytes: int,
        ssl_context: ssl.SSLContext | None,
        sasl: SaslLogin | None,
    ) -> None:
        super().__init__(
            host,
            port,
            node_id=node_id,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            ssl_context=ssl_context,
            sasl=sasl,
        )
        self._reader = FrameReader(
            MAX_RESPONSE_BYTES,
            pool=FramePool(
                max_buffers=2, max_buffer_bytes=response_bytes, max_total_bytes=2 * response_bytes
            ),
        )


@dataclass
class FetchResult:
    error: ErrorCode
    records: bytes | None = None
    high_watermark: int = -1
    log_start_offset: int = -1
    aborted: list[tuple[int, int]] = field(default_factory=list)
    message: str = ""  # why, for a retriable failure without a broker error code


class RangeFetcher:
    """Single-partition Fetch requests on a loop thread; see the module docstring."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.config = load_config(Role.CONSUMER, settings)
        self.read_committed = self.config["isolation.level"] == "read_committed"
        self.retry_backoff_s = self.config["retry.backoff.ms"] / 1000
        self._fetch_conns: dict[int, FramedConnection] = {}
        self._connecting: dict[int, asyncio.Future[FramedConnection]] = {}
        self._thread = _LoopThread("epochlog-spark-fetcher")
        try:
            self._net: NetworkClient = self._thread.run(self._make())
        except BaseException:
            self._thread.stop()
            raise

    async def _make(self) -> NetworkClient:
        net = NetworkClient(self.config, allow_auto_topic_creation=False)
        await net.start()
        return net

    def submit(self, tp: tuple[str, int], offset: int) -> concurrent.futures.Future[FetchResult]:
        return self._thread.submit(self._fetch(tp, offset))

    async def _fetch_connection(self, node_id: int) -> FramedConnection:
        """The fetch connection to `node_id`, connected (at most one attempt at a time)."""
        conn = self._fetch_conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        pending = self._connecting.get(node_id)
        if pending is not None:
            return await asyncio.shield(pending)
        pending = asyncio.get_running_loop().create_future()
        pending.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._connecting[node_id] = pending
        try:
            host, port = self._net.address(node_id)
            conn = _FetchConnection(
                host,
                port,
                node_id=node_id,
                client_id=self.config["client.id"] or None,
                request_timeout_ms=self.config["request.timeout.ms"],
                response_bytes=self.config["max.partition.fetch.bytes"] + 1024 * 1024,
                # the client's TLS and SASL login (security.protocol), as its other connections
                ssl_context=self._net.ssl_context,
                sasl=self._net.sasl,
            )
            try:
                await wait_for(
                    conn.connect(), self.config["socket.connection.setup.timeout.ms"] / 1000
                )
            except (ClientError, OSError, TimeoutError) as exc:
                await conn.close()
                raise NodeNotReadyError(
                    f"node {node_id} ({host}:{port}): fetch connection failed: {exc}"
                ) from exc
            self._fetch_conns[node_id] = conn
            pending.set_result(conn)
            return conn
        except BaseException as exc:
            pending.set_exception(exc)
            raise
        finally:
            del self._connecting[node_id]

    async def _fetch(self, tp: tuple[str, int], offset: int) -> FetchResult:
        c = self.config
        net = self._net
        topic, partition = tp
        try:
            part = net.cluster.partition(tp)
            if part is None:
                net.want_topics([topic])
                await net.topic_metadata(topic, c["request.timeout.ms"])
                part = net.cluster.partition(tp)
            leader = net.cluster.leader_for(tp)
            if part is None or leader is None:
                net.request_update()
                return FetchResult(ErrorCode.LEADER_NOT_AVAILABLE, message="no leader known")
            conn = await self._fetch_connection(leader)
            topic_id = net.cluster.topic_id(topic)
            version = conn.version_for(ApiKey.FETCH, None if topic_id != ZERO_UUID else 12)
            request = m.FetchRequest(
                replica_id=-1,
                max_wait_ms=c["fetch.max.wait.ms"],
                min_bytes=c["fetch.min.bytes"],
                max_bytes=c["fetch.max.bytes"],
                isolation_level=1 if self.read_committed else 0,
                topics=[
                    m.FetchRequest.FetchTopic(
                        topic=topic,
                        topic_id=topic_id,
                        partitions=[
                            m.FetchRequest.FetchPartition(
                                partition=partition,
                                current_leader_epoch=part.leader_epoch,
                                fetch_offset=offset,
                                partition_max_bytes=c["max.partition.fetch.bytes"],
                            )
                        ],
                    )
                ],
                rack_id=c["client.rack"],
            )
            response = await conn.send(
                request,
                api_key=ApiKey.FETCH,
                version=version,
                timeout_ms=c["request.timeout.ms"] + c["fetch.max.wait.ms"],
            )
        except KafkaError as exc:
            net.handle_error_code(exc.code)
            return FetchResult(exc.code, message=str(exc))
        except ClientError as exc:
            if not exc.retriable:
                raise
            net.request_update()
            return FetchResult(ErrorCode.NETWORK_EXCEPTION, message=str(exc))
        top = ErrorCode.of(response.error_code) if version >= 7 else ErrorCode.NONE
        if top is not ErrorCode.NONE:
            net.handle_error_code(top)
            return FetchResult(top, message="Fetch")
        for t in response.responses:
            name = t.topic if version <= 12 else net.cluster.topic_name(t.topic_id)
            if name != topic:
                continue
            for p in t.partitions:
                if p.partition_index != partition:
                    continue
                code = ErrorCode.of(p.error_code)
                if code is not ErrorCode.NONE:
                    net.handle_error_code(code)
                    return FetchResult(code, high_watermark=p.high_watermark)
                return FetchResult(
                    code,
                    p.records,
                    p.high_watermark,
                    p.log_start_offset,
                    [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or [])],
                )
        net.request_update()
        return FetchResult(ErrorCode.UNKNOWN_SERVER_ERROR, message=f"no data for {tp} in Fetch")

    async def _close(self) -> None:
        conns, self._fetch_conns = self._fetch_conns, {}
        for conn in conns.values():
            await conn.close()
        await self._net.close()

    def close(self) -> None:
        try:
            self._thread.run(self._close(), 30)
        finally:
            self._thread.stop()


# ------------------------------------------------------------------------------ sending

_PRODUCE_REQUEST_OVERHEAD = 1024  # what a one-partition Produce request adds to its batch


@dataclass
class _Item:
    batch: EncodedBatch
    done: asyncio.Future[None]
    created: float
    sequence: int = -1
    generation: int = -1  # producer id generation the sequence belongs to
    attempts: int = 0


class BatchSender:
    """Built record batches to partitions, in order per partition; see the module docstring."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.config = c = load_config(Role.PRODUCER, settings)
        self.acks: int = c["acks"]
        self.idempotent: bool = c["enable.idempotence"]
        self.max_request_size: int = c["max.request.size"]
        self.compression = Compression.parse(c["compression.type"])
        self._thread = _LoopThread("epochlog-spark-sender")
        try:
            self._net: NetworkClient = self._thread.run(self._make())
        except BaseException:
            self._thread.stop()
            raise
        self._queues: dict[tuple[str, int], deque[_Item]] = {}
        self._producer_id = -1
        self._producer_epoch = -1
        self._generation = 0
        self._sequences: dict[tuple[str, int], tuple[int, int]] = {}  # tp -> (generation, next)
        self._pid_lock: asyncio.Lock | None = None
        # Set by a transactional sender (`txn_clients`): Produce requests carry it and batches
        # are stamped transactional.
        self.transactional_id: str | None = None

    async def _make(self) -> NetworkClient:
        net = NetworkClient(self.config, allow_auto_topic_creation=True)
        await net.start()
        return net

    @property
    def max_batch_bytes(self) -> int:
        return max(
            1, min(self.config["batch.size"], self.max_request_size - _PRODUCE_REQUEST_OVERHEAD)
        )

    def partition_count(self, topic: str) -> int:
        async def count() -> int:
            info = await self._net.topic_metadata(topic, self.config["max.block.ms"])
            return len(info.partitions)

        return self._thread.run(count())

    def send(
        self, tp: tuple[str, int], batches: list[EncodedBatch]
    ) -> list[concurrent.futures.Future[None]]:
        """Queue the batches for `tp`; one future per batch, done once it is acknowledged."""
        return [self._thread.submit(self._enqueue(tp, b)) for b in batches]

    async def _enqueue(self, tp: tuple[str, int], batch: EncodedBatch) -> None:
        item = _Item(batch, asyncio.get_running_loop().create_future(), time.monotonic())
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        queue.append(item)
        if len(queue) == 1:
            asyncio.get_running_loop().create_task(self._drain(tp, queue))
        await item.done

    async def _drain(self, tp: tuple[str, int], queue: deque[_Item]) -> None:
        while queue:
            item = queue[0]
            try:
                await self._deliver(tp, item)
            except Exception as exc:  # handed to the waiting task, with every batch behind it
                while queue:
                    failed = queue.popleft()
                    if not failed.done.done():
                        failed.done.set_exception(exc)
                break
            queue.popleft()
            if not item.done.done():
                item.done.set_result(None)
        if self._queues.get(tp) is queue:
            del self._queues[tp]

    async def _producer_fields(self, tp: tuple[str, int], item: _Item) -> tuple[int, int, int]:
        if not self.idempotent:
            return -1, -1, -1
        if self._pid_lock is None:
            self._pid_lock = asyncio.Lock()
        async with self._pid_lock:
            while self._producer_id < 0:
                await self._init_producer_id()
        if item.generation != self._generation:
            generation, following = self._sequences.get(tp, (self._generation, 0))
            if generation != self._generation:
                following = 0
            item.generation, item.sequence = self._generation, following
            self._sequences[tp] = (self._generation, (following + item.batch.records) & 0x7FFFFFFF)
        return self._producer_id, self._producer_epoch, item.sequence

    async def _init_producer_id(self) -> None:
        try:
            conn = await self._net.least_loaded_connection(self.config["request.timeout.ms"])
            response = await conn.send(
                m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=2**31 - 1),
                api_key=ApiKey.INIT_PRODUCER_ID,
            )
        except IncompatibleBrokerError as exc:
            raise ClientError(f"idempotent producer not supported: {exc}") from exc
        except ClientError as exc:
            log.debug("InitProducerId failed: %s", exc)
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
            return
        error = ErrorCode.of(response.error_code)
        if error is ErrorCode.NONE:
            self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
            self._generation += 1
        elif not error.retriable:
            raise KafkaError(error, "InitProducerId")
        else:
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    def _reset_producer_id(self, generation: int) -> None:
        if generation == self._generation:
            self._producer_id = -1

    async def _deliver(self, tp: tuple[str, int], item: _Item) -> None:
        """Send one batch until it is acknowledged; raises what fails it for good. A batch the
        broker finds too large is sent as two halves instead."""
        c = self.config
        net = self._net
        topic, partition = tp
        while True:
            producer_id, epoch, sequence = await self._producer_fields(tp, item)
            data = item.batch.data
            if producer_id >= 0:
                data = stamp_producer(
                    data, producer_id, epoch, sequence, self.transactional_id is not None
                )
            item.attempts += 1
            error = ErrorCode.NONE
            problem: Exception | None = None
            try:
                leader = net.cluster.leader_for(tp)
                if leader is None:
                    await net.topic_metadata(topic, c["max.block.ms"])
                    leader = net.cluster.leader_for(tp)
                    if leader is None:
                        raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"produce to {tp}")
                conn = await net.ready(leader)
                request = m.ProduceRequest(
                    transactional_id=self.transactional_id,
                    acks=self.acks,
                    timeout_ms=c["request.timeout.ms"],
                    topic_data=[
                        m.ProduceRequest.TopicProduceData(
                            name=topic,
                            partition_data=[
                                m.ProduceRequest.PartitionProduceData(index=partition, records=data)
                            ],
                        )
                    ],
                )
                response = await conn.send(
                    request, api_key=ApiKey.PRODUCE, expect_response=self.acks != 0
                )
                if response is not None:
                    error = ErrorCode.UNKNOWN_SERVER_ERROR
                    problem = ClientError(f"produce response has no result for {tp}")
                    for t in response.responses:
                        for p in t.partition_responses:
                            if t.name == topic and p.index == partition:
                                error = ErrorCode.of(p.error_code)
                                message = getattr(p, "error_message", None)
                                problem = KafkaError(error, f"produce to {tp}", message)
            except KafkaError as exc:
                error, problem = exc.code, exc
            except ClientError as exc:
                if not exc.retriable:
                    raise
                error, problem = ErrorCode.NETWORK_EXCEPTION, exc
                net.request_update()
            if error in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                return
            if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
                if item.batch.records > 1:
                    for half in self._split(item):
                        await self._deliver(tp, half)
                    return
                raise MessageTooLargeError(f"{tp}: broker refused the record: {problem}")
            net.handle_error_code(error)
            if self.idempotent and error in (
                ErrorCode.UNKNOWN_PRODUCER_ID,
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                ErrorCode.INVALID_PRODUCER_EPOCH,
            ):
                self._reset_producer_id(item.generation)
                retriable = True
            else:
                retriable = error.retriable
            elapsed_ms = (time.monotonic() - item.created) * 1000
            if not retriable or item.attempts > c["retries"]:
                raise problem or KafkaError(error, f"produce to {tp}")
            if elapsed_ms >= c["delivery.timeout.ms"]:
                raise DeliveryTimeoutError(
                    f"{item.batch.records} records for {tp} not acknowledged within "
                    f"delivery.timeout.ms={c['delivery.timeout.ms']}: {problem}"
                )
            log.debug("retrying %s after %s", tp, error.name)
            await asyncio.sleep(c["retry.backoff.ms"] / 1000)

    def _split(self, item: _Item) -> list[_Item]:
        """The batch's records as two batches. The refused batch's sequences were not used, so
        the halves go under a new producer id, as the producer does."""
        decoded = decode_batch(item.batch.data)
        records = decoded.records
        middle = len(records) // 2
        halves = []
        for part in (records[:middle], records[middle:]):
            builder = RecordBatchBuilder(decoded.header.compression)
            for r in part:
                builder.append(r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
            halves.append(_Item(EncodedBatch(builder.build(), len(part)), item.done, item.created))
        self._reset_producer_id(item.generation)
        return halves

    def close(self) -> None:
        try:
            self._thread.run(self._net.close(), 30)
        finally:
            self._thread.stop()
