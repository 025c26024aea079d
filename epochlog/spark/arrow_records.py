"""Record batches (v2) <-> Arrow columns, vectorised with numpy: the Spark source's decoder and
the sink's encoder. Sans-I/O.

Why. Decoding a fetch into one `ConsumerRecord` per record and then building Arrow columns from
those objects costs several microseconds a record in Python; encoding a record at a time in the
producer costs as much. Here the only per-record Python work is one walk over the records'
length prefixes (to find where each record starts); every field is then read, and every key and
value copied, by numpy over all the records of a fetch at once.

Decoding (`decode_fetch`): the whole batches of one partition's fetched bytes are checked (CRC),
decompressed, and their records turned into columns: offsets, timestamps, timestamp types, keys
and values as Arrow binary arrays (built from an offsets buffer and one data buffer), headers
when asked. As `fetch_decoder` does: a partial batch at the end is ignored, control batches never
yield records, with read_committed the batches of aborted transactions are skipped, and records
before the fetch offset (a compressed batch may start before it) are dropped; so are records at
or after `end_offset`. `next_offset` is where the next fetch starts.

Encoding (`encode_records`): rows for one partition become record batches of at most
`max_batch_bytes` (uncompressed) with offset deltas 0..n-1, one timestamp, optional compression,
and producer id / epoch / base sequence left for `records.stamp_producer` at send time.
`murmur2_partitions` computes Kafka's default partition of many keys at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa

from epochlog.client.fetch_decoder import TransactionFilter
from epochlog.protocol.compression import Compression, compress, decompress
from epochlog.protocol.errors import CorruptRecordError
from epochlog.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    RecordBatchBuilder,
    assemble_batch,
    decode_records,
    parse_batch_header,
    read_offset_and_length,
    verify_batch,
)
from epochlog.protocol.varint import decode_varint

Headers = list[tuple[str, bytes | None]]

_PAD = 16  # zero bytes after joined records, so the 16-byte record heads never run off the end
_ZIGZAG_1 = [(b >> 1) ^ -(b & 1) for b in range(128)]


# ------------------------------------------------------------------------------ varints


def _read_varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray | int]:
    """The zig-zag varints (varlongs too) at `pos`: (values, sizes); sizes is 1 when all are
    one byte long, the common case."""
    b = buf[pos]
    active = b >= 128
    if not active.any():
        v = b.astype(np.int64)
        return (v >> 1) ^ -(v & 1), 1
    value = (b & 0x7F).astype(np.int64)
    size = np.ones(len(pos), np.int64)
    last = len(buf) - 1  # reads past the end (only for records that end there) are clamped
    for j in range(1, 9):  # up to 9 bytes: 63 bits, within int64
        b = buf[np.minimum(pos + j, last)]
        value |= np.where(active, (b & 0x7F).astype(np.int64) << (7 * j), 0)
        size += active
        active &= b >= 128
        if not active.any():
            return (value >> 1) ^ -(value & 1), size
    return _read_long_varints(buf, pos)


def _read_long_varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_read_varints` for varlongs of 10 bytes, in unsigned arithmetic."""
    value = np.zeros(len(pos), np.uint64)
    size = np.zeros(len(pos), np.int64)
    active = np.ones(len(pos), bool)
    last = len(buf) - 1
    for j in range(10):
        b = buf[np.minimum(pos + j, last)].astype(np.uint64)
        value |= np.where(active, (b & np.uint64(0x7F)) << np.uint64(7 * j), np.uint64(0))
        size += active
        active &= b >= 128
    if active.any():
        raise CorruptRecordError("a record has a varint longer than 10 bytes")
    signed = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
    return signed, size


def _varint_sizes(zigzagged: np.ndarray) -> np.ndarray:
    """Encoded sizes of non-negative (already zig-zagged) values below 2**35."""
    v = zigzagged
    return 1 + (v >= 1 << 7).astype(np.int64) + (v >= 1 << 14) + (v >= 1 << 21) + (v >= 1 << 28)


