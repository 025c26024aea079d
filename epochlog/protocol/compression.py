"""Compression codecs of record batches, each through a well-kept library.

- gzip: the standard library's gzip format (zlib).
- snappy: cramjam's raw snappy inside the xerial framing the Java client writes; raw snappy is
  accepted on read too, as librdkafka and the Java client both do.
- lz4: the LZ4 frame format (python-lz4) with independent 64 KiB blocks, which is what Kafka's
  KafkaLZ4BlockInputStream reads.
- zstd: a standard zstd frame (cramjam; the stream reader is python-zstandard's).

`compress` and `decompress` work on whole payloads: clients use them on batches they built or
fetched. `compress` takes an optional level with Kafka's ranges (KIP-390, Kafka 3.8+): gzip 1..9 or
-1 (zlib's default, 6), lz4 1..17 (1 is the fast compressor, higher the HC one; python-lz4 stops at
16, so 17 compresses as 16), zstd -131072..22; `level_problem` says what is wrong with one. A broker
reads a produced batch only through `decompress_stream` (a rebuild with the topic's codec,
`recompression`, joins the chunks of a batch validation has already bounded); it yields the output
in chunks of at most `chunk_size` bytes, each codec's own streaming decoder asked for no more than
that at a time, and stops with `DecompressedSizeError` as soon as the output would pass
`max_output`, so a batch that expands a thousandfold costs the broker `max_output` bytes of work and
one chunk of memory, not the whole expansion. Snappy has no streaming decoder here: each xerial
block (or a raw payload) declares its decompressed length up front, which is checked against the
bound before the block is decompressed.
Undecodable input raises `DecompressionError`.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib
from collections.abc import Generator, Iterator

import cramjam
import lz4.frame
import zstandard


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, name: str) -> Compression:
        """From Kafka's `compression.type` names: none, gzip, snappy, lz4, zstd."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression type {name!r}; expected one of none, gzip, snappy, lz4, zstd"
            ) from None


# Kafka's level ranges and defaults per codec (GzipCompression, Lz4Compression, ZstdCompression).
GZIP_DEFAULT_LEVEL = -1
LZ4_MIN_LEVEL, LZ4_MAX_LEVEL, LZ4_DEFAULT_LEVEL = 1, 17, 9
ZSTD_MIN_LEVEL, ZSTD_MAX_LEVEL, ZSTD_DEFAULT_LEVEL = -131072, 22, 3
_ZLIB_DEFAULT_LEVEL = 6
_PYTHON_LZ4_MAX_LEVEL = 16


def level_problem(codec: Compression, level: int) -> str | None:
    """What is wrong with `level` for `codec` (Kafka's ranges), or None."""
    if codec is Compression.GZIP:
        ok = level == GZIP_DEFAULT_LEVEL or 1 <= level <= 9
        return None if ok else "must be -1 (the default) or between 1 and 9"
    if codec is Compression.LZ4:
        ok = LZ4_MIN_LEVEL <= level <= LZ4_MAX_LEVEL
        return None if ok else f"must be between {LZ4_MIN_LEVEL} and {LZ4_MAX_LEVEL}"
    if codec is Compression.ZSTD:
        ok = ZSTD_MIN_LEVEL <= level <= ZSTD_MAX_LEVEL
        return None if ok else f"must be between {ZSTD_MIN_LEVEL} and {ZSTD_MAX_LEVEL}"
    return f"{codec.name.lower()} has no compression levels"


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out += struct.pack(">i", len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError("xerial snappy block length is truncated")
        (length,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise ValueError(f"xerial snappy block of {length} bytes runs past the payload")
        out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + length]))
        pos += length
    return bytes(out)


