"""Clients of the data source, cached per Python process, and the I/O the source and sink do.

Spark reuses its Python workers (spark.python.worker.reuse), so a client made for one task
serves the next ones in the same worker: `_cached` keeps one client per (kind, settings) for
the life of the process. Clients are never closed by Spark (DataSourceStreamReader.stop() is not
called by pyspark 4.3); they are daemon threads and sockets that end with the worker.

- `ClusterView` (driver): which partitions a source reads, and earliest / latest / by-time
  offsets, through an `Admin` and a `Consumer`.
- `read_range` (executor): the records of one offset range as Arrow-ready columns, through a
  cached `raw_clients.RangeFetcher` (raw Fetch responses, the next one requested while the
  current one is decoded by `arrow_records`); an offset out of range (records deleted by
  retention) surfaces as a data-loss decision instead of a silent jump.
- `batch_sender` (executor): the cached `raw_clients.BatchSender` of the at-least-once sink.
- `BulkProducer` (driver, exactly-once publishing): an `AsyncProducer` on its own event-loop
  thread, fed a whole Arrow batch of records per loop call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from epochlog.client.config import Role
from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.sync import Admin, Consumer
from epochlog.protocol.errors import ErrorCode
from epochlog.spark.offsets import TP, OffsetRange
from epochlog.spark.options import EARLIEST, OptionError, SourceOptions, role_settings

# What only executors (reading, the sink) or the exactly-once publisher use is imported where it
# is used: Spark starts a Python process per streaming query for the driver side, which needs
# just `ClusterView`.
if TYPE_CHECKING:
    from epochlog.client.producer import AsyncProducer, RecordMetadata
    from epochlog.spark.arrow_records import DecodedColumns
    from epochlog.spark.raw_clients import BatchSender, RangeFetcher

log = logging.getLogger(__name__)
T = TypeVar("T")

_cache: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
_cache_lock = threading.Lock()


def _key(kind: str, settings: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return kind, tuple(sorted((k, str(v)) for k, v in settings.items()))


def _cached(kind: str, settings: Mapping[str, Any], make: Callable[[], T]) -> T:
    key = _key(kind, settings)
    with _cache_lock:
        client = _cache.get(key)
        if client is None:
            client = _cache[key] = make()
        return client


def _drop(kind: str, settings: Mapping[str, Any], wait: bool = True) -> None:
    with _cache_lock:
        client = _cache.pop(_key(kind, settings), None)
    if client is None:
        return

    def close() -> None:
        try:
            client.close()
        except Exception:  # a broken client is dropped either way
            log.debug("closing a cached %s failed", kind, exc_info=True)

    if wait:
        close()
    else:  # a stuck client must not block its replacement
        threading.Thread(target=close, daemon=True).start()


LOOKUP_TIMEOUT_S = 20.0
QUICK_LOOKUP_TIMEOUT_S = 5.0
LOOKUP_ATTEMPTS = 4


class DataLossError(RuntimeError):
    """Offsets a query wanted are gone (retention, a deleted topic) and failOnDataLoss=true."""


# ------------------------------------------------------------------------------ consumers

_READER_DEFAULTS = {
    "auto.offset.reset": "none",
    "allow.auto.create.topics": "false",
    "max.poll.records": "100000",
    "max.partition.fetch.bytes": str(8 * 1024 * 1024),
    "fetch.max.wait.ms": "100",
}


def consumer_settings(client: Mapping[str, Any]) -> dict[str, Any]:
    settings = dict(_READER_DEFAULTS)
    settings.update(role_settings(client, Role.CONSUMER))
    settings["auto.offset.reset"] = "none"
    return settings


# The driver's lookups retry (and space their metadata refreshes) every 10 ms unless the options
# say otherwise, as Spark's Kafka source (fetchOffset.retryIntervalMs=10): with the clients'
# 100 ms, a fresh client's first ListOffsets slept 100-200 ms waiting for the topic's leader, at
# every query start; repeated failures still back off exponentially (retry.backoff.max.ms).
_DRIVER_DEFAULTS = {"retry.backoff.ms": "10"}


def _driver_settings(client: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(settings)
    out.update({k: v for k, v in _DRIVER_DEFAULTS.items() if k not in client})
    return out


class ClusterView:
    """Driver-side lookups for a source: partitions and offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._consumer_settings = _driver_settings(
            options.client, consumer_settings(options.client)
        )
        self._admin_settings = _driver_settings(
            options.client, role_settings(options.client, Role.ADMIN)
        )

    @property
    def admin(self) -> Admin:
        return _cached("admin", self._admin_settings, lambda: Admin(self._admin_settings))

    @property
    def consumer(self) -> Consumer:
        s = self._consumer_settings
        return _cached("driver-consumer", s, lambda: Consumer(s))

    def _call(self, kind: str, fn: Callable[[], T]) -> T:
        """Run a lookup with a deadline; a client that fails or does not answer in time (say,
        stuck on a dead broker) is dropped and the lookup tried again with a fresh one."""
        settings = self._admin_settings if kind == "admin" else self._consumer_settings
        for attempt in range(LOOKUP_ATTEMPTS):
            pool = concurrent.futures.ThreadPoolExecutor(1)
            try:
                return pool.submit(fn).result(LOOKUP_TIMEOUT_S + 5)
            except (concurrent.futures.TimeoutError, KafkaError, ClientError) as exc:
                if isinstance(exc, KafkaError) and not exc.retriable:
                    raise
                log.warning("%s lookup failed (attempt %d): %r", kind, attempt + 1, exc)
                _drop(kind, settings, wait=False)
                if attempt == LOOKUP_ATTEMPTS - 1:
                    raise
            finally:
                pool.shutdown(wait=False)
        raise AssertionError("unreachable")

    def partitions(self) -> list[TP]:
        """The topic-partitions the source reads now. Topics named by subscribe or assign that
        do not exist are an error naming the option when failOnDataLoss=true."""
        o = self.options
        described = None
        if o.subscribe_pattern is None:
            # One metadata round trip when every named topic exists (each admin call waits for a
            # fresh metadata response, spaced by retry.backoff.ms); else the full check below.
            wanted = sorted(set(o.subscribe) or {t for t, _ in o.assign})
            # A topic missing or not ready, or no answer soon: the full check (with retries)
            # below decides.
            with contextlib.suppress(ClientError, TimeoutError):
                described = self.admin.describe_topics(wanted, timeout=QUICK_LOOKUP_TIMEOUT_S)
        if described is not None:
            return self._assigned(
                [(t, p.partition) for t in wanted for p in described[t].partitions], set(wanted)
            )
        existing = set(
            self._call("admin", lambda: self.admin.list_topics(timeout=LOOKUP_TIMEOUT_S))
        )
        if o.subscribe_pattern is not None:
            topics = sorted(t for t in existing if o.matches(t))
        else:
            wanted = sorted(set(o.subscribe) or {t for t, _ in o.assign})
            missing = [t for t in wanted if t not in existing]
            if missing and o.fail_on_data_loss:
                raise OptionError(
                    o.topic_option,
                    f"topic {', '.join(map(repr, missing))} does not exist "
                    "(set failOnDataLoss=false to read nothing from it)",
                )
            topics = [t for t in wanted if t in existing]
        if not topics:
            return []
        described = self._call(
            "admin", lambda: self.admin.describe_topics(topics, timeout=LOOKUP_TIMEOUT_S)
        )
        return self._assigned(
            [(t, p.partition) for t in topics for p in described[t].partitions], existing
        )

    def _assigned(self, out: list[TP], existing: set[str]) -> list[TP]:
        """`out` (the partitions of the topics read), narrowed to `assign` if given."""
        o = self.options
        if o.assign:
            present = set(out)
            absent = [tp for tp in o.assign if tp not in present and tp[0] in existing]
            if absent and o.fail_on_data_loss:
                names = ", ".join(f"{t}-{p}" for t, p in absent)
                raise OptionError("assign", f"partitions {names} do not exist")
            out = [tp for tp in o.assign if tp in present]
        return sorted(out)

    def earliest(self, tps: list[TP]) -> dict[TP, int]:
        if not tps:
            return {}
        return {
            (tp.topic, tp.partition): o
            for tp, o in self._call(
                "driver-consumer", lambda: self.consumer.beginning_offsets(tps, LOOKUP_TIMEOUT_S)
            ).items()
        }

    def latest(self, tps: list[TP]) -> dict[TP, int]:
        if not tps:
            return {}
        return {
            (tp.topic, tp.partition): o
            for tp, o in self._call(
                "driver-consumer", lambda: self.consumer.end_offsets(tps, LOOKUP_TIMEOUT_S)
            ).items()
        }

    def for_times(self, stamps: Mapping[TP, int]) -> dict[TP, int | None]:
        if not stamps:
            return {}
        found = self._call(
            "driver-consumer", lambda: self.consumer.offsets_for_times(stamps, LOOKUP_TIMEOUT_S)
        )
        return {(tp.topic, tp.partition): (r.offset if r else None) for tp, r in found.items()}


