"""Writing a response whose records are file slices: bytes through the transport, log data with
sendfile.

A Fetch response is encoded as a `SegmentedBuffer`: the response bytes with holes where the
records go, and (position, FileSlice) pairs for the holes. `send_segmented` writes the bytes
between holes through the transport and each slice with `send_file_slice`.

How a slice is sent (the default, `SendMode.DIRECT`): when the transport has nothing buffered,
`os.sendfile` moves bytes from the segment file straight into the socket, as many as the socket
takes. When the socket is full (EAGAIN) a chunk of the slice is read and handed to the transport,
which writes it as the socket drains; once the transport's buffer is empty again, sendfile takes
over. Data never passes through Python while the client keeps up, and ordering is kept because
sendfile only ever runs with an empty transport buffer. Writing to the socket behind the
transport is safe for that reason, on uvloop as on the standard loop.

Small responses (up to `SMALL_RESPONSE_BYTES` in all) skip all this: their slices are read with
pread and the frame goes out in one write.

Why not `loop.sendfile`: uvloop does not implement it at all (`AbstractEventLoop.sendfile`
raises NotImplementedError), and on the standard loop every call drains the transport, pauses
reading and awaits a future. Measured with a broker process on loopback (2 cores, a Python
client in another process, hot page cache; ranges over repeated runs, which were noisy):

    loop / path                 16 KiB responses    1 MiB responses     8 MiB responses
    uvloop  + direct sendfile   3.9-6.1k resp/s     1.3-2.0 GB/s        1.9-2.8 GB/s
    uvloop  + copy              4.7k resp/s         1.4-1.6 GB/s        2.0 GB/s
    asyncio + direct sendfile   3.4-4.0k resp/s     1.0-1.7 GB/s        2.0-3.8 GB/s
    asyncio + loop.sendfile     2.4-3.7k resp/s     1.0-1.8 GB/s        1.9-3.7 GB/s
    asyncio + copy              4.5k resp/s         1.6 GB/s            1.6-1.8 GB/s

So the broker runs uvloop (as fast or faster everywhere but the largest responses, where the
runs overlap, and about twice as fast as the standard loop on small non-fetch requests) with the
direct sendfile path. `SendMode.LOOP` (standard loop only) and `SendMode.COPY` remain for such
measurements (`python -m epochlog.broker.harness --loop=asyncio --send-mode=loop ...`).

Over TLS the bytes must be encrypted on their way, so sendfile cannot be used:
`SendMode.THROUGH` reads each slice COPY_CHUNK at a time and writes it through the transport,
waiting for the transport to drain between chunks (the server picks it for TLS connections).

A slice whose file was truncated under it (a follower truncating its log) yields fewer bytes
than the response's size prefix promised. The frame cannot be fixed any more, so
`SliceTruncatedError` is raised and the server closes the connection, as Kafka does when a
FileRecords shrinks during a send; the client reconnects and fetches again.
"""

from __future__ import annotations

import asyncio
import enum
import os
from collections.abc import Awaitable, Callable

from epochlog.protocol.codec import SegmentedBuffer
from epochlog.storage import FileSlice

COPY_CHUNK = 256 * 1024
# A response this small is read into memory and written at once: a replica fetch under a steady
# produce load carries a few KiB from each of many partitions, and a write plus a sendfile per
# partition cost more system calls than a pread each and one write.
SMALL_RESPONSE_BYTES = 64 * 1024


class SendMode(enum.Enum):
    DIRECT = "direct"  # os.sendfile on the socket when the transport buffer is empty
    LOOP = "loop"  # loop.sendfile (standard asyncio loop only)
    COPY = "copy"  # read the slice and write it through the transport
    # read the slice in chunks and write each through the transport once it has drained: for
    # TLS, whose bytes must be encrypted on their way
    THROUGH = "through"


class SliceTruncatedError(Exception):
    """A file slice's file is shorter than the slice: the response frame is now wrong."""


Drain = Callable[[], Awaitable[None]]