def compress(codec: Compression, data: bytes, level: int | None = None) -> bytes:
    """`data` compressed with `codec`; `level` (Kafka's range for the codec, see `level_problem`)
    or None for the codec's usual level (gzip 6, lz4 fast, zstd cramjam's default)."""
    if codec is Compression.NONE:
        return data
    if level is not None and codec is not Compression.SNAPPY:
        problem = level_problem(codec, level)
        if problem is not None:
            raise ValueError(f"{codec.name.lower()} compression level {level} {problem}")
    if codec is Compression.GZIP:
        gzip_level = _ZLIB_DEFAULT_LEVEL if level in (None, GZIP_DEFAULT_LEVEL) else level
        return gzip.compress(data, compresslevel=gzip_level, mtime=0)
    if codec is Compression.SNAPPY:
        return _snappy_compress(data)
    if codec is Compression.LZ4:
        # python-lz4: levels below 3 are the fast compressor, 3..16 the HC one.
        lz4_level = 0 if level is None or level == 1 else min(level, _PYTHON_LZ4_MAX_LEVEL)
        return lz4.frame.compress(
            data,
            compression_level=lz4_level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec is Compression.ZSTD:
        if level is None:
            return bytes(cramjam.zstd.compress(data))
        return bytes(cramjam.zstd.compress(data, level=level))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: Compression, data: bytes) -> bytes:
    if codec is Compression.NONE:
        return data
    if codec is Compression.GZIP:
        return zlib.decompress(data, wbits=47)  # 32 + 15: gzip or zlib header, auto-detected
    if codec is Compression.SNAPPY:
        return _snappy_decompress(data)
    if codec is Compression.LZ4:
        return lz4.frame.decompress(data)
    if codec is Compression.ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"unknown compression codec {codec}")


# ------------------------------------------------------------------- bounded streaming decoding

STREAM_CHUNK = 256 * 1024


class DecompressionError(ValueError):
    """A payload that is not valid data of its codec (garbage, truncated, trailing bytes)."""


class DecompressedSizeError(ValueError):
    """Decompressing would produce more than the allowed number of bytes."""

    def __init__(self, codec: Compression, limit: int) -> None:
        super().__init__(f"{codec.name.lower()} payload decompresses to more than {limit} bytes")
        self.limit = limit


def decompress_stream(
    codec: Compression,
    payload: bytes | bytearray | memoryview,
    max_output: int,
    chunk_size: int = STREAM_CHUNK,
) -> Generator[bytes, None, None]:
    """The decompressed payload in chunks of at most `chunk_size` bytes, never more than
    `max_output` bytes in all: DecompressedSizeError as soon as there would be more,
    DecompressionError for input that does not decode."""
    if codec is Compression.GZIP:
        reader: _Reader = _GzipReader(payload)
    elif codec is Compression.LZ4:
        reader = _Lz4Reader(payload)
    elif codec is Compression.ZSTD:
        reader = _ZstdReader(payload)
    elif codec is Compression.SNAPPY:
        reader = _SnappyReader(payload, max_output)
    else:
        raise ValueError(f"{codec!r} is not a compression codec")
    total = 0
    while True:
        # One byte past the bound is asked for: getting it proves the output is too large.
        try:
            chunk = reader.read(min(chunk_size, max_output - total + 1))
        except (DecompressionError, DecompressedSizeError):
            raise
        except Exception as exc:  # each library raises its own type
            raise DecompressionError(
                f"{codec.name.lower()} payload does not decompress: {exc}"
            ) from exc
        if not chunk:
            return
        total += len(chunk)
        if total > max_output:
            raise DecompressedSizeError(codec, max_output)
        yield chunk


class _Reader:
    """`read(n)`: up to n more bytes of output (at least one while any remain), b"" at the end."""

    def read(self, n: int) -> bytes:
        raise NotImplementedError


class _GzipReader(_Reader):
    # Concatenated gzip members are one stream, as Java's GZIPInputStream reads them.
    def __init__(self, payload: bytes | bytearray | memoryview) -> None:
        self._decoder = zlib.decompressobj(wbits=47)
        self._input = bytes(payload)

    def read(self, n: int) -> bytes:
        while True:
            if self._decoder.eof:
                rest = self._decoder.unused_data
                if not rest:
                    return b""
                self._decoder = zlib.decompressobj(wbits=47)
                self._input = rest
            out = self._decoder.decompress(self._input, n)
            self._input = self._decoder.unconsumed_tail
            if out:
                return out
            if not self._input and not self._decoder.eof:
                out = self._decoder.flush()
                if out:  # pragma: no cover - zlib hands out everything it can in decompress
                    return out
                raise DecompressionError("gzip payload is truncated")


class _Lz4Reader(_Reader):
    # One LZ4 frame, as Kafka's KafkaLZ4BlockInputStream reads it.
    def __init__(self, payload: bytes | bytearray | memoryview) -> None:
        self._decoder = lz4.frame.LZ4FrameDecompressor()
        self._input: bytes | bytearray | memoryview = payload
        self._done = False

    def read(self, n: int) -> bytes:
        while not self._done:
            out = self._decoder.decompress(self._input, max_length=n)
            self._input = b""
            if self._decoder.eof:
                self._done = True
                if self._decoder.unused_data:
                    raise DecompressionError(
                        f"lz4 payload has {len(self._decoder.unused_data)} bytes after its frame"
                    )
            elif self._decoder.needs_input and not out:
                raise DecompressionError("lz4 payload is truncated")
            if out:
                return out
        return b""


