"""Records checked against their batch header, and bounded streaming decompression, driven
directly: no broker, no socket (protocol.record_validation, protocol.compression)."""

from __future__ import annotations

import os
import struct
import tracemalloc

import cramjam
import pytest

from epochlog.broker.produce_validation import ProduceValidationError, validate_partition_records
from epochlog.protocol.compression import (
    Compression,
    DecompressedSizeError,
    DecompressionError,
    compress,
    decompress_stream,
)
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.record_validation import (
    RecordsError,
    check_batch_records,
    find_record_at_or_after,
)
from epochlog.protocol.records import RecordBatchBuilder, parse_batch_header
from epochlog.testing.bad_batches import (
    BASE_TIMESTAMP,
    batch_of,
    garbage_batch,
    record_bytes,
    records_payload,
    zip_bomb_batch,
)

CODECS = list(Compression)
COMPRESSED = [c for c in Compression if c is not Compression.NONE]
BOUND = 1 << 20


def check(raw: bytes, bound: int = BOUND, **kw):
    return check_batch_records(raw, parse_batch_header(raw), max_decompressed_bytes=bound, **kw)


def refusal(raw: bytes, bound: int = BOUND, **kw) -> RecordsError:
    with pytest.raises(RecordsError) as info:
        check(raw, bound, **kw)
    return info.value


def built(codec: Compression, n: int = 500) -> bytes:
    b = RecordBatchBuilder(compression=codec)
    for i in range(n):
        key = None if i % 5 == 0 else b"key-%d" % i
        headers = [("trace", b"x" * (i % 7)), ("none", None)] if i % 3 == 0 else []
        b.append(BASE_TIMESTAMP + (i * 37) % 101, key, b"v" * (i % 300), headers)
    return b.build()


# ----------------------------------------------------------------------- good batches


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_batches_from_the_builder_pass_with_their_count_and_max_timestamp(codec):
    summary = check(built(codec))
    assert summary.record_count == 500
    assert summary.max_timestamp == BASE_TIMESTAMP + 100


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_records_cut_across_decompressed_chunks_are_walked_whole(codec):
    # values of 100 KiB: most records straddle the 256 KiB chunks of the stream
    b = RecordBatchBuilder(compression=codec)
    for i in range(40):
        b.append(BASE_TIMESTAMP + i, b"k", os.urandom(100 * 1024))
    assert check(b.build(), bound=8 << 20).record_count == 40


# ---------------------------------------------------------------- garbage: CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_a_payload_that_does_not_decompress_is_corrupt_message(codec):
    problem = refusal(garbage_batch(codec))
    assert problem.error_code is ErrorCode.CORRUPT_MESSAGE
    assert codec.name.lower() in str(problem)


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_a_truncated_compressed_payload_is_corrupt_message(codec):
    payload = compress(codec, records_payload(50))
    raw = batch_of(b"", 50, codec=codec, compressed_payload=payload[:-3])
    assert refusal(raw).error_code is ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize(
    "payload",
    [
        b"\xff" * 40,  # a varint that never ends
        record_bytes(0, key=None)[:-3],  # the payload ends inside the record
    ],
    ids=["endless-varint", "cut-record"],
)
def test_uncompressed_garbage_is_corrupt_message(payload):
    assert refusal(batch_of(payload, 1)).error_code is ErrorCode.CORRUPT_MESSAGE


def test_a_negative_key_length_other_than_null_is_corrupt_message():
    record = bytearray(record_bytes(0, key=None))
    record[4] = 0x09  # key length varint -5 (zig-zag 9)
    problem = refusal(batch_of(bytes(record), 1))
    assert problem.error_code is ErrorCode.CORRUPT_MESSAGE and problem.record_index == 0


