"""The asyncio consumer: assign, seek, poll; with a group.id, subscribe, commit and committed.

Groups. With `group.id` set, `subscribe(topics)` or `subscribe(pattern=...)` joins the group
(`consumer_coordinator` does the work, `membership` decides it, `assignors` run on the leader):
the group's assignment replaces `assign()`, rebalance callbacks `on_assign`, `on_revoke` and
`on_lost` (confluent-kafka's names: `callback(consumer, partitions)`; plain functions or
coroutine functions) run on this loop, and new partitions start at the group's committed
offsets. `commit()` stores the positions of what `poll()` returned (or the given offsets),
`commit_async()` does it in the background, `committed()` reads them back; auto commit
(enable.auto.commit, on by default as in Java) commits from `poll()` every
auto.commit.interval.ms, before partitions are revoked and on close. `assign()` under a group id
also starts at committed offsets and commits with generation -1, without joining.

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
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.aio import wait_for
from epochlog.client.config import Role, load_config
from epochlog.client.consumer_coordinator import ASSIGNED, LOST, REVOKED, ConsumerCoordinator
from epochlog.client.errors import (
    ClientClosedError,
    ClientError,
    KafkaError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from epochlog.client.fetch_decoder import ConsumerRecord, decode_partition_records
from epochlog.client.group_offsets import ConsumerGroupMetadata, OffsetAndMetadata
from epochlog.client.list_offsets import OffsetAndTimestamp, list_offsets
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

RebalanceCallback = Callable[[Any, list[TopicPartition]], Any]
# Runs a rebalance callback: (callback, partitions) -> awaitable. The blocking consumer swaps in
# one that runs it in the thread that polls.
CallbackRunner = Callable[[RebalanceCallback, list[TopicPartition]], Awaitable[None]]


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
        self._check_crcs: bool = c["check.crcs"]
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
        self._callbacks: dict[str, RebalanceCallback | None] = {}
        self.run_callback: CallbackRunner = self._run_callback
        self._group: ConsumerCoordinator | None = None
        if c["group.id"]:
            self._group = ConsumerCoordinator(
                c, self._net, self._subs, self._on_rebalance, self._wakeup.set
            )

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
            if self._group is not None:
                self._group.start()

    async def close(self) -> None:
        """Commit (auto commit), revoke, leave the group (not a static member), then close."""
        if self._closed:
            return
        if self._group is not None and self._task is not None:
            await self._group.close(self._default_timeout_ms)
        self._closed = True
        if self._task is not None:
            self._wakeup.set()  # the loop checks _closed too: wait_for may swallow a cancel
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._net.close()

    # ---------------------------------------------------------------- assignment and positions

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Consume exactly these (topic, partition)s; positions of kept partitions are kept.
        With a group.id, new ones start at the group's committed offsets."""
        if self._group is not None and self._group.subscribed:
            raise ClientError("assign() and subscribe() are mutually exclusive; unsubscribe()")
        self._subs.assign(partitions, from_committed=self._group is not None)
        self._net.want_topics({tp.topic for tp in self._subs.assignment()})
        if self._group is not None:
            self._group.wake()
        self._buffer = deque(b for b in self._buffer if self._subs.is_assigned(b.tp))
        self._wakeup.set()

    def assignment(self) -> set[TopicPartition]:
        return self._subs.assignment()

    # ---------------------------------------------------------------- groups

    def _need_group(self, what: str) -> ConsumerCoordinator:
        if self._group is None:
            raise ClientError(f"{what} needs a group.id")
        return self._group

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        *,
        pattern: str | None = None,
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Join the group for these topics, or for every topic matching `pattern` (a regular
        expression over whole names, re-evaluated as metadata refreshes). Callbacks get
        (consumer, partitions): `on_assign` with the partitions added (all of them under the
        eager protocol), `on_revoke` with those taken away, `on_lost` with those lost without a
        clean hand-over (session or poll interval exceeded, fenced); `on_revoke` stands in for
        a missing `on_lost`."""
        group = self._need_group("subscribe()")
        if (topics is None) == (pattern is None):
            raise ClientError("subscribe() takes a list of topics or a pattern, not both")
        if not group.subscribed and self._subs.assignment():
            raise ClientError("assign() and subscribe() are mutually exclusive; assign([]) first")
        if topics is not None:
            topics = [topics] if isinstance(topics, str) else list(topics)
        self._callbacks = {ASSIGNED: on_assign, REVOKED: on_revoke, LOST: on_lost or on_revoke}
        group.subscribe(topics, pattern)
        self._wakeup.set()

    async def unsubscribe(self) -> None:
        """Revoke everything and leave the group (not a static member)."""
        group = self._need_group("unsubscribe()")
        await group.unsubscribe()
        self._buffer.clear()

    def subscription(self) -> set[str]:
        return set(self._group.subscription()) if self._group is not None else set()

    @property
    def member_id(self) -> str:
        return self._group.membership.member_id if self._group is not None else ""

    @property
    def generation_id(self) -> int:
        return self._group.membership.generation_id if self._group is not None else -1

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The consumer's group, generation and member id now, for a transactional producer's
        `send_offsets_to_transaction` (Kafka's groupMetadata())."""
        if self._group is None:
            raise ClientError("group_metadata() needs a consumer with a group.id")
        member = self._group.membership
        return ConsumerGroupMetadata(
            self._group.group_id,
            member.generation_id,
            member.member_id,
            member.group_instance_id,
        )

    async def _on_rebalance(self, kind: str, partitions: list[TopicPartition]) -> None:
        callback = self._callbacks.get(kind)
        if callback is not None:
            await self.run_callback(callback, partitions)

    async def _run_callback(
        self, callback: RebalanceCallback, partitions: list[TopicPartition]
    ) -> None:
        result = callback(self, partitions)
        if inspect.isawaitable(result):
            await result

    def _offsets_arg(
        self, offsets: Mapping[tuple[str, int], int | OffsetAndMetadata] | None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        group = self._need_group("commit()")
        if offsets is None:
            return group.positions_to_commit()
        return {
            TopicPartition(*tp): (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o))
            for tp, o in offsets.items()
        }

    async def commit(
        self,
        offsets: Mapping[tuple[str, int], int | OffsetAndMetadata] | None = None,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Commit `offsets` (the next offset to read per partition), or the position of every
        assigned partition (one past the last record `poll()` returned, with its leader epoch),
        and wait until the coordinator stored them. Raises KafkaError: UNKNOWN_MEMBER_ID,
        ILLEGAL_GENERATION or REBALANCE_IN_PROGRESS when the group moved on (as Java's
        CommitFailedException), REQUEST_TIMED_OUT and others after retrying until `timeout`."""
        await self.start()
        to_commit = self._offsets_arg(offsets)
        await self._need_group("commit()").commit(to_commit, self._timeout_ms(timeout))
        return to_commit

    def commit_async(
        self, offsets: Mapping[tuple[str, int], int | OffsetAndMetadata] | None = None
    ) -> asyncio.Task[None]:
        """Commit in the background (the offsets are taken now); the task holds the outcome."""
        if self._task is None:
            raise ClientError("start() the consumer first")
        return self._need_group("commit_async()").commit_in_background(self._offsets_arg(offsets))

    async def committed(
        self, partitions: Iterable[tuple[str, int]], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where nothing is committed)."""
        await self.start()
        tps = [TopicPartition(*tp) for tp in partitions]
        group = self._need_group("committed()")
        return await group.fetch_committed(tps, self._timeout_ms(timeout))

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
        return await list_offsets(
            self._net,
            query,
            timeout_ms,
            self._retry_backoff_ms,
            read_committed=self._read_committed,
            fail_unknown=False,
        )

    # ---------------------------------------------------------------- poll

    async def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to `timeout` seconds for some."""
        await self.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        max_records: int = self.config["max.poll.records"]
        if self._group is not None:
            self._group.polled()
        while True:
            if self._group is not None:
                self._group.raise_pending_errors()
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
        revoking = self._group.revoking if self._group is not None else ()
        while self._buffer and len(out) < max_records:
            item = self._buffer[0]
            if not self._subs.is_assigned(item.tp) or item.tp in revoking:
                self._buffer.popleft()
                if item.tp in revoking:
                    self._subs.state(item.tp).buffered = False
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
        # a rebalance may have taken partitions away between scheduling and now
        tps = [tp for tp in tps if self._subs.is_assigned(tp)]
        if not tps:
            self._fetching_nodes.discard(node)
            self._wakeup.set()
            return
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
            check_crcs=self._check_crcs,
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
