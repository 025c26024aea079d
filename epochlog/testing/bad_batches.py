"""Bad record batches for tests: each one a producer could send, with a CRC that holds.

A CRC-32C only proves the bytes are the sender's, so every batch here carries a valid one and the
broker must look at the records to refuse it:

- `record_bytes` encodes one record field by field, with its length varint, any offset delta and
  an optional error in its declared length;
- `batch_of` wraps a payload (compressing it, or not) in a v2 header with any record count, last
  offset delta and timestamps, CRC computed;
- `garbage_batch` is a header that claims a codec over random bytes;
- `zip_bomb_batch` is valid records of zeros adding up to `expanded_bytes`, compressed as a
  stream (a 1 GiB bomb is ~32 KiB of zstd and never held uncompressed): one record, or many
  whose timestamps count up, so a search by timestamp has to walk far into it;
- `plant_batch` appends a batch to a stopped broker's partition directory through the storage
  layer's follower append, which checks only the CRC: a bad batch "already on disk", as one
  written before produce validation looked at records.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import lz4.frame
import zstandard

from epochlog.protocol.compression import Compression, compress
from epochlog.protocol.records import (
    _HEADER,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    batch_crc,
    parse_batch_header,
    stamp_batch,
)
from epochlog.protocol.varint import encode_varint
from epochlog.storage import PartitionLog

BASE_TIMESTAMP = 1_700_000_000_000


def record_bytes(
    offset_delta: int,
    timestamp_delta: int = 0,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: Sequence[tuple[bytes, bytes | None]] = (),
    length_error: int = 0,
) -> bytes:
    """One encoded record; `length_error` is added to the length it declares."""
    body = bytearray(b"\x00")
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += encode_varint(-1)
        else:
            body += encode_varint(len(field)) + field
    body += encode_varint(len(headers))
    for hkey, hvalue in headers:
        body += encode_varint(len(hkey)) + hkey
        body += encode_varint(-1) if hvalue is None else encode_varint(len(hvalue)) + hvalue
    return encode_varint(len(body) + length_error) + bytes(body)


def records_payload(count: int, value: bytes = b"v") -> bytes:
    """`count` well-formed records with offset deltas 0..count-1 and timestamp delta 0."""
    return b"".join(record_bytes(i, value=value) for i in range(count))


def batch_of(
    payload: bytes,
    records_count: int,
    *,
    codec: Compression = Compression.NONE,
    compressed_payload: bytes | None = None,
    last_offset_delta: int | None = None,
    base_timestamp: int = BASE_TIMESTAMP,
    max_timestamp: int | None = None,
) -> bytes:
    """A v2 batch around `payload` (compressed with `codec`, or `compressed_payload` as given),
    with the header's count, last offset delta (count - 1 by default) and max timestamp
    (the base timestamp by default) as given; the CRC is right."""
    body = compressed_payload if compressed_payload is not None else compress(codec, payload)
    batch = bytearray(BATCH_HEADER_SIZE) + body
    _HEADER.pack_into(
        batch,
        0,
        0,
        len(batch) - LOG_OVERHEAD,
        -1,
        MAGIC_V2,
        0,
        int(codec),
        records_count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        base_timestamp if max_timestamp is None else max_timestamp,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        NO_SEQUENCE,
        records_count,
    )
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


def garbage_batch(codec: Compression, size: int = 256, seed: int = 0) -> bytes:
    """A one-record batch whose payload is `size` random bytes under `codec`'s attribute."""
    garbage = random.Random(seed).randbytes(size)
    return batch_of(b"", 1, codec=codec, compressed_payload=garbage)


def _bomb_stream(expanded_bytes: int, record_size: int | None) -> Iterator[bytes]:
    """Records with null keys and values of zeros, encoded in pieces of at most 1 MiB: one
    record of `expanded_bytes`, or records of `record_size` whose timestamp deltas count up."""
    sizes = (
        [expanded_bytes] if record_size is None else [record_size] * (expanded_bytes // record_size)
    )
    zeros = bytes(1 << 20)
    for index, value_size in enumerate(sizes):
        delta = 0 if record_size is None else index
        head = b"\x00" + encode_varint(delta) + encode_varint(index) + encode_varint(-1)
        head += encode_varint(value_size)
        yield encode_varint(len(head) + value_size + 1) + head
        left = value_size
        while left:
            piece = min(left, len(zeros))
            yield zeros if piece == len(zeros) else zeros[:piece]
            left -= piece
        yield encode_varint(0)  # no headers


def zip_bomb_batch(
    codec: Compression = Compression.ZSTD,
    expanded_bytes: int = 1 << 30,
    record_size: int | None = None,
) -> bytes:
    """A valid batch that decompresses to about `expanded_bytes` bytes: one record, or (with
    `record_size`) records of that size with timestamps BASE_TIMESTAMP + their index."""
    pieces = _bomb_stream(expanded_bytes, record_size)
    if codec is Compression.ZSTD:
        compressor = zstandard.ZstdCompressor(level=3).compressobj()
        parts = [compressor.compress(piece) for piece in pieces]
        parts.append(compressor.flush())
    elif codec is Compression.GZIP:
        deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts = [deflate.compress(piece) for piece in pieces]
        parts.append(deflate.flush())
    elif codec is Compression.LZ4:
        lz4_compressor = lz4.frame.LZ4FrameCompressor(
            block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False
        )
        parts = [lz4_compressor.begin()]
        parts += [lz4_compressor.compress(piece) for piece in pieces]
        parts.append(lz4_compressor.flush())
    else:
        raise ValueError(f"no streaming bomb for {codec.name}")
    count = 1 if record_size is None else expanded_bytes // record_size
    return batch_of(
        b"",
        count,
        codec=codec,
        compressed_payload=b"".join(parts),
        max_timestamp=BASE_TIMESTAMP + count - 1 if record_size else BASE_TIMESTAMP,
    )


def plant_batch(partition_dir: Path | str, batch: bytes) -> int:
    """Append `batch` to the partition log in `partition_dir` (its broker stopped) at the log
    end offset with the last batch's leader epoch, checking nothing but its CRC; return the
    offset it got."""
    log = PartitionLog.open(Path(partition_dir), had_clean_shutdown=True)
    try:
        offset = log.log_end_offset
        stamped = bytearray(batch)
        stamp_batch(stamped, 0, offset, max(log.last_batch_epoch, 0))
        log.append_as_follower(bytes(stamped))
        log.flush()
    finally:
        log.close()
    assert parse_batch_header(stamped).base_offset == offset
    return offset
