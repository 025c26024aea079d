"""The broker's frame reader: frames come out whole and in order however the stream is cut, large
frames are read straight into their own memory, bad sizes are refused."""

from __future__ import annotations

import random
import struct

import pytest

from epochlog.protocol.framing import POOL_GRANULE, FramePool, FrameReader, FrameSizeError


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def feed(reader: FrameReader, data: bytes, max_read: int | None = None) -> None:
    """Deliver `data` as a socket would: into `buffer()`, at most its size (or `max_read`)."""
    pos = 0
    while pos < len(data):
        target = reader.buffer()
        assert len(target) > 0
        n = min(len(target), len(data) - pos, max_read or len(data))
        target[:n] = data[pos : pos + n]
        target.release()
        reader.filled(n)
        pos += n


def bodies(reader: FrameReader) -> list[bytes]:
    out = []
    while reader.frames:
        frame = reader.frames.popleft()
        out.append(bytes(frame))
        reader.recycle(frame)
    return out


def test_small_frames_in_one_read_come_out_in_order() -> None:
    reader = FrameReader(1 << 20)
    frames = [b"a", b"bc" * 10, b"\x00" * 300]
    feed(reader, b"".join(framed(f) for f in frames))
    assert bodies(reader) == frames
    assert not reader.partial


@pytest.mark.parametrize("cut", [1, 2, 3, 4, 5, 7, 13, 1000])
def test_frames_cut_anywhere_are_reassembled(cut: int) -> None:
    reader = FrameReader(1 << 20, scratch_bytes=4096, direct_bytes=512)
    frames = [bytes([i]) * size for i, size in enumerate([1, 100, 511, 512, 513, 3000, 10000, 7])]
    feed(reader, b"".join(framed(f) for f in frames), max_read=cut)
    assert bodies(reader) == frames
    assert not reader.partial


def test_random_streams_match_their_frames() -> None:
    rng = random.Random(7)
    for _ in range(50):
        reader = FrameReader(1 << 20, scratch_bytes=2048, direct_bytes=256)
        frames = [rng.randbytes(rng.choice([1, 50, 255, 256, 257, 900, 5000])) for _ in range(30)]
        stream = b"".join(framed(f) for f in frames)
        pos = 0
        got: list[bytes] = []
        while pos < len(stream):
            target = reader.buffer()
            n = min(len(target), len(stream) - pos, rng.randint(1, 3000))
            target[:n] = stream[pos : pos + n]
            reader.filled(n)
            pos += n
            got += bodies(reader)
        assert got == frames


def test_a_large_frame_is_read_into_its_own_buffer() -> None:
    reader = FrameReader(1 << 20, scratch_bytes=4096, direct_bytes=1024)
    body = bytes(range(256)) * 40  # 10 KiB
    data = framed(body)
    feed(reader, data[:100])
    assert reader.partial and not reader.frames
    # The rest goes straight into the frame: the buffer offered is exactly what is missing.
    target = reader.buffer()
    assert len(target) == len(body) - 96
    target[:] = data[100:]
    reader.filled(len(target))
    (frame,) = reader.frames
    assert isinstance(frame, memoryview) and frame == body
    assert not reader.partial


def test_a_recycled_large_frame_memory_takes_the_next_large_frame() -> None:
    pool = FramePool()
    reader = FrameReader(1 << 20, scratch_bytes=4096, direct_bytes=1024, pool=pool)
    first, second = b"1" * 5000, b"2" * 3000
    feed(reader, framed(first), max_read=100)
    frame = reader.frames.popleft()
    memory = frame.obj
    assert frame == first
    reader.recycle(frame)
    assert pool.free == [memory]
    feed(reader, framed(second), max_read=100)
    frame = reader.frames.popleft()
    assert frame.obj is memory and frame == second  # no new allocation
    # A frame not recycled keeps its memory: the next one gets other memory.
    feed(reader, framed(first), max_read=100)
    assert reader.frames.popleft().obj is not memory
    assert frame == second


def test_the_pool_gives_the_smallest_fitting_buffer_and_keeps_a_bounded_number() -> None:
    pool = FramePool(max_buffers=2, max_buffer_bytes=4 * POOL_GRANULE)
    small, large = pool.take(10), pool.take(POOL_GRANULE + 1)
    assert (len(small), len(large)) == (POOL_GRANULE, 2 * POOL_GRANULE)
    pool.give(large)
    pool.give(small)
    pool.give(bytearray(POOL_GRANULE))  # a third: the smallest goes
    pool.give(bytearray(5 * POOL_GRANULE))  # too large to keep
    assert sorted(len(b) for b in pool.free) == [POOL_GRANULE, 2 * POOL_GRANULE]
    pool.give(bytearray(3 * POOL_GRANULE))  # larger than the smallest kept: replaces it
    assert sorted(len(b) for b in pool.free) == [2 * POOL_GRANULE, 3 * POOL_GRANULE]
    assert pool.take(100) is large
    assert len(pool.take(4 * POOL_GRANULE)) == 4 * POOL_GRANULE  # none fits: a new one
    assert [len(b) for b in pool.free] == [3 * POOL_GRANULE]


def test_the_pool_keeps_a_bounded_number_of_bytes() -> None:
    pool = FramePool(max_buffers=10, max_total_bytes=3 * POOL_GRANULE)
    for size in (1, 2, 1):
        pool.give(bytearray(size * POOL_GRANULE))
    assert sorted(len(b) for b in pool.free) == [POOL_GRANULE, 2 * POOL_GRANULE]


@pytest.mark.parametrize("size", [0, -1, -(2**31), 1001])
def test_a_size_outside_the_limit_is_refused(size: int) -> None:
    reader = FrameReader(1000)
    feed(reader, framed(b"ok"))
    with pytest.raises(FrameSizeError, match=f"request size {size} is outside 1..1000"):
        feed(reader, struct.pack(">i", size) + b"zz")
    assert bodies(reader) == [b"ok"]


def test_a_scratch_too_small_for_direct_frames_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot hold"):
        FrameReader(1000, scratch_bytes=100, direct_bytes=100)