# ------------------------------------------------------------------------------ reading


def read_range(
    client: Mapping[str, Any],
    r: OffsetRange,
    *,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    want_headers: bool = False,
) -> Iterator[DecodedColumns]:
    """The records of `r` in offset order, as columns, a fetch at a time (the next fetch is
    under way while one is decoded). Offsets below the log start are data loss: an error with
    failOnDataLoss=true, else skipped (with a warning)."""
    from epochlog.spark.raw_clients import RangeFetcher

    settings = consumer_settings(client)
    fetcher = _cached("fetcher", settings, lambda: RangeFetcher(settings))
    try:
        yield from _read(fetcher, settings, r, fail_on_data_loss, poll_timeout_ms, want_headers)
    except (KafkaError, TimeoutError, ClientError):
        _drop("fetcher", settings)  # a fresh client for the next task
        raise


def _offsets_consumer(settings: Mapping[str, Any]) -> Consumer:
    """For the rare offset lookups of a reader (earliest, and after data loss)."""
    return _cached("consumer", settings, lambda: Consumer(settings))


def _read(
    fetcher: RangeFetcher,
    settings: Mapping[str, Any],
    r: OffsetRange,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    want_headers: bool,
) -> Iterator[DecodedColumns]:
    from epochlog.spark.arrow_records import decode_fetch, next_fetch_offset

    tp = (r.topic, r.partition)
    start = r.start
    if start == EARLIEST:
        start = _offsets_consumer(settings).beginning_offsets([tp])[_tp(tp)]
    if start >= r.end:
        return
    position = start
    last_progress = time.monotonic()
    pending = fetcher.submit(tp, position)
    while position < r.end:
        result = pending.result(poll_timeout_ms / 1000 + 60)
        if result.error is ErrorCode.OFFSET_OUT_OF_RANGE:
            consumer = _offsets_consumer(settings)
            begin = consumer.beginning_offsets([tp])[_tp(tp)]
            latest = consumer.end_offsets([tp])[_tp(tp)]
            message = (
                f"{tp[0]}-{tp[1]}: offsets {position}..{r.end} are no longer all in the log "
                f"(log now holds {begin}..{latest}); records were deleted, e.g. by retention"
            )
            if fail_on_data_loss:
                raise DataLossError(message + ". Set failOnDataLoss=false to skip them.") from None
            log.warning("%s; skipping them (failOnDataLoss=false)", message)
            if begin >= r.end or begin <= position:
                return
            position = begin
            pending = fetcher.submit(tp, position)
            continue
        if result.error is not ErrorCode.NONE:
            if not result.error.retriable:
                raise KafkaError(result.error, f"fetch {tp[0]}-{tp[1]}", result.message or None)
            log.debug("fetch %s-%s at %d: %s %s", *tp, position, result.error.name, result.message)
            _check_progress(tp, position, r.end, last_progress, poll_timeout_ms)
            time.sleep(fetcher.retry_backoff_s)
            pending = fetcher.submit(tp, position)
            continue
        following = next_fetch_offset(result.records, position)
        ahead = position < following < r.end
        if ahead:  # fetch the next records while these are decoded
            pending = fetcher.submit(tp, following)
        columns = decode_fetch(
            result.records,
            position,
            r.end,
            read_committed=fetcher.read_committed,
            aborted=result.aborted,
            want_headers=want_headers,
        )
        if len(columns):
            yield columns
        if columns.next_offset > position:
            last_progress = time.monotonic()
            position = columns.next_offset
        else:
            _check_progress(tp, position, r.end, last_progress, poll_timeout_ms)
        if not ahead and position < r.end:
            pending = fetcher.submit(tp, position)


