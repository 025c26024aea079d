"""Splitting a connection's byte stream into Kafka request frames (int32 size, then that many
bytes), reading into buffers this object owns; sans-I/O, for a `BufferedProtocol`.

Why. A Produce request carrying 1 KiB records is often 100-500 KiB. Taking `data_received`
chunks, appending them to a buffer and slicing each frame out copied every byte three times in
Python (append, slice, bytes()), and the large short-lived allocations were the broker's
single biggest cost on that path (py-spy: 23% of an RF 1 leader's CPU with 200 KiB requests).
Here the socket is read straight into memory that becomes the frame:

- reads land in a fixed scratch buffer; every frame found whole in it is copied out once (small
  requests: Fetch, Metadata, heartbeats);
- once the size of a frame of at least `direct_bytes` is known and the frame is not yet whole,
  it gets its own memory: what has arrived is copied in, and the rest is read straight into it
  (`buffer()` hands out the unfilled part), so most of a large frame is never copied. That
  memory comes from a `FramePool` and goes back to it once the frame is decoded (`recycle`):
  a fresh zeroed 200 KiB bytearray per request cost page faults worth 10% of a leader's CPU
  (glibc maps such sizes anew), a reused one nothing.

A size <= 0 or above `max_frame_bytes` raises `FrameSizeError` (the caller closes the connection
without reading on, as Kafka does with an InvalidReceiveException).
"""

from __future__ import annotations

import struct
from collections import deque

SCRATCH_BYTES = 64 * 1024
DIRECT_BYTES = 8 * 1024
POOL_GRANULE = 64 * 1024
_SIZE = struct.Struct(">i")
_SIZE_BYTES = _SIZE.size


class FrameSizeError(Exception):
    """A frame's size prefix is outside 1..max_frame_bytes."""

    def __init__(self, size: int, max_frame_bytes: int) -> None:
        super().__init__(f"request size {size} is outside 1..{max_frame_bytes}")
        self.size = size


class FramePool:
    """Buffers for large frames, kept for reuse once their frames are decoded. At most
    `max_buffers` are kept, `max_total_bytes` in all, none larger than `max_buffer_bytes`; when
    over, the smallest go (the largest are the costliest to make and fit the most frames). A
    client pipelining many large requests has many frames queued at once, so a server's pool
    must hold about that many. One event loop uses it."""

    def __init__(
        self,
        max_buffers: int = 32,
        max_buffer_bytes: int = 4 * 1024 * 1024,
        max_total_bytes: int = 32 * 1024 * 1024,
    ) -> None:
        self.max_buffers = max_buffers
        self.max_buffer_bytes = max_buffer_bytes
        self.max_total_bytes = max_total_bytes
        self.free: list[bytearray] = []
        self._free_bytes = 0

    def take(self, size: int) -> bytearray:
        """A buffer of at least `size` bytes (the smallest kept one that fits, else a new one)."""
        best = -1
        for i, buf in enumerate(self.free):
            if len(buf) >= size and (best < 0 or len(buf) < len(self.free[best])):
                best = i
        if best >= 0:
            buf = self.free.pop(best)
            self._free_bytes -= len(buf)
            return buf
        return bytearray(-(-size // POOL_GRANULE) * POOL_GRANULE)

    def give(self, buf: bytearray) -> None:
        if len(buf) > self.max_buffer_bytes:
            return
        self.free.append(buf)
        self._free_bytes += len(buf)
        while len(self.free) > self.max_buffers or self._free_bytes > self.max_total_bytes:
            smallest = min(range(len(self.free)), key=lambda i: len(self.free[i]))
            self._free_bytes -= len(self.free.pop(smallest))


class FrameReader:
    """Call `buffer()` for memory to read into, then `filled(n)` with the bytes read; whole
    frames (without the size prefix) collect in `frames`, in order: bytes, or for a large frame
    a memoryview of pooled memory, which the caller hands back with `recycle` once it no longer
    needs the frame's bytes (after decoding: the codec copies what it keeps)."""

    def __init__(
        self,
        max_frame_bytes: int,
        *,
        scratch_bytes: int = SCRATCH_BYTES,
        direct_bytes: int = DIRECT_BYTES,
        pool: FramePool | None = None,
    ) -> None:
        if scratch_bytes < 2 * (direct_bytes + _SIZE_BYTES):
            raise ValueError(
                f"scratch of {scratch_bytes} bytes cannot hold two frames of {direct_bytes} bytes"
            )
        self.max_frame_bytes = max_frame_bytes
        self.direct_bytes = direct_bytes
        self.pool = FramePool() if pool is None else pool
        self.frames: deque[bytes | memoryview] = deque()
        self._scratch = bytearray(scratch_bytes)
        self._view = memoryview(self._scratch)
        # Unsplit bytes are _scratch[_start:_end]: at most a size prefix and a frame shorter
        # than direct_bytes, so after a compaction there is always room to finish it.
        self._start = 0
        self._end = 0
        self._frame: memoryview | None = None  # a large frame being read into directly
        self._filled = 0

    @property
    def partial(self) -> bool:
        """Whether bytes of an unfinished frame (or size prefix) are held."""
        return self._frame is not None or self._end > self._start

    def buffer(self) -> memoryview:
        """Where the next read goes (never empty)."""
        if self._frame is not None:
            return self._frame[self._filled :]
        if len(self._scratch) - self._end < self.direct_bytes + _SIZE_BYTES:
            self._compact()
        return self._view[self._end :]

    def filled(self, nbytes: int) -> None:
        """`nbytes` were read into the last `buffer()`; split off what is now whole."""
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == len(self._frame):
                self.frames.append(self._frame)
                self._frame = None
            return
        self._end += nbytes
        self._split()

    def recycle(self, frame: bytes | memoryview) -> None:
        """`frame` (from `frames`) is done with: its memory may hold the next large frame."""
        if isinstance(frame, memoryview):
            buf = frame.obj
            frame.release()
            assert isinstance(buf, bytearray)
            self.pool.give(buf)

    def _compact(self) -> None:
        held = self._end - self._start
        if self._start:
            self._scratch[:held] = self._scratch[self._start : self._end]
        self._start, self._end = 0, held

    def _split(self) -> None:
        view = self._view
        pos, end = self._start, self._end
        while end - pos >= _SIZE_BYTES:
            (size,) = _SIZE.unpack_from(view, pos)
            if size <= 0 or size > self.max_frame_bytes:
                raise FrameSizeError(size, self.max_frame_bytes)
            body = pos + _SIZE_BYTES
            if end - body >= size:
                self.frames.append(bytes(view[body : body + size]))
                pos = body + size
                continue
            if size >= self.direct_bytes:
                frame = memoryview(self.pool.take(size))[:size]
                have = end - body
                frame[:have] = view[body:end]
                self._frame, self._filled = frame, have
                pos = end
            break
        if pos == end:
            self._start = self._end = 0
        else:
            self._start = pos
