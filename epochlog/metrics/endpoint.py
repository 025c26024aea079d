"""The Prometheus endpoint: `GET /metrics` over HTTP/1.1, served on the broker's event loop.

Served by the loop itself (asyncio streams), not by prometheus_client's server thread: a scrape
then reads the broker's partitions, groups and controller between two steps of the loop, never
while they change, and takes no lock on the hot path. One request per connection (answered with
`Connection: close`); anything but GET of /metrics (or /) is answered 404 or 405.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 16384


class MetricsEndpoint:
    """Serves one registry; `start` returns the bound port (port 0: a free one)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._server: asyncio.AbstractServer | None = None

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(
            self._serve, host or None, port, reuse_address=True, limit=MAX_HEADER_BYTES
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            status, content_type, body = self.answer(request_line)
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # a client that sent no complete request head: nothing to answer
        except ConnectionError:
            pass
        except Exception:
            log.exception("metrics scrape failed")
        finally:
            writer.close()

    def answer(self, request_line: str) -> tuple[str, str, bytes]:
        """(status, content type, body) for an HTTP request line."""
        parts = request_line.split()
        if len(parts) != 3:
            return "400 Bad Request", "text/plain", b"malformed request line\n"
        method, target, _ = parts
        if target.split("?", 1)[0] not in ("/metrics", "/"):
            return "404 Not Found", "text/plain", b"metrics are at /metrics\n"
        if method != "GET":
            return "405 Method Not Allowed", "text/plain", b"only GET\n"
        body = generate_latest(self.registry)
        return "200 OK", CONTENT_TYPE_LATEST, body
