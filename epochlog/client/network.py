"""The network client: connections to every broker, bootstrap, and metadata refresh.

The I/O shell around three sans-I/O pieces: `connection_state.ConnectionStates` decides when a
node may be (re)connected and which node is least loaded; `metadata.apply_metadata_response`
turns a Metadata response into the next `ClusterMetadata`; a `recovery.MetadataRecovery` object
decides when to rebootstrap. This module only does what they say, and reports back what happened.

Nodes. Before the first metadata the known nodes are the `bootstrap.servers`, with ids -1, -2, ...
(as Kafka's clients number them). Once a Metadata response lists brokers, those are the nodes;
connections to bootstrap nodes, to brokers that left, and to brokers whose address changed are
closed. At most one connection per node; `ready(node)` returns it, starting an attempt if the
node may connect now and raising `NodeNotReadyError` if it is backing off or the attempt fails.
An attempt is bounded by the connection setup timeout. A failed attempt or a lost connection puts
the node into reconnect backoff and asks for a metadata refresh (the broker may be gone).

Metadata. One background task keeps the cluster view fresh. It refreshes when asked
(`request_update()`, which producer, consumer and admin call on errors that invalidate metadata:
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH, ...;
and this module on disconnects) and when the view is older than `metadata.max.age.ms`. Attempts
are spaced by `retry.backoff.ms`, growing exponentially up to `retry.backoff.max.ms` while they
fail. Each goes to the least loaded node, asks for the topics someone wants (`want_topics`) or for
all of them, and wakes every task waiting in `update_metadata()` / `topic_metadata()`.

Rebootstrap (KIP-899 / KIP-1102). After every metadata attempt the `recovery` object is asked
whether to rebootstrap (REBOOTSTRAP_REQUIRED in a v13+ response, no known broker available, or
no good metadata for `metadata.recovery.rebootstrap.trigger.ms`); each attempt is bounded by the
time left before that trigger, so a broker that accepts a connection and never answers cannot
delay it. `rebootstrap()` closes every connection, the bootstrap ones included (librdkafka issue
#5605 is a client that kept its old ones), forgets the brokers and goes back to the bootstrap
servers, whose host names are resolved again when connecting. When metadata then names another
cluster id, the `add_cluster_id_listener` callbacks run (the producer takes a new producer id).

Listeners registered with `add_listener` are called (synchronously, on the loop) whenever a
connection becomes ready or is lost and whenever metadata changes, so the producer's sender can
sleep until something it waits for has happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random as _random
import time
from collections.abc import Callable, Iterable
from typing import Any

from epochlog.aio import wait_for
from epochlog.client.config import ClientConfig
from epochlog.client.connection import BrokerConnection
from epochlog.client.connection_state import (
    ConnectionStates,
    ExponentialBackoff,
    least_loaded_node,
)
from epochlog.client.errors import (
    METADATA_INVALIDATING_ERRORS,
    ClientClosedError,
    ClientError,
    KafkaError,
    NodeNotReadyError,
)
from epochlog.client.metadata import (
    ClusterMetadata,
    TopicInfo,
    apply_metadata_response,
    metadata_request,
)
from epochlog.client.recovery import MetadataRecovery, recovery_for
from epochlog.client.sasl import SaslAuthenticationError, SaslLogin, login_from_config
from epochlog.client.tls import client_ssl_context
from epochlog.protocol.api import ApiKey
from epochlog.protocol.codec import Message
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# Topic errors after which the topic's metadata is worth asking for again soon.
_RETRY_TOPIC_ERRORS = (
    frozenset({ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
    | METADATA_INVALIDATING_ERRORS
)


class NetworkClient:
    """Connections and cluster metadata of one client; see the module docstring."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        allow_auto_topic_creation: bool = True,
        recovery: MetadataRecovery | None = None,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.config = config
        self.client_id: str | None = config["client.id"] or None
        self.request_timeout_ms: int = config["request.timeout.ms"]
        self.sasl: SaslLogin | None = login_from_config(config)
        # TLS for every connection (security.protocol SSL/SASL_SSL), built once: a bad setting
        # fails here, naming its key
        self.ssl_context = client_ssl_context(config)
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.recovery: MetadataRecovery = recovery or recovery_for(config)
        self.cluster = ClusterMetadata()
        self.states = ConnectionStates(
            config["reconnect.backoff.ms"],
            config["reconnect.backoff.max.ms"],
            config["socket.connection.setup.timeout.ms"],
            config["socket.connection.setup.timeout.max.ms"],
            random=random,
        )
        self._metadata_backoff = ExponentialBackoff(
            config["retry.backoff.ms"], config["retry.backoff.max.ms"], random=random
        )
        self._clock = clock
        self._random = random
        self._bootstrap: dict[int, tuple[str, int]] = {}
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._topics: set[str] = set()
        self._all_topics = False
        self._need_update = True
        self._last_attempt_ms = -float("inf")
        self._last_success_ms = -float("inf")
        self._failed_updates = 0
        self._waiters: list[asyncio.Future[ClusterMetadata]] = []
        self._listeners: list[Callable[[], None]] = []
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.rebootstraps = 0  # how many times this client rebootstrapped, and the last why
        self.last_rebootstrap_reason = ""
        self._cluster_id_listeners: list[Callable[[str | None, str | None], None]] = []
        self._bootstrap_nodes()

    def now_ms(self) -> float:
        return self._clock() * 1000

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Start the metadata task (idempotent); the first refresh goes out at once."""
        if self._task is None:
            self._wakeup = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(
                self._metadata_loop(), name="metadata"
            )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            if self._wakeup is not None:
                self._wakeup.set()  # the loop checks _closed too: wait_for may swallow a cancel
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._close_all()
        for fut in self._waiters:
            if not fut.done():
                fut.set_exception(ClientClosedError("network client closed"))
        self._waiters.clear()

    async def _close_all(self) -> None:
        for task in list(self._connecting.values()):
            task.cancel()
        await asyncio.gather(*self._connecting.values(), return_exceptions=True)
        await asyncio.gather(*(c.close() for c in list(self._conns.values())))

    def _bootstrap_nodes(self) -> None:
        servers = self.config["bootstrap.servers"]
        self._bootstrap = {-(i + 1): hp for i, hp in enumerate(servers)}

    async def rebootstrap(self, reason: str = "") -> None:
        """Close every connection (bootstrap ones included), forget the known brokers and start
        again from bootstrap.servers (KIP-899), whose names are resolved again on connecting.
        The topics' metadata is kept (without brokers no partition has a usable leader) so
        senders keep knowing partition counts; the wanted topics are kept too."""
        log.warning(
            "rebootstrapping from %s%s",
            ",".join(f"{h}:{p}" for h, p in self.config["bootstrap.servers"]),
            f": {reason}" if reason else "",
        )
        await self._close_all()
        for node in list(self.cluster.brokers) + list(self._bootstrap):
            self.states.forget(node)
        self.cluster = ClusterMetadata(
            topics=self.cluster.topics, cluster_id=self.cluster.cluster_id
        )
        self._bootstrap_nodes()
        self._failed_updates = 0
        self._last_attempt_ms = -float("inf")
        self.recovery.on_rebootstrap(self.now_ms())
        # Counted once done, so whoever watches the count sees the forgotten brokers too.
        self.rebootstraps += 1
        self.last_rebootstrap_reason = reason
        self.request_update()
        self._notify()

    # ---------------------------------------------------------------- nodes and connections

    def nodes(self) -> list[int]:
        """The nodes requests may go to: the brokers of the metadata, or the bootstrap servers."""
        if self.cluster.brokers:
            return sorted(self.cluster.brokers)
        return sorted(self._bootstrap, reverse=True)

    def address(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            hp = self._bootstrap.get(node_id)
            if hp is not None:
                return hp
        else:
            broker = self.cluster.brokers.get(node_id)
            if broker is not None:
                return broker.host, broker.port
        raise NodeNotReadyError(f"node {node_id} is not a known broker")

    def connection(self, node_id: int) -> BrokerConnection | None:
        """The ready connection to `node_id`, if there is one (no attempt is started)."""
        conn = self._conns.get(node_id)
        return conn if conn is not None and conn.connected else None

    def try_ready(self, node_id: int) -> BrokerConnection | None:
        """The ready connection to `node_id`, or None after starting an attempt if allowed."""
        conn = self.connection(node_id)
        if (
            conn is None
            and node_id not in self._connecting
            and self.states.can_connect(node_id, self.now_ms())
        ):
            with contextlib.suppress(NodeNotReadyError):
                self._start_connect(node_id)
        return conn

    async def ready(self, node_id: int) -> BrokerConnection:
        """A ready connection to `node_id`, connecting if needed; NodeNotReadyError if the node
        is backing off, unknown, or the attempt fails."""
        conn = self.connection(node_id)
        if conn is not None:
            return conn
        if self._closed:
            raise ClientClosedError("network client closed")
        task = self._connecting.get(node_id)
        if task is None:
            delay = self.states.connection_delay(node_id, self.now_ms())
            if delay > 0:
                raise NodeNotReadyError(f"node {node_id} is backing off for {delay:.0f} ms")
            task = self._start_connect(node_id)
        return await asyncio.shield(task)

    def connection_delay(self, node_id: int) -> float:
        return self.states.connection_delay(node_id, self.now_ms())

    def _start_connect(self, node_id: int) -> asyncio.Task[BrokerConnection]:
        host, port = self.address(node_id)
        task = asyncio.get_running_loop().create_task(
            self._connect(node_id, host, port), name=f"connect node {node_id}"
        )
        task.add_done_callback(_consume_exception)
        self._connecting[node_id] = task
        return task

    async def _connect(self, node_id: int, host: str, port: int) -> BrokerConnection:
        timeout_ms = self.states.connecting(node_id, self.now_ms())
        conn = BrokerConnection(
            host,
            port,
            node_id=node_id,
            client_id=self.client_id,
            request_timeout_ms=self.request_timeout_ms,
            on_close=self._on_connection_closed,
            sasl=self.sasl,
            ssl_context=self.ssl_context,
        )
        try:
            try:
                await wait_for(conn.connect(), timeout_ms / 1000)
            except (ClientError, OSError, TimeoutError) as exc:
                await conn.close()
                backoff = self.states.failed(node_id, self.now_ms())
                if isinstance(exc, SaslAuthenticationError):
                    # A refused login is the caller's to see (as Kafka's clients raise
                    # SaslAuthenticationException), not a broker to wait for.
                    self._fail_waiters(exc)
                self.request_update()
                self._notify()
                reason = "setup timed out" if isinstance(exc, TimeoutError) else str(exc)
                raise NodeNotReadyError(
                    f"node {node_id} ({host}:{port}): {reason}; backing off {backoff:.0f} ms"
                ) from exc
            except asyncio.CancelledError:
                await conn.close()
                self.states.closed(node_id, self.now_ms())
                raise
            self.states.established(node_id, self.now_ms())
            self._conns[node_id] = conn
            self._notify()
            return conn
        finally:
            self._connecting.pop(node_id, None)

    def _on_connection_closed(self, conn: BrokerConnection, error: BaseException | None) -> None:
        node_id = conn.node_id
        assert node_id is not None
        if self._conns.get(node_id) is not conn:
            return  # an attempt that never became ready; _connect handles it
        del self._conns[node_id]
        if error is None:
            self.states.closed(node_id, self.now_ms())
        else:
            log.info("connection to node %s lost: %s", node_id, error)
            self.states.lost(node_id, self.now_ms())
            self.request_update()
        self._notify()

    def in_flight(self) -> dict[int, int]:
        return {node: conn.in_flight for node, conn in self._conns.items()}

    def least_loaded_node(self) -> int | None:
        """Kafka's leastLoadedNode over the known nodes; None if every one is backing off."""
        nodes = self.nodes()
        if not nodes:
            return None
        start = int(self._random() * len(nodes)) % len(nodes)
        return least_loaded_node(nodes, self.states, self.in_flight(), self.now_ms(), start)

    async def least_loaded_connection(self, timeout_ms: float) -> BrokerConnection:
        """A ready connection to the least loaded node, waiting out backoffs up to `timeout_ms`."""
        deadline = self.now_ms() + timeout_ms
        last_error: Exception | None = None
        while True:
            if self._closed:
                raise ClientClosedError("network client closed")
            node = self.least_loaded_node()
            if node is not None:
                try:
                    return await self.ready(node)
                except NodeNotReadyError as exc:
                    last_error = exc
                    continue
            remaining = deadline - self.now_ms()
            if remaining <= 0:
                raise NodeNotReadyError(f"no broker available within {timeout_ms:.0f} ms") from (
                    last_error
                )
            delays = [self.connection_delay(n) for n in self.nodes()] or [remaining]
            await asyncio.sleep(max(1.0, min(min(delays), remaining)) / 1000)

    async def send(
        self,
        node_id: int,
        request: Message,
        *,
        api_key: int | None = None,
        version: int | None = None,
        timeout_ms: int | None = None,
        expect_response: bool = True,
    ) -> Any:
        """Send one request to `node_id` over its connection (connecting if needed)."""
        conn = await self.ready(node_id)
        return await conn.send(
            request,
            api_key=api_key,
            version=version,
            timeout_ms=timeout_ms,
            expect_response=expect_response,
        )

    # ---------------------------------------------------------------- metadata

    def add_listener(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def add_cluster_id_listener(self, callback: Callable[[str | None, str | None], None]) -> None:
        """`callback(old, new)` runs when metadata names a cluster id other than the last one
        (a rebootstrap or a proxy switch moved the client to another cluster)."""
        self._cluster_id_listeners.append(callback)

    def _notify(self) -> None:
        for callback in self._listeners:
            callback()

    def want_topics(self, topics: Iterable[str]) -> None:
        """Keep metadata for `topics` (refreshing now if any is new)."""
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            if not self._all_topics:
                self.request_update()

    def want_all_topics(self) -> None:
        if not self._all_topics:
            self._all_topics = True
            self.request_update()

    def request_update(self) -> None:
        """Refresh metadata as soon as the refresh backoff allows."""
        self._need_update = True
        if self._wakeup is not None:
            self._wakeup.set()

    def handle_error_code(self, code: ErrorCode) -> None:
        """Called by users of the client for every error code they receive."""
        if code in METADATA_INVALIDATING_ERRORS:
            self.request_update()

    def _fail_waiters(self, error: Exception) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_exception(error)

    async def update_metadata(self, timeout_ms: float) -> ClusterMetadata:
        """Ask for a refresh and wait for the next good response (KafkaError REQUEST_TIMED_OUT
        after `timeout_ms`)."""
        if self._closed:
            raise ClientClosedError("network client closed")
        await self.start()
        fut: asyncio.Future[ClusterMetadata] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self.request_update()
        try:
            return await wait_for(fut, max(timeout_ms, 0) / 1000)
        except TimeoutError:
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT, f"no metadata within {timeout_ms:.0f} ms"
            ) from None
        finally:
            if fut in self._waiters:
                self._waiters.remove(fut)

    async def topic_metadata(self, topic: str, timeout_ms: float) -> TopicInfo:
        """Metadata of `topic` with at least one partition, waiting up to `timeout_ms`."""
        self.want_topics([topic])
        deadline = self.now_ms() + timeout_ms
        while True:
            info = self.cluster.topic(topic)
            if info is not None and info.partitions and info.error is ErrorCode.NONE:
                return info
            remaining = deadline - self.now_ms()
            if remaining <= 0:
                code = info.error if info is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                raise KafkaError(
                    code, f"topic {topic!r} not present in metadata after {timeout_ms:.0f} ms"
                )
            try:
                await self.update_metadata(remaining)
            except SaslAuthenticationError:
                raise
            except KafkaError:
                pass

    def _time_to_next_update(self, now: float) -> float:
        if self._need_update:
            expire = 0.0
        else:
            expire = self._last_success_ms + self.config["metadata.max.age.ms"] - now
        allow = self._last_attempt_ms + self._metadata_backoff.backoff(self._failed_updates) - now
        return max(expire, allow, 0.0)

    async def _metadata_loop(self) -> None:
        assert self._wakeup is not None
        while not self._closed:
            wait_ms = self._time_to_next_update(self.now_ms())
            if wait_ms > 0:
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await wait_for(self._wakeup.wait(), wait_ms / 1000)
                continue
            try:
                await self._update_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep refreshing whatever one attempt did
                log.exception("metadata refresh failed")
                self._failed_updates += 1

    async def _update_once(self) -> None:
        now = self.now_ms()
        self._last_attempt_ms = now
        self.recovery.on_metadata_request(now)
        node = self.least_loaded_node()
        if node is None:
            self._failed_updates += 1
            await self._maybe_rebootstrap(any_node_available=False)
            return
        topics = None if self._all_topics else set(self._topics)
        # An attempt may not outlast the rebootstrap trigger: a broker that accepts connections
        # and never answers would otherwise hold the decision back for a whole setup timeout.
        budget_ms = self.recovery.time_to_trigger_ms(now)
        try:
            async with asyncio.timeout(None if budget_ms == float("inf") else budget_ms / 1000):
                conn = await self.ready(node)
                version = conn.version_for(ApiKey.METADATA)
                request = metadata_request(version, topics, self.allow_auto_topic_creation)
                response = await conn.send(request, api_key=ApiKey.METADATA, version=version)
        except (ClientError, TimeoutError) as exc:
            log.debug("metadata request to node %s failed: %s", node, exc or "trigger elapsed")
            self._failed_updates += 1
            await self._maybe_rebootstrap(self.least_loaded_node() is not None)
            return
        update = apply_metadata_response(self.cluster, response, version, topics)
        self.recovery.on_metadata_response(self.now_ms(), update.brokers_seen, update.error)
        if update.error is not ErrorCode.NONE or not update.brokers_seen:
            log.warning(
                "metadata from node %s: error %s, %d brokers",
                node,
                update.error.name,
                update.brokers_seen,
            )
            self._failed_updates += 1
        else:
            self._failed_updates = 0
            self._last_success_ms = self.now_ms()
            self._need_update = any(
                code in _RETRY_TOPIC_ERRORS for code in update.topic_errors.values()
            ) or any(
                p.leader < 0 for t in update.cluster.topics.values() for p in t.partitions.values()
            )
            await self._set_cluster(update.cluster)
        await self._maybe_rebootstrap(self.least_loaded_node() is not None)

    async def _maybe_rebootstrap(self, any_node_available: bool) -> None:
        using_bootstrap = not self.cluster.brokers
        if self.recovery.should_rebootstrap(self.now_ms(), any_node_available, using_bootstrap):
            reason = getattr(self.recovery, "reason", None)
            await self.rebootstrap(reason.value if reason is not None else "")

    async def _set_cluster(self, cluster: ClusterMetadata) -> None:
        stale = []
        for node_id, conn in self._conns.items():
            broker = cluster.brokers.get(node_id)
            if broker is None or (broker.host, broker.port) != (conn.host, conn.port):
                stale.append(conn)
        old_id = self.cluster.cluster_id
        self.cluster = cluster
        if old_id is not None and cluster.cluster_id is not None and old_id != cluster.cluster_id:
            log.warning("now talking to cluster %s (was %s)", cluster.cluster_id, old_id)
            for listener in self._cluster_id_listeners:
                listener(old_id, cluster.cluster_id)
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(cluster)
        self._waiters.clear()
        self._notify()
        for conn in stale:
            await conn.close()
            if conn.node_id is not None and conn.node_id not in cluster.brokers:
                self.states.forget(conn.node_id)


def _consume_exception(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