async def send_segmented(
    transport: asyncio.WriteTransport,
    buf: SegmentedBuffer,
    wait_drained: Drain,
    mode: SendMode = SendMode.DIRECT,
) -> None:
    """Write a whole segmented frame in order."""
    if buf.total_size <= SMALL_RESPONSE_BYTES:
        transport.write(assembled(buf))
        return
    view = memoryview(buf)
    try:
        pos = 0
        for position, file_slice in buf.slices:
            if position > pos:
                transport.write(bytes(view[pos:position]))
            pos = position
            if mode is SendMode.DIRECT:
                await send_file_slice(transport, file_slice, wait_drained)
            elif mode is SendMode.THROUGH:
                await write_file_slice(transport, file_slice, wait_drained)
            elif mode is SendMode.LOOP:
                await wait_drained()
                sent = await asyncio.get_running_loop().sendfile(
                    transport, file_slice.file, file_slice.position, len(file_slice)
                )
                if sent != len(file_slice):
                    raise SliceTruncatedError(f"sendfile sent {sent} of {len(file_slice)} bytes")
            else:
                data = file_slice.read_bytes()
                if len(data) != len(file_slice):
                    raise SliceTruncatedError(f"read {len(data)} of {len(file_slice)} bytes")
                transport.write(data)
        if pos < len(buf):
            transport.write(bytes(view[pos:]))
    finally:
        view.release()


def assembled(buf: SegmentedBuffer) -> bytes:
    """The whole frame in memory, the slices read with pread."""
    out = bytearray()
    pos = 0
    for position, file_slice in buf.slices:
        out += buf[pos:position]
        data = file_slice.read_bytes()
        if len(data) != len(file_slice):
            raise SliceTruncatedError(f"read {len(data)} of {len(file_slice)} bytes")
        out += data
        pos = position
    out += buf[pos:]
    return bytes(out)


async def send_file_slice(
    transport: asyncio.WriteTransport, file_slice: FileSlice, wait_drained: Drain
) -> None:
    """Send one slice with sendfile, falling back to buffered chunks while the socket is full."""
    sock = transport.get_extra_info("socket")
    out_fd = sock.fileno()
    in_fd = file_slice.fileno()
    offset = file_slice.position
    remaining = len(file_slice)
    while remaining:
        if transport.is_closing():
            raise ConnectionResetError("the connection closed during a fetch response")
        if transport.get_write_buffer_size() == 0:
            try:
                sent = os.sendfile(out_fd, in_fd, offset, remaining)
            except (BlockingIOError, InterruptedError):
                sent = -1
            if sent == 0:
                raise SliceTruncatedError(
                    f"{file_slice.source.path if file_slice.source else '?'} ended at "
                    f"{offset}, {remaining} bytes short of the slice"
                )
            if sent > 0:
                offset += sent
                remaining -= sent
                continue
        wanted = min(remaining, COPY_CHUNK)
        assert file_slice.source is not None
        chunk = file_slice.source.pread(wanted, offset)
        if len(chunk) < wanted:
            raise SliceTruncatedError(
                f"{file_slice.source.path} ended at {offset + len(chunk)}, "
                f"{remaining - len(chunk)} bytes short of the slice"
            )
        transport.write(chunk)
        offset += wanted
        remaining -= wanted
        await wait_drained()


async def write_file_slice(
    transport: asyncio.WriteTransport, file_slice: FileSlice, wait_drained: Drain
) -> None:
    """Send one slice through the transport, COPY_CHUNK at a time, so a large fetch answer is
    never in memory whole (a TLS transport encrypts what it is given)."""
    assert file_slice.source is not None
    offset = file_slice.position
    remaining = len(file_slice)
    while remaining:
        if transport.is_closing():
            raise ConnectionResetError("the connection closed during a fetch response")
        wanted = min(remaining, COPY_CHUNK)
        chunk = file_slice.source.pread(wanted, offset)
        if len(chunk) < wanted:
            raise SliceTruncatedError(
                f"{file_slice.source.path} ended at {offset + len(chunk)}, "
                f"{remaining - len(chunk)} bytes short of the slice"
            )
        transport.write(chunk)
        offset += wanted
        remaining -= wanted
        await wait_drained()
