"""A replica fetcher: copies the partitions this broker follows from one leader (Kafka's
ReplicaFetcherThread), as one task on the broker's event loop.

Every round sends one Fetch (v15+ with the ReplicaState tag {ReplicaId = this broker, ReplicaEpoch
= its current broker epoch}; topic ids from v13; LastFetchedEpoch and CurrentLeaderEpoch per
partition) for all ready partitions, with replica.fetch.wait.max.ms, replica.fetch.min.bytes,
replica.fetch.max.bytes (per partition) and replica.fetch.response.max.bytes. For each partition
in the answer (decisions in `follower_rules`):

- data: appended as it is (`append_as_follower`), then HW = min(leader's HW, local LEO) and the
  log start offset follows the leader's (never past the HW);
- DivergingEpoch: truncate by leader epoch, append nothing, fetch again (the next Fetch carries
  the new last epoch, so an incomplete truncation repeats until the logs agree);
- OFFSET_OUT_OF_RANGE: ask the leader for its log end (and if needed start) offset with
  ListOffsets and truncate, restart the log, or continue;
- FENCED_LEADER_EPOCH: this broker's view is stale; the partition waits for a LeaderAndIsr;
- anything else (UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, a failed append, ...): back off
  replica.fetch.backoff.ms and try again.

Partitions in the truncating phase are handled before the fetch: without a leader epoch in the
log they truncate to the HW; with one (when the leader cannot send DivergingEpoch, Fetch < 12)
they ask OffsetForLeaderEpoch and truncate, repeating until the truncation is complete. A lost
connection or request backs everything off. The fault injector is consulted before each Fetch
(a `hold` rule pauses this follower). Answers are applied only to the partition state they were
requested for: the manager replaces a partition's state whenever a LeaderAndIsr re-adds it.

Fetch sessions (KIP-227, `fetch_session.FetchSessionBuilder`): the first Fetch to a leader opens
a session with every ready partition; later ones carry only the partitions whose fetch offset,
epochs, log start or size changed and forget those no longer ready, and the leader answers only
partitions with news. A session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
FETCH_SESSION_TOPIC_ID_ERROR) voids that answer and the next Fetch is full again; so does a lost
connection.

Replication throttles (`replication_quotas`): a partition the follower throttle names is left
out of the Fetch while the follower's quota is exceeded and the replica is not in sync (its
last answer left it behind the leader's HW); its appended bytes are recorded. When every
ready partition is held back the fetcher backs off replica.fetch.backoff.ms, as Kafka's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
import uuid
from collections.abc import Callable
from typing import Any

from epochlog.aio import wait_for
from epochlog.broker.collaborators import BrokerEpochHolder
from epochlog.broker.fetch_session import FetchSessionBuilder, PartitionParams
from epochlog.broker.follower_rules import (
    FetchPhase,
    OutOfRangeAction,
    PartitionFetchState,
    initial_fetch_state,
    offset_truncation_state,
    out_of_range_action,
    whole_batches_length,
)
from epochlog.broker.partition import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Partition
from epochlog.broker.replica_manager import ReplicaManager, TopicPartition
from epochlog.broker.replication_quotas import should_follower_throttle
from epochlog.client.errors import (
    ConnectionFailedError,
    IncompatibleBrokerError,
    RequestTimedOutError,
)
from epochlog.client.framed_connection import FramedConnection
from epochlog.client.sasl import login_of
from epochlog.config.broker import BrokerConfig
from epochlog.config.sasl import inter_broker_login
from epochlog.faults import NO_FAULTS, FaultInjector
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import CorruptRecordError, ErrorCode, InvalidRecordError
from epochlog.storage import StorageError
from epochlog.storage.checkpoint import deferred_checkpoints

log = logging.getLogger(__name__)

MAX_FETCH_VERSION = 16
# A partition in this follower's fetch session: (topic id from Fetch v13, else None; name; index)
SessionTopicKey = tuple[uuid.UUID | None, str, int]
_CONNECTION_ERRORS = (
    ConnectionFailedError,
    RequestTimedOutError,
    IncompatibleBrokerError,
    TimeoutError,
    OSError,
)
_SESSION_ERRORS = (
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
    ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
)
_APPEND_ERRORS = (StorageError, CorruptRecordError, InvalidRecordError, OSError)


class LeaderRequestError(Exception):
    """A per-partition error answered to a ListOffsets or OffsetForLeaderEpoch."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ReplicaFetcher:
    """Fetches every partition this broker follows from broker `source_id`."""

    def __init__(
        self,
        *,
        source_id: int,
        broker_id: int,
        fetcher_id: int = 0,
        replica_manager: ReplicaManager,
        config: BrokerConfig,
        epoch_holder: BrokerEpochHolder,
        resolve_endpoint: Callable[[int], tuple[str, int] | None],
        faults: FaultInjector = NO_FAULTS,
        max_fetch_version: int = MAX_FETCH_VERSION,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.source_id = source_id
        self.ssl_context = ssl_context  # the inter-broker listener is TLS
        self.broker_id = broker_id
        self.fetcher_id = fetcher_id
        self.rm = replica_manager
        self.epoch_holder = epoch_holder
        self.resolve_endpoint = resolve_endpoint
        self.faults = faults
        self.max_fetch_version = max_fetch_version
        self.max_wait_ms: int = config["replica.fetch.wait.max.ms"]
        self.min_bytes: int = config["replica.fetch.min.bytes"]
        self.partition_max_bytes: int = config["replica.fetch.max.bytes"]
        self.response_max_bytes: int = config["replica.fetch.response.max.bytes"]
        self.backoff_ms: int = config["replica.fetch.backoff.ms"]
        self.socket_timeout_ms: int = config["replica.socket.timeout.ms"]
        self.sasl = login_of(inter_broker_login(config))  # the inter-broker listener's login
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self.fetches_sent = 0
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: FramedConnection | None = None
        self.session: FetchSessionBuilder[SessionTopicKey] = FetchSessionBuilder()  # KIP-227

    def __repr__(self) -> str:
        return f"ReplicaFetcher-{self.fetcher_id}({self.broker_id} <- {self.source_id})"

    # ------------------------------------------------------------------ partitions

    def add_partition(self, partition: Partition) -> PartitionFetchState:
        """Follow `partition` from its LEO and latest epoch (a fresh state)."""
        state = initial_fetch_state(
            topic=partition.topic,
            partition=partition.index,
            leader_epoch=partition.leader_epoch,
            log_end_offset=partition.log_end_offset,
            high_watermark=partition.high_watermark,
            latest_epoch=partition.log.latest_epoch,
        )
        self.partitions[partition.key] = state
        self._changed.set()
        return state

    def adopt_state(self, state: PartitionFetchState) -> None:
        """Follow a partition with the state another fetcher had (a resize keeps offsets)."""
        self.partitions[state.key] = state
        self._changed.set()

    def remove_partition(self, key: TopicPartition) -> bool:
        if self.partitions.pop(key, None) is None:
            return False
        self._changed.set()
        return True

    def _current(self, state: PartitionFetchState) -> Partition | None:
        """The partition if `state` is still what this fetcher follows it with."""
        if self.partitions.get(state.key) is not state:
            return None
        partition = self.rm.get_partition(*state.key)
        if partition is None or partition.is_leader or partition.leader_id != self.source_id:
            return None
        return partition

    # ------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=repr(self))

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._close()

    async def _close(self) -> None:
        self.session.on_error()  # whatever the leader's session holds is unknown now
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def _connected(self) -> FramedConnection:
        if self._connection is not None and self._connection.connected:
            return self._connection
        await self._close()
        endpoint = self.resolve_endpoint(self.source_id)
        if endpoint is None:
            raise ConnectionFailedError(f"no endpoint known for broker {self.source_id}")
        connection = FramedConnection(
            endpoint[0],
            endpoint[1],
            node_id=self.source_id,
            client_id=f"broker-{self.broker_id}-fetcher-{self.fetcher_id}-{self.source_id}",
            request_timeout_ms=self.socket_timeout_ms,
            sasl=self.sasl,
            ssl_context=self.ssl_context,
        )
        try:
            await wait_for(connection.connect(), self.socket_timeout_ms / 1000)
        except BaseException:
            await connection.close()
            raise
        self._connection = connection
        return connection

    # ------------------------------------------------------------------------ loop

    async def _run(self) -> None:
        while True:
            try:
                connection = await self._connected()
                await self._truncate(connection)
                now = _now_ms()
                ready = [
                    s
                    for s in self.partitions.values()
                    if s.phase is FetchPhase.FETCHING and s.is_ready(now)
                ]
                fetchable = self.unthrottled(ready, now)
                if not fetchable:
                    if ready:  # all held back by the follower's throttle: back off, as Kafka
                        await asyncio.sleep(self.backoff_ms / 1000)
                    else:
                        await self._wait_for_work()
                    continue
                ready = fetchable
                await self._fetch(connection, ready)
            except asyncio.CancelledError:
                raise
            except _CONNECTION_ERRORS as exc:
                log.info("%s: %s; backing off %d ms", self, exc, self.backoff_ms)
                await self._close()
                await asyncio.sleep(self.backoff_ms / 1000)
            except Exception:
                log.exception("%s failed; backing off", self)
                await self._close()
                await asyncio.sleep(self.backoff_ms / 1000)

    def unthrottled(self, ready: list[PartitionFetchState], now: int) -> list[PartitionFetchState]:
        """The ready partitions the follower's replication throttle lets into the next Fetch."""
        quota = self.rm.replication_quotas.follower
        return [
            s
            for s in ready
            if not should_follower_throttle(quota, s.topic, s.partition, s.in_sync, now)
        ]

    async def _wait_for_work(self) -> None:
        """Until a partition is added or removed, or the earliest back-off ends."""
        now = _now_ms()
        waiting = [
            s.delayed_until_ms for s in self.partitions.values() if s.phase is not FetchPhase.FAILED
        ]
        timeout = max(0.0, (min(waiting) - now) / 1000) if waiting else None
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await wait_for(self._changed.wait(), timeout)

    # ------------------------------------------------------------------------ fetch

    def _fetch_version(
        self, connection: FramedConnection, states: list[PartitionFetchState]
    ) -> int:
        version = connection.version_for(ApiKey.FETCH, self.max_fetch_version)
        if version >= 13 and any(self.rm.topic_id_for_name(s.topic) is None for s in states):
            version = 12  # a partition without a topic id is fetched by name (Kafka does too)
        return version

    async def _fetch(self, connection: FramedConnection, ready: list[PartitionFetchState]) -> None:
        version = self._fetch_version(connection, ready)
        if version < 12:
            # No DivergingEpoch from this leader: check each log once by OffsetForLeaderEpoch.
            for state in ready:
                if state.last_fetched_epoch >= 0 and not state.epoch_checked:
                    state.phase = FetchPhase.TRUNCATING
            ready = [s for s in ready if s.phase is FetchPhase.FETCHING]
            if not ready:
                return
        # Session keys carry the topic id the request names: a partition is forgotten by the id
        # the leader's session holds, even once this broker has deleted the topic (forgotten by
        # name alone, a deleted topic's partitions stayed in the session and every incremental
        # Fetch came back at once with their UNKNOWN_TOPIC_ID: a busy loop), and a topic
        # re-created under its name is a new key.
        topic_ids = (
            {topic: self.rm.topic_id_for_name(topic) for topic in {s.topic for s in ready}}
            if version >= 13
            else {}
        )
        by_session_key: dict[SessionTopicKey, PartitionFetchState] = {
            (topic_ids.get(s.topic), *s.key): s for s in ready
        }
        # Answers are matched by topic id from v13: one for an id no longer asked for is ignored.
        by_answer_key = {
            (topic_id if version >= 13 else name, index): s
            for (topic_id, name, index), s in by_session_key.items()
        }
        wanted = {k: self._params(s, version) for k, s in by_session_key.items()}
        send, forget = self.session.build(wanted, version >= 13)
        request = self._fetch_request(version, send, forget, wanted)
        if not await self.faults.before_send(ApiKey.FETCH, self.broker_id, self.source_id):
            log.info("%s: Fetch dropped by a fault rule", self)
            await asyncio.sleep(self.backoff_ms / 1000)
            return
        self.fetches_sent += 1
        response = await connection.send(
            request,
            api_key=ApiKey.FETCH,
            version=version,
            timeout_ms=self.socket_timeout_ms + self.max_wait_ms,
        )
        now = _now_ms()
        top_error = ErrorCode.of(response.error_code)
        if not self.session.on_response(top_error, response.session_id if version >= 7 else 0):
            if top_error not in _SESSION_ERRORS:  # a session error: the next Fetch is full
                for state in ready:
                    self._on_error(state, top_error, now)
            return
        out_of_range: list[PartitionFetchState] = []
        # The first batches of a new leader epoch change each partition's epoch cache: after a
        # failover that is thousands of checkpoint files, written off the loop afterwards.
        with deferred_checkpoints() as deferred:
            for topic in response.responses:
                topic_key = topic.topic_id if version >= 13 else topic.topic
                for data in topic.partitions:
                    state = by_answer_key.get((topic_key, data.partition_index))
                    if state is None:
                        continue
                    partition = self._current(state)
                    if partition is None:
                        continue
                    error = ErrorCode.of(data.error_code)
                    if error is ErrorCode.OFFSET_OUT_OF_RANGE:
                        out_of_range.append(state)
                    elif error is ErrorCode.NONE:
                        self._on_data(partition, state, data, version, now)
                    else:
                        self._on_error(state, error, now)
        if deferred:
            self.rm.write_deferred_checkpoints(deferred)
        for state in out_of_range:
            await self._on_out_of_range(connection, state)

    def _params(self, state: PartitionFetchState, version: int) -> PartitionParams:
        partition = self.rm.get_partition(*state.key)
        return PartitionParams(
            fetch_offset=state.fetch_offset,
            max_bytes=self.partition_max_bytes,
            current_leader_epoch=state.current_leader_epoch,
            last_fetched_epoch=state.last_fetched_epoch if version >= 12 else -1,
            log_start_offset=partition.log_start_offset if partition else -1,
        )

    def _fetch_request(
        self,
        version: int,
        send: list[SessionTopicKey],
        forget: list[SessionTopicKey],
        wanted: dict[SessionTopicKey, PartitionParams],
    ) -> Any:
        """The Fetch carrying `send` (all partitions in a full fetch, the changed ones in an
        incremental one) and forgetting `forget` (session keys of partitions no longer
        fetched), each topic named by the id in its session key (v13+)."""
        R = m.FetchRequest
        topics: dict[tuple[uuid.UUID | None, str], Any] = {}
        for key in send:
            topic_id, name, index = key
            topic = topics.get((topic_id, name))
            if topic is None:
                topic = topics[(topic_id, name)] = R.FetchTopic(topic=name)
                if topic_id is not None:
                    topic.topic_id = topic_id
            params = wanted[key]
            topic.partitions.append(
                R.FetchPartition(
                    partition=index,
                    current_leader_epoch=params.current_leader_epoch,
                    fetch_offset=params.fetch_offset,
                    last_fetched_epoch=params.last_fetched_epoch,
                    log_start_offset=params.log_start_offset,
                    partition_max_bytes=params.max_bytes,
                )
            )
        forgotten: dict[tuple[uuid.UUID | None, str], Any] = {}
        for topic_id, name, index in forget:
            entry = forgotten.get((topic_id, name))
            if entry is None:
                entry = forgotten[(topic_id, name)] = R.ForgottenTopic(topic=name)
                if topic_id is not None:
                    entry.topic_id = topic_id
            entry.partitions.append(index)
        request = R(
            max_wait_ms=self.max_wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.response_max_bytes,
            isolation_level=0,
            session_id=self.session.session_id,
            session_epoch=self.session.epoch,
            topics=list(topics.values()),
            forgotten_topics_data=list(forgotten.values()),
        )
        if version >= 15:
            request.replica_state = R.ReplicaState(
                replica_id=self.broker_id, replica_epoch=self.epoch_holder.epoch
            )
        else:
            request.replica_id = self.broker_id
        return request

    def _on_data(
        self,
        partition: Partition,
        state: PartitionFetchState,
        data: Any,
        version: int,
        now: int,
    ) -> None:
        diverging = data.diverging_epoch if version >= 12 else None
        if diverging is not None and diverging.epoch >= 0 and diverging.end_offset >= 0:
            self._truncate_to_leader(partition, state, diverging.epoch, diverging.end_offset, now)
            return
        records = data.records
        try:
            if records:
                size = whole_batches_length(records)
                if size:
                    partition.append_records_as_follower(memoryview(records)[:size], now)
                    quota = self.rm.replication_quotas.follower
                    if quota.is_throttled(state.topic, state.partition):
                        quota.record(size, now)  # in-sync or not: the total stays bounded
            partition.update_follower_high_watermark(data.high_watermark)
            if data.log_start_offset >= 0 and partition.update_follower_log_start_offset(
                data.log_start_offset
            ):
                self.rm.on_log_start_moved(partition)
        except _APPEND_ERRORS as exc:
            log.warning("%s: cannot append to %s: %s", self, partition.name, exc)
            state.delay(now, self.backoff_ms)
            if isinstance(exc, OSError):  # its log dir goes offline, once this response is done
                asyncio.get_running_loop().call_soon(self.rm.on_io_error, partition.key, exc)
                return
        state.fetch_offset = partition.log_end_offset
        state.lag = max(0, data.high_watermark - state.fetch_offset)
        latest = partition.log.latest_epoch
        state.last_fetched_epoch = -1 if latest is None else latest
        state.epoch_checked = True

    def _on_error(self, state: PartitionFetchState, error: ErrorCode, now: int) -> None:
        if error is ErrorCode.FENCED_LEADER_EPOCH:
            log.info(
                "%s: %s-%d fenced at leader epoch %d; waiting for a LeaderAndIsr",
                self,
                state.topic,
                state.partition,
                state.current_leader_epoch,
            )
            state.phase = FetchPhase.FAILED
            return
        log.debug("%s: %s-%d answered %s; backing off", self, *state.key, error.name)
        state.delay(now, self.backoff_ms)

    def _truncate_to_leader(
        self,
        partition: Partition,
        state: PartitionFetchState,
        leader_epoch: int,
        leader_end_offset: int,
        now: int,
        fetch_offset: int | None = None,
    ) -> bool:
        """Truncate by the leader's (epoch, end offset); True when the truncation is complete."""
        result = offset_truncation_state(
            leader_epoch=leader_epoch,
            leader_end_offset=leader_end_offset,
            local_epoch_end=partition.log.end_offset_for_epoch,
            log_end_offset=partition.log_end_offset,
            fetch_offset=state.fetch_offset if fetch_offset is None else fetch_offset,
        )
        before = partition.log_end_offset
        partition.truncate_as_follower(result.offset, now)
        if partition.log_end_offset != before:
            log.info(
                "%s: truncated %s from %d to %d (leader epoch %d ends at %d)%s",
                self,
                partition.name,
                before,
                partition.log_end_offset,
                leader_epoch,
                leader_end_offset,
                "" if result.complete else "; checking an earlier epoch",
            )
        state.fetch_offset = partition.log_end_offset
        latest = partition.log.latest_epoch
        state.last_fetched_epoch = -1 if latest is None else latest
        return result.complete

    # ------------------------------------------------------------------- truncation

    async def _truncate(self, connection: FramedConnection) -> None:
        now = _now_ms()
        truncating = [
            s
            for s in self.partitions.values()
            if s.phase is FetchPhase.TRUNCATING and s.is_ready(now)
        ]
        with_epoch: list[PartitionFetchState] = []
        for state in truncating:
            partition = self._current(state)
            if partition is None:
                continue
            if state.last_fetched_epoch < 0:
                # No epoch to compare: everything above the HW may be uncommitted.
                partition.truncate_as_follower(
                    min(state.fetch_offset, partition.high_watermark), now
                )
                state.fetch_offset = partition.log_end_offset
                latest = partition.log.latest_epoch
                state.last_fetched_epoch = -1 if latest is None else latest
                state.epoch_checked = True
                state.phase = FetchPhase.FETCHING
            else:
                with_epoch.append(state)
        if with_epoch:
            await self._offsets_for_leader_epoch(connection, with_epoch)

    async def _offsets_for_leader_epoch(
        self, connection: FramedConnection, states: list[PartitionFetchState]
    ) -> None:
        R = m.OffsetForLeaderEpochRequest
        topics: dict[str, Any] = {}
        for state in states:
            topic = topics.setdefault(state.topic, R.OffsetForLeaderTopic(topic=state.topic))
            topic.partitions.append(
                R.OffsetForLeaderPartition(
                    partition=state.partition,
                    current_leader_epoch=state.current_leader_epoch,
                    leader_epoch=state.last_fetched_epoch,
                )
            )
        request = R(replica_id=self.broker_id, topics=list(topics.values()))
        response = await connection.send(request, api_key=ApiKey.OFFSET_FOR_LEADER_EPOCH)
        now = _now_ms()
        by_key = {s.key: s for s in states}
        answered = {(t.topic, p.partition) for t in response.topics for p in t.partitions}
        for state in states:
            if state.key not in answered:
                state.delay(now, self.backoff_ms)  # left out of the answer: ask again later
        for topic in response.topics:
            for data in topic.partitions:
                state = by_key.get((topic.topic, data.partition))
                partition = self._current(state) if state is not None else None
                if state is None or partition is None:
                    continue
                error = ErrorCode.of(data.error_code)
                if error is not ErrorCode.NONE:
                    self._on_error(state, error, now)
                    continue
                complete = self._truncate_to_leader(
                    partition,
                    state,
                    data.leader_epoch,
                    data.end_offset,
                    now,
                    fetch_offset=partition.high_watermark,
                )
                if complete:
                    state.phase = FetchPhase.FETCHING
                    state.epoch_checked = True
                elif state.last_fetched_epoch < 0:
                    state.fetch_offset = partition.high_watermark  # no epoch left: to the HW

    # ------------------------------------------------------------------ out of range

    async def _on_out_of_range(
        self, connection: FramedConnection, state: PartitionFetchState
    ) -> None:
        now = _now_ms()
        try:
            leader_leo = await self._leader_offset(connection, state, LATEST_TIMESTAMP)
            partition = self._current(state)
            if partition is None:
                return
            action, offset = out_of_range_action(
                local_leo=partition.log_end_offset, leader_leo=leader_leo, leader_start=None
            )
            if action is OutOfRangeAction.NEED_LEADER_START:
                start = await self._leader_offset(connection, state, EARLIEST_TIMESTAMP)
                partition = self._current(state)
                if partition is None:
                    return
                action, offset = out_of_range_action(
                    local_leo=partition.log_end_offset, leader_leo=leader_leo, leader_start=start
                )
        except LeaderRequestError as exc:
            self._on_error(state, exc.error, now)
            return
        log.info(
            "%s: %s fetch offset %d out of range: %s (%d)",
            self,
            partition.name,
            state.fetch_offset,
            action.value,
            offset,
        )
        if action is OutOfRangeAction.TRUNCATE:
            partition.truncate_as_follower(offset, now)
        elif action is OutOfRangeAction.RESTART:
            partition.truncate_fully_as_follower(offset, now)
        state.fetch_offset = partition.log_end_offset
        latest = partition.log.latest_epoch
        state.last_fetched_epoch = -1 if latest is None else latest

    async def _leader_offset(
        self, connection: FramedConnection, state: PartitionFetchState, timestamp: int
    ) -> int:
        R = m.ListOffsetsRequest
        request = R(
            replica_id=self.broker_id,
            isolation_level=0,
            topics=[
                R.ListOffsetsTopic(
                    name=state.topic,
                    partitions=[
                        R.ListOffsetsPartition(
                            partition_index=state.partition,
                            current_leader_epoch=state.current_leader_epoch,
                            timestamp=timestamp,
                        )
                    ],
                )
            ],
        )
        response = await connection.send(request, api_key=ApiKey.LIST_OFFSETS)
        for topic in response.topics:
            for data in topic.partitions:
                error = ErrorCode.of(data.error_code)
                if error is not ErrorCode.NONE:
                    raise LeaderRequestError(error)
                return int(data.offset)
        raise LeaderRequestError(ErrorCode.UNKNOWN_SERVER_ERROR)