class _ZstdReader(_Reader):
    # zstd frames one after another, as zstd-jni's ZstdInputStream reads them. The stream reader
    # ends quietly at a frame cut short, which a consumer's decoder would refuse, so once it has
    # ended the frames' block headers are walked to see that the last frame is whole.
    def __init__(self, payload: bytes | bytearray | memoryview) -> None:
        self._payload = bytes(payload)
        self._stream = zstandard.ZstdDecompressor().stream_reader(
            self._payload, read_across_frames=True
        )

    def read(self, n: int) -> bytes:
        out = self._stream.read(n)
        if not out:
            problem = zstd_frames_problem(self._payload)
            if problem is not None:
                raise DecompressionError(f"zstd payload {problem}")
        return out


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = 0x184D2A50  # .. 0x184D2A5F
_ZSTD_FCS_SIZES = (0, 2, 4, 8)
_ZSTD_DID_SIZES = (0, 1, 2, 4)


def zstd_frames_problem(data: bytes) -> str | None:
    """What makes `data` something other than whole zstd frames (RFC 8878), or None. Only the
    frame and block headers are read, not the blocks."""
    pos, end = 0, len(data)
    if end == 0:
        return "is empty"
    while pos < end:
        if end - pos < 4:
            return f"has {end - pos} stray bytes at {pos}"
        (magic,) = struct.unpack_from("<I", data, pos)
        if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
            if end - pos < 8:
                return f"is truncated in a skippable frame header at {pos}"
            (size,) = struct.unpack_from("<I", data, pos + 4)
            pos += 8 + size
            continue
        if magic != _ZSTD_MAGIC:
            return f"has no zstd frame at byte {pos}"
        if end - pos < 5:
            return "is truncated in a frame header"
        descriptor = data[pos + 4]
        single_segment = descriptor & 0x20
        fcs = _ZSTD_FCS_SIZES[descriptor >> 6] or (1 if single_segment else 0)
        pos += 5 + (0 if single_segment else 1) + _ZSTD_DID_SIZES[descriptor & 0x03] + fcs
        while True:
            if end - pos < 3:
                return "is truncated in a block header"
            block = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            block_type = (block >> 1) & 0x03
            pos += 3 + (1 if block_type == 1 else block >> 3)
            if pos > end:
                return "is truncated inside a block"
            if block & 1:
                break
        if descriptor & 0x04:
            pos += 4  # content checksum
    if pos > end:
        return "is truncated at its end"
    return None


# A snappy copy element writes at most 64 bytes and takes at least 3 bytes (2 for 11 bytes).
_SNAPPY_MAX_EXPANSION = 22


class _SnappyReader(_Reader):
    # Each block's decompressed length is read from its preamble and checked against what the
    # bound leaves before the block is decompressed.
    def __init__(self, payload: bytes | bytearray | memoryview, max_output: int) -> None:
        data = bytes(payload)
        if data.startswith(_XERIAL_MAGIC):
            self._blocks = _xerial_blocks(data)
        else:
            self._blocks = iter((data,))
        self._limit = max_output
        self._left = max_output
        self._block = memoryview(b"")

    def read(self, n: int) -> bytes:
        while not self._block:
            block = next(self._blocks, None)
            if block is None:
                return b""
            size = cramjam.snappy.decompress_raw_len(block)
            if size > _SNAPPY_MAX_EXPANSION * len(block) + 64:
                raise DecompressionError(
                    f"snappy block of {len(block)} bytes declares {size} decompressed bytes, "
                    "more than snappy can encode in it"
                )
            if size > self._left:
                raise DecompressedSizeError(Compression.SNAPPY, self._limit)
            self._left -= size
            self._block = memoryview(bytes(cramjam.snappy.decompress_raw(block)))
        out = bytes(self._block[:n])
        self._block = self._block[n:]
        return out


def _xerial_blocks(data: bytes) -> Iterator[bytes]:
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise DecompressionError("xerial snappy block length is truncated")
        (length,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise DecompressionError(f"xerial snappy block of {length} bytes runs past the payload")
        yield data[pos : pos + length]
        pos += length
