"""Record batch v2 (magic 2): the broker's view and the client's view.

The broker never builds records. It reads the 61-byte batch header, verifies the CRC-32C that
covers everything from the attributes to the end of the batch, walks a producer's records to
check them against the header without keeping any (`record_validation`), and stamps the base
offset and the partition leader epoch into the header in place; neither field is covered by the
CRC, so the client's CRC stays valid. Clients build and read whole batches:
`RecordBatchBuilder` writes one, `decode_batch` reads one back, with gzip, snappy, lz4 or zstd
compression (see `compression`).

Layout (big-endian), from Kafka's DefaultRecordBatch:

    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
    17 crc uint32 | 21 attributes int16 | 23 lastOffsetDelta int32 | 27 baseTimestamp int64
    35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32
    57 recordsCount int32 | 61 records...
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mypy_extensions import mypyc_attr

from epochlog.protocol.compression import Compression, compress, decompress
from epochlog.protocol.errors import CorruptRecordError, DecodeError, InvalidRecordError
from epochlog.protocol.varint import (
    decode_varint,
    encode_varint,
    size_of_varint,
)

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch that batchLength does not count
MAGIC_V2 = 2
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_MAX_TIMESTAMP = struct.Struct(">q")
assert _HEADER.size == BATCH_HEADER_SIZE


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        codec = _CODECS_BY_ID.get(self.attributes & COMPRESSION_MASK)
        if codec is None:  # as Compression(id) would: the id names no codec
            raise ValueError(f"{self.attributes & COMPRESSION_MASK} is not a valid Compression")
        return codec

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


# A dict lookup, not an enum call: every produced and replicated batch asks for its codec.
_CODECS_BY_ID = {codec.value: codec for codec in Compression}


def parse_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Read the batch header at `pos`; checks only that 61 bytes and the v2 magic are there."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch at byte {pos} is truncated: {len(buf) - pos} bytes, "
            f"a header needs {BATCH_HEADER_SIZE}"
        )
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(
            f"record batch at byte {pos} has magic {header.magic}; only magic 2 is supported"
        )
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"record batch at byte {pos} has batchLength {header.batch_length}, "
            f"less than the header's {BATCH_HEADER_SIZE - LOG_OVERHEAD}"
        )
    return header


def batch_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C over the batch from its attributes to its end (what the header's crc covers)."""
    global _crc32c
    if _crc32c is None:
        # Imported on first use: crc32c's package import reads its distribution metadata
        # (importlib.metadata, argparse; ~15 ms), which a process that never checks a batch
        # (Spark's driver) need not pay.
        from crc32c import crc32c

        _crc32c = crc32c
    return _crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


_crc32c: Callable[[bytes | bytearray | memoryview], int] | None = None


def verify_batch(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> None:
    """Raise CorruptRecordError unless the whole batch is present and its CRC matches."""
    if len(buf) - pos < header.size:
        raise CorruptRecordError(
            f"record batch at byte {pos} is truncated: batchLength says {header.size} bytes, "
            f"{len(buf) - pos} are present"
        )
    actual = batch_crc(buf, pos, header.size)
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch at byte {pos} (base offset {header.base_offset}) fails its CRC: "
            f"stored {header.crc:#010x}, computed {actual:#010x}"
        )


