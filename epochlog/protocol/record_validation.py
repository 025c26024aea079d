"""The records of a v2 batch, checked against its header as Kafka's LogValidator does; sans-I/O.

A CRC only proves that the bytes are the producer's. Before a broker appends a batch it walks the
records, so that nothing a consumer cannot read is ever stored: each record's length varint, its
timestamp and offset deltas, its key, value and headers. `check_batch_records` raises
`RecordsError` with Kafka's error code for the first problem it meets:

- CORRUPT_MESSAGE: the bytes are not records. The payload does not decompress (garbage, a cut
  frame, bytes after it), a varint runs past its ten bytes, a length is negative (other than -1
  for null) or a record is cut off by the end of the payload.
- INVALID_RECORD: records that disagree with their header or with themselves. Fewer or more
  records than the header's count, an offset delta other than the record's index (Kafka's
  "Invalid offset"), a record whose fields do not take exactly its length, a largest timestamp
  other than the header's maxTimestamp (CreateTime), or a payload that decompresses to more than
  `max_decompressed_bytes`.

For a compacted topic (`require_keys`) a record without a key is INVALID_RECORD too, as Kafka's
LogValidator has it: every keyless record is collected and `MissingKeyError` names their indexes.

An uncompressed batch is walked in place. A compressed one is decompressed as a stream
(`compression.decompress_stream`): each chunk is walked as it comes, a record cut by the chunk's
end is carried to the next, and decompression stops at the bound, so a batch that expands a
thousandfold is refused after at most `max_decompressed_bytes` of output, holding at most one
chunk and one record. Reads use the same walk: `find_record_at_or_after` stops at the first record
it is asked for (ListOffsets by timestamp) and never holds more than a record and a chunk either.
"""

from __future__ import annotations

from typing import NamedTuple

from epochlog.protocol.compression import (
    Compression,
    DecompressedSizeError,
    DecompressionError,
    decompress_stream,
)
from epochlog.protocol.errors import DecodeError, ErrorCode
from epochlog.protocol.records import BATCH_HEADER_SIZE, BatchHeader
from epochlog.protocol.varint import decode_varint

INT32_MAX = 2**31 - 1
# attributes, timestamp delta, offset delta, key length, value length, header count: a byte each
MIN_RECORD_BODY = 6

# Below any timestamp delta (a varlong): the largest delta before the first record.
NO_DELTA = -(2**64)

# Zig-zag varints of one byte (-64..63) are by far the most common in records.
_ZIGZAG_1 = [(b >> 1) ^ -(b & 1) for b in range(128)]


class RecordsError(Exception):
    """The first problem found in a batch's records; `record_index` is the record's position in
    its batch (Kafka's BatchIndex) when one record is to blame."""

    def __init__(self, error_code: ErrorCode, message: str, record_index: int | None = None):
        super().__init__(message)
        self.error_code = error_code
        self.record_index = record_index


class MissingKeyError(RecordsError):
    """Records without a key in a batch for a compacted topic; `record_indexes` lists them."""

    def __init__(self, record_indexes: list[int]) -> None:
        super().__init__(
            ErrorCode.INVALID_RECORD,
            f"{len(record_indexes)} records without a key (indexes {record_indexes[:10]})",
            record_indexes[0],
        )
        self.record_indexes = record_indexes


class RecordsSummary(NamedTuple):
    record_count: int
    max_timestamp: int
    uncompressed_bytes: int


class RecordMatch(NamedTuple):
    timestamp: int
    offset: int


class _Walk:
    """Where a walk over one batch's records is: the next record's index and what was seen."""

    __slots__ = (
        "index",
        "count",
        "max_delta",
        "need",
        "target_delta",
        "min_index",
        "found",
        "keyless",
    )

    def __init__(
        self,
        count: int,
        target_delta: int | None = None,
        min_index: int = 0,
        require_keys: bool = False,
    ) -> None:
        self.index = 0
        self.count = count
        self.max_delta = NO_DELTA
        # bytes, from the start of the record being cut, that the next window must hold
        self.need = 0
        self.target_delta = target_delta
        self.min_index = min_index
        self.found: tuple[int, int] | None = None
        # The indexes of records without a key, collected only when keys are required.
        self.keyless: list[int] | None = [] if require_keys else None


def _invalid(message: str, index: int | None = None) -> RecordsError:
    return RecordsError(ErrorCode.INVALID_RECORD, message, index)


def _corrupt(message: str, index: int | None = None) -> RecordsError:
    return RecordsError(ErrorCode.CORRUPT_MESSAGE, message, index)


def _field_past_end(index: int, field: str, size: int, length: int) -> RecordsError:
    return _invalid(
        f"record {index}'s {field} of {size} bytes runs past its length {length}", index
    )