# ---------------------------------------------------- disagreements: INVALID_RECORD


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_a_count_of_int32_max_over_one_record_is_invalid_record(codec):
    raw = batch_of(records_payload(1), 2**31 - 1, codec=codec)
    problem = refusal(raw)
    assert problem.error_code is ErrorCode.INVALID_RECORD
    assert "2147483647" in str(problem) and "holds 1" in str(problem)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_more_records_than_the_count_is_invalid_record(codec):
    problem = refusal(batch_of(records_payload(3), 2, codec=codec))
    assert problem.error_code is ErrorCode.INVALID_RECORD
    assert "follow its last record" in str(problem)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_an_offset_delta_other_than_the_index_is_invalid_record_naming_the_record(codec):
    payload = record_bytes(0) + record_bytes(5) + record_bytes(2)
    problem = refusal(batch_of(payload, 3, codec=codec))
    assert problem.error_code is ErrorCode.INVALID_RECORD
    assert problem.record_index == 1
    assert "invalid offset" in str(problem) and "delta 5" in str(problem)


@pytest.mark.parametrize("length_error", [1, -1], ids=["longer", "shorter"])
def test_a_length_that_disagrees_with_the_fields_is_invalid_record(length_error):
    payload = record_bytes(0) + record_bytes(1, length_error=length_error) + record_bytes(2)
    problem = refusal(batch_of(payload, 3))
    assert problem.error_code is ErrorCode.INVALID_RECORD
    assert problem.record_index == 1


def test_a_value_longer_than_its_record_is_invalid_record():
    record = bytearray(record_bytes(0, value=b"abc"))
    record[6] = 0x7E  # value length 63 in a record of 9 bytes
    problem = refusal(batch_of(bytes(record), 1))
    assert problem.error_code is ErrorCode.INVALID_RECORD
    assert "value of 63 bytes" in str(problem)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_a_max_timestamp_other_than_the_records_largest_is_invalid_record(codec):
    payload = record_bytes(0, timestamp_delta=0) + record_bytes(1, timestamp_delta=9)
    raw = batch_of(payload, 2, codec=codec, max_timestamp=BASE_TIMESTAMP + 5)
    problem = refusal(raw)
    assert problem.error_code is ErrorCode.INVALID_RECORD
    assert str(BASE_TIMESTAMP + 9) in str(problem)
    # LogAppendTime topics overwrite the header's max timestamp: not compared
    assert check(raw, check_max_timestamp=False).max_timestamp == BASE_TIMESTAMP + 9