def _check_progress(
    tp: TP, position: int, end: int, last_progress: float, poll_timeout_ms: int
) -> None:
    if (time.monotonic() - last_progress) * 1000 > poll_timeout_ms:
        raise TimeoutError(
            f"{tp[0]}-{tp[1]}: no records at offset {position} (reading up to {end}) "
            f"within kafkaConsumer.pollTimeoutMs={poll_timeout_ms}"
        )


def _tp(tp: TP) -> Any:
    from epochlog.client import TopicPartition

    return TopicPartition(*tp)


# ------------------------------------------------------------------------------ producing


class _LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        async def wrapped() -> T:
            return await coro

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout)

    def stop(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
            self.loop.close()


OutRecord = tuple[
    str | None, bytes | None, bytes | None, list[tuple[str, bytes | None]], int | None
]

_PRODUCER_DEFAULTS = {"linger.ms": "20", "batch.size": str(512 * 1024)}


def producer_settings(client: Mapping[str, Any]) -> dict[str, Any]:
    settings = dict(_PRODUCER_DEFAULTS)
    settings.update(role_settings(client, Role.PRODUCER))
    return settings


class BulkProducer:
    """An AsyncProducer on its own loop thread; `send_all` queues many records in one call."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._thread = _LoopThread("epochlog-spark-producer")
        try:
            self._producer: AsyncProducer = self._thread.run(self._make(settings))
        except BaseException:
            self._thread.stop()
            raise

    @staticmethod
    async def _make(settings: Mapping[str, Any]) -> AsyncProducer:
        from epochlog.client.producer import AsyncProducer

        producer = AsyncProducer(settings)
        await producer.start()
        return producer

    @classmethod
    def cached(cls, client: Mapping[str, Any]) -> BulkProducer:
        settings = producer_settings(client)
        return _cached("producer", settings, lambda: cls(settings))

    @classmethod
    def forget(cls, client: Mapping[str, Any]) -> None:
        _drop("producer", producer_settings(client))

    def send_all(
        self, records: Iterable[OutRecord], headers_extra: list[tuple[str, bytes | None]] = ()
    ) -> list[asyncio.Future[RecordMetadata]]:
        """Queue every record (topic, value, key, headers, partition); futures of their acks."""
        items = list(records)
        return self._thread.run(self._send_all(items, list(headers_extra)))

    async def _send_all(
        self, items: list[OutRecord], extra: list[tuple[str, bytes | None]]
    ) -> list[asyncio.Future[RecordMetadata]]:
        producer = self._producer
        futures = []
        ready: set[str] = set()
        for i, (topic, value, key, headers, partition) in enumerate(items):
            if topic is None:
                raise ValueError("a row has a null topic and there is no topic option")
            if topic not in ready or i % 1000 == 0:
                await producer.ready_for(topic)  # metadata, and room in buffer.memory
                ready.add(topic)
            futures.append(
                producer.send_nowait(
                    topic, value, key, headers + extra if extra else headers, partition
                )
            )
        return futures

    def flush(self, timeout: float | None = None) -> None:
        self._thread.run(self._producer.flush(timeout))

    def partition_count(self, topic: str) -> int:
        return len(self._thread.run(self._producer.partitions_for(topic)))

    def close(self) -> None:
        try:
            self._thread.run(self._producer.close(30))
        finally:
            self._thread.stop()


def batch_sender(client: Mapping[str, Any]) -> BatchSender:
    """The worker's sender of built record batches for these client settings."""
    from epochlog.spark.raw_clients import BatchSender

    settings = producer_settings(client)
    return _cached("sender", settings, lambda: BatchSender(settings))


def forget_batch_sender(client: Mapping[str, Any]) -> None:
    _drop("sender", producer_settings(client))


def wait_acked(futures: list[asyncio.Future[RecordMetadata]]) -> list[RecordMetadata]:
    """Results of acknowledged sends (call after flush); raises the first delivery error."""
    out = []
    for fut in futures:
        if not fut.done():
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "record not acknowledged after flush")
        error = fut.exception()
        if error is not None:
            raise error
        out.append(fut.result())
    return out
