"""A connection whose responses are read straight into their frames' memory, for bulk readers:
a broker's replica fetcher following its leader, the Spark source's fetcher.

Why not `BrokerConnection`: its stream reader copies every response byte about three times on
the way in (into the reader's buffer, out of it, then the codec's copy), and a follower of a
busy leader receives everything produced to it. py-spy on a broker of an RF 3 cluster taking
1 KiB records: the stream reader's `feed_data` and `readexactly` were 11% of the broker's CPU.
Here the socket is read with a `BufferedProtocol` into a `FrameReader` (large frames land in
pooled memory), each response is decoded as it completes (the codec's copy is the only one) and
the frame's memory goes back to the pool.

Same contract as `BrokerConnection` for what those readers use (`connect`, `send`,
`version_for`, `connected`, `close`): one socket, correlation ids, ApiVersions negotiated first
(at our highest version; a broker answering UNSUPPORTED_VERSION is asked again at v0, which every
broker serves), a request unanswered within its timeout closes the connection
(`RequestTimedOutError`), a closed connection fails every pending request with
`ConnectionFailedError`, a response that does not decode fails its request with
`ConnectionFailedError`; a `sasl` login authenticates after ApiVersions and again before
the session ends (`client.sasl`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import ssl
import struct
from typing import Any, cast

from epochlog.aio import wait_for
from epochlog.client.connection import (
    CLIENT_SOFTWARE_NAME,
    CLIENT_SOFTWARE_VERSION,
    decode_response_body,
    negotiated_version,
    our_versions,
    retrieve_result,
)
from epochlog.client.errors import (
    ConnectionFailedError,
    RequestTimedOutError,
)
from epochlog.client.sasl import SaslLogin, SaslSessionKeeper
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, encode_request
from epochlog.protocol.codec import Message
from epochlog.protocol.errors import ErrorCode, ProtocolError
from epochlog.protocol.framing import FramePool, FrameReader, FrameSizeError

MAX_RESPONSE_BYTES = 100 * 1024 * 1024 + 1024
_CORRELATION = struct.Struct(">i")
_ERROR_CODE = struct.Struct(">h")
_RAW = -1  # a pending request whose caller decodes the frame itself (ApiVersions)


class FramedConnection(asyncio.BufferedProtocol):
    """A connection to the broker at `host:port`; see the module docstring."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int | None = None,
        client_id: str | None = None,
        request_timeout_ms: int = 30000,
        sasl: SaslLogin | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.sasl = sasl  # authenticate with this after ApiVersions (SASL listeners)
        self._sasl_session: SaslSessionKeeper | None = None
        self.port = port
        self.ssl_context = ssl_context  # TLS when given
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.close_reason: BaseException | None = None
        # One request at a time per fetcher: two kept buffers cover a response and the next.
        self._reader = FrameReader(MAX_RESPONSE_BYTES, pool=FramePool(max_buffers=2))
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._ids = itertools.count(1)
        self._closed = False

    def __repr__(self) -> str:
        return f"FramedConnection(node {self.node_id} at {self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._transport is not None and not self._closed

    # ---------------------------------------------------------------- lifecycle

    async def connect(self) -> None:
        """Open the socket and negotiate API versions; the caller bounds it with a timeout. On
        any failure the connection is closed."""
        if self._transport is not None or self._closed:
            raise RuntimeError(f"{self} was connected before")
        loop = asyncio.get_running_loop()
        try:
            await loop.create_connection(lambda: self, self.host, self.port, ssl=self.ssl_context)
        except OSError as exc:
            self._closed = True
            self.close_reason = exc
            raise ConnectionFailedError(
                f"cannot connect to {self.host}:{self.port}: {exc}"
            ) from exc
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

    def _shutdown(self, error: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        self.close_reason = error
        if self._sasl_session is not None:
            self._sasl_session.cancel()
        transport = self._transport
        if transport is not None:
            if error is None:
                transport.close()
            else:  # close() would wait for unsent bytes a broker may never read
                transport.abort()
        pending, self._pending = self._pending, {}
        for _, _, fut in pending.values():
            if not fut.done():
                fut.set_exception(self._closed_error())

    def _closed_error(self) -> ConnectionFailedError:
        return ConnectionFailedError(
            f"{self}: connection closed: {self.close_reason or 'by this side'}"
        )

    # ---------------------------------------------------------------- versions

    def version_for(self, api_key: int, max_version: int | None = None) -> int:
        """The highest version of `api_key` that both sides support (optionally capped)."""
        return negotiated_version(self.api_versions, api_key, max_version)

    async def _negotiate_api_versions(self) -> None:
        for version in (our_versions(ApiKey.API_VERSIONS)[1], 0):
            request = m.ApiVersionsRequest(
                client_software_name=CLIENT_SOFTWARE_NAME,
                client_software_version=CLIENT_SOFTWARE_VERSION,
            )
            frame = await self._request(request, ApiKey.API_VERSIONS, version, None, raw=True)
            body = memoryview(frame)[_CORRELATION.size :]  # ApiVersions: response header v0
            if len(body) < _ERROR_CODE.size:
                raise ConnectionFailedError(f"{self}: ApiVersions response of {len(body)} bytes")
            (error,) = _ERROR_CODE.unpack_from(body, 0)
            if error == ErrorCode.UNSUPPORTED_VERSION and version > 0:
                continue
            if error != ErrorCode.NONE:
                raise ConnectionFailedError(
                    f"{self}: ApiVersions v{version} failed with {ErrorCode.of(error).name}"
                )
            try:
                response = m.ApiVersionsResponse.decode(body, version)
            except ProtocolError as exc:
                raise ConnectionFailedError(f"{self}: bad ApiVersions response: {exc}") from exc
            self.api_versions = {
                k.api_key: (k.min_version, k.max_version) for k in response.api_keys
            }
            return

    # ---------------------------------------------------------------- requests

    async def send(
        self,
        request: Message,
        *,
        api_key: int | None = None,
        version: int | None = None,
        timeout_ms: int | None = None,
    ) -> Any:
        """Send `request` and return the decoded response body."""
        if api_key is None:
            api_key = request.SCHEMA.api_key
            assert api_key is not None, request
        if version is None:
            version = self.version_for(api_key)
        return await self._request(request, api_key, version, timeout_ms)

    async def _request(
        self,
        request: Message,
        api_key: int,
        version: int,
        timeout_ms: int | None,
        raw: bool = False,
    ) -> Any:
        if self._closed or self._transport is None:
            raise self._closed_error()
        correlation_id = next(self._ids) & 0x7FFFFFFF
        data = encode_request(api_key, version, correlation_id, self.client_id, request)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(retrieve_result)  # a caller that gave up must not leave it unread
        self._pending[correlation_id] = (_RAW if raw else api_key, version, fut)
        self._transport.write(data)
        timeout = (self.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        try:
            return await wait_for(fut, timeout)
        except TimeoutError:
            error = RequestTimedOutError(
                f"{self}: no response to API {api_key} v{version} within {timeout * 1000:.0f} ms"
            )
            self._shutdown(error)
            raise error from None

    # ---------------------------------------------------------------- asyncio protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._closed:
            return
        try:
            self._reader.filled(nbytes)
        except FrameSizeError as exc:
            self._shutdown(ConnectionFailedError(f"{self}: response frame of {exc.size} bytes"))
            return
        frames = self._reader.frames
        while frames and not self._closed:
            frame = frames.popleft()
            try:
                self._deliver(frame)
            finally:
                self._reader.recycle(frame)

    def eof_received(self) -> bool:
        self._shutdown(ConnectionFailedError(f"{self}: closed by the broker"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._shutdown(ConnectionFailedError(f"{self}: closed by the broker: {exc or 'EOF'}"))

    def _deliver(self, frame: bytes | memoryview) -> None:
        if len(frame) < _CORRELATION.size:
            self._shutdown(ConnectionFailedError(f"{self}: response frame of {len(frame)} bytes"))
            return
        (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            self._shutdown(
                ConnectionFailedError(
                    f"{self}: response with unknown correlation id {correlation_id}"
                )
            )
            return
        api_key, version, fut = entry
        if fut.done():  # its caller gave up
            return
        if api_key == _RAW:
            fut.set_result(bytes(frame))
            return
        try:
            # Decoding copies what the body keeps, so the frame's memory can be reused.
            fut.set_result(decode_response_body(api_key, version, frame))
        except ProtocolError as exc:
            fut.set_exception(
                ConnectionFailedError(f"{self}: bad response to API {api_key}: {exc}")
            )
