"""A topic's `compression.type` applied to a produced batch, as Kafka's LogValidator does; sans-I/O.

Kafka's topic config `compression.type` (broker default: `compression.type`) is `producer` (keep
the producer's codec) or a codec: `uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`. A batch whose
codec differs from the topic's is rebuilt with the topic's codec (LogValidator's
`validateMessagesAndAssignOffsetsCompressed`, "no in-place assignment" case 1), uncompressed
included; one whose codec already matches is stored as it came.

Two pure pieces:
- `rebuild_codec(source, compression_type)` is the decision: the codec to rebuild with, or None.
- `rebuild_batch(batch, header, codec, ...)` is the rebuild, bytes to bytes. The records' bytes
  are kept as they are (every record's key, value, headers, offset delta and timestamp delta,
  hence its timestamp); only the payload's compression changes, so the header keeps its base
  timestamp, max timestamp, timestamp type, producer id, epoch and base sequence and its
  transactional and control flags. The attributes' codec bits, the batch length and the CRC are
  rewritten; base offset and partition leader epoch are stamped on append as for any batch.
  Kafka re-encodes the records through MemoryRecordsBuilder (base timestamp = the first record's),
  which gives the same records; keeping their bytes is cheaper and changes nothing a reader sees.

Consumers that cannot read zstd: Kafka answers a Fetch below v10 for a partition whose topic's
compression.type is zstd with UNSUPPORTED_COMPRESSION_TYPE (KafkaApis, whatever the batches
hold); `fetch_compression_error` is that rule.

The batch must have been validated first (`record_validation.check_batch_records`): the rebuild
decompresses it as a stream under the same `max_decompressed_bytes` bound, so it never holds more
than validation allowed. Followers never rebuild: they store the leader's bytes.
"""

from __future__ import annotations

import struct

from epochlog.protocol.compression import Compression, compress, decompress_stream
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CRC_OFFSET,
    LOG_OVERHEAD,
    BatchHeader,
    batch_crc,
)

ZSTD_MIN_FETCH_VERSION = 10

PRODUCER = "producer"
UNCOMPRESSED = "uncompressed"
# Kafka's BrokerCompressionType names, in the order its docs list them.
COMPRESSION_TYPES = (UNCOMPRESSED, "zstd", "lz4", "snappy", "gzip", PRODUCER)

_CODEC_OF_TYPE = {
    UNCOMPRESSED: Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


def compression_type_problem(value: str) -> str | None:
    """What is wrong with a `compression.type` value, or None."""
    if value in COMPRESSION_TYPES:
        return None
    return f"{value!r} is not one of {', '.join(COMPRESSION_TYPES)}"


def target_codec(compression_type: str) -> Compression | None:
    """The codec a topic's `compression.type` stores batches with; None for `producer`."""
    if compression_type == PRODUCER:
        return None
    codec = _CODEC_OF_TYPE.get(compression_type)
    if codec is None:
        raise ValueError(f"compression.type {compression_type_problem(compression_type)}")
    return codec


def rebuild_codec(source: Compression, compression_type: str) -> Compression | None:
    """The codec to rebuild a batch compressed with `source` with, on a topic whose
    compression.type is `compression_type`; None when the batch is stored as it came."""
    target = target_codec(compression_type)
    if target is None or target is source:
        return None
    return target


def fetch_compression_error(fetch_version: int, compression_type: str) -> ErrorCode:
    """A consumer's Fetch error for a partition of a topic with this compression.type."""
    if compression_type == "zstd" and fetch_version < ZSTD_MIN_FETCH_VERSION:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    return ErrorCode.NONE


def rebuild_batch(
    batch: bytes | bytearray | memoryview,
    header: BatchHeader,
    codec: Compression,
    *,
    max_decompressed_bytes: int,
    level: int | None = None,
) -> bytes:
    """The validated batch at the start of `batch` with its records compressed by `codec` (at
    `level`, Kafka's range for the codec, None for its default) instead of its own."""
    payload_view = memoryview(batch)[BATCH_HEADER_SIZE : header.size]
    source = header.compression
    if source is Compression.NONE:
        records = bytes(payload_view)
    else:
        chunks = decompress_stream(source, payload_view, max_decompressed_bytes)
        try:
            records = b"".join(chunks)
        finally:
            chunks.close()
    payload = compress(codec, records, level)
    out = bytearray(BATCH_HEADER_SIZE + len(payload))
    out[:BATCH_HEADER_SIZE] = memoryview(batch)[:BATCH_HEADER_SIZE]
    out[BATCH_HEADER_SIZE:] = payload
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    attributes = (header.attributes & ~COMPRESSION_MASK) | int(codec)
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, attributes)
    struct.pack_into(">I", out, CRC_OFFSET, batch_crc(out, 0, len(out)))
    return bytes(out)
