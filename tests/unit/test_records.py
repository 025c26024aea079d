"""Record batch v2: build/decode round trips, in-place stamping, and corrupt batches refused."""

from __future__ import annotations

import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import CorruptRecordError
from epochlog.protocol.records import (
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    Header,
    RecordBatchBuilder,
    batch_crc,
    decode_batch,
    decode_batches,
    iter_batches,
    parse_batch_header,
    set_log_append_time,
    stamp_batch,
)

records_strategy = st.lists(
    st.tuples(
        st.integers(0, 2**41),
        st.none() | st.binary(max_size=30),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
    ),
    min_size=1,
    max_size=20,
)


def build(records, compression=Compression.NONE, **kwargs) -> bytes:
    builder = RecordBatchBuilder(compression=compression, **kwargs)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    return builder.build()


@pytest.mark.parametrize("compression", list(Compression), ids=lambda c: c.name)
@settings(max_examples=40, deadline=None)
@given(records=records_strategy)
def test_batch_round_trips_with_every_compression(compression, records) -> None:
    raw = build(records, compression, producer_id=7, producer_epoch=1, base_sequence=42)
    batch = decode_batch(raw)
    assert batch.header.compression is compression
    assert batch.header.records_count == len(records)
    assert batch.header.last_offset_delta == len(records) - 1
    assert batch.header.max_timestamp == max(r[0] for r in records)
    assert (batch.header.producer_id, batch.header.base_sequence) == (7, 42)
    for i, (record, (ts, key, value, headers)) in enumerate(
        zip(batch.records, records, strict=True)
    ):
        assert record.offset == i
        assert record.timestamp == ts
        assert (record.key, record.value) == (key, value)
        assert [(h.key, h.value) for h in record.headers] == headers


def test_stamp_writes_offset_and_epoch_without_breaking_the_crc() -> None:
    raw = bytearray(build([(1000, b"k", b"v", []), (1001, None, b"w", [])]))
    stamp_batch(raw, 0, base_offset=5000, leader_epoch=9)
    batch = decode_batch(raw)  # CRC still verifies
    assert batch.header.base_offset == 5000
    assert batch.header.partition_leader_epoch == 9
    assert [r.offset for r in batch.records] == [5000, 5001]
    assert batch.header.last_offset == 5001


def test_log_append_time_rewrites_timestamps_and_crc() -> None:
    raw = bytearray(build([(1000, b"k", b"v", []), (1500, None, b"w", [])]))
    set_log_append_time(raw, 0, len(raw), 99_999)
    batch = decode_batch(raw)
    assert batch.header.is_log_append_time
    assert [r.timestamp for r in batch.records] == [99_999, 99_999]


@pytest.mark.parametrize("compression", list(Compression), ids=lambda c: c.name)
def test_every_bit_flip_in_crc_covered_bytes_is_refused(compression) -> None:
    raw = build([(1, b"key", b"value" * 20, [("h", b"x")])] * 3, compression)
    for byte in range(CRC_OFFSET, len(raw)):
        flipped = bytearray(raw)
        flipped[byte] ^= 0x10
        with pytest.raises(CorruptRecordError):
            decode_batch(flipped)


def test_truncated_batches_are_refused_at_every_length() -> None:
    raw = build([(1, b"k", b"v" * 50, [])] * 4)
    for cut in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            decode_batch(raw[:cut])


def test_wrong_magic_is_refused() -> None:
    raw = bytearray(build([(1, b"k", b"v", [])]))
    raw[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        parse_batch_header(raw)


@settings(max_examples=200, deadline=None)
@given(
    payload=st.binary(max_size=200),
    count=st.integers(-5, 50),
    compression=st.sampled_from(list(Compression)),
)
# a record length varint longer than 10 bytes (once escaped as DecodeError)
@example(payload=b"\x80" * 10, count=1, compression=Compression.NONE)
def test_garbage_records_with_a_valid_crc_raise_corrupt_record(payload, count, compression) -> None:
    """A batch whose CRC is right but whose records are nonsense never escapes as another error."""
    header = struct.pack(
        ">qiibIhiqqqhii",
        0,
        BATCH_HEADER_SIZE - 12 + len(payload),
        -1,
        2,
        0,
        int(compression),
        max(count - 1, 0),
        0,
        0,
        -1,
        -1,
        -1,
        count,
    )
    raw = bytearray(header + payload)
    struct.pack_into(">I", raw, CRC_OFFSET, batch_crc(raw, 0, len(raw)))
    try:
        batch = decode_batch(raw)
    except CorruptRecordError:
        return
    assert len(batch.records) == count


def test_iter_batches_walks_concatenated_batches_and_stops_at_damage() -> None:
    batches = [build([(i, b"k", b"v" * i, [])]) for i in range(1, 5)]
    joined = b"".join(batches)
    positions = [pos for pos, _ in iter_batches(joined)]
    assert positions == [
        0,
        len(batches[0]),
        len(batches[0]) + len(batches[1]),
        sum(map(len, batches[:3])),
    ]
    damaged = bytearray(joined)
    damaged[len(batches[0]) + len(batches[1]) + 30] ^= 1  # inside the third batch
    seen = []
    with pytest.raises(CorruptRecordError):
        for pos, _ in iter_batches(damaged):
            seen.append(pos)
    assert seen == positions[:2]


def test_decode_batches_ignores_a_partial_trailing_batch() -> None:
    batches = [build([(i, b"k", b"v", [Header("a", b"b")])]) for i in range(3)]
    joined = b"".join(batches)
    assert len(decode_batches(joined[:-5])) == 2
    assert len(decode_batches(joined)) == 3


def test_lz4_frames_use_independent_blocks_as_kafka_requires() -> None:
    raw = build([(1, None, b"x" * 1000, [])], Compression.LZ4)
    frame = raw[BATCH_HEADER_SIZE:]
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    assert frame[4] & 0x20, "block independence flag must be set"


def test_snappy_uses_xerial_framing_and_reads_raw_snappy_too() -> None:
    import cramjam

    from epochlog.protocol.compression import decompress

    raw = build([(1, None, b"y" * 1000, [])], Compression.SNAPPY)
    assert raw[BATCH_HEADER_SIZE:].startswith(b"\x82SNAPPY\x00")
    plain = b"hello snappy" * 10
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(plain))) == plain