def iter_batches(
    buf: bytes | bytearray | memoryview, verify: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each batch in a buffer of whole batches.

    Raises CorruptRecordError at the first batch that is truncated, has a bad magic or length, or
    (with `verify`) fails its CRC; batches before it have already been yielded.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        header = parse_batch_header(buf, pos)
        if verify:
            verify_batch(buf, pos, header)
        elif end - pos < header.size:
            raise CorruptRecordError(f"record batch at byte {pos} is truncated")
        yield pos, header
        pos += header.size


def stamp_batch(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Write the base offset and partition leader epoch into the batch at `pos`, in place.

    Neither field is covered by the CRC, so the batch stays valid.
    """
    _BASE_OFFSET.pack_into(buf, pos, base_offset)
    _LEADER_EPOCH.pack_into(buf, pos + 12, leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with `timestamp` as its max timestamp and recompute its CRC."""
    (attributes,) = struct.unpack_from(">h", buf, pos + ATTRIBUTES_OFFSET)
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _MAX_TIMESTAMP.pack_into(buf, pos + 35, timestamp)
    _CRC.pack_into(buf, pos + CRC_OFFSET, batch_crc(buf, pos, size))


def read_offset_and_length(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(baseOffset, batchLength) of the batch at `pos`: enough to walk a log file batch by batch."""
    return _OFFSET_AND_LENGTH.unpack_from(buf, pos)


# --------------------------------------------------------------------------- client side: records


_PRODUCER_FIELDS = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
_PRODUCER_FIELDS_OFFSET = 43
_ATTRIBUTES = struct.Struct(">h")


def assemble_batch(header: BatchHeader, payload: bytes | bytearray | memoryview) -> bytes:
    """A whole v2 batch: `header`'s fields in front of `payload` (its records, compressed or
    not), with the batch length, magic 2 and the CRC-32C computed here (the header's own values
    of those three are ignored). The one place a batch is laid out: the producers (ours and
    the Spark sink's) and the cleaner build theirs with it."""
    batch = bytearray(BATCH_HEADER_SIZE)
    batch += payload
    _HEADER.pack_into(
        batch,
        0,
        header.base_offset,
        len(batch) - LOG_OVERHEAD,
        header.partition_leader_epoch,
        MAGIC_V2,
        0,
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
    )
    _CRC.pack_into(batch, CRC_OFFSET, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


def stamp_producer(
    batch: bytes,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool = False,
) -> bytes:
    """`batch` with producer id, epoch and base sequence written in (and the transactional
    attribute set if asked), its CRC fixed: what a producer does at send time."""
    buf = bytearray(batch)
    _PRODUCER_FIELDS.pack_into(
        buf, _PRODUCER_FIELDS_OFFSET, producer_id, producer_epoch, base_sequence
    )
    if transactional:
        (attributes,) = _ATTRIBUTES.unpack_from(buf, ATTRIBUTES_OFFSET)
        _ATTRIBUTES.pack_into(buf, ATTRIBUTES_OFFSET, attributes | TRANSACTIONAL_MASK)
    _CRC.pack_into(buf, CRC_OFFSET, batch_crc(buf, 0, len(buf)))
    return bytes(buf)


@dataclass(slots=True)
class Header:
    key: str
    value: bytes | None


@dataclass(slots=True)
class Record:
    """One record as a client sees it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


@dataclass(slots=True)
class RecordBatch:
    """A decoded batch: the header and its records (control batches included, marked)."""

    header: BatchHeader
    records: list[Any]  # Records unless decoded with another record maker

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset


def _encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header | tuple[str, bytes | None]],
) -> None:
    body = bytearray(b"\x00")  # attributes: unused
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    if key is None:
        body += b"\x01"  # varint -1
    else:
        body += encode_varint(len(key))
        body += key
    if value is None:
        body += b"\x01"
    else:
        body += encode_varint(len(value))
        body += value
    body += encode_varint(len(headers))
    for h in headers:
        hkey, hvalue = (h.key, h.value) if isinstance(h, Header) else h
        raw_key = hkey.encode()
        body += encode_varint(len(raw_key))
        body += raw_key
        if hvalue is None:
            body += b"\x01"
        else:
            body += encode_varint(len(hvalue))
            body += hvalue
    out += encode_varint(len(body))
    out += body


# Compiled by mypyc (epochlog._build); the client's ProducerBatchBuilder extends it uncompiled.
@mypyc_attr(allow_interpreted_subclasses=True)
class RecordBatchBuilder:
    """Builds one v2 batch from records appended in offset order (offsets relative to 0).

    The broker assigns the real base offset on append; producers leave it 0.
    """

    def __init__(
        self,
        compression: Compression = Compression.NONE,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        is_transactional: bool = False,
        is_control: bool = False,
    ) -> None:
        self.compression = compression
        self.is_control = is_control
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.base_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        self.is_transactional = is_transactional
        self._records = bytearray()
        self._count = 0
        self._base_timestamp: int | None = None
        self._max_timestamp = NO_TIMESTAMP

    def __len__(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        """Uncompressed size so far; what `batch.size` is compared against."""
        return BATCH_HEADER_SIZE + len(self._records)

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header | tuple[str, bytes | None]] = (),
    ) -> int:
        """Append a record; returns its offset delta within the batch."""
        if self._base_timestamp is None:
            self._base_timestamp = timestamp
        delta = self._count
        _encode_record(self._records, delta, timestamp - self._base_timestamp, key, value, headers)
        self._count += 1
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return delta

    def build(self) -> bytes:
        """The finished batch, CRC included."""
        if self._count == 0:
            raise InvalidRecordError("a record batch needs at least one record")
        payload: bytes | bytearray = self._records
        if self.compression is not Compression.NONE:
            payload = compress(self.compression, bytes(payload))
        attributes = int(self.compression)
        if self.is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if self.is_control:
            attributes |= CONTROL_MASK
        base_ts = self._base_timestamp if self._base_timestamp is not None else NO_TIMESTAMP
        return assemble_batch(
            BatchHeader(
                self.base_offset,
                0,
                self.partition_leader_epoch,
                MAGIC_V2,
                0,
                attributes,
                self._count - 1,
                base_ts,
                self._max_timestamp,
                self.producer_id,
                self.producer_epoch,
                self.base_sequence,
                self._count,
            ),
            payload,
        )


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"record field has negative length {length}")
        return None, pos
    end = pos + length
    if end > len(buf):
        raise CorruptRecordError("record field runs past the end of its batch")
    return buf[pos:end], end


# Zig-zag varints of one byte (-64..63) are by far the most common in records: decode them with a
# table lookup inline instead of a call.
_ZIGZAG_1 = [(b >> 1) ^ -(b & 1) for b in range(128)]


RecordMaker = Callable[[int, int, "bytes | None", "bytes | None", list[Header]], Any]


def decode_records(payload: bytes, header: BatchHeader, make: RecordMaker = Record) -> list[Any]:
    """The records of a batch body (already decompressed), each built by
    `make(offset, timestamp, key, value, headers)` (a `Record` by default: a consumer builds
    its own record type directly, without a Record in between)."""
    count = header.records_count
    if count < 0:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} has a negative record count {count}"
        )
    zz = _ZIGZAG_1
    varint = decode_varint
    records: list[Any] = []
    append = records.append
    pos = 0
    end = len(payload)
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    append_time = header.max_timestamp if header.is_log_append_time else None
    for _ in range(count):
        b = payload[pos]
        if b < 128:
            length = zz[b]
            pos += 1
        else:
            length, pos = varint(payload, pos)
        record_end = pos + length
        if length < 0 or record_end > end:
            raise CorruptRecordError(
                f"record {len(records)} of batch at offset {base_offset} has length "
                f"{length}, {end - pos} bytes remain"
            )
        pos += 1  # attributes
        b = payload[pos]
        if b < 128:
            ts_delta = zz[b]
            pos += 1
        else:
            ts_delta, pos = varint(payload, pos)
        b = payload[pos]
        if b < 128:
            offset_delta = zz[b]
            pos += 1
        else:
            offset_delta, pos = varint(payload, pos)
        b = payload[pos]
        if b < 128:
            n = zz[b]
            pos += 1
        else:
            n, pos = varint(payload, pos)
        if n < 0:
            if n != -1:
                raise CorruptRecordError(f"record key has negative length {n}")
            key = None
        else:
            if pos + n > record_end:
                raise CorruptRecordError("record key runs past the end of its record")
            key = payload[pos : pos + n]
            pos += n
        b = payload[pos]
        if b < 128:
            n = zz[b]
            pos += 1
        else:
            n, pos = varint(payload, pos)
        if n < 0:
            if n != -1:
                raise CorruptRecordError(f"record value has negative length {n}")
            value = None
        else:
            if pos + n > record_end:
                raise CorruptRecordError("record value runs past the end of its record")
            value = payload[pos : pos + n]
            pos += n
        b = payload[pos]
        if b < 128:
            header_count = zz[b]
            pos += 1
        else:
            header_count, pos = varint(payload, pos)
        headers: list[Header] = []
        if header_count:
            if header_count < 0 or header_count > record_end - pos:
                raise CorruptRecordError(f"record has an impossible header count {header_count}")
            for _h in range(header_count):
                raw_key, pos = _read_bytes(payload, pos)
                if raw_key is None:
                    raise CorruptRecordError("record header key is null")
                hvalue, pos = _read_bytes(payload, pos)
                headers.append(Header(raw_key.decode("utf-8", errors="strict"), hvalue))
        if pos != record_end:
            raise CorruptRecordError(
                f"record {len(records)} of batch at offset {base_offset} declares "
                f"{length} bytes but its fields take {length + pos - record_end}"
            )
        append(
            make(
                base_offset + offset_delta,
                append_time if append_time is not None else base_ts + ts_delta,
                key,
                value,
                headers,
            )
        )
    if pos != end:
        raise CorruptRecordError(
            f"batch at offset {base_offset} has {end - pos} bytes after its {count} records"
        )
    return records


def decode_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    maker: Callable[[BatchHeader], RecordMaker] | None = None,
    verify: bool = True,
) -> RecordBatch:
    """Verify (unless `verify` is false: a consumer's check.crcs=false) and decode the batch at
    `pos`, decompressing as its attributes say; `maker(header)` gives the batch's record
    constructor (see `decode_records`)."""
    header = parse_batch_header(buf, pos)
    if verify:
        verify_batch(buf, pos, header)
    payload = bytes(memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size])
    if header.compression is not Compression.NONE:
        try:
            payload = decompress(header.compression, payload)
        except CorruptRecordError:
            raise
        except Exception as exc:  # each library raises its own type
            raise CorruptRecordError(
                f"batch at offset {header.base_offset}: {header.compression.name} payload does "
                f"not decompress: {exc}"
            ) from exc
    try:
        records = decode_records(payload, header, Record if maker is None else maker(header))
    # DecodeError: a varint > 10 B
    except (IndexError, UnicodeDecodeError, DecodeError) as malformed:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} has malformed records: {malformed}"
        ) from malformed
    return RecordBatch(header, records)


def decode_batches(
    buf: bytes | bytearray | memoryview,
    maker: Callable[[BatchHeader], RecordMaker] | None = None,
    verify: bool = True,
) -> list[RecordBatch]:
    """Decode every whole batch in `buf`. A partial batch at the end is ignored, as Kafka's
    clients do with a fetch response cut at max bytes."""
    batches: list[RecordBatch] = []
    pos = 0
    end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        _, length = read_offset_and_length(buf, pos)
        if end - pos < length + LOG_OVERHEAD:
            break
        batches.append(decode_batch(buf, pos, maker, verify))
        pos += length + LOG_OVERHEAD
    return batches


def record_size_upper_bound(
    key: bytes | None, value: bytes | None, headers: Sequence[Header | tuple[str, bytes | None]]
) -> int:
    """An upper bound on the encoded size of one record, for batch-size accounting."""
    size = 21 + (len(key) if key else 0) + (len(value) if value else 0)
    for h in headers:
        hkey, hvalue = (h.key, h.value) if isinstance(h, Header) else h
        size += 10 + len(hkey.encode()) + (len(hvalue) if hvalue else 0)
    return size + size_of_varint(size)