def _scan(buf: bytes, pos: int, walk: _Walk) -> int:
    """Check the whole records in buf[pos:]; return where the first record that is not wholly
    in `buf` starts (len(buf) when none is cut). With a target, stop after the first record at
    or past it (`walk.found`). `buf` is bytes, never a view: compiled, indexing bytes is a
    machine load where a bytes/bytearray/memoryview union goes through PyObject_GetItem and a
    new int per byte (`bench/record_validation.py`: 350 -> 158 ns a record)."""
    end = len(buf)
    zz = _ZIGZAG_1
    varint = decode_varint
    index = walk.index
    count = walk.count
    max_delta = walk.max_delta
    target = walk.target_delta
    keyless = walk.keyless
    try:
        while pos < end:
            if index >= count:
                raise _invalid(f"{end - pos} bytes follow its last record ({count} records)")
            start = pos
            b = buf[pos]
            if b < 128:
                length = zz[b]
                pos += 1
            else:
                try:
                    b2 = buf[pos + 1]
                    if b2 < 128:  # two bytes (records up to 8 KiB): inline, no call
                        raw = (b & 0x7F) | (b2 << 7)
                        length = (raw >> 1) ^ -(raw & 1)
                        pos += 2
                    else:
                        length, pos = varint(buf, pos)
                except IndexError:  # the length itself is cut by the end of the window
                    walk.need = end - start + 1
                    return start
            if length < MIN_RECORD_BODY or length > INT32_MAX:
                raise _corrupt(f"record {index} has length {length}", index)
            record_end = pos + length
            if record_end > end:
                walk.need = record_end - start
                return start
            try:
                pos += 1  # attributes: unused in v2
                b = buf[pos]
                if b < 128:
                    ts_delta = zz[b]
                    pos += 1
                elif buf[pos + 1] < 128:  # two bytes: deltas up to 8 s
                    raw = (b & 0x7F) | (buf[pos + 1] << 7)
                    ts_delta = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    ts_delta, pos = varint(buf, pos)
                b = buf[pos]
                if b < 128:
                    offset_delta = zz[b]
                    pos += 1
                else:
                    offset_delta, pos = varint(buf, pos)
                if offset_delta != index:
                    raise _invalid(
                        f"invalid offset: record {index} has offset delta {offset_delta}, "
                        f"expected {index}",
                        index,
                    )
                b = buf[pos]
                if b < 128:
                    n = zz[b]
                    pos += 1
                else:
                    n, pos = varint(buf, pos)
                if n > 0:
                    if n > record_end - pos:
                        raise _field_past_end(index, "key", n, length)
                    pos += n
                elif n < -1:
                    raise _corrupt(f"record {index} has key length {n}", index)
                elif n == -1 and keyless is not None:
                    keyless.append(index)
                b = buf[pos]
                if b < 128:
                    n = zz[b]
                    pos += 1
                elif buf[pos + 1] < 128:  # two bytes: values up to 8 KiB
                    raw = (b & 0x7F) | (buf[pos + 1] << 7)
                    n = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    n, pos = varint(buf, pos)
                if n > 0:
                    if n > record_end - pos:
                        raise _field_past_end(index, "value", n, length)
                    pos += n
                elif n < -1:
                    raise _corrupt(f"record {index} has value length {n}", index)
                b = buf[pos]
                if b < 128:
                    header_count = zz[b]
                    pos += 1
                else:
                    header_count, pos = varint(buf, pos)
                if header_count:
                    pos = _skip_headers(buf, pos, record_end, header_count, index)
            except IndexError:
                raise _invalid(
                    f"record {index}'s fields run past its length {length}", index
                ) from None
            if pos != record_end:
                raise _invalid(
                    f"record {index} has length {length} but its fields take "
                    f"{length + pos - record_end} bytes",
                    index,
                )
            if ts_delta > max_delta:
                max_delta = ts_delta
            if target is not None and ts_delta >= target and index >= walk.min_index:
                walk.found = (index, ts_delta)
                index += 1
                return pos
            index += 1
    except DecodeError as exc:
        raise _corrupt(f"record {index}: {exc.reason}", index) from None
    finally:
        walk.index = index
        walk.max_delta = max_delta
    return pos


def _as_bytes(buf: bytes | bytearray | memoryview, size: int = -1) -> bytes:
    """buf[:size] (all of it for -1) as bytes: itself when it already is, else a copy (a batch
    copies in tens of microseconds; walking it as a view costs milliseconds compiled)."""
    if type(buf) is bytes and (size == -1 or size == len(buf)):
        return buf
    return bytes(memoryview(buf)[:size] if size != -1 else buf)


def _skip_headers(buf: bytes, pos: int, record_end: int, header_count: int, index: int) -> int:
    if header_count < 0 or header_count > record_end - pos:
        raise _corrupt(f"record {index} has header count {header_count}", index)
    for _ in range(header_count):
        key_length, pos = decode_varint(buf, pos)
        if key_length < 0:
            raise _corrupt(f"record {index} has a header key of length {key_length}", index)
        pos += key_length
        value_length, pos = decode_varint(buf, pos)
        if value_length < -1:
            raise _corrupt(f"record {index} has a header value of length {value_length}", index)
        pos += max(value_length, 0)
        if pos > record_end:
            raise _invalid(f"record {index}'s headers run past its length", index)
    return pos


