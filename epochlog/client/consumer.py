"""The asyncio consumer: assign, seek, poll. No consumer groups yet.

How it works. `assign()` sets the partitions (`subscription.SubscriptionState` keeps their
positions) and asks the network client for their topics' metadata. A background fetch task then
loops: partitions that need a position get one through ListOffsets to their leaders
(auto.offset.reset or seek_to_beginning/end); fetchable partitions are grouped by leader and each
leader gets one Fetch in flight at a time, sent at the highest version both sides support (v13+
names topics by id, so the version is capped at 12 while metadata lacks topic ids, as librdkafka
does), with `fetch.min.bytes`, `fetch.max.wait.ms`, `fetch.max.bytes`,
`max.partition.fetch.bytes` and `isolation.level`. Decoded records (`fetch_decoder`) wait in a
buffer until `poll()` takes them, at most `max.poll.records` at a time, advancing positions; a
partition is not fetched again while records for it are buffered.

Errors per partition: those that mean the leader moved (NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, ...) refresh metadata and retry after
`retry.backoff.ms`, so fetching follows leader changes; OFFSET_OUT_OF_RANGE resets the position
per auto.offset.reset, or, with `none`, makes the next `poll()` raise OffsetOutOfRangeError.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.aio import wait_for
from epochlog.client.config import Role, load_config
from epochlog.client.errors import (
    ClientClosedError,
    ClientError,
    KafkaError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from epochlog.client.fetch_decoder import ConsumerRecord, decode_partition_records
from epochlog.client.metadata import ZERO_UUID, TopicPartition
from epochlog.client.network import NetworkClient
from epochlog.client.subscription import (
    EARLIEST,
    EARLIEST_TIMESTAMP,
    LATEST,
    LATEST_TIMESTAMP,
    RESET_TIMESTAMPS,
    SubscriptionState,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int
    leader_epoch: int = -1


@dataclass
class _Buffered:
    tp: TopicPartition
    generation: int
    records: list[ConsumerRecord]
    next_offset: int
    last_epoch: int
    taken: int = 0


class AsyncConsumer:
    """An asyncio Kafka consumer with manual assignment; see the module docstring."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = load_config(Role.CONSUMER, config)
        c = self.config
        self._net = NetworkClient(c, allow_auto_topic_creation=c["allow.auto.create.topics"])
        self._subs = SubscriptionState(c["auto.offset.reset"])
        self._read_committed = c["isolation.level"] == "read_committed"
        self._retry_backoff_ms: int = c["retry.backoff.ms"]
        self._default_timeout_ms: int = c["default.api.timeout.ms"]
        self._buffer: deque[_Buffered] = deque()
        self._fetching_nodes: set[int] = set()
        self._resetting = False
        self._out_of_range: dict[TopicPartition, int] = {}
        self._wakeup = asyncio.Event()
        self._data = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def cluster_id(self) -> str | None:
        """The id of the cluster this client's metadata comes from (None before any)."""
        return self._net.cluster.cluster_id

    @property
    def rebootstraps(self) -> int:
        """How many times this client went back to bootstrap.servers (KIP-899 / KIP-1102)."""
        return self._net.rebootstraps

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        if self._closed:
            raise ClientClosedError("consumer is closed")
        if self._task is None:
            self._net.add_listener(self._wakeup.set)
            await self._net.start()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="fetcher")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            self._wakeup.set()  # the loop checks _closed too: wait_for may swallow a cancel
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._net.close()

    # ---------------------------------------------------------------- assignment and positions

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Consume exactly these (topic, partition)s; positions of kept partitions are kept."""
        self._subs.assign(partitions)
        self._net.want_topics({tp.topic for tp in self._subs.assignment()})
        self._buffer = deque(b for b in self._buffer if self._subs.is_assigned(b.tp))
        self._wakeup.set()

    def assignment(self) -> set[TopicPartition]:
        return self._subs.assignment()

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        self._subs.seek(tp, offset)
        self._out_of_range.pop(TopicPartition(*tp), None)
        self._wakeup.set()

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        for tp in self._targets(partitions):
            self._subs.request_reset(tp, EARLIEST)
        self._wakeup.set()

    def seek_to_end(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        for tp in self._targets(partitions):
            self._subs.request_reset(tp, LATEST)
        self._wakeup.set()

    def _targets(self, partitions: Iterable[tuple[str, int]] | None) -> list[TopicPartition]:
        if partitions is None:
            return sorted(self._subs.assignment())
        return [TopicPartition(*tp) for tp in partitions]

    async def position(self, tp: tuple[str, int], timeout: float | None = None) -> int:
        """The offset of the next record poll() returns, resetting first if needed."""
        await self.start()
        tp = TopicPartition(*tp)
        deadline = self._net.now_ms() + self._timeout_ms(timeout)
        while (pos := self._subs.position(tp)) is None:
            self._raise_pending_errors()
            if self._net.now_ms() >= deadline:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"no position for {tp}")
            self._wakeup.set()
            await asyncio.sleep(0.005)
        return pos

    def _timeout_ms(self, timeout: float | None) -> float:
        return self._default_timeout_ms if timeout is None else timeout * 1000

    # ---------------------------------------------------------------- offsets lookups

    async def offsets_for_times(
        self, timestamps: Mapping[tuple[str, int], int], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition, the earliest offset whose timestamp is >= the given one (None if no
        such record)."""
        await self.start()
        query = {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        found = await self._list_offsets(query, self._timeout_ms(timeout))
        return {tp: (r if r.offset >= 0 else None) for tp, r in found.items()}

    async def beginning_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        await self.start()
        query = {TopicPartition(*tp): EARLIEST_TIMESTAMP for tp in partitions}
        found = await self._list_offsets(query, self._timeout_ms(timeout))
        return {tp: r.offset for tp, r in found.items()}

    async def end_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        await self.start()
        query = {TopicPartition(*tp): LATEST_TIMESTAMP for tp in partitions}
        found = await self._list_offsets(query, self._timeout_ms(timeout))
        return {tp: r.offset for tp, r in found.items()}

    async def _list_offsets(
        self, query: dict[TopicPartition, int], timeout_ms: float
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """ListOffsets to each partition's leader, retrying retriable errors until timeout."""
        self._net.want_topics({tp.topic for tp in query})
        deadline = self._net.now_ms() + timeout_ms
        results: dict[TopicPartition, OffsetAndTimestamp] = {}
        last_error: Exception | None = None
        while True:
            todo = {tp: ts for tp, ts in query.items() if tp not in results}
            if not todo:
                return results
            by_node: dict[int, dict[TopicPartition, int]] = {}
            for tp, ts in todo.items():
                leader = self._net.cluster.leader_for(tp)
                if leader is None:
                    self._net.request_update()
                else:
                    by_node.setdefault(leader, {})[tp] = ts
            outcomes = await asyncio.gather(
                *(self._list_offsets_on(node, part) for node, part in by_node.items()),
                return_exceptions=True,
            )
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    if not isinstance(outcome, ClientError):
                        raise outcome
                    last_error = outcome
                    continue
                got, error = outcome
                results.update(got)
                last_error = error or last_error
            if len(results) == len(query):
                return results
            remaining = deadline - self._net.now_ms()
            if remaining <= 0:
                missing = ", ".join(str(tp) for tp in query if tp not in results)
                if isinstance(last_error, KafkaError) and not last_error.retriable:
                    raise last_error
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"ListOffsets for {missing}",
                    str(last_error) if last_error else None,
                )
            if isinstance(last_error, KafkaError) and not last_error.retriable:
                raise last_error
            await asyncio.sleep(min(self._retry_backoff_ms, remaining) / 1000)

    async def _list_offsets_on(
        self, node: int, query: dict[TopicPartition, int]
    ) -> tuple[dict[TopicPartition, OffsetAndTimestamp], KafkaError | None]:
        by_topic: dict[str, list[Any]] = {}
        for tp, ts in query.items():
            part = self._net.cluster.partition(tp)
            by_topic.setdefault(tp.topic, []).append(
                m.ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=tp.partition,
                    current_leader_epoch=part.leader_epoch if part else -1,
                    timestamp=ts,
                )
            )
        request = m.ListOffsetsRequest(
            replica_id=-1,
            topics=[
                m.ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=p)
                for t, p in by_topic.items()
            ],
        )
        conn = await self._net.ready(node)
        version = conn.version_for(ApiKey.LIST_OFFSETS)
        if version >= 2:
            request.isolation_level = 1 if self._read_committed else 0
        response = await conn.send(request, api_key=ApiKey.LIST_OFFSETS, version=version)
        results: dict[TopicPartition, OffsetAndTimestamp] = {}
        error: KafkaError | None = None
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                code = ErrorCode.of(p.error_code)
                if code is ErrorCode.NONE:
                    results[tp] = OffsetAndTimestamp(p.offset, p.timestamp, p.leader_epoch)
                else:
                    self._net.handle_error_code(code)
                    error = KafkaError(code, f"ListOffsets for {tp}")
        return results, error

    # ---------------------------------------------------------------- poll

    async def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to `timeout` seconds for some."""
        await self.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        max_records: int = self.config["max.poll.records"]
        while True:
            self._raise_pending_errors()
            records = self._take(max_records)
            if records:
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            self._data.clear()
            with contextlib.suppress(TimeoutError):
                await wait_for(self._data.wait(), remaining)

    def _raise_pending_errors(self) -> None:
        if self._out_of_range:
            errors, self._out_of_range = self._out_of_range, {}
            raise OffsetOutOfRangeError(errors)
        missing = self._subs.missing_position()
        if missing:
            names = ", ".join(str(tp) for tp in missing)
            raise NoOffsetForPartitionError(
                f"no position for {names} and auto.offset.reset=none; seek() first"
            )

    def _take(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        while self._buffer and len(out) < max_records:
            item = self._buffer[0]
            if not self._subs.is_assigned(item.tp):
                self._buffer.popleft()
                continue
            state = self._subs.state(item.tp)
            if state.generation != item.generation:
                self._buffer.popleft()  # a seek happened since this was fetched
                continue
            chunk = item.records[item.taken : item.taken + max_records - len(out)]
            item.taken += len(chunk)
            out.extend(chunk)
            if item.taken >= len(item.records):
                self._buffer.popleft()
                state.buffered = False
                self._subs.advance(item.tp, item.generation, item.next_offset, item.last_epoch)
                self._wakeup.set()
            elif chunk:
                last = chunk[-1]
                self._subs.advance(item.tp, item.generation, last.offset + 1, last.leader_epoch)
        return out

    # ---------------------------------------------------------------- the fetch task

    async def _run(self) -> None:
        while not self._closed:
            self._wakeup.clear()
            try:
                wait_ms = self._run_once()
            except Exception:
                log.exception("consumer fetch iteration failed")
                wait_ms = self._retry_backoff_ms
            with contextlib.suppress(TimeoutError):
                await wait_for(self._wakeup.wait(), wait_ms / 1000)

    def _run_once(self) -> float:
        loop = asyncio.get_running_loop()
        now = self._net.now_ms()
        wait_ms = float(self._retry_backoff_ms)
        to_reset = self._subs.needing_reset()
        if to_reset and not self._resetting:
            self._resetting = True
            loop.create_task(self._reset_positions(to_reset), name="reset offsets")
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in self._subs.fetchable(now):
            leader = self._net.cluster.leader_for(tp)
            if leader is None:
                self._net.want_topics([tp.topic])
                self._net.request_update()
                continue
            by_node.setdefault(leader, []).append(tp)
        for node, tps in by_node.items():
            if node in self._fetching_nodes:
                continue
            conn = self._net.try_ready(node)
            if conn is None:
                delay = self._net.connection_delay(node)
                if delay != float("inf"):
                    wait_ms = min(wait_ms, max(delay, 1.0))
                continue
            for tp in tps:
                self._subs.state(tp).fetching = True
            self._fetching_nodes.add(node)
            loop.create_task(self._fetch(node, conn, tps), name=f"fetch from node {node}")
        return wait_ms

    async def _reset_positions(self, tps: list[TopicPartition]) -> None:
        try:
            started = {tp: self._subs.begin_reset(tp) for tp in tps}
            query = {tp: RESET_TIMESTAMPS[strategy] for tp, (strategy, _) in started.items()}
            try:
                found = await self._list_offsets(query, self.config["request.timeout.ms"])
            except ClientError as exc:
                log.debug("offset reset failed, will retry: %s", exc)
                found = {}
            for tp, (_, generation) in started.items():
                result = found.get(tp)
                self._subs.complete_reset(tp, generation, None if result is None else result.offset)
        finally:
            self._resetting = False
            self._wakeup.set()

    def _fetch_version(self, conn: Any, tps: list[TopicPartition]) -> int:
        have_ids = all(self._net.cluster.topic_id(tp.topic) != ZERO_UUID for tp in tps)
        return conn.version_for(ApiKey.FETCH, None if have_ids else 12)

    async def _fetch(self, node: int, conn: Any, tps: list[TopicPartition]) -> None:
        c = self.config
        generations = {tp: self._subs.state(tp).generation for tp in tps}
        offsets = {tp: self._subs.state(tp).position for tp in tps}
        try:
            version = self._fetch_version(conn, tps)
            by_topic: dict[str, list[Any]] = {}
            for tp in tps:
                part = self._net.cluster.partition(tp)
                by_topic.setdefault(tp.topic, []).append(
                    m.FetchRequest.FetchPartition(
                        partition=tp.partition,
                        current_leader_epoch=part.leader_epoch if part else -1,
                        fetch_offset=offsets[tp],
                        partition_max_bytes=c["max.partition.fetch.bytes"],
                    )
                )
            topic_ids = {t: self._net.cluster.topic_id(t) for t in by_topic}
            request = m.FetchRequest(
                replica_id=-1,
                max_wait_ms=c["fetch.max.wait.ms"],
                min_bytes=c["fetch.min.bytes"],
                max_bytes=c["fetch.max.bytes"],
                isolation_level=1 if self._read_committed else 0,
                topics=[
                    m.FetchRequest.FetchTopic(topic=t, topic_id=topic_ids[t], partitions=p)
                    for t, p in by_topic.items()
                ],
                rack_id=c["client.rack"],
            )
            timeout = c["request.timeout.ms"] + c["fetch.max.wait.ms"]
            response = await conn.send(
                request, api_key=ApiKey.FETCH, version=version, timeout_ms=timeout
            )
            self._handle_fetch(version, response, generations, offsets)
        except ClientError as exc:
            log.debug("fetch from node %s failed: %s", node, exc)
            until = self._net.now_ms() + self._retry_backoff_ms
            for tp in tps:
                self._subs.back_off(tp, until)
        finally:
            self._fetching_nodes.discard(node)
            for tp in tps:
                if self._subs.is_assigned(tp):
                    self._subs.state(tp).fetching = False
            self._wakeup.set()

    def _handle_fetch(
        self,
        version: int,
        response: Any,
        generations: dict[TopicPartition, int],
        offsets: dict[TopicPartition, int | None],
    ) -> None:
        top = ErrorCode.of(response.error_code) if version >= 7 else ErrorCode.NONE
        if top is not ErrorCode.NONE:
            raise KafkaError(top, "Fetch")
        backoff_until = self._net.now_ms() + self._retry_backoff_ms
        for t in response.responses:
            name = t.topic if version <= 12 else self._net.cluster.topic_name(t.topic_id)
            if name is None:
                self._net.request_update()
                continue
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                if tp not in generations or not self._subs.is_assigned(tp):
                    continue
                state = self._subs.state(tp)
                if state.generation != generations[tp]:
                    continue  # seeked meanwhile
                code = ErrorCode.of(p.error_code)
                if code is ErrorCode.NONE:
                    self._accept(tp, generations[tp], offsets[tp], p)
                elif code is ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._offset_out_of_range(tp, offsets[tp])
                else:
                    log.debug("fetch %s: %s", tp, code.name)
                    self._net.handle_error_code(code)
                    self._subs.back_off(tp, backoff_until)

    def _accept(self, tp: TopicPartition, generation: int, offset: int | None, p: Any) -> None:
        assert offset is not None
        state = self._subs.state(tp)
        state.high_watermark = p.high_watermark
        state.log_start_offset = p.log_start_offset
        aborted = [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or [])]
        decoded = decode_partition_records(
            tp.topic,
            tp.partition,
            p.records,
            offset,
            read_committed=self._read_committed,
            aborted=aborted,
        )
        if decoded.records:
            state.buffered = True
            self._buffer.append(
                _Buffered(tp, generation, decoded.records, decoded.next_offset, decoded.last_epoch)
            )
            self._data.set()
        elif decoded.next_offset > offset:  # only control batches or a compacted gap
            self._subs.advance(tp, generation, decoded.next_offset, decoded.last_epoch)

    def _offset_out_of_range(self, tp: TopicPartition, offset: int | None) -> None:
        strategy = self._subs.default_reset
        if strategy == "none":
            self._out_of_range[tp] = offset if offset is not None else -1
            self._subs.back_off(tp, self._net.now_ms() + self._retry_backoff_ms)
            self._data.set()
        else:
            log.info("offset %s out of range for %s; resetting to %s", offset, tp, strategy)
            self._subs.request_reset(tp, strategy)
