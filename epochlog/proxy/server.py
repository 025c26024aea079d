"""The proxy's I/O shell: listeners, connection pairs, upstream tracking, switches.

Layout: one listen port per upstream broker. `--listen HOST:PORT` is the bootstrap port; a
connection there is paired with any reachable upstream broker. Every node id the upstream's
metadata names gets a listener of its own on the same host (an ephemeral port chosen the first
time the node id appears and kept for the proxy's life, so a node id keeps its address across
switches); a connection there is paired with that broker. Metadata, DescribeCluster and
FindCoordinator responses are rewritten to list those listeners (`policy`), so clients see only
the proxy (group coordinators included), and requests reach the partition leaders and
coordinators they were meant for without the proxy ever parsing partitions. (The alternative,
one port for everything and routing each request by partition leader, would have to split and
merge Produce and Fetch requests; a port per broker needs none of that.)

Each client connection is paired with one upstream connection: requests are read whole (size
prefix, header), decided on by `policy.decide_request`, and forwarded byte for byte; responses
come back in request order (Kafka's rule per connection), so each is matched to the oldest
pending request and only the rewritten APIs are decoded. Answers the proxy makes itself
(REBOOTSTRAP_REQUIRED) join the same queue, so responses stay in order.

Upstream tracking: every `metadata_interval_ms` the proxy asks the upstream for its brokers
(Metadata without topics) to learn addresses and the cluster id. A new cluster id starts a new
generation, as does `switch(bootstrap)` (the control channel's `switch`), which first checks that
the new upstream answers, and changes nothing if it does not.

TLS, on either side and independently (`epochlog proxy --listen SSL://...`): with a
`listener_ssl` context every listen port (bootstrap and per node) serves TLS; with upstream
settings whose `security.protocol` is SSL (`upstream.UpstreamSecurity`) every upstream
connection, the probes' and the sessions', is TLS. The proxy decrypts and re-encrypts: it reads
the request headers either way. The proxy runs asyncio's own loop with stream protocols, so
`start_server(ssl=...)` does here what the broker needed its own TLS layer for (uvloop with a
BufferedProtocol); as in asyncio generally, a failed handshake closes that connection without a
log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from epochlog.aio import wait_for
from epochlog.client.config import parse_host_port
from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import ClientError, ConfigError
from epochlog.client.metadata import metadata_request
from epochlog.protocol.api import (
    ApiKey,
    decode_response,
    describe_unserved,
    encode_response,
    peek_client_id,
    peek_request_header,
    request_header_version,
)
from epochlog.protocol.codec import decode_from
from epochlog.protocol.headers import RequestHeader
from epochlog.protocol.varint import decode_uvarint
from epochlog.proxy.policy import (
    REWRITTEN_APIS,
    Action,
    ConnectionView,
    close_at_switch,
    decide_request,
    find_coordinator_nodes,
    rebootstrap_required_response,
    rewrite_describe_cluster,
    rewrite_find_coordinator,
    rewrite_metadata,
)
from epochlog.proxy.upstream import PLAINTEXT, UpstreamSecurity

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_MAX_FRAME = 100 * 1024 * 1024 + 1024
UPSTREAM_CONNECT_TIMEOUT_S = 10.0


class ProxyError(Exception):
    """A proxy operation that could not be done (bad upstream, upstream unreachable)."""


def parse_servers(text: str, what: str = "--upstream") -> list[tuple[str, int]]:
    """`host:port,host:port` into pairs; ProxyError naming `what` if malformed or empty."""
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise ProxyError(f"{what}: no servers given")
    try:
        return [parse_host_port(what, item) for item in items]
    except ConfigError as exc:
        raise ProxyError(str(exc)) from None


@dataclass
class UpstreamView:
    """One upstream cluster as the proxy knows it."""

    bootstrap: list[tuple[str, int]]
    cluster_id: str | None
    brokers: dict[int, tuple[str, int]]


async def probe_upstream(
    servers: Sequence[tuple[str, int]],
    timeout_s: float = UPSTREAM_CONNECT_TIMEOUT_S,
    security: UpstreamSecurity = PLAINTEXT,
) -> tuple[str | None, dict[int, tuple[str, int]]]:
    """(cluster id, brokers) from the first of `servers` that answers Metadata."""
    errors = []
    for host, port in servers:
        # the proxy's own login (sessions carry their clients' own: `upstream` docstring)
        conn = BrokerConnection(
            host,
            port,
            client_id=security.client_id,
            ssl_context=security.ssl_context,
            sasl=security.login,
        )
        try:
            await wait_for(conn.connect(), timeout_s)
            version = conn.version_for(ApiKey.METADATA)
            response = await conn.send(
                metadata_request(version, []), version=version, timeout_ms=int(timeout_s * 1000)
            )
        except (ClientError, OSError, TimeoutError) as exc:
            errors.append(f"{host}:{port}: {exc or 'timed out'}")
            continue
        finally:
            await conn.close()
        brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        if brokers:
            return (response.cluster_id if version >= 2 else None), brokers
        errors.append(f"{host}:{port}: metadata listed no brokers")
    raise ProxyError("no upstream server answered: " + "; ".join(errors))


class Session:
    """One client connection and its upstream connection."""

    _ids = itertools.count(1)

    def __init__(
        self,
        proxy: ProxyServer,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        generation: int,
    ) -> None:
        self.id = next(self._ids)
        self.proxy = proxy
        self.view = ConnectionView(generation)
        self._reader = reader
        self._writer = writer
        self._up_writer: asyncio.StreamWriter | None = None
        self._pending: deque[tuple[int, int, int, asyncio.Future[bytes]]] = deque()
        self._replies: asyncio.Queue[asyncio.Future[bytes] | None] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self.closed = False

    async def run(self, targets: Sequence[tuple[str, int]]) -> None:
        up_reader: asyncio.StreamReader | None = None
        for host, port in targets:
            try:
                up_reader, self._up_writer = await wait_for(
                    asyncio.open_connection(
                        host, port, ssl=self.proxy.upstream_security.ssl_context
                    ),
                    UPSTREAM_CONNECT_TIMEOUT_S,
                )
                break
            except (OSError, TimeoutError) as exc:  # ssl.SSLError included
                log.info("session %d: upstream %s:%d unreachable: %s", self.id, host, port, exc)
        if up_reader is None:
            self.close()
            return
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._client_to_upstream(), name=f"proxy {self.id} requests"),
            loop.create_task(self._upstream_to_client(up_reader), name=f"proxy {self.id} up"),
            loop.create_task(self._write_replies(), name=f"proxy {self.id} replies"),
        ]
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._writer.close()
        if self._up_writer is not None:
            self._up_writer.close()
        self.proxy.sessions.discard(self)

    async def _client_to_upstream(self) -> None:
        try:
            while True:
                frame = await _read_frame(self._reader)
                api_key, version, correlation_id = peek_request_header(frame)
                action = decide_request(self.view, self.proxy.generation, api_key, version)
                if action is Action.REFUSE:
                    reason = describe_unserved(api_key, version, peek_client_id(frame))
                    log.warning("session %d: closing: %s", self.id, reason)
                    break
                if action is Action.CLOSE:
                    log.info(
                        "session %d: closing a connection of generation %d (API %d v%d)",
                        self.id,
                        self.view.generation,
                        api_key,
                        version,
                    )
                    break
                reply: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
                if action is Action.ANSWER_REBOOTSTRAP:
                    reply.set_result(
                        encode_response(
                            api_key, version, correlation_id, rebootstrap_required_response()
                        )
                    )
                    self._replies.put_nowait(reply)
                    continue
                if api_key != ApiKey.PRODUCE or produce_expects_response(frame, version):
                    self._pending.append((correlation_id, api_key, version, reply))
                    self._replies.put_nowait(reply)
                assert self._up_writer is not None
                self._up_writer.write(_SIZE.pack(len(frame)) + frame)
                await self._up_writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            self._replies.put_nowait(None)

    async def _upstream_to_client(self, up_reader: asyncio.StreamReader) -> None:
        try:
            while True:
                frame = await _read_frame(up_reader)
                (correlation_id,) = struct.unpack_from(">i", frame, 0)
                if not self._pending or self._pending[0][0] != correlation_id:
                    log.warning("session %d: upstream answered out of order", self.id)
                    break
                _, api_key, version, reply = self._pending.popleft()
                if api_key in REWRITTEN_APIS:
                    data = await self.proxy.rewrite(self, api_key, version, frame)
                else:
                    data = _SIZE.pack(len(frame)) + frame
                if not reply.done():
                    reply.set_result(data)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            for *_, reply in self._pending:
                if not reply.done():
                    reply.cancel()
            self._replies.put_nowait(None)

    async def _write_replies(self) -> None:
        try:
            while True:
                reply = await self._replies.get()
                if reply is None:
                    break
                try:
                    data = await reply
                except asyncio.CancelledError:
                    if self.closed or reply.cancelled():
                        break
                    raise
                self._writer.write(data)
                await self._writer.drain()
        except ConnectionError:
            pass
        finally:
            self.close()


class ProxyServer:
    """A Kafka-protocol-aware proxy in front of one upstream cluster at a time."""

    def __init__(
        self,
        listen: tuple[str, int],
        upstream: Sequence[tuple[str, int]],
        *,
        advertised_host: str | None = None,
        metadata_interval_ms: int = 5000,
        upstream_security: UpstreamSecurity = PLAINTEXT,
        listener_ssl: ssl.SSLContext | None = None,
    ) -> None:
        self.listen_host, self.listen_port = listen
        self.upstream_security = upstream_security
        # TLS for clients on every listen port (bootstrap and per node) when given
        self.listener_ssl = listener_ssl
        self.advertised_host = advertised_host or self.listen_host
        self.metadata_interval_ms = metadata_interval_ms
        self.upstream = UpstreamView(list(upstream), None, {})
        self.generation = 1
        self.node_ports: dict[int, int] = {}
        self.sessions: set[Session] = set()
        self.switches = 0
        self._servers: list[asyncio.base_events.Server] = []
        self._node_servers: dict[int, asyncio.base_events.Server] = {}
        self._listener_lock = asyncio.Lock()
        self._poller: asyncio.Task[None] | None = None
        self._rotation = itertools.count()

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> ProxyServer:
        server = await asyncio.start_server(
            self._accept_bootstrap, self.listen_host, self.listen_port, ssl=self.listener_ssl
        )
        self.listen_port = server.sockets[0].getsockname()[1]
        self._servers.append(server)
        with contextlib.suppress(ProxyError):
            await self.refresh_upstream()
        self._poller = asyncio.get_running_loop().create_task(self._poll(), name="proxy poller")
        log.info(
            "proxy on %s:%d (%s) for %s (%s)",
            self.listen_host,
            self.listen_port,
            self.listener_security,
            self.upstream_text,
            self.upstream_security.security_protocol,
        )
        return self

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        for server in [*self._servers, *self._node_servers.values()]:
            server.close()
        for session in list(self.sessions):
            session.close()
        for server in [*self._servers, *self._node_servers.values()]:
            with contextlib.suppress(Exception):
                await wait_for(server.wait_closed(), 2)

    @property
    def upstream_text(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.upstream.bootstrap)

    @property
    def listener_security(self) -> str:
        return "SSL" if self.listener_ssl is not None else "PLAINTEXT"

    def status(self) -> dict[str, Any]:
        return {
            "listen": f"{self.listen_host}:{self.listen_port}",
            "listener_security_protocol": self.listener_security,
            "upstream": self.upstream_text,
            "upstream_security_protocol": self.upstream_security.security_protocol,
            "cluster_id": self.upstream.cluster_id,
            "generation": self.generation,
            "switches": self.switches,
            "node_ports": {str(n): p for n, p in sorted(self.node_ports.items())},
            "upstream_brokers": {
                str(n): f"{h}:{p}" for n, (h, p) in sorted(self.upstream.brokers.items())
            },
            "connections": len(self.sessions),
            "stale_connections": sum(
                1 for s in self.sessions if s.view.generation != self.generation
            ),
        }

    # ---------------------------------------------------------------- upstream

    async def refresh_upstream(self) -> None:
        """Ask the upstream for its brokers and cluster id; a new cluster id is a switch."""
        candidates = list(
            dict.fromkeys([*self.upstream.brokers.values(), *self.upstream.bootstrap])
        )
        cluster_id, brokers = await probe_upstream(candidates, security=self.upstream_security)
        await self._ensure_listeners(brokers)
        previous = self.upstream.cluster_id
        self.upstream.brokers = brokers
        self.upstream.cluster_id = cluster_id
        if previous is not None and cluster_id is not None and cluster_id != previous:
            log.warning("upstream cluster id changed from %s to %s", previous, cluster_id)
            self._new_generation()

    async def switch(self, upstream: str) -> dict[str, Any]:
        """Front the cluster at `upstream` from now on (after checking that it answers)."""
        servers = parse_servers(upstream)
        cluster_id, brokers = await probe_upstream(servers, security=self.upstream_security)
        await self._ensure_listeners(brokers)
        self.upstream = UpstreamView(servers, cluster_id, brokers)
        self._new_generation()
        log.warning("switched upstream to %s (cluster %s)", upstream, cluster_id)
        return self.status()

    def _new_generation(self) -> None:
        self.generation += 1
        self.switches += 1
        for session in list(self.sessions):
            if session.view.generation != self.generation and close_at_switch(session.view):
                session.close()

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.metadata_interval_ms / 1000)
            try:
                await self.refresh_upstream()
            except ProxyError as exc:
                log.info("upstream refresh failed: %s", exc)
            except Exception:
                log.exception("upstream refresh failed")

    # ---------------------------------------------------------------- listeners

    async def _ensure_listeners(self, node_ids: Any) -> None:
        async with self._listener_lock:
            for node_id in node_ids:
                if node_id in self._node_servers:
                    continue
                server = await asyncio.start_server(
                    lambda r, w, n=node_id: self._accept_node(n, r, w),
                    self.listen_host,
                    0,
                    ssl=self.listener_ssl,
                )
                self._node_servers[node_id] = server
                self.node_ports[node_id] = server.sockets[0].getsockname()[1]
                log.info("node %d at %s:%d", node_id, self.listen_host, self.node_ports[node_id])

    def advertise(self, node_id: int) -> tuple[str, int]:
        return self.advertised_host, self.node_ports[node_id]

    async def _accept_bootstrap(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        brokers = list(self.upstream.brokers.values())
        if brokers:
            start = next(self._rotation) % len(brokers)
            brokers = brokers[start:] + brokers[:start]
        await self._serve(reader, writer, brokers + self.upstream.bootstrap)

    async def _accept_node(
        self, node_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        address = self.upstream.brokers.get(node_id)
        if address is None:
            log.info("node %d is not in the current upstream; closing", node_id)
            writer.close()
            return
        await self._serve(reader, writer, [address])

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        targets: list[tuple[str, int]],
    ) -> None:
        session = Session(self, reader, writer, self.generation)
        self.sessions.add(session)
        try:
            await session.run(targets)
        finally:
            session.close()

    async def rewrite(self, session: Session, api_key: int, version: int, frame: bytes) -> bytes:
        """A Metadata, DescribeCluster or FindCoordinator response frame with the proxy's
        addresses."""
        correlation_id, body = decode_response(api_key, version, frame)
        if api_key == ApiKey.FIND_COORDINATOR:
            await self._ensure_listeners(find_coordinator_nodes(body, version))
            named = rewrite_find_coordinator(body, version, self.advertise)
            if session.view.generation == self.generation:
                for node_id, address in named.items():  # a coordinator newer than our metadata
                    self.upstream.brokers.setdefault(node_id, address)
            return encode_response(api_key, version, correlation_id, body)
        if api_key == ApiKey.METADATA:
            node_ids = [b.node_id for b in body.brokers]
        else:
            node_ids = [b.broker_id for b in body.brokers]
        await self._ensure_listeners(node_ids)
        if api_key == ApiKey.METADATA:
            upstream = rewrite_metadata(body, self.advertise)
        else:
            upstream = rewrite_describe_cluster(body, self.advertise)
        if session.view.generation == self.generation and upstream:
            self.upstream.brokers = upstream  # responses list every live broker
        return encode_response(api_key, version, correlation_id, body)


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    if not 8 <= size <= _MAX_FRAME:
        raise ValueError(f"frame of {size} bytes")
    return await reader.readexactly(size)


def produce_expects_response(frame: bytes, version: int) -> bool:
    """False for a Produce request with acks=0 (the broker sends nothing back)."""
    _, pos = decode_from(RequestHeader, frame, request_header_version(ApiKey.PRODUCE, version), 0)
    if version >= 9:  # compact nullable string: length + 1 as an unsigned varint
        length, pos = decode_uvarint(frame, pos)
        pos += max(length - 1, 0)
    else:
        (length,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + max(length, 0)
    (acks,) = struct.unpack_from(">h", frame, pos)
    return acks != 0