@pytest.mark.parametrize(
    "codec", [Compression.ZSTD, Compression.GZIP, Compression.LZ4], ids=lambda c: c.name
)
@pytest.mark.parametrize("record_size", [None, 100_000], ids=["one-record", "many-records"])
def test_a_zip_bomb_stops_at_the_bound_holding_little(codec, record_size):
    bomb = zip_bomb_batch(codec, expanded_bytes=64 << 20, record_size=record_size)
    assert len(bomb) < (1 << 20)
    tracemalloc.start()
    try:
        problem = refusal(bomb, bound=4 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert problem.error_code is ErrorCode.INVALID_RECORD
    assert f"more than {4 << 20} bytes" in str(problem)
    assert peak < (2 << 20)  # a chunk and the record the walk carries across chunks


def test_a_snappy_block_declaring_more_than_the_bound_is_refused_before_decompressing():
    payload = bytes(cramjam.snappy.compress_raw(records_payload(1, value=bytes(5 << 20))))
    problem = refusal(batch_of(b"", 1, codec=Compression.SNAPPY, compressed_payload=payload))
    assert problem.error_code is ErrorCode.INVALID_RECORD
    assert "snappy payload decompresses to more than" in str(problem)


# -------------------------------------------------------------------- reads by timestamp


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_find_record_at_or_after_returns_the_first_record_at_both_bounds(codec):
    raw = built(codec)
    header = parse_batch_header(raw)
    # timestamps are BASE + (i * 37) % 101: record 3 has +10, record 11 has +3
    found = find_record_at_or_after(
        raw, header, BASE_TIMESTAMP + 100, 0, max_decompressed_bytes=BOUND
    )
    assert found.offset == 30 and found.timestamp == BASE_TIMESTAMP + 100
    found = find_record_at_or_after(
        raw, header, BASE_TIMESTAMP + 1, 5, max_decompressed_bytes=BOUND
    )
    assert (found.offset, found.timestamp) == (5, BASE_TIMESTAMP + 84)
    assert (
        find_record_at_or_after(raw, header, BASE_TIMESTAMP + 101, 0, max_decompressed_bytes=BOUND)
        is None
    )


def test_find_record_stops_at_its_record_before_the_rest_of_a_bomb():
    # record 0 is small; record 1 would expand past the bound
    bomb = zip_bomb_batch(Compression.ZSTD, expanded_bytes=64 << 20)
    header = parse_batch_header(bomb)
    with pytest.raises(RecordsError) as info:
        find_record_at_or_after(bomb, header, BASE_TIMESTAMP, 0, max_decompressed_bytes=1 << 20)
    assert info.value.error_code is ErrorCode.INVALID_RECORD  # bound reached inside record 0
    head = record_bytes(0, value=b"x")
    tail = record_bytes(1, value=bytes(64 << 20))
    raw = batch_of(head + tail, 2, codec=Compression.ZSTD)
    found = find_record_at_or_after(
        raw, parse_batch_header(raw), BASE_TIMESTAMP, 0, max_decompressed_bytes=1 << 20
    )
    assert found.offset == 0


# ---------------------------------------------------------------- produce validation


def test_produce_validation_names_the_partition_and_the_record():
    payload = record_bytes(0) + record_bytes(7)
    with pytest.raises(ProduceValidationError) as info:
        validate_partition_records(
            batch_of(payload, 2, codec=Compression.LZ4),
            version=9,
            max_message_bytes=1_000_000,
            where="orders-3",
        )
    error = info.value
    assert error.error_code is ErrorCode.INVALID_RECORD
    assert str(error).startswith("orders-3: lz4 batch: invalid offset")
    assert error.record_errors == [(1, str(error))]


@pytest.mark.parametrize("record_size", [None, 100_000], ids=["one-record", "many-records"])
def test_produce_validation_bounds_decompression_by_a_multiple_of_max_message_bytes(record_size):
    bomb = zip_bomb_batch(Compression.ZSTD, expanded_bytes=16 << 20, record_size=record_size)
    with pytest.raises(ProduceValidationError) as info:
        validate_partition_records(
            bomb,
            version=9,
            max_message_bytes=100_000,
            where="t-0",
            max_decompressed_bytes=1_000_000,
        )
    error = info.value
    assert error.error_code is ErrorCode.INVALID_RECORD
    assert "more than 1000000 bytes" in str(error)
    # a record longer than the bound is refused as soon as its length is read: it is to blame
    assert error.record_errors == ([(0, str(error))] if record_size is None else [])


# ------------------------------------------------------------- streaming decompression


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
def test_decompress_stream_yields_bounded_chunks_up_to_an_exact_bound(codec):
    data = os.urandom(200_000) + bytes(3_000_000)
    payload = compress(codec, data)
    chunks = list(decompress_stream(codec, payload, len(data), chunk_size=64 * 1024))
    assert b"".join(chunks) == data
    if codec is not Compression.SNAPPY:  # snappy hands out whole 32 KiB xerial blocks
        assert max(len(c) for c in chunks) <= 64 * 1024
    with pytest.raises(DecompressedSizeError):
        for _ in decompress_stream(codec, payload, len(data) - 1):
            pass


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name)
@pytest.mark.parametrize("damage", ["truncated", "trailing", "garbage"])
def test_decompress_stream_refuses_damaged_payloads(codec, damage):
    payload = compress(codec, os.urandom(1000) + bytes(100_000))
    if damage == "truncated":
        payload = payload[:-5]
    elif damage == "trailing":
        payload = payload + b"\x00junk"
    else:
        payload = os.urandom(300)
    if codec is Compression.SNAPPY and damage == "trailing":
        payload = payload + struct.pack(">i", 99)  # a block length running past the end
    with pytest.raises(DecompressionError):
        for _ in decompress_stream(codec, payload, 10 << 20):
            pass
