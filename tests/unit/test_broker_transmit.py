"""Sending segmented responses: bytes and file slices arrive in order, whether sendfile takes
them at once or the socket fills up; a slice cut short by truncation is an error."""

from __future__ import annotations

import asyncio
import os
import socket
import threading

import pytest

from epochlog.broker.eventloop import loop_factory
from epochlog.broker.transmit import SendMode, SliceTruncatedError, send_segmented
from epochlog.protocol.codec import SegmentedBuffer
from epochlog.storage.files import FileSlice, SharedFile


class Sink(asyncio.Protocol):
    """The writing side's protocol, with the drain signal the server's connection gives."""

    def __init__(self) -> None:
        self.paused = False
        self.waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport):
        transport.set_write_buffer_limits(high=0)

    def pause_writing(self):
        self.paused = True

    def resume_writing(self):
        self.paused = False
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def wait_drained(self):
        while self.paused:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter


def send(buf: SegmentedBuffer, mode: SendMode, new_loop=None) -> bytes:
    """Send `buf` over a socketpair; a slow reader thread collects everything."""
    ours, theirs = socket.socketpair()
    received = bytearray()

    def reader():
        while True:
            chunk = theirs.recv(65536)
            if not chunk:
                return
            received.extend(chunk)

    thread = threading.Thread(target=reader)
    thread.start()

    async def run():
        loop = asyncio.get_running_loop()
        transport, sink = await loop.create_connection(Sink, sock=ours)
        try:
            await send_segmented(transport, buf, sink.wait_drained, mode)
            await sink.wait_drained()
        finally:
            transport.close()
            await asyncio.sleep(0.01)

    loop = (new_loop or loop_factory())()
    try:
        loop.run_until_complete(run())
    finally:
        loop.close()
        thread.join(10)
        theirs.close()
    return bytes(received)


def segmented(tmp_path, sizes, declared_extra=0):
    data = os.urandom(sum(sizes))
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    source = SharedFile(path)
    buf = SegmentedBuffer(b"HEAD")
    expected = bytearray(b"HEAD")
    position = 0
    for i, size in enumerate(sizes):
        length = size + (declared_extra if i == len(sizes) - 1 else 0)
        buf.slices.append((len(buf), FileSlice(source, position, length)))
        expected += data[position : position + size]
        buf += f"|{i}|".encode()
        expected += f"|{i}|".encode()
        position += size
    return buf, bytes(expected)


@pytest.mark.parametrize("mode", [SendMode.DIRECT, SendMode.COPY])
@pytest.mark.parametrize("sizes", [[10, 20], [8 * 1024 * 1024, 1000]], ids=["small", "8MiB"])
def test_segments_arrive_in_order(tmp_path, mode, sizes):
    buf, expected = segmented(tmp_path, sizes)
    assert send(buf, mode) == expected


def test_loop_sendfile_mode_on_the_standard_loop(tmp_path):
    buf, expected = segmented(tmp_path, [300_000, 5])
    assert send(buf, SendMode.LOOP, asyncio.new_event_loop) == expected


@pytest.mark.parametrize("mode", [SendMode.DIRECT, SendMode.COPY])
@pytest.mark.parametrize("size", [100, 200_000], ids=["in-memory", "sendfile"])
def test_a_slice_longer_than_its_file_is_truncated(tmp_path, mode, size):
    buf, _ = segmented(tmp_path, [size], declared_extra=50)
    with pytest.raises(SliceTruncatedError):
        send(buf, mode)
