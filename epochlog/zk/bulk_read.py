"""Reading thousands of znodes at once: pipelined GetData on a short-lived session of its own.

kazoo's connection thread sends one request per turn of its loop (a select, a wake-up pipe read,
a send) and reads one reply per turn, so 10,000 pipelined `get_async` calls take about 3 s on
this machine, while the ZooKeeper server answers them in a fraction of that. A new controller
reads every partition state before it can act (10,000 znodes in the failover benchmark), so that
was most of its failover time. `get_many` instead opens a plain socket, starts a session, writes
the GetData requests in large chunks (a window of them in flight, so neither side's buffers
fill), parses the replies as they come, and closes the session. The wire format is kazoo's own
(`kazoo.protocol.serialization`); only the framing loop is here.

Consistency: the session's Connect carries the kazoo session's last seen zxid, and a ZooKeeper
server refuses a session whose client has seen a newer zxid than it has, so the reads are at
least as recent as everything the caller's own session has seen (ZooKeeper's guarantee across
server switches, used here across sessions). When no server accepts, or anything else fails,
`get_many` falls back to kazoo's pipelined `get_async` on the caller's session.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import time
from collections.abc import Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import EXCEPTIONS, NoNodeError
from kazoo.protocol.serialization import Close, Connect, GetData
from kazoo.protocol.states import ZnodeStat

log = logging.getLogger(__name__)

# Below this many paths kazoo's own pipelining is fast enough and a second session not worth it.
BULK_MIN_PATHS = 200
# Requests in flight at most. Past ZooKeeper's globalOutstandingLimit (1000) the server only
# stops reading the socket for a moment; the margin keeps it from ever waiting for requests.
WINDOW = 2000
SESSION_TIMEOUT_MS = 10_000
_FRAME = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">ii")
_REPLY_HEADER = struct.Struct(">iqi")
_NO_NODE = NoNodeError.code
_CLOSE_XID = 0x7FFFFFFF

Result = tuple[bytes, ZnodeStat] | None  # None: the znode does not exist


class BulkReadError(Exception):
    """The bulk session could not be used (no server accepted it, or it broke)."""


def get_many(
    client: KazooClient, paths: Sequence[str], timeout_s: float | None = None
) -> list[Result]:
    """The data and stat of each path, in order; None for a path with no znode. Other errors
    (e.g. no auth) raise kazoo's exception for them, as `client.get` would. The bulk session's
    deadline is `timeout_s`, by default 10 s plus 0.2 ms per path (a loaded machine reads
    100,000 states in several seconds; past the deadline the fallback would take far longer)."""
    if timeout_s is None:
        timeout_s = 10.0 + 0.0002 * len(paths)
    if len(paths) >= BULK_MIN_PATHS:
        try:
            return _bulk_get(client, paths, timeout_s)
        except (BulkReadError, OSError) as exc:
            log.warning(
                "bulk read of %d znodes failed (%s); reading through kazoo", len(paths), exc
            )
    return _kazoo_get(client, paths)


def _kazoo_get(client: KazooClient, paths: Sequence[str]) -> list[Result]:
    pending = [client.get_async(path) for path in paths]
    results: list[Result] = []
    for fetch in pending:
        try:
            results.append(fetch.get())
        except NoNodeError:
            results.append(None)
    return results


def _bulk_get(client: KazooClient, paths: Sequence[str], timeout_s: float) -> list[Result]:
    deadline = time.monotonic() + timeout_s
    refused: list[str] = []
    for host, port in client.hosts or ():
        try:
            sock = socket.create_connection(
                (host, port), timeout=max(deadline - time.monotonic(), 0.1)
            )
        except OSError as exc:
            refused.append(f"{host}:{port}: {exc}")
            continue
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not _connect_session(sock, client.last_zxid or 0, deadline):
                refused.append(f"{host}:{port}: behind this client's view")
                continue
            try:
                return _pipelined_get(sock, client.chroot or "", paths, deadline)
            finally:
                _close_session(sock)
        finally:
            sock.close()
    raise BulkReadError("no ZooKeeper server took a read session: " + "; ".join(refused))


def _connect_session(sock: socket.socket, last_zxid: int, deadline: float) -> bool:
    """Start a session; False when the server refuses it (it has not seen `last_zxid` yet)."""
    request = Connect(0, last_zxid, SESSION_TIMEOUT_MS, 0, b"\x00" * 16, False).serialize()
    sock.sendall(_FRAME.pack(len(request)) + request)
    reader = _FrameReader(sock, deadline)
    try:
        frame = reader.next_frame()
    except BulkReadError:
        return False  # a server behind last_zxid closes the connection without an answer
    answer, _ = Connect.deserialize(frame, 0)
    return bool(answer.time_out > 0)


def _close_session(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # else the session expires by itself
        sock.sendall(_request(_CLOSE_XID, Close.type, b""))


def _request(xid: int, op: int, body: bytes | bytearray) -> bytes:
    return _FRAME.pack(_REQUEST_HEADER.size + len(body)) + _REQUEST_HEADER.pack(xid, op) + body


def _pipelined_get(
    sock: socket.socket, chroot: str, paths: Sequence[str], deadline: float
) -> list[Result]:
    results: list[Result] = [None] * len(paths)
    reader = _FrameReader(sock, deadline)
    sent = answered = 0
    while answered < len(paths):
        if sent < len(paths) and sent - answered < WINDOW // 2:
            upto = min(len(paths), answered + WINDOW)
            chunk = b"".join(
                _request(xid + 1, GetData.type, GetData(chroot + paths[xid], False).serialize())
                for xid in range(sent, upto)
            )
            sock.sendall(chunk)
            sent = upto
        frame = reader.next_frame()
        xid, _zxid, err = _REPLY_HEADER.unpack_from(frame, 0)
        if xid <= 0:
            continue  # a watch event or ping: not ours (this session sets no watches)
        index = xid - 1
        if index != answered:
            raise BulkReadError(f"reply {xid} out of order (expected {answered + 1})")
        answered += 1
        if err == _NO_NODE:
            continue
        if err != 0:
            raise EXCEPTIONS[err]()
        results[index] = GetData.deserialize(frame, _REPLY_HEADER.size)
    return results


class _FrameReader:
    """Length-prefixed frames from a socket, read in large chunks."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.buffer = bytearray()
        self.pos = 0

    def next_frame(self) -> bytes:
        while True:
            available = len(self.buffer) - self.pos
            if available >= 4:
                (size,) = _FRAME.unpack_from(self.buffer, self.pos)
                if available >= 4 + size:
                    start = self.pos + 4
                    self.pos = start + size
                    return bytes(self.buffer[start : self.pos])
            if self.pos:
                del self.buffer[: self.pos]
                self.pos = 0
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise BulkReadError("timed out")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise BulkReadError("the server closed the connection")
            self.buffer += chunk