def _walk_stream(
    header: BatchHeader,
    payload: bytes | bytearray | memoryview,
    max_decompressed_bytes: int,
    walk: _Walk,
) -> int:
    """Walk a compressed payload chunk by chunk; return the decompressed size seen."""
    codec = header.compression
    pending: list[bytes] = []
    pending_size = 0
    total = 0
    chunks = decompress_stream(codec, payload, max_decompressed_bytes)
    try:
        for chunk in chunks:
            total += len(chunk)
            if pending:
                pending.append(chunk)
                pending_size += len(chunk)
                if pending_size < walk.need:
                    continue
                window = b"".join(pending)
                pending.clear()
            else:
                window = _as_bytes(chunk)
            pos = _scan(window, 0, walk)
            if walk.found is not None:
                return total
            if pos < len(window):
                pending.append(window[pos:])
                pending_size = len(window) - pos
                if total - pending_size + walk.need > max_decompressed_bytes:
                    # a record longer than the bound leaves: refused before it is decompressed
                    raise _invalid(
                        f"record {walk.index} takes {walk.need} bytes: the {codec.name.lower()} "
                        f"payload would decompress to more than {max_decompressed_bytes} bytes",
                        walk.index,
                    )
    except DecompressedSizeError as exc:
        raise _invalid(f"{exc} (records walked: {walk.index})") from None
    except DecompressionError as undecodable:
        raise _corrupt(str(undecodable)) from None
    finally:
        chunks.close()
    if pending:
        raise _corrupt(
            f"{codec.name.lower()} payload ends inside record {walk.index} "
            f"({pending_size} bytes of it)",
            walk.index,
        )
    return total


def check_batch_records(
    batch: bytes | bytearray | memoryview,
    header: BatchHeader,
    *,
    max_decompressed_bytes: int,
    check_max_timestamp: bool = True,
    require_keys: bool = False,
) -> RecordsSummary:
    """Walk every record of the batch at the start of `batch` (whose header is `header` and whose
    CRC has been checked) and check it against the header; raise RecordsError for the first
    problem. `check_max_timestamp` is off for LogAppendTime topics, whose broker overwrites the
    header's maxTimestamp. `require_keys` (a compacted topic) refuses records without a key
    (MissingKeyError), once the whole batch has been walked."""
    count = header.records_count
    if count < 1:
        raise _invalid(f"the header counts {count} records")
    walk = _Walk(count, require_keys=require_keys)
    if header.compression is Compression.NONE:
        size = header.size
        pos = _scan(_as_bytes(batch, size), BATCH_HEADER_SIZE, walk)
        if pos != size:
            raise _corrupt(
                f"the payload ends inside record {walk.index} ({size - pos} bytes of it)",
                walk.index,
            )
        uncompressed = size - BATCH_HEADER_SIZE
    else:
        payload = memoryview(batch)[BATCH_HEADER_SIZE : header.size]
        uncompressed = _walk_stream(header, payload, max_decompressed_bytes, walk)
    if walk.index != count:
        raise _invalid(f"the header counts {count} records, the batch holds {walk.index}")
    if walk.keyless:
        raise MissingKeyError(walk.keyless)
    max_timestamp = header.base_timestamp + walk.max_delta
    if check_max_timestamp and max_timestamp != header.max_timestamp:
        raise _invalid(
            f"the header's max timestamp is {header.max_timestamp}, its records' largest "
            f"timestamp is {max_timestamp}"
        )
    return RecordsSummary(count, max_timestamp, uncompressed)


def find_record_at_or_after(
    batch: bytes | bytearray | memoryview,
    header: BatchHeader,
    timestamp: int,
    min_offset: int,
    *,
    max_decompressed_bytes: int,
) -> RecordMatch | None:
    """The first record of a stored CreateTime batch whose timestamp is >= `timestamp` and whose
    offset is >= `min_offset`, or None. Records are walked one at a time, a compressed batch
    decompressed as a stream that stops there; RecordsError if the walk meets a problem first."""
    walk = _Walk(
        header.records_count,
        target_delta=timestamp - header.base_timestamp,
        min_index=min_offset - header.base_offset,
    )
    if header.compression is Compression.NONE:
        _scan(_as_bytes(batch, header.size), BATCH_HEADER_SIZE, walk)
    else:
        payload = memoryview(batch)[BATCH_HEADER_SIZE : header.size]
        _walk_stream(header, payload, max_decompressed_bytes, walk)
    if walk.found is None:
        return None
    index, delta = walk.found
    return RecordMatch(header.base_timestamp + delta, header.base_offset + index)
