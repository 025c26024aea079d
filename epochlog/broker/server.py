"""The broker's network server: Kafka framing over asyncio, one request at a time per client.

How it works. Each listener is an asyncio server; each accepted connection is a `Connection`
protocol. Bytes are framed as they arrive (int32 size, then that many bytes), read straight
into the frames' memory (`framing.FrameReader`). A size <= 0 or above socket.request.max.bytes
closes that connection at once without reading on (Kafka's InvalidReceiveException). Whole
frames go into the connection's queue; when the queue is long reading pauses, so a client
cannot make the broker buffer without bound.

One task per connection takes frames from the queue in order and handles each completely
before the next: decode, run the API's handler (which may wait on the purgatories: acks=all,
long-poll fetch), write the response, and wait until the transport's buffer is empty. That is
Kafka's muting of a channel while its request is in flight, so responses are in request order.
Slow requests await futures; nothing blocks the event loop.

Every API is dispatched the same way (`HANDLERS`). A handler returns either a coroutine (run
to its end before the next request of the connection) or an `asyncio.Future`: a request whose
ordered work is done already (a Produce's records appended, an OffsetCommit's records queued
for __consumer_offsets) and whose answer is deferred until they replicate. A deferred answer
does not hold the connection: the next request is taken at once; further deferred requests
wait alongside (up to MAX_WAITING_PRODUCES), anything else waits until they are answered, and a
writer task answers them in order. A client pipelining produces (librdkafka keeps many in
flight) then waits one replication round trip for many requests, not one each: about 3x the
acks=all throughput with replication factor 3 here, and async commits share replication rounds
the same way. Answers handled in one step of the loop are written together
(`_queue_response`).

Bad input closes only the connection it came on:
- a frame that does not decode (garbage, truncated body): close, logged (bytes after a body
  are ignored, as Kafka ignores them);
- an API key or version we do not serve: close, logged in one line naming the API, version,
  client id and the range we serve, as Kafka's SocketServer does; only ApiVersions is answered,
  with the v0 UNSUPPORTED_VERSION body that lists its own range (`protocol.api.refusal`).
  Answers to the requests before it on the connection go out first;
- a handler that fails unexpectedly: the API's error response with UNKNOWN_SERVER_ERROR;
- a handler that raises `CloseConnection` (a failed acks=0 produce): close.

Responses are encoded with holes where a body carries log data as file slices (a Fetch's
records), and those are written by `transmit` (sendfile); any other answer is queued as bytes.

TLS (a listener whose protocol is SSL or SASL_SSL; settings in `security.tls`): the connection
is plain TCP and the TLS layer is ours, sans-I/O (`tls_transport.TlsSession`): ciphertext
arrives in `buffer_updated`, the handshake advances with it, and plaintext is read from the
session straight into the frame reader's buffers. A handshake that fails (a plaintext client,
garbage, a missing or untrusted certificate where ssl.client.auth=required) or does not finish
within TLS_HANDSHAKE_TIMEOUT_S is one line in the log and that connection closed; no task exists
until the handshake is done. The connection's principal is then the client certificate's
subject mapped by ssl.principal.mapping.rules (ANONYMOUS without one), logged at DEBUG. Writes
go through `TlsTransport`, which encrypts; file slices cannot be sendfile'd into TLS, so they are
read in chunks and written through it (`SendMode.THROUGH`). Plaintext listeners are unchanged.

Client quotas (KIP-13, KIP-219; the math is `client_quotas`): a Produce's request size and a
consumer Fetch's response size are recorded against the client's byte rate when it is
answered. Over quota, the answer carries throttle_time_ms and the connection is muted for that
long: reading pauses and no further request is taken. A throttled Fetch is answered empty (its
bytes unrecorded), as Kafka does. Versions whose clients do not hold back by themselves
(Produce < 6, Fetch < 8) get their answer only after the throttle time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Sequence
from typing import Any, cast

from epochlog.broker.client_quotas import ANONYMOUS_USER, client_throttles_itself
from epochlog.broker.handlers import HANDLERS, BrokerServices, CloseConnection, ConnectionInfo
from epochlog.broker.handlers.errors import error_response
from epochlog.broker.sasl_gate import GateAnswer, SaslGate
from epochlog.broker.tls_transport import TlsSession, TlsTransport
from epochlog.broker.transmit import SendMode, SliceTruncatedError, send_segmented
from epochlog.metrics.request_stats import RequestStats
from epochlog.protocol.api import (
    ApiKey,
    Refusal,
    Request,
    decode_request,
    describe_unserved,
    encode_response_segments,
    peek_client_id,
    peek_request_header,
    refusal,
    unsupported_api_versions_response,
)
from epochlog.protocol.errors import DecodeError, ErrorCode, ProtocolError, UnsupportedVersionError
from epochlog.protocol.framing import FramePool, FrameReader, FrameSizeError
from epochlog.security.principal_mapping import NoMatchingRuleError, certificate_principal
from epochlog.security.tls import ListenerTls

log = logging.getLogger(__name__)

MAX_QUEUED_FRAMES = 32
# Deferred answers (appended produces, queued commits) of one connection waiting for replication
# at once (see `_defer_produce`).
MAX_WAITING_PRODUCES = 16
TLS_HANDSHAKE_TIMEOUT_S = 30.0
TLS_READ_BYTES = 64 * 1024  # ciphertext read at once from a TLS connection's socket


class KafkaServer:
    """Listens on the broker's listeners and serves every connection."""

    def __init__(
        self,
        services: BrokerServices,
        *,
        max_request_bytes: int,
        send_mode: SendMode = SendMode.DIRECT,
    ) -> None:
        self.services = services
        self.max_request_bytes = max_request_bytes
        self.send_mode = send_mode
        self.connections: set[Connection] = set()
        self.frame_pool = FramePool()  # large request frames' memory, shared by connections
        self._servers: list[asyncio.AbstractServer] = []
        # Kafka's RequestMetrics (metrics.port set): each answered request's phases are timed
        # (`metrics.request_stats` says how they map onto this server); None: nothing timed.
        self.request_stats: RequestStats | None = None

    async def listen(
        self,
        listener: str,
        host: str,
        port: int,
        *,
        security_protocol: str = "PLAINTEXT",
        tls: ListenerTls | None = None,
    ) -> int:
        """Start serving `listener` on host:port, over TLS when `tls` is given; returns the
        bound port (port 0: a free one)."""
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: Connection(self, listener, security_protocol, tls),
            host or None,
            port,
            reuse_address=True,
            backlog=512,
        )
        self._servers.append(server)
        # typeshed says a tuple; uvloop's Server holds a list (mypyc checks the declared type)
        sockets: Sequence[socket.socket] = cast(Any, server).sockets
        bound = sockets[0].getsockname()[1]
        log.info("listening for %s on %s:%d", listener, host or "*", bound)
        return bound

    async def stop(self) -> None:
        """Stop accepting, close every connection and wait for their tasks."""
        for server in self._servers:
            server.close()
        for connection in list(self.connections):
            connection.close("broker shutting down")
        tasks = [c.task for c in self.connections if c.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._servers.clear()


class Connection(asyncio.BufferedProtocol):
    """One client connection: framing, the in-order request loop, flow control."""

    def __init__(
        self,
        server: KafkaServer,
        listener: str,
        security_protocol: str = "PLAINTEXT",
        tls: ListenerTls | None = None,
    ) -> None:
        self.server = server
        self.listener = listener
        self.security_protocol = security_protocol
        self.tls = tls
        self._tls_session: TlsSession | None = None
        self._cipher_buffer: memoryview | None = None
        self._handshake_timer: asyncio.TimerHandle | None = None
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None
        self.info = ConnectionInfo(listener, "?", security_protocol=security_protocol)
        # The socket is read straight into the reader's buffers (`framing`): large frames are
        # not copied on their way in.
        self._reader = FrameReader(server.max_request_bytes, pool=server.frame_pool)
        self._frames = self._reader.frames
        self._frame_ready: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._write_paused = False
        self._read_paused = False
        self._eof = False
        self._closed = False
        # Responses not yet written: pipelined requests answered in one step of the request
        # loop go out in one write when the loop yields (`_flush_responses`), not a send each.
        self._unsent: list[bytes] = []
        # Produce requests (acks=all) whose records are appended and wait for replication, in
        # request order, and the task writing their answers in that order (`_defer_produce`).
        self._waiting_produces: deque[
            tuple[Request, asyncio.Future[Any], int, tuple[float, float, float]]
        ] = deque()
        self._produces_answered = asyncio.Event()
        self._produces_answered.set()
        self._produce_writer: asyncio.Task[None] | None = None
        # Client quotas: muted (no reading, no next request) until this loop time.
        self._throttled_until = 0.0
        self._throttle_paused = False
        self._unmute_timer: asyncio.TimerHandle | None = None
        # SASL listeners: the connection's gate (None on other listeners; see sasl_gate).
        self.sasl: SaslGate | None = None

    # ---------------------------------------------------------------- asyncio protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport, but behave as one.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.info = ConnectionInfo(
            self.listener,
            f"{peer[0]}:{peer[1]}" if peer else "?",
            security_protocol=self.security_protocol,
        )
        sasl_settings = self.server.services.sasl_listeners.get(self.listener)
        if sasl_settings is not None:
            self.sasl = SaslGate(sasl_settings, self.server.services.scram_credentials)
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Pause as soon as anything is buffered, resume when the buffer is empty: the request
        # loop waits for that before the next request, and sendfile needs an empty buffer.
        self.transport.set_write_buffer_limits(high=0)
        self.server.connections.add(self)
        loop = asyncio.get_running_loop()
        if self.tls is not None:
            # the request loop starts once the handshake is done (`_tls_established`)
            self._tls_session = TlsSession(self.tls.context)
            self._cipher_buffer = memoryview(bytearray(TLS_READ_BYTES))
            self._handshake_timer = loop.call_later(
                TLS_HANDSHAKE_TIMEOUT_S, self._handshake_failed, None
            )
            return
        self.task = loop.create_task(self._serve())

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._cipher_buffer is not None:
            return self._cipher_buffer
        return self._reader.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._closed:
            return
        if self._tls_session is not None:
            assert self._cipher_buffer is not None
            self._tls_received(self._tls_session, self._cipher_buffer[:nbytes])
            return
        self._plain_received(nbytes)

    def _plain_received(self, nbytes: int) -> None:
        """`nbytes` of the request stream landed in the frame reader's buffer."""
        try:
            self._reader.filled(nbytes)
        except FrameSizeError as exc:
            self.close(f"{exc} (socket.request.max.bytes)")
            return
        if self._frames:
            self._wake(self._frame_ready)
            if len(self._frames) >= MAX_QUEUED_FRAMES and not self._read_paused:
                self._read_paused = True
                assert self.transport is not None
                self.transport.pause_reading()

    def eof_received(self) -> bool:
        # Answer what has arrived, then close (a client may half-close after its requests).
        session = self._tls_session
        if session is not None and not session.established:
            self._handshake_failed(ConnectionResetError("closed by the client"))
            return False
        self._eof = True
        self._wake(self._frame_ready)
        return True

    # ---------------------------------------------------------------------------- TLS

    def _tls_received(self, session: TlsSession, ciphertext: memoryview) -> None:
        session.receive(ciphertext)
        try:
            if not session.established:
                done = session.handshake()
                self._send_tls_output(session)
                if not done:
                    return
                self._tls_established(session)
            self._read_tls(session)
        except (ssl.SSLError, OSError) as exc:
            if session.established:
                self.close(f"TLS error: {_one_line(exc)}")
            else:
                self._send_tls_output(session)  # the alert saying why, if any
                self._handshake_failed(exc)

    def _read_tls(self, session: TlsSession) -> None:
        """Decrypt what the session holds into the frame reader, while reading is not paused
        (resuming calls it again: plaintext may wait in the session, not in the socket)."""
        while not (self._closed or self._read_paused or self._throttle_paused):
            nbytes = session.read_into(self._reader.buffer())
            if nbytes == 0:
                break
            if nbytes < 0:  # close_notify: the client is done
                self.eof_received()
                break
            self._plain_received(nbytes)
        self._send_tls_output(session)

    def _send_tls_output(self, session: TlsSession) -> None:
        data = session.outgoing()
        transport = self.transport
        if data and transport is not None and not transport.is_closing():
            raw = transport.raw if isinstance(transport, TlsTransport) else transport
            raw.write(data)

    def _tls_established(self, session: TlsSession) -> None:
        assert self.tls is not None and self.transport is not None
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        try:
            principal = certificate_principal(session.peer_certificate(), self.tls.mapper)
        except NoMatchingRuleError as exc:
            self.close(f"TLS authentication failed: {exc}")
            return
        self.info = dataclasses.replace(self.info, principal=principal)
        log.debug(
            "TLS connection from %s on listener %s: principal %s (%s)",
            self.info.peer,
            self.listener,
            principal,
            session.ssl_object.version(),
        )
        self.transport = cast(asyncio.Transport, TlsTransport(self.transport, session))
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def _handshake_failed(self, exc: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        self.server.connections.discard(self)
        reason = (
            f"no handshake within {TLS_HANDSHAKE_TIMEOUT_S:.0f} s"
            if exc is None
            else _one_line(exc)
        )
        log.info(
            "TLS handshake with %s on listener %s failed, closing: %s",
            self.info.peer,
            self.listener,
            reason,
        )
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        self.server.connections.discard(self)
        self._wake(self._frame_ready)
        self._wake(self._drained)
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self._produce_writer is not None and not self._produce_writer.done():
            self._produce_writer.cancel()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake(self._drained)

    # --------------------------------------------------------------------- helpers

    @staticmethod
    def _wake(waiter: asyncio.Future[None] | None) -> None:
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _queue_response(self, data: bytes) -> None:
        if not self._unsent:
            asyncio.get_running_loop().call_soon(self._flush_responses)
        self._unsent.append(data)

    def _flush_responses(self) -> None:
        if not self._unsent:
            return
        data = self._unsent[0] if len(self._unsent) == 1 else b"".join(self._unsent)
        self._unsent.clear()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def close(self, reason: str, level: int = logging.INFO) -> None:
        if self._closed:
            return
        self._flush_responses()  # what was answered before the reason to close still goes out
        self._closed = True
        log.log(level, "closing connection from %s: %s", self.info.peer, reason)
        if self.transport is not None:
            self.transport.close()
        self._wake(self._frame_ready)
        self._wake(self._drained)

    async def wait_drained(self) -> None:
        """Until the transport has written everything it buffered."""
        while self._write_paused and not self._closed:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained
        if self._closed:
            raise ConnectionResetError("connection closed")

    async def _next_frame(self) -> bytes | memoryview | None:
        while not self._frames:
            if self._closed or self._eof:
                return None
            self._frame_ready = asyncio.get_running_loop().create_future()
            await self._frame_ready
        frame = self._frames.popleft()
        if self._read_paused and len(self._frames) < MAX_QUEUED_FRAMES // 2 and not self._closed:
            self._read_paused = False
            assert self.transport is not None
            if not self._throttle_paused:
                self.transport.resume_reading()
                if self._tls_session is not None:
                    self._read_tls(self._tls_session)
        return frame

    # ---------------------------------------------------------------- quota throttling

    def _mute(self, throttle_ms: int) -> None:
        """Read nothing and take no request for `throttle_ms` (KIP-219's channel muting)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if until <= self._throttled_until:
            return
        self._throttled_until = until
        if not self._throttle_paused and not self._closed and self.transport is not None:
            self._throttle_paused = True
            if not self._read_paused:
                self.transport.pause_reading()
        # One timer per connection, replaced when a mute extends it. (The loop may run a timer
        # up to its clock resolution early, so the timer itself ends the mute, no time check.)
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()
        self._unmute_timer = loop.call_at(until, self._unmute)

    def _unmute(self) -> None:
        self._unmute_timer = None
        if not self._throttle_paused:
            return
        self._throttle_paused = False
        if not self._read_paused and not self._closed and self.transport is not None:
            self.transport.resume_reading()
            if self._tls_session is not None:
                self._read_tls(self._tls_session)

    async def _wait_unmuted(self) -> None:
        loop = asyncio.get_running_loop()
        while (remaining := self._throttled_until - loop.time()) > 0 and not self._closed:
            await asyncio.sleep(remaining)

    def _record_quota(self, request: Request, body: Any, request_size: int) -> tuple[Any, int]:
        """Record the request against the client's byte-rate quota: (the body to send, the
        throttle time in ms). A throttled consumer fetch is answered empty."""
        quotas = self.server.services.client_quotas
        api_key, version = request.api_key, request.api_version
        if api_key == ApiKey.PRODUCE:
            if not quotas.produce.enabled:
                return body, 0
            client_id = request.header.client_id or ""
            now_ms = int(time.time() * 1000)
            return body, quotas.produce.record(ANONYMOUS_USER, client_id, request_size, now_ms)
        if api_key != ApiKey.FETCH or body is None or not quotas.fetch.enabled:
            return body, 0
        client_id = request.header.client_id or ""
        now_ms = int(time.time() * 1000)
        fetch = request.body
        replica_id = fetch.replica_state.replica_id if version >= 15 else fetch.replica_id
        if replica_id >= 0:
            return body, 0  # replication is not client traffic
        size = encode_response_segments(api_key, version, request.correlation_id, body).total_size
        throttle_ms = quotas.fetch.record(ANONYMOUS_USER, client_id, size, now_ms)
        if throttle_ms > 0:
            quotas.fetch.unrecord(ANONYMOUS_USER, client_id, size, now_ms)
            body = type(body)(error_code=ErrorCode.NONE, session_id=0, responses=[])
        return body, throttle_ms

    # ---------------------------------------------------------------- request loop

    async def _serve(self) -> None:
        try:
            while not self._closed:
                if self._throttled_until:  # muted once: wait out what is left of it
                    await self._wait_unmuted()
                if self._frames and not self._read_paused:
                    frame: bytes | memoryview | None = self._frames.popleft()  # no await
                else:
                    frame = await self._next_frame()
                if frame is None:
                    break
                await self._handle(frame)
            if self._eof and not self._closed:
                await self._produces_answered.wait()
                self.close("client closed its side", logging.DEBUG)
        except (asyncio.CancelledError, ConnectionError):
            pass
        except Exception:
            log.exception("connection from %s failed", self.info.peer)
            self.close("internal error")

    async def _handle(self, frame: bytes | memoryview) -> None:
        gate = self.sasl
        if gate is not None and gate.raw_tokens:
            await self._raw_sasl_token(gate, frame)
            return
        timed = self.server.request_stats is not None
        started = time.perf_counter() if timed else 0.0
        try:
            request = decode_request(frame)
        except UnsupportedVersionError:
            api_key, version, correlation_id = peek_request_header(frame)
            reason = describe_unserved(api_key, version, peek_client_id(frame))
            self._reader.recycle(frame)
            await self._produces_answered.wait()  # the answers before it go out first
            if refusal(api_key, version) is Refusal.ANSWER_UNSUPPORTED_VERSION:
                log.info("request from %s: %s", self.info.peer, reason)
                self._queue_response(unsupported_api_versions_response(correlation_id))
                await self.wait_drained()
            else:
                self.close(reason, logging.WARNING)
            return
        except DecodeError as exc:
            self._reader.recycle(frame)
            log.warning("bad request from %s: %s", self.info.peer, exc)
            await self._produces_answered.wait()
            self.close("malformed request")
            return
        # Decoding copied what the request keeps: the frame's memory can take the next one.
        request_size = len(frame)
        self._reader.recycle(frame)
        api_key, version = request.api_key, request.api_version
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s v%d from %s (%s)",
                ApiKey(api_key).name,
                version,
                self.info.peer,
                request.header.client_id,
            )
        if gate is not None and gate.intercepting:
            answer = gate.on_request(request)
            if answer is not None:
                await self._answer_gate(request, answer)
                return
        if len(self._waiting_produces) >= MAX_WAITING_PRODUCES:
            await self._produces_answered.wait()
        handling: Awaitable[Any]
        handler_started = time.perf_counter() if timed else 0.0
        try:
            handling = HANDLERS[api_key](self.server.services, request, self.info)
        except Exception as failure:  # answered UNKNOWN_SERVER_ERROR by _answer, in order
            failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            failed.set_exception(failure)
            handling = failed
        # (taken from the queue, handler called, handler returned): for the request metrics
        clock = (started, handler_started, time.perf_counter() if timed else 0.0)
        if isinstance(handling, asyncio.Future):
            # Begun: its ordered work is done, its answer may wait for replication.
            if self._waiting_produces or not handling.done():
                self._defer_produce(request, handling, request_size, clock)
                return
            await self._answer(request, handling, request_size, clock)
            return
        if self._waiting_produces:
            # Anything else runs after the deferred answers before it, as it would if the
            # connection took one request at a time.
            try:
                await self._produces_answered.wait()
            except BaseException:
                if asyncio.iscoroutine(handling):
                    handling.close()  # never started: nothing to clean up, no warning
                raise
        await self._answer(request, handling, request_size, clock)

    async def _answer_gate(self, request: Request, answer: GateAnswer) -> None:
        """Send the SASL gate's answer after the answers before it; take its principal; close
        if it says so (a failed authentication: after its answer)."""
        await self._produces_answered.wait()
        if answer.principal is not None:
            self.info = dataclasses.replace(self.info, principal=answer.principal)
            log.debug("%s authenticated as %s", self.info.peer, answer.principal)
        if answer.body is not None:
            frame = encode_response_segments(
                request.api_key, request.api_version, request.correlation_id, answer.body
            )
            self._queue_response(bytes(frame))
        if answer.close is not None:
            self.close(answer.close)

    async def _raw_sasl_token(self, gate: SaslGate, frame: bytes | memoryview) -> None:
        """A bare SASL token (after a v0 SaslHandshake), answered bare."""
        token = bytes(frame)
        self._reader.recycle(frame)
        await self._produces_answered.wait()
        answer_token, answer = gate.on_raw_token(token)
        if answer.principal is not None:
            self.info = dataclasses.replace(self.info, principal=answer.principal)
        if answer_token is not None:
            self._queue_response(len(answer_token).to_bytes(4, "big") + answer_token)
        if answer.close is not None:
            self.close(answer.close)

    def _defer_produce(
        self,
        request: Request,
        pending: asyncio.Future[Any],
        request_size: int,
        clock: tuple[float, float, float],
    ) -> None:
        """Take the next request while this produce waits for replication (its records are
        appended already, so appends stay in request order); answers go out in order."""
        self._waiting_produces.append((request, pending, request_size, clock))
        self._produces_answered.clear()
        if self._produce_writer is None or self._produce_writer.done():
            self._produce_writer = asyncio.get_running_loop().create_task(
                self._answer_waiting_produces()
            )

    async def _answer_waiting_produces(self) -> None:
        try:
            while self._waiting_produces and not self._closed:
                request, pending, request_size, clock = self._waiting_produces[0]
                await self._answer(request, pending, request_size, clock)
                self._waiting_produces.popleft()
        except ConnectionError:
            pass  # the connection went away: nobody to answer
        finally:
            self._waiting_produces.clear()
            self._produces_answered.set()

    async def _answer(
        self,
        request: Request,
        handling: Awaitable[Any],
        request_size: int = 0,
        clock: tuple[float, float, float] = (0.0, 0.0, 0.0),
    ) -> None:
        """Wait for a request's handling and write its answer (throttled by client quotas)."""
        api_key, version = request.api_key, request.api_version
        if not isinstance(handling, asyncio.Future) and self.server.request_stats is not None:
            # A coroutine starts only now (after any wait behind deferred answers): its whole
            # run is local time.
            clock = (clock[0], time.perf_counter(), 0.0)
        throttled_ms = 0
        try:
            body: Any = await handling
        except CloseConnection as exc:
            self.close(str(exc))
            return
        except (asyncio.CancelledError, ConnectionError):
            raise
        except Exception:
            log.exception("%s v%d from %s failed", ApiKey(api_key).name, version, self.info.peer)
            body = error_response(api_key, version, request.body, ErrorCode.UNKNOWN_SERVER_ERROR)
        if self._closed:
            return
        stats = self.server.request_stats
        answered = time.perf_counter() if stats is not None else 0.0
        if api_key in (ApiKey.PRODUCE, ApiKey.FETCH):
            body, throttle_ms = self._record_quota(request, body, request_size)
            if throttle_ms > 0:
                log.debug(
                    "throttling %s (%s v%d) for %d ms",
                    self.info.peer,
                    ApiKey(api_key).name,
                    version,
                    throttle_ms,
                )
                self._mute(throttle_ms)
                if body is not None:
                    body.throttle_time_ms = max(body.throttle_time_ms, throttle_ms)
                if not client_throttles_itself(api_key, version):
                    await asyncio.sleep(throttle_ms / 1000)  # the answer is the throttle
                    throttled_ms = throttle_ms
        if body is None or self._closed:
            if stats is not None and body is None:  # acks=0: handled, nothing to send
                self._record(stats, request, clock, answered, throttled_ms)
            return
        assert self.transport is not None
        try:
            frame = encode_response_segments(api_key, version, request.correlation_id, body)
            if frame.slices:
                self._flush_responses()  # earlier answers first: the transport writes in order
                # TLS: the bytes must pass through the transport to be encrypted
                mode = self.server.send_mode if self.tls is None else SendMode.THROUGH
                await send_segmented(self.transport, frame, self.wait_drained, mode)
            else:
                self._queue_response(bytes(frame))
        except SliceTruncatedError as truncated:
            log.warning("fetch response to %s cut short: %s", self.info.peer, truncated)
            self.close("log truncated during a fetch response")
            return
        except ProtocolError:
            log.exception("cannot encode the %s v%d response", ApiKey(api_key).name, version)
            self.close("response encoding failed")
            return
        if self._write_paused or self._closed:
            await self.wait_drained()
        if stats is not None:
            self._record(stats, request, clock, answered, throttled_ms)

    @staticmethod
    def _record(
        stats: RequestStats,
        request: Request,
        clock: tuple[float, float, float],
        answered: float,
        throttled_ms: int,
    ) -> None:
        """Kafka's RequestMetrics for one answered request (see `metrics.request_stats`): a
        deferred answer's wait is remote time; any other handler's whole run is local time
        (its clock has no `begun`: 0)."""
        started, handler_started, begun = clock
        if begun == 0.0:
            begun = answered
        stats.record(
            request.api_key,
            request.api_version,
            started,
            handler_started,
            begun,
            answered,
            float(throttled_ms),
            time.perf_counter(),
        )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not text.startswith(type(exc).__name__) else text