def _varlong_sizes(zigzagged: np.ndarray) -> np.ndarray:
    """Encoded sizes of non-negative (already zig-zagged) values below 2**63: timestamp
    deltas, which may need more than the 5 bytes `_varint_sizes` counts."""
    sizes = np.ones(len(zigzagged), np.int64)
    for k in range(1, 9):
        sizes += zigzagged >= 1 << (7 * k)
    return sizes


def _write_varints(
    out: np.ndarray, pos: np.ndarray, zigzagged: np.ndarray, sizes: np.ndarray
) -> None:
    for j in range(int(sizes.max(initial=0))):
        sel = sizes > j
        v = zigzagged[sel]
        byte = (v >> (7 * j)) & 0x7F
        byte |= np.where(sizes[sel] > j + 1, 0x80, 0)
        out[pos[sel] + j] = byte


def _zigzag(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.int64)
    return (v << 1) ^ (v >> 63)


def _range_mask(size: int, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A boolean mask of `size` that is true on [starts[i], starts[i] + lengths[i]) for every i
    (ranges ascending and disjoint): runs of false and true, expanded by np.repeat."""
    n = len(starts)
    runs = np.empty(2 * n + 1, np.int64)
    ends = starts + lengths
    runs[0] = starts[0] if n else size
    if n:
        runs[2:-1:2] = starts[1:] - ends[:-1]
        runs[1::2] = lengths
        runs[-1] = size - ends[-1]
    pattern = np.zeros(2 * n + 1, bool)
    pattern[1::2] = True
    return np.repeat(pattern, runs)


def _equal_runs(starts: np.ndarray, sizes: np.ndarray) -> list[int]:
    """Bounds [0, .., n] of the runs of ranges of one size at one stride (a run of one range
    included)."""
    n = len(starts)
    if n <= 1:
        return [0, n]
    step = np.diff(starts)
    changed = sizes[1:] != sizes[:-1]
    changed[1:] |= step[1:] != step[:-1]
    return [0, *(np.flatnonzero(changed) + 1).tolist(), n]


def _gather(
    buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray, offsets: np.ndarray
) -> np.ndarray:
    """The byte ranges [starts[i], starts[i] + sizes[i]) of `buf`, concatenated (`offsets`: their
    cumulated sizes). Records of one producer mostly come in runs of equal layout: ranges of one
    size at one stride, which copy as a 2-d strided view; otherwise a mask picks the bytes."""
    n = len(starts)
    total = int(offsets[-1])
    if not total:
        return np.zeros(0, np.uint8)
    bounds = _equal_runs(starts, sizes)
    if len(bounds) > n // 16 + 8:  # no long runs: a mask is cheaper than many small copies
        return buf[_range_mask(len(buf), starts, sizes)]
    data = np.empty(total, np.uint8)
    for a, b in zip(bounds[:-1], bounds[1:], strict=False):
        size = int(sizes[a])
        if not size:
            continue
        at = int(starts[a])
        out = int(offsets[a])
        if b - a == 1:
            data[out : out + size] = buf[at : at + size]
            continue
        rows = np.lib.stride_tricks.as_strided(
            buf[at:], shape=(b - a, size), strides=(int(starts[a + 1]) - at, 1), writeable=False
        )
        data[out : out + (b - a) * size].reshape(b - a, size)[...] = rows
    return data


def _binary_array(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """An Arrow binary array of the byte ranges of `buf` (length -1: null)."""
    n = len(starts)
    valid = lengths >= 0
    sizes = np.where(valid, lengths, 0)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("more than 2 GiB of keys or values in one Arrow batch")
    data = _gather(buf, starts, sizes, offsets)
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
        null_count=int(n - valid.sum()),
    )


# ------------------------------------------------------------------------------ decoding


@dataclass
class DecodedColumns:
    """The records of one fetch as columns (all the same length)."""

    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, ms
    timestamp_types: np.ndarray  # int32: 0 CreateTime, 1 LogAppendTime
    keys: pa.Array  # binary
    values: pa.Array  # binary
    headers: list[Headers] | None  # with want_headers only
    next_offset: int  # where the next fetch starts; == fetch offset if nothing whole arrived
    last_epoch: int  # partition leader epoch of the last batch, -1 if none

    def __len__(self) -> int:
        return len(self.offsets)


@dataclass
class _Batch:
    payload_at: int  # where its records start in the buffer decoded (joined or in place)
    count: int
    base_offset: int
    base_timestamp: int
    log_append_time: int | None
    has_records_in_range: bool = True


def _is_abort_marker(data: bytes | memoryview, pos: int, header: object) -> bool:
    for r in decode_records(bytes(_payload(data, pos, header)), header):  # type: ignore[arg-type]
        if r.key is not None and len(r.key) >= 4:
            return int.from_bytes(r.key[2:4], "big", signed=True) == 0
    return False


def _payload(buf: bytes | memoryview, pos: int, header: object) -> bytes | memoryview:
    h = header
    raw = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + h.size]  # type: ignore[attr-defined]
    if h.compression is Compression.NONE:  # type: ignore[attr-defined]
        return raw
    try:
        return decompress(h.compression, bytes(raw))  # type: ignore[attr-defined]
    except CorruptRecordError:
        raise
    except Exception as exc:  # each library raises its own type
        raise CorruptRecordError(
            f"batch at offset {h.base_offset}: {h.compression.name} payload does "  # type: ignore[attr-defined]
            f"not decompress: {exc}"
        ) from exc


def next_fetch_offset(data: bytes | memoryview | None, fetch_offset: int) -> int:
    """Where the fetch after this one starts: the end of the last whole batch (headers only)."""
    following = fetch_offset
    if not data:
        return following
    pos = 0
    end = len(data)
    while end - pos >= LOG_OVERHEAD:
        _, length = read_offset_and_length(data, pos)
        if end - pos < length + LOG_OVERHEAD:
            break
        header = parse_batch_header(data, pos)
        following = max(following, header.next_offset)
        pos += header.size
    return following


def decode_fetch(
    data: bytes | memoryview | None,
    fetch_offset: int,
    end_offset: int | None = None,
    *,
    read_committed: bool = False,
    aborted: Sequence[tuple[int, int]] = (),
    want_headers: bool = False,
) -> DecodedColumns:
    """Columns of the records in [fetch_offset, end_offset) of one partition's fetched bytes;
    `aborted` is the response's (producer id, first offset) pairs. See the module docstring."""
    batches: list[_Batch] = []
    payloads: list[bytes | memoryview] = []
    in_place: list[int] = []  # where each payload starts in `data`, while all are uncompressed
    next_offset = fetch_offset
    last_epoch = -1
    at = 0
    if data:
        transactions = TransactionFilter(read_committed, aborted)
        pos = 0
        end = len(data)
        while end - pos >= LOG_OVERHEAD:
            _, length = read_offset_and_length(data, pos)
            if end - pos < length + LOG_OVERHEAD:
                break  # a partial batch, cut by the fetch size limits
            header = parse_batch_header(data, pos)
            verify_batch(data, pos, header)
            start_of_batch = pos
            pos += header.size
            if end_offset is not None and header.base_offset >= end_offset:
                break
            next_offset = max(next_offset, header.next_offset)
            last_epoch = header.partition_leader_epoch
            marker = partial(_is_abort_marker, data, start_of_batch, header)
            if transactions.skips(header, marker):
                continue
            if header.last_offset < fetch_offset or header.records_count <= 0:
                if header.records_count < 0:
                    raise CorruptRecordError(
                        f"batch at offset {header.base_offset} has a negative record count "
                        f"{header.records_count}"
                    )
                continue
            payload = _payload(data, start_of_batch, header)
            batches.append(
                _Batch(
                    at,
                    header.records_count,
                    header.base_offset,
                    header.base_timestamp,
                    header.max_timestamp if header.is_log_append_time else None,
                )
            )
            payloads.append(payload)
            at += len(payload)
            if header.compression is Compression.NONE:
                in_place.append(start_of_batch + BATCH_HEADER_SIZE)
    if not batches:
        empty = np.zeros(0, np.int64)
        return DecodedColumns(
            empty,
            empty,
            np.zeros(0, np.int32),
            pa.array([], pa.binary()),
            pa.array([], pa.binary()),
            [] if want_headers else None,
            next_offset,
            last_epoch,
        )
    if isinstance(data, bytes) and len(in_place) == len(batches):
        # Uncompressed: the records are read where they are in the fetched bytes (no copy).
        joined = data
        for b, start in zip(batches, in_place, strict=True):
            b.payload_at = start
    else:
        joined = b"".join([*payloads, bytes(_PAD)])  # padded: see _PAD
    try:
        return _decode_records(
            joined,
            payloads,
            batches,
            fetch_offset,
            end_offset,
            want_headers,
            next_offset,
            last_epoch,
        )
    except (IndexError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"fetched records are malformed: {exc}") from exc


def _record_starts(
    buf: np.ndarray, joined: bytes, batches: list[_Batch], ends: list[int]
) -> np.ndarray:
    """Where each record starts in `joined`. Records follow one another, each led by its length,
    so this is a walk; it guesses that the next records have the length of the current one
    (records of one producer often do), checks a window of guesses at once with numpy (their
    length prefixes must be the current one's bytes), and keeps the verified prefix. Where
    lengths keep changing it walks in Python."""
    parts: list[np.ndarray] = []
    for b, end in zip(batches, ends, strict=True):
        pos = b.payload_at
        left = b.count
        window = 256
        while left > 0:
            length, body = decode_varint(joined, pos)
            if length < 0:
                break
            stride = body - pos + length
            m = min(window, left, (end - pos - 1) // stride + 1)
            guess = np.arange(pos, pos + stride * m, stride, dtype=np.int64)
            same = buf[guess] == joined[pos]
            for j in range(1, body - pos):
                same &= buf[np.minimum(guess + j, len(buf) - 1)] == joined[pos + j]
            wrong = np.flatnonzero(~same)
            k = int(wrong[0]) + 1 if len(wrong) else m  # guess[:k] are record starts
            parts.append(guess[:k])
            left -= k
            if not len(wrong):
                pos = int(guess[-1]) + stride
                window = min(window * 4, 1 << 16)
                continue
            length, body = decode_varint(joined, int(guess[k - 1]))
            pos = body + length
            if k < 16 and left > 0:  # lengths vary: walk a stretch in Python
                walked, pos = _walk(joined, pos, min(left, 128))
                parts.append(np.array(walked, np.int64))
                left -= len(walked)
                window = 64
            else:
                window = 256
        if pos != end or left:
            raise CorruptRecordError(
                f"batch at offset {b.base_offset}: its {b.count} records do not fill its "
                f"{end - b.payload_at} bytes"
            )
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _walk(joined: bytes, pos: int, count: int) -> tuple[list[int], int]:
    zz = _ZIGZAG_1
    starts: list[int] = []
    for _ in range(count):
        starts.append(pos)
        byte = joined[pos]
        if byte < 128:
            pos += zz[byte] + 1
        else:
            length, body = decode_varint(joined, pos)
            if length < 0:
                raise CorruptRecordError(f"a record has a negative length {length}")
            pos = body + length
    return starts, pos


_HEAD = 16  # bytes of each record read at once by `_record_heads`


def _record_heads(
    joined: bytes, starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(length, record_end, timestamp delta, offset delta, key length, where the key starts) of
    each record, read from a copy of its first 16 bytes: one gather over the fetched bytes instead
    of one per byte of each of those four varints (each gather over a multi-MiB fetch reads
    memory outside the CPU's cache again); None when a record's fields up to its key do not
    all lie in its first 16 bytes (read them from the records then)."""
    n = len(starts)
    heads = np.zeros(n * _HEAD + _PAD, np.uint8)  # padded: see _PAD
    # Records starting in the buffer's last 16 bytes (read in place, it has no padding) are
    # copied as far as the buffer goes; zeros follow them.
    whole = int(np.searchsorted(starts, len(joined) - _HEAD, "right"))
    items = np.ndarray((max(0, len(joined) - _HEAD + 1),), f"V{_HEAD}", buffer=joined, strides=(1,))
    heads[: whole * _HEAD].view(f"V{_HEAD}")[:] = items[starts[:whole]]
    for i in range(whole, n):
        tail = np.frombuffer(joined, np.uint8)[int(starts[i]) :]
        heads[i * _HEAD : i * _HEAD + len(tail)] = tail
    rows = np.arange(0, n * _HEAD, _HEAD, dtype=np.int64)
    try:
        length, length_size, ts_delta, offset_delta, key_len, key_at = _record_fields(heads, rows)
    except CorruptRecordError:  # a varint ran past its record's 16 bytes, into the next's
        return None
    if int(key_at.max(initial=0)) > _HEAD:
        return None
    return length, starts + length_size + length, ts_delta, offset_delta, key_len, starts + key_at


def _record_fields(
    data: np.ndarray, at: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(length, the length's size, timestamp delta, offset delta, key length, where the key
    starts) of the records starting at `at` in `data`; sizes and the key's start counted from
    `at`."""
    length, length_size = _read_varints(data, at)
    pos = at + length_size + 1  # attributes: unused
    ts_delta, size = _read_varints(data, pos)
    pos += size
    offset_delta, size = _read_varints(data, pos)
    pos += size
    key_len, size = _read_varints(data, pos)
    pos += size
    return length, length_size, ts_delta, offset_delta, key_len, pos - at


def _decode_records(
    joined: bytes,
    payloads: list[bytes | memoryview],
    batches: list[_Batch],
    fetch_offset: int,
    end_offset: int | None,
    want_headers: bool,
    next_offset: int,
    last_epoch: int,
) -> DecodedColumns:
    buf = np.frombuffer(joined, np.uint8)
    ends = [b.payload_at + len(p) for b, p in zip(batches, payloads, strict=True)]
    starts = _record_starts(buf, joined, batches, ends)
    counts = np.array([b.count for b in batches], np.int64)
    base_offsets = np.repeat(np.array([b.base_offset for b in batches], np.int64), counts)
    base_ts = np.repeat(np.array([b.base_timestamp for b in batches], np.int64), counts)
    append_times = [b.log_append_time for b in batches]
    heads = _record_heads(joined, starts)
    if heads is None:
        length, length_size, ts_delta, offset_delta, key_len, key_at = _record_fields(buf, starts)
        record_end = starts + length_size + length
        pos = starts + key_at
    else:
        length, record_end, ts_delta, offset_delta, key_len, pos = heads
    key_at = pos
    pos = pos + np.maximum(key_len, 0)
    value_len, size = _read_varints(buf, pos)
    pos += size
    value_at = pos
    pos = pos + np.maximum(value_len, 0)
    header_count, size = _read_varints(buf, pos)
    pos += size
    if (key_len < -1).any() or (value_len < -1).any() or (header_count < 0).any():
        raise CorruptRecordError("a record has a negative key, value or header length")
    offsets = base_offsets + offset_delta
    timestamps = base_ts + ts_delta
    ts_types = np.zeros(len(starts), np.int32)
    if any(t is not None for t in append_times):
        is_append = np.repeat(np.array([t is not None for t in append_times]), counts)
        stamped = np.repeat(np.array([t or 0 for t in append_times], np.int64), counts)
        timestamps = np.where(is_append, stamped, timestamps)
        ts_types = is_append.astype(np.int32)
    with_headers = np.flatnonzero(header_count)
    headers: list[Headers] | None = None
    if len(with_headers):
        parsed: dict[int, Headers] = {}
        for i in with_headers.tolist():
            parsed[i], pos[i] = _read_headers(joined, int(pos[i]), int(header_count[i]))
        if want_headers:
            headers = [parsed.get(i, []) for i in range(len(starts))]
    elif want_headers:
        headers = [[] for _ in range(len(starts))]
    if not np.array_equal(pos, record_end):
        bad = int(np.flatnonzero(pos != record_end)[0])
        raise CorruptRecordError(
            f"record at offset {int(offsets[bad])} declares {int(length[bad])} bytes but its "
            f"fields take {int(length[bad] + pos[bad] - record_end[bad])}"
        )
    keep = offsets >= fetch_offset
    if end_offset is not None:
        keep &= offsets < end_offset
    if not keep.all():
        idx = np.flatnonzero(keep)
        offsets, timestamps, ts_types = offsets[idx], timestamps[idx], ts_types[idx]
        key_at, key_len, value_at, value_len = (
            key_at[idx],
            key_len[idx],
            value_at[idx],
            value_len[idx],
        )
        if headers is not None:
            headers = [headers[i] for i in idx.tolist()]
    return DecodedColumns(
        offsets,
        timestamps,
        ts_types,
        _binary_array(buf, key_at, key_len),
        _binary_array(buf, value_at, value_len),
        headers,
        next_offset,
        last_epoch,
    )


def _read_headers(payload: bytes, pos: int, count: int) -> tuple[Headers, int]:
    out: Headers = []
    for _ in range(count):
        n, pos = decode_varint(payload, pos)
        if n < 0:
            raise CorruptRecordError("record header key is null")
        key = payload[pos : pos + n].decode("utf-8", errors="strict")
        pos += n
        n, pos = decode_varint(payload, pos)
        if n < -1:
            raise CorruptRecordError(f"record header value has negative length {n}")
        if n == -1:
            value = None
        else:
            value = payload[pos : pos + n]
            pos += n
        out.append((key, value))
    return out, pos


# ------------------------------------------------------------------------------ encoding


def as_binary(column: pa.Array | pa.ChunkedArray | None, n: int) -> pa.Array:
    """A binary array of `n` rows from a binary or string column (None: all null)."""
    if column is None:
        return pa.nulls(n, pa.binary())
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary() if pa.types.is_string(column.type) else pa.large_binary())
    if pa.types.is_large_binary(column.type):
        column = column.cast(pa.binary())
    if not pa.types.is_binary(column.type):
        raise TypeError(f"a key or value column must be binary or string, not {column.type}")
    return column


def _binary_parts(array: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lengths with -1 for null, start of each value in data, data) of a binary array."""
    n = len(array)
    validity, offsets_buf, data_buf = array.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32)[array.offset : array.offset + n + 1].astype(
        np.int64
    )
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    if array.null_count:
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        lengths = np.where(valid, lengths, -1)
    return lengths, offsets[:-1], data


def murmur2_partitions(keys: pa.Array, partitions: int) -> np.ndarray:
    """Kafka's default partition (`toPositive(murmur2(key)) % partitions`) of every key, -1 for a
    null key; the same as `epochlog.client.partitioner.partition_for_key`, key by key."""
    keys = as_binary(keys, len(keys))
    lengths, starts, data = _binary_parts(keys)
    out = np.full(len(keys), -1, np.int64)
    m = np.uint32(0x5BD1E995)
    for length in np.unique(lengths[lengths >= 0]).tolist():
        rows = np.flatnonzero(lengths == length)
        block = data[starts[rows, None] + np.arange(length)] if length else None
        with np.errstate(over="ignore"):
            h = np.full(len(rows), (0x9747B28C ^ length) & 0xFFFFFFFF, np.uint32)
            for i in range(length // 4):
                assert block is not None
                k = block[:, 4 * i : 4 * i + 4].copy().view("<u4").ravel()
                k = k * m
                k ^= k >> np.uint32(24)
                k = k * m
                h = (h * m) ^ k
            tail = length & 3
            base = length - tail
            if tail:
                assert block is not None
                if tail == 3:
                    h ^= block[:, base + 2].astype(np.uint32) << np.uint32(16)
                if tail >= 2:
                    h ^= block[:, base + 1].astype(np.uint32) << np.uint32(8)
                h ^= block[:, base].astype(np.uint32)
                h = h * m
            h ^= h >> np.uint32(13)
            h = h * m
            h ^= h >> np.uint32(15)
        out[rows] = (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % partitions
    return out


@dataclass
class EncodedBatch:
    data: bytes  # producer id, epoch and sequence unset (-1): records.stamp_producer sets them
    records: int


def encode_records(
    keys: pa.Array,
    values: pa.Array,
    timestamp: int | np.ndarray,
    *,
    headers: Sequence[Headers] | None = None,
    max_batch_bytes: int = 512 * 1024,
    compression: Compression = Compression.NONE,
) -> list[EncodedBatch]:
    """Record batches of the rows (binary arrays of equal length), in row order, each at most
    `max_batch_bytes` before compression unless it holds a single record. `timestamp` is one
    for every record, or one per record (int64 milliseconds): then each batch's base timestamp
    is its first record's, and each record carries its delta from it, as Kafka's producer."""
    n = len(values)
    if n == 0:
        return []
    if isinstance(timestamp, np.ndarray) and len(timestamp) != n:
        raise ValueError(f"{len(timestamp)} timestamps for {n} records")
    if headers is not None and any(headers):
        return _encode_with_headers(keys, values, timestamp, headers, max_batch_bytes, compression)
    key_len, key_from, key_data = _binary_parts(keys)
    value_len, value_from, value_data = _binary_parts(values)
    kz, vz = _zigzag(key_len), _zigzag(value_len)
    k_size, v_size = _varint_sizes(kz), _varint_sizes(vz)
    fixed = 3 + k_size + np.maximum(key_len, 0) + v_size + np.maximum(value_len, 0)  # + delta
    # An upper bound per record (offset delta <= 5 bytes, length prefix <= 5, a timestamp delta
    # <= 10) to cut batches.
    bound = np.cumsum(fixed + (19 if isinstance(timestamp, np.ndarray) else 10))
    out: list[EncodedBatch] = []
    lo = 0
    while lo < n:
        before = bound[lo - 1] if lo else 0
        hi = int(np.searchsorted(bound, before + max_batch_bytes - BATCH_HEADER_SIZE, "right"))
        hi = min(max(hi, lo + 1), n)
        out.append(
            _encode_chunk(
                lo,
                hi,
                key_len,
                key_from,
                key_data,
                kz,
                k_size,
                value_len,
                value_from,
                value_data,
                vz,
                v_size,
                fixed,
                timestamp,
                compression,
            )
        )
        lo = hi
    return out


def _encode_chunk(
    lo: int,
    hi: int,
    key_len: np.ndarray,
    key_from: np.ndarray,
    key_data: np.ndarray,
    kz: np.ndarray,
    k_size: np.ndarray,
    value_len: np.ndarray,
    value_from: np.ndarray,
    value_data: np.ndarray,
    vz: np.ndarray,
    v_size: np.ndarray,
    fixed: np.ndarray,
    timestamp: int | np.ndarray,
    compression: Compression,
) -> EncodedBatch:
    m = hi - lo
    sl = slice(lo, hi)
    delta_z = np.arange(m, dtype=np.int64) << 1
    d_size = _varint_sizes(delta_z)
    if isinstance(timestamp, np.ndarray):
        stamps = timestamp[sl].astype(np.int64)
        base, newest = int(stamps[0]), int(stamps.max())
        tz = _zigzag(stamps - base)
        t_size = _varlong_sizes(tz)
    else:
        base = newest = timestamp
        tz = None
        t_size = np.ones(m, np.int64)  # a delta of 0: one byte
    body = fixed[sl] + d_size + t_size - 1  # `fixed` counts one timestamp delta byte
    body_z = body << 1
    b_size = _varint_sizes(body_z)
    record = b_size + body
    start = np.zeros(m, np.int64)
    np.cumsum(record[:-1], out=start[1:])
    total = int(start[-1] + record[-1])
    out = np.zeros(total, np.uint8)  # attributes, timestamp delta 0 and header count 0 stay 0
    _write_varints(out, start, body_z, b_size)
    pos = start + b_size + 1  # attributes
    if tz is not None:
        _write_varints(out, pos, tz, t_size)
    pos += t_size  # the timestamp delta
    _write_varints(out, pos, delta_z, d_size)
    pos += d_size
    _write_varints(out, pos, kz[sl], k_size[sl])
    pos += k_size[sl]
    _copy_ranges(out, pos, key_len[sl], key_from[sl], key_data)
    pos += np.maximum(key_len[sl], 0)
    _write_varints(out, pos, vz[sl], v_size[sl])
    pos += v_size[sl]
    _copy_ranges(out, pos, value_len[sl], value_from[sl], value_data)
    return EncodedBatch(_finish_batch(out.tobytes(), m, base, newest, compression), m)


def _copy_ranges(
    out: np.ndarray, to: np.ndarray, lengths: np.ndarray, src_from: np.ndarray, data: np.ndarray
) -> None:
    """Copy the values (consecutive in `data` from src_from[0]: rows of one binary array) to
    the ranges of `out` starting at `to`."""
    sizes = np.maximum(lengths, 0)
    total = int(sizes.sum())
    if not total:
        return
    first = int(src_from[0])
    bounds = _equal_runs(to, sizes)
    if len(bounds) > len(to) // 16 + 8:  # no long runs: one masked copy (as `_gather`)
        nonempty = sizes > 0
        out[_range_mask(len(out), to[nonempty], sizes[nonempty])] = data[first : first + total]
        return
    # Runs of equal size at one stride (rows of one layout): each a 2-d strided copy.
    src = first
    for a, b in zip(bounds[:-1], bounds[1:], strict=False):
        size = int(sizes[a])
        if not size:
            continue
        at = int(to[a])
        m = b - a
        if m == 1:
            out[at : at + size] = data[src : src + size]
        else:
            rows = np.lib.stride_tricks.as_strided(
                out[at:], shape=(m, size), strides=(int(to[a + 1]) - at, 1)
            )
            rows[...] = data[src : src + m * size].reshape(m, size)
        src += m * size


def _finish_batch(
    records: bytes, count: int, timestamp: int, max_timestamp: int, compression: Compression
) -> bytes:
    payload = records if compression is Compression.NONE else compress(compression, records)
    return assemble_batch(
        BatchHeader(
            0,
            0,
            NO_PARTITION_LEADER_EPOCH,
            MAGIC_V2,
            0,
            int(compression),
            count - 1,
            timestamp,
            max_timestamp,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            NO_SEQUENCE,
            count,
        ),
        payload,
    )


def _encode_with_headers(
    keys: pa.Array,
    values: pa.Array,
    timestamp: int | np.ndarray,
    headers: Sequence[Headers],
    max_batch_bytes: int,
    compression: Compression,
) -> list[EncodedBatch]:
    """Rows with headers: the protocol's builder, a record at a time (the uncommon case)."""
    out: list[EncodedBatch] = []
    builder = RecordBatchBuilder(compression)
    stamps = timestamp.tolist() if isinstance(timestamp, np.ndarray) else [timestamp] * len(values)
    for key, value, hdrs, ts in zip(
        keys.to_pylist(), values.to_pylist(), headers, stamps, strict=True
    ):
        if len(builder) and builder.estimated_size + _size(key, value, hdrs) > max_batch_bytes:
            out.append(EncodedBatch(builder.build(), len(builder)))
            builder = RecordBatchBuilder(compression)
        builder.append(int(ts), key, value, hdrs)
    if len(builder):
        out.append(EncodedBatch(builder.build(), len(builder)))
    return out


def _size(key: bytes | None, value: bytes | None, headers: Headers) -> int:
    size = 21 + (len(key) if key else 0) + (len(value) if value else 0)
    for k, v in headers:
        size += 10 + len(k.encode()) + (len(v) if v else 0)
    return size
