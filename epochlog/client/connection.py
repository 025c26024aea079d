"""One asyncio TCP connection to one broker: framing, pipelining, ApiVersions negotiation.

How it works. `connect()` opens the socket and negotiates versions (below); after that `send()`
may be called concurrently from many tasks. Each request gets the next correlation id, its frame
(4-byte size prefix, header, body; see `epochlog.protocol.api`) is written at once, and the
caller awaits a future kept in `_pending` under that id. One reader task reads frames
(`size`, then `size` bytes) and completes the future whose id the response header names, so any
number of requests can be in flight. A request without a response (Produce with acks=0) is only
written.

A request that gets no answer within its timeout closes the connection, as Kafka's clients do:
responses come in order, so nothing behind it can arrive sooner. When the connection closes for
any reason (peer closed, timeout, bad frame, `close()`), every pending request fails with
`ConnectionFailedError` and `on_close` (if given) is called once.

ApiVersions. The first request is ApiVersions at the highest version we speak (v4). A broker that
does not serve it answers UNSUPPORTED_VERSION with a v0-layout body listing its own range for key
18; like librdkafka, we retry with min(our version - 1, that max), or v0 if the body does not say.
(librdkafka's mock writes that error body with a one-byte array count; that layout is read too.)
`version_for(api_key)` is then the highest version both sides support.

SASL. Given a `sasl` login, the connection authenticates right after ApiVersions
(`client.sasl`) and again before the session lifetime the broker gave ends (KIP-368); a failed
re-authentication closes it.
With an `ssl_context` the connection is TLS (the peer's host name checked if the context says
so); a handshake that fails is a `ConnectionFailedError` naming the reason.

This class holds no client policy (no retries, no metadata, no backoff): brokers use it too, for
replica fetchers and controller requests.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct
from collections.abc import Callable, Mapping
from typing import Any

from epochlog.aio import wait_for
from epochlog.client.errors import (
    ConnectionFailedError,
    IncompatibleBrokerError,
    RequestTimedOutError,
)
from epochlog.client.sasl import SaslLogin, SaslSessionKeeper
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, encode_request, response_header_version
from epochlog.protocol.codec import Message, decode_from
from epochlog.protocol.errors import ErrorCode, ProtocolError, UnsupportedVersionError
from epochlog.protocol.headers import ResponseHeader
from epochlog.protocol.varint import decode_uvarint

log = logging.getLogger(__name__)

CLIENT_SOFTWARE_NAME = "epochlog"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
_API_VERSION_ENTRY = struct.Struct(">hhh")
_MAX_FRAME = 100 * 1024 * 1024 + 1024  # refuse absurd sizes instead of allocating them


def our_versions(api_key: int) -> tuple[int, int]:
    """The version range this codebase speaks for an API (the codec's schemas)."""
    api = APIS.get(api_key)
    if api is None:
        raise IncompatibleBrokerError(api_key, None, (0, -1))
    return api.min_version, api.max_version


class BrokerConnection:
    """A connection to `host:port`; see the module docstring."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int | None = None,
        client_id: str | None = None,
        request_timeout_ms: int = 30000,
        on_close: Callable[[BrokerConnection, BaseException | None], None] | None = None,
        sasl: SaslLogin | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.sasl = sasl  # authenticate with this after ApiVersions (SASL listeners)
        self._sasl_session: SaslSessionKeeper | None = None
        self.port = port
        self.ssl_context = ssl_context  # TLS (security.protocol SSL or SASL_SSL) when given
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_version = -1  # the ApiVersions version the broker answered
        self._on_close = on_close
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self.close_reason: BaseException | None = None

    def __repr__(self) -> str:
        return f"BrokerConnection(node {self.node_id} at {self.host}:{self.port})"

    # ---------------------------------------------------------------- lifecycle

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._closed

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        """Requests written and not yet answered."""
        return len(self._pending)

    async def connect(self) -> None:
        """Open the socket and negotiate API versions. The caller bounds it with its own timeout
        (socket.connection.setup.timeout.ms); on any failure the connection is closed."""
        if self._writer is not None:
            raise RuntimeError(f"{self} is already connected")
        try:
            self._reader, self._writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.ssl_context
            )
        except OSError as exc:  # ssl.SSLError included: a failed handshake
            self._closed = True
            self.close_reason = exc
            raise ConnectionFailedError(
                f"cannot connect to {self.host}:{self.port}: {exc}"
            ) from exc
        self._read_task = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"read {self.host}:{self.port}"
        )
        try:
            await self._negotiate_api_versions()
            if self.sasl is not None:
                self._sasl_session = SaslSessionKeeper(
                    self.sasl,
                    self.send,
                    lambda: self.version_for(ApiKey.SASL_AUTHENTICATE),
                    self._shutdown,
                    repr(self),
                )
                await self._sasl_session.login()
        except BaseException as exc:
            self._shutdown(exc if isinstance(exc, Exception) else None)
            raise

    async def close(self) -> None:
        """Close the socket; pending requests fail with ConnectionFailedError."""
        self._shutdown(None)
        task = self._read_task
        if task is not None and task is not asyncio.current_task():
            await asyncio.gather(task, return_exceptions=True)

    def _shutdown(self, error: BaseException | None) -> None:
        if self._closed and self._writer is None:
            return
        first = not self._closed
        self._closed = True
        if first:
            self.close_reason = error
        if self._sasl_session is not None:
            self._sasl_session.cancel()
        if self._writer is not None:
            if error is None:
                self._writer.close()  # unsent requests still go out
            else:  # close() would wait for unsent bytes a broker may never read
                self._writer.transport.abort()
            self._writer = None
        if self._read_task is not None and self._read_task is not asyncio.current_task():
            self._read_task.cancel()
        pending, self._pending = self._pending, {}
        for _, _, fut in pending.values():
            if not fut.done():
                fut.set_exception(_as_connection_error(self, error))
        if first and self._on_close is not None:
            try:
                self._on_close(self, error)
            except Exception:  # a callback's bug must not break closing
                log.exception("on_close callback of %s failed", self)

    # ---------------------------------------------------------------- versions

    def version_for(self, api_key: int, max_version: int | None = None) -> int:
        """The highest version of `api_key` that both sides support (optionally capped)."""
        return negotiated_version(self.api_versions, api_key, max_version)

    def supports(self, api_key: int) -> bool:
        try:
            self.version_for(api_key)
        except IncompatibleBrokerError:
            return False
        return True

    async def _negotiate_api_versions(self) -> None:
        version = our_versions(ApiKey.API_VERSIONS)[1]
        while True:
            request = m.ApiVersionsRequest(
                client_software_name=CLIENT_SOFTWARE_NAME,
                client_software_version=CLIENT_SOFTWARE_VERSION,
            )
            frame = await self._request_raw(request, ApiKey.API_VERSIONS, version, None)
            body = memoryview(frame)[_CORRELATION.size :]
            if len(body) < 2:
                raise ConnectionFailedError(f"{self}: ApiVersions response of {len(body)} bytes")
            (error,) = struct.unpack_from(">h", body, 0)
            if error == ErrorCode.UNSUPPORTED_VERSION and version > 0:
                their_max = _advertised_api_versions_max(bytes(body))
                version = 0 if their_max is None else max(0, min(version - 1, their_max))
                continue
            if error != ErrorCode.NONE:
                raise ConnectionFailedError(
                    f"{self}: ApiVersions v{version} failed with {ErrorCode.of(error).name}"
                )
            response = m.ApiVersionsResponse.decode(body, version)
            self.api_versions = {
                k.api_key: (k.min_version, k.max_version) for k in response.api_keys
            }
            self.api_versions_version = version
            return

    # ---------------------------------------------------------------- requests

    async def send(
        self,
        request: Message,
        *,
        api_key: int | None = None,
        version: int | None = None,
        timeout_ms: int | None = None,
        expect_response: bool = True,
    ) -> Any:
        """Send `request` and return the decoded response body (None if `expect_response` is
        false). `api_key` defaults to the request's own; `version` to `version_for(api_key)`."""
        if api_key is None:
            api_key = request.SCHEMA.api_key
            assert api_key is not None, request
        if version is None:
            version = self.version_for(api_key)
        frame = await self._request_raw(request, api_key, version, timeout_ms, expect_response)
        if frame is None:
            return None
        try:
            body = decode_response_body(api_key, version, frame)
        except ProtocolError as exc:
            raise ConnectionFailedError(f"{self}: bad response to API {api_key}: {exc}") from exc
        return body

    async def _request_raw(
        self,
        request: Message,
        api_key: int,
        version: int,
        timeout_ms: int | None,
        expect_response: bool = True,
    ) -> bytes | None:
        if self._closed or self._writer is None:
            raise _as_connection_error(self, self.close_reason)
        correlation_id = next(self._ids) & 0x7FFFFFFF
        data = encode_request(api_key, version, correlation_id, self.client_id, request)
        fut: asyncio.Future[Any] | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            fut.add_done_callback(retrieve_result)  # a caller that gave up must not leave it unread
            self._pending[correlation_id] = (api_key, version, fut)
        writer = self._writer
        timeout = (self.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        try:
            writer.write(data)
            # A broker that stops reading leaves drain() waiting for socket buffer space: that
            # wait counts against the request's timeout too, or the request would hang forever.
            async with asyncio.timeout(timeout):
                await writer.drain()
        except TimeoutError:
            error = RequestTimedOutError(
                f"{self}: request to API {api_key} v{version} not written within "
                f"{timeout * 1000:.0f} ms (the broker is not reading)"
            )
            self._shutdown(error)
            raise error from None
        except (OSError, RuntimeError) as exc:
            self._shutdown(ConnectionFailedError(f"{self}: write failed: {exc}"))
            raise _as_connection_error(self, exc) from exc
        if fut is None:
            return None
        try:
            # Not shielded: a caller cancelled meanwhile cancels the future, and its response is
            # dropped when it comes; a shield would cost every response one more loop turn.
            return await wait_for(fut, timeout)
        except TimeoutError:
            error = RequestTimedOutError(
                f"{self}: no response to API {api_key} v{version} within {timeout * 1000:.0f} ms"
            )
            self._shutdown(error)
            raise error from None

    async def _read_loop(self) -> None:
        reader = self._reader
        assert reader is not None
        error: BaseException | None = None
        try:
            while True:
                size_bytes = await reader.readexactly(4)
                (size,) = _SIZE.unpack(size_bytes)
                if not _CORRELATION.size <= size <= _MAX_FRAME:
                    raise ConnectionFailedError(f"{self}: response frame of {size} bytes")
                frame = await reader.readexactly(size)
                (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
                entry = self._pending.pop(correlation_id, None)
                if entry is None:
                    raise ConnectionFailedError(
                        f"{self}: response with unknown correlation id {correlation_id}"
                    )
                fut = entry[2]
                if not fut.done():
                    fut.set_result(frame)
        except asyncio.CancelledError:
            return
        except asyncio.IncompleteReadError:
            error = ConnectionFailedError(f"{self}: closed by the broker")
        except (OSError, ConnectionFailedError) as exc:
            error = exc
        self._shutdown(error or ConnectionFailedError(f"{self}: reader stopped"))


def negotiated_version(
    api_versions: dict[int, tuple[int, int]], api_key: int, max_version: int | None = None
) -> int:
    """The highest version of `api_key` in both our range (optionally capped) and the broker's
    advertised `api_versions`; IncompatibleBrokerError when the ranges do not meet."""
    low, high = our_versions(api_key)
    if max_version is not None:
        high = min(high, max_version)
    theirs = api_versions.get(api_key)
    if theirs is None or max(low, theirs[0]) > min(high, theirs[1]):
        raise IncompatibleBrokerError(api_key, theirs, (low, high))
    return min(high, theirs[1])


def decode_response_body(api_key: int, version: int, frame: bytes | memoryview) -> Any:
    """Decode a response frame's body. Bytes after the body are ignored, as Kafka's Java client
    and librdkafka do (librdkafka's mock, for one, ends Metadata responses with a spare byte)."""
    api = APIS.get(api_key)
    if api is None or not api.supports(version):
        raise UnsupportedVersionError(api_key, version)
    _, pos = decode_from(ResponseHeader, frame, response_header_version(api_key, version), 0)
    body, _ = decode_from(api.response, frame, version, pos)
    return body


def retrieve_result(fut: asyncio.Future[Any]) -> None:
    """A done callback: marks the future's exception retrieved (a caller may have given up)."""
    if not fut.cancelled():
        fut.exception()


def _as_connection_error(conn: BrokerConnection, reason: BaseException | None) -> Exception:
    """A fresh error for one request that failed because the connection closed."""
    return ConnectionFailedError(f"{conn}: connection closed: {reason or 'by this side'}")


def _advertised_api_versions_max(body: bytes) -> int | None:
    """The broker's ApiVersions max from an UNSUPPORTED_VERSION body, if the body says.

    Kafka writes a v0 body (int32 array count); librdkafka's mock writes a one-byte count. Both
    are tried; None when neither parses to a list naming key 18.
    """
    for entries in (_entries_v0(body), _entries_short_count(body)):
        if entries is not None and ApiKey.API_VERSIONS in entries:
            return entries[ApiKey.API_VERSIONS][1]
    return None


def _entries_v0(body: bytes) -> Mapping[int, tuple[int, int]] | None:
    try:
        response = m.ApiVersionsResponse.decode(body, 0)
    except ProtocolError:
        try:  # v0 body followed by trailing fields (throttle time): decode the prefix only
            (count,) = struct.unpack_from(">i", body, 2)
            return _read_entries(body, 6, count)
        except struct.error:
            return None
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def _entries_short_count(body: bytes) -> Mapping[int, tuple[int, int]] | None:
    try:
        count, pos = decode_uvarint(body, 2)
    except (IndexError, ValueError, ProtocolError):
        return None
    for n in (count, count - 1):  # a plain count, or a compact (N + 1) one
        entries = _read_entries(body, pos, n)
        if entries:
            return entries
    return None


def _read_entries(body: bytes, pos: int, count: int) -> dict[int, tuple[int, int]] | None:
    if count < 0 or pos + count * _API_VERSION_ENTRY.size > len(body):
        return None
    out = {}
    for i in range(count):
        key, low, high = _API_VERSION_ENTRY.unpack_from(body, pos + i * _API_VERSION_ENTRY.size)
        out[key] = (low, high)
    return out
