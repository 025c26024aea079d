"""The proxy's control channel: a Unix socket next to the proxy, one JSON line each way.

`epochlog proxy switch --listen HOST:PORT --upstream BOOTSTRAP` finds the running proxy by its
listen address: the socket is `control_path(HOST, PORT)` (in the temp directory) unless the proxy
was started with `--control PATH`. Requests: `{"op": "switch", "upstream": "h:p,..."}` and
`{"op": "status"}`; replies `{"ok": true, ...status}` or `{"ok": false, "error": "..."}`. A
switch to an upstream that does not answer is refused and changes nothing. Only local users who
may open the socket file can use it; it is created with mode 0600.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from typing import Any

from epochlog.aio import wait_for
from epochlog.proxy.server import ProxyError, ProxyServer


def control_path(host: str, port: int) -> str:
    safe = host.replace("/", "_").replace(":", "_")
    return os.path.join(tempfile.gettempdir(), f"epochlog-proxy-{safe}-{port}.sock")


async def serve_control(proxy: ProxyServer, path: str) -> asyncio.base_events.Server:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            reply = await _answer(proxy, line)
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_unix_server(handle, path)
    os.chmod(path, 0o600)
    return server


async def _answer(proxy: ProxyServer, line: bytes) -> dict[str, Any]:
    try:
        request = json.loads(line)
        op = request.get("op") if isinstance(request, dict) else None
        if op == "status":
            return {"ok": True, **proxy.status()}
        if op == "switch":
            upstream = request.get("upstream")
            if not isinstance(upstream, str):
                raise ProxyError("switch needs an upstream 'host:port,...'")
            return {"ok": True, **(await proxy.switch(upstream))}
        raise ProxyError(f"unknown op {op!r} (expected switch or status)")
    except (ProxyError, ValueError) as exc:
        return {"ok": False, "error": str(exc)}


async def send_control(
    path: str, request: dict[str, Any], timeout_s: float = 30.0
) -> dict[str, Any]:
    """Send one request to a running proxy; ProxyError if none listens at `path`."""
    try:
        reader, writer = await wait_for(asyncio.open_unix_connection(path), timeout_s)
    except (OSError, TimeoutError) as exc:
        raise ProxyError(f"no proxy control socket at {path}: {exc}") from None
    try:
        writer.write(json.dumps(request).encode() + b"\n")
        await writer.drain()
        line = await wait_for(reader.readline(), timeout_s)
    finally:
        writer.close()
    if not line:
        raise ProxyError(f"the proxy at {path} closed the control connection")
    reply: dict[str, Any] = json.loads(line)
    if not reply.get("ok"):
        raise ProxyError(str(reply.get("error", "the proxy refused the request")))
    return reply
