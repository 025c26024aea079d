"""The Spark data source's numpy codec (record batches <-> Arrow columns), checked against the
protocol's record batch codec and the consumer's fetch decoder; and the sink's routing."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.client.errors import KafkaError, MessageTooLargeError
from epochlog.client.fetch_decoder import decode_partition_records
from epochlog.client.partitioner import partition_for_key
from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import CorruptRecordError
from epochlog.protocol.records import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    RecordBatchBuilder,
    batch_crc,
    decode_batch,
    parse_batch_header,
    set_log_append_time,
    stamp_producer,
    verify_batch,
)
from epochlog.protocol.records import stamp_batch as stamp_offsets
from epochlog.spark.arrow_records import (
    _record_heads,
    decode_fetch,
    encode_records,
    murmur2_partitions,
    next_fetch_offset,
)
from epochlog.spark.rows import arrow_schema, columns_to_batch, route_batch

COMPRESSIONS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
COMPRESSIONS.append(Compression.ZSTD)

Rec = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def build(base: int, records: list[Rec], compression=Compression.NONE, **kw) -> bytes:
    b = RecordBatchBuilder(compression, base_offset=base, **kw)
    for ts, key, value, headers in records:
        b.append(ts, key, value, headers)
    return b.build()


def batch(base: int, n: int, *, pid: int = -1, txn: bool = False, compression=Compression.NONE):
    return build(
        base,
        [(100 + i, b"k%d" % (base + i), b"v%d" % (base + i), []) for i in range(n)],
        compression,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        is_transactional=txn,
    )


def marker(base: int, pid: int, commit: bool) -> bytes:
    b = RecordBatchBuilder(
        producer_id=pid, producer_epoch=0, base_offset=base, is_transactional=True
    )
    b.append(0, struct.pack(">hh", 0, 1 if commit else 0), b"\x00\x00\x00\x00\x00\x00")
    buf = bytearray(b.build())
    (attrs,) = struct.unpack_from(">h", buf, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, attrs | CONTROL_MASK)
    struct.pack_into(">I", buf, CRC_OFFSET, batch_crc(buf, 0, len(buf)))
    return bytes(buf)


def same_as_fetch_decoder(data: bytes, offset: int, **kw) -> None:
    """decode_fetch gives exactly the records (and next offset) the consumer's decoder gives."""
    want = decode_partition_records("t", 0, data, offset, **kw)
    got = decode_fetch(data, offset, want_headers=True, **kw)
    assert got.next_offset == want.next_offset and got.last_epoch == want.last_epoch
    assert got.offsets.tolist() == [r.offset for r in want.records]
    assert got.timestamps.tolist() == [r.timestamp for r in want.records]
    assert got.timestamp_types.tolist() == [r.timestamp_type for r in want.records]
    assert got.keys.to_pylist() == [r.key for r in want.records]
    assert got.values.to_pylist() == [r.value for r in want.records]
    assert got.headers == [r.headers for r in want.records]


# ------------------------------------------------------------------------------ decoding


@pytest.mark.parametrize("compression", COMPRESSIONS, ids=lambda c: c.name)
def test_decoded_columns_match_the_consumers_records(compression: Compression) -> None:
    records: list[Rec] = [
        (1_700_000_000_000 + i * 7919, b"key-%d" % i, b"v" * (i * 37 % 300), []) for i in range(200)
    ]
    records[3] = (1_700_000_000_000, None, b"null key", [])
    records[4] = (1_700_000_000_000, b"null value", None, [])
    records[5] = (1_700_000_000_000, None, None, [("a", b"1"), ("b", None), ("ü", b"")])
    records[6] = (1_600_000_000_000, b"", b"", [])  # a negative timestamp delta
    records[7] = (2**40, b"big" * 10_000, b"x" * 70_000, [("h", b"y" * 200)])  # long varints
    data = build(0, records[:100], compression) + build(100, records[100:], compression)
    same_as_fetch_decoder(data, 0)
    same_as_fetch_decoder(data, 57)  # starts inside a batch
    got = decode_fetch(data, 0)
    assert got.headers is None and len(got) == 200
    assert got.keys.null_count == 2 and got.values.null_count == 2


def test_many_records_per_batch_with_changing_lengths() -> None:
    # offset deltas cross the 1- and 2-byte varint limits, lengths change here and there
    records: list[Rec] = [(5, b"%08d" % i, b"v" * (100 + (i // 3000)), []) for i in range(20_000)]
    data = build(1000, records)
    same_as_fetch_decoder(data, 1000)
    got = decode_fetch(data, 1000)
    assert got.offsets.tolist() == list(range(1000, 21_000))
    varied: list[Rec] = [(5, b"k", b"v" * (i % 250), []) for i in range(3000)]
    same_as_fetch_decoder(build(0, varied), 0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**45),
            st.none() | st.binary(max_size=300),
            st.none() | st.binary(max_size=300),
            st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
        ),
        min_size=1,
        max_size=60,
    ),
    st.sampled_from(COMPRESSIONS),
    st.integers(0, 59),
)
def test_decoding_any_records_matches_the_consumer(records, compression, start) -> None:
    data = build(10, records[:30], compression)
    if len(records) > 30:
        data += build(40, records[30:], compression)
    same_as_fetch_decoder(data, 10 + min(start, len(records) - 1))


def test_end_offset_and_fetch_offset_bound_the_records() -> None:
    data = batch(0, 5) + batch(5, 5, compression=Compression.LZ4) + batch(10, 5)
    got = decode_fetch(data, 3, 12)
    assert got.offsets.tolist() == list(range(3, 12))
    assert got.values.to_pylist() == [b"v%d" % i for i in range(3, 12)]
    assert got.next_offset == 15  # the batch holding offset 12 was read whole
    assert next_fetch_offset(data, 3) == 15
    assert decode_fetch(data, 0, 5).next_offset == 5  # batches from the end on are not read


def test_a_partial_batch_at_the_end_is_left_for_the_next_fetch() -> None:
    for cut in (5, 100):  # cut in the records, and in the header
        whole = batch(2, 2)
        data = batch(0, 2) + whole[: max(len(whole) - cut, 13)]
        got = decode_fetch(data, 0)
        assert got.offsets.tolist() == [0, 1] and got.next_offset == 2
        assert next_fetch_offset(data, 0) == 2
    empty = decode_fetch(None, 3)
    assert len(empty) == 0 and empty.next_offset == 3 and empty.keys.type == pa.binary()


def test_control_batches_are_skipped_and_aborted_transactions_dropped_read_committed() -> None:
    got = decode_fetch(marker(7, 1, commit=True), 7)
    assert len(got) == 0 and got.next_offset == 8
    data = batch(0, 2, pid=1, txn=True) + batch(2, 2, pid=2, txn=True) + marker(4, 1, False)
    data += marker(5, 2, True) + batch(6, 1, pid=1, txn=True)
    committed = decode_fetch(data, 0, read_committed=True, aborted=[(1, 0)])
    assert committed.offsets.tolist() == [2, 3, 6] and committed.next_offset == 7
    same_as_fetch_decoder(data, 0, read_committed=True, aborted=[(1, 0)])
    assert decode_fetch(data, 0, aborted=[(1, 0)]).offsets.tolist() == [0, 1, 2, 3, 6]


def test_log_append_time_batches_carry_the_brokers_time() -> None:
    data = bytearray(batch(0, 3))
    set_log_append_time(data, 0, len(data), 1_234_567)
    stamp_offsets(data, 0, 0, 4)
    got = decode_fetch(bytes(data), 0)
    assert got.timestamps.tolist() == [1_234_567] * 3
    assert got.timestamp_types.tolist() == [1, 1, 1] and got.last_epoch == 4
    same_as_fetch_decoder(bytes(data), 0)


def test_corrupt_batches_are_refused() -> None:
    data = bytearray(batch(0, 3))
    data[-2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_fetch(bytes(data), 0)
    # a record whose declared length disagrees with its fields (CRC recomputed)
    good = build(0, [(1, b"k", b"value", [])])
    bad = bytearray(good)
    bad[61] += 2  # length varint of the only record: 2 bytes more than its fields take
    struct.pack_into(">I", bad, CRC_OFFSET, batch_crc(bad, 0, len(bad)))
    with pytest.raises(CorruptRecordError):
        decode_fetch(bytes(bad), 0)
    bad += b"\x00"  # the batch holds the byte more the record claims (+2 zig-zagged is +1)
    struct.pack_into(">i", bad, 8, len(bad) - 12)  # the batch length
    struct.pack_into(">I", bad, CRC_OFFSET, batch_crc(bad, 0, len(bad)))
    with pytest.raises(CorruptRecordError, match="declares"):
        decode_fetch(bytes(bad), 0)


# ------------------------------------------------------------------------------ encoding


def encoded_records(batches) -> list[tuple]:
    out = []
    for b in batches:
        decoded = decode_batch(b.data)
        assert decoded.header.records_count == b.records == len(decoded.records)
        out.extend(
            (r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
            for r in decoded.records
        )
    return out


@pytest.mark.parametrize("compression", COMPRESSIONS, ids=lambda c: c.name)
def test_encoded_batches_decode_with_the_protocol_codec(compression: Compression) -> None:
    keys = [b"k%d" % i for i in range(5000)]
    keys[1] = None
    keys[2] = b""
    values = [b"v" * (i % 500) for i in range(5000)]
    values[3] = None
    values[4] = b"w" * 40_000  # multi-byte length varints
    batches = encode_records(
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        1_700_000_000_000,
        max_batch_bytes=100_000,
        compression=compression,
    )
    assert len(batches) > 5
    for b in batches:
        header = parse_batch_header(b.data)
        verify_batch(b.data, 0, header)
        assert header.compression is compression and header.producer_id == -1
        assert header.max_timestamp == header.base_timestamp == 1_700_000_000_000
        if compression is Compression.NONE and b.records > 1:
            assert len(b.data) <= 100_000
    assert encoded_records(batches) == [
        (1_700_000_000_000, k, v, []) for k, v in zip(keys, values, strict=True)
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.none() | st.binary(max_size=200), st.none() | st.binary(max_size=200))),
    st.integers(100, 3000),
)
def test_encoding_any_rows_round_trips(rows, max_bytes) -> None:
    keys = pa.array([k for k, _ in rows], pa.binary())
    values = pa.array([v for _, v in rows], pa.binary())
    batches = encode_records(keys, values, 42, max_batch_bytes=max_bytes)
    assert encoded_records(batches) == [(42, k, v, []) for k, v in rows]
    # and the fetch decoder reads them back once the broker gave them offsets
    data = b""
    base = 0
    for b in batches:
        stamped = bytearray(b.data)
        stamp_offsets(stamped, 0, base, 0)
        data += bytes(stamped)
        base += b.records
    got = decode_fetch(data, 0)
    assert got.keys.to_pylist() == [k for k, _ in rows]
    assert got.values.to_pylist() == [v for _, v in rows]
    assert got.offsets.tolist() == list(range(len(rows)))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 300),  # rows in the run
            st.none() | st.integers(0, 140),  # key size of the run (None: null keys)
            st.none() | st.integers(0, 140),  # value size of the run
        ),
        max_size=6,
    ),
    st.integers(1, 2),
)
def test_runs_of_equal_sized_rows_round_trip(runs, timestamps) -> None:
    """Runs of rows of one layout are copied as 2-d strided blocks (`_copy_ranges`); long runs
    and short ones, nulls, empty values and one or many timestamps all come back as given."""
    rows = []
    for count, key_size, value_size in runs:
        for i in range(count):
            key = None if key_size is None else bytes([i % 251]) * key_size
            value = None if value_size is None else bytes([(7 * i) % 251]) * value_size
            rows.append((key, value))
    keys = pa.array([k for k, _ in rows], pa.binary())
    values = pa.array([v for _, v in rows], pa.binary())
    stamps = 42 if timestamps == 1 else np.arange(len(rows), dtype=np.int64) * 1000
    batches = encode_records(keys, values, stamps, max_batch_bytes=20_000)
    expected = [
        (42 if timestamps == 1 else i * 1000, k, v, []) for i, (k, v) in enumerate(rows)
    ]
    assert encoded_records(batches) == expected


def test_string_columns_sliced_arrays_and_headers_encode() -> None:
    values = pa.array(["a", "bb", None, "dddd"]).slice(1)
    keys = pa.array(["x", None, "z", "w"], pa.string()).slice(1)
    from epochlog.spark.arrow_records import as_binary

    batches = encode_records(as_binary(keys, 3), as_binary(values, 3), 9)
    assert encoded_records(batches) == [
        (9, None, b"bb", []),
        (9, b"z", None, []),
        (9, b"w", b"dddd", []),
    ]
    headers = [[("h", b"1")], [], [("a", None), ("b", b"")]]
    batches = encode_records(as_binary(keys, 3), as_binary(values, 3), 9, headers=headers)
    assert [r[3] for r in encoded_records(batches)] == headers


def test_stamped_batches_carry_the_producer_fields_and_a_valid_crc() -> None:
    (b,) = encode_records(pa.array([b"k"]), pa.array([b"v"]), 1)
    stamped = stamp_producer(b.data, 77, 3, 1000)
    header = parse_batch_header(stamped)
    verify_batch(stamped, 0, header)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 1000)


def test_murmur2_partitions_match_the_producers_partitioner() -> None:
    rng = np.random.default_rng(7)
    keys = [
        bytes(rng.integers(0, 256, int(rng.integers(0, 40)), dtype=np.uint8)) for _ in range(500)
    ]
    keys += [b"", b"a", b"ab", b"abc", b"abcd", None]
    for partitions in (1, 3, 12):
        got = murmur2_partitions(pa.array(keys, pa.binary()), partitions).tolist()
        want = [partition_for_key(k, partitions) if k is not None else -1 for k in keys]
        assert got == want


# ------------------------------------------------------------------------------ rows


def test_columns_become_an_arrow_batch_with_sparks_types() -> None:
    data = build(7, [(1_700_000_000_123, b"k", b"v", [("h", b"x")]), (5, None, None, [])])
    for include_headers in (False, True):
        columns = decode_fetch(data, 7, want_headers=include_headers)
        out = columns_to_batch(
            columns, "topic-a", 3, arrow_schema(include_headers), include_headers
        )
        assert out.schema == arrow_schema(include_headers)
        rows = out.to_pylist()
        assert [r["offset"] for r in rows] == [7, 8]
        assert [r["topic"] for r in rows] == ["topic-a"] * 2 and rows[1]["partition"] == 3
        assert rows[0]["timestamp"].timestamp() == pytest.approx(1_700_000_000.123)
        assert rows[1]["key"] is None and rows[1]["timestampType"] == 0
        if include_headers:
            assert rows[0]["headers"] == [{"key": "h", "value": b"x"}] and rows[1]["headers"] == []


def routed(batch, topic=None, counts=None, sticky=None, limit=1_000_000):
    counts = counts or {"a": 3, "b": 1}
    out = route_batch(batch, topic, counts.__getitem__, {} if sticky is None else sticky, limit)
    return {
        tp: (keys.to_pylist(), values.to_pylist(), headers) for tp, keys, values, headers in out
    }


def test_routing_follows_topic_partition_and_key_columns() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "value": [f"v{i}" for i in range(8)],
            "key": ["k1", None, "k2", None, "k1", None, None, "k3"],
            "topic": ["a", "a", "a", "b", "a", "a", "b", "a"],
            "partition": pa.array([None, 2, None, None, None, None, None, 0], pa.int32()),
        }
    )
    sticky: dict[str, int] = {}
    out = routed(batch, sticky=sticky)
    values = {tp: v for tp, (_, v, _) in out.items()}
    assert values[("b", 0)] == [b"v3", b"v6"]
    assert (("a", 2)) in values and b"v1" in values[("a", 2)]
    k1 = ("a", partition_for_key(b"k1", 3))
    assert b"v0" in values[k1] and b"v4" in values[k1]
    assert b"v7" in values[("a", 0)]
    # the keyless row without a partition went to the sticky partition of its topic
    assert any(b"v5" in v for v in values.values()) and set(sticky) == {"a", "b"}
    assert sorted(v for vs in values.values() for v in vs) == [f"v{i}".encode() for i in range(8)]
    for vs in values.values():  # row order is kept within a partition
        assert vs == sorted(vs)
    # the topic option overrides the column
    assert {tp[0] for tp in routed(batch, topic="b", counts={"b": 3})} == {"b"}


def test_routing_refuses_bad_rows_naming_what_is_wrong() -> None:
    no_topic = pa.RecordBatch.from_pydict({"value": ["x"], "topic": pa.array([None], pa.string())})
    with pytest.raises(ValueError, match="null topic"):
        routed(no_topic)
    bad = pa.RecordBatch.from_pydict({"value": ["x"], "partition": pa.array([5], pa.int32())})
    with pytest.raises(KafkaError, match="partition 5 of 'a'"):
        routed(bad, topic="a")
    big = pa.RecordBatch.from_pydict({"value": [b"x" * 2000]})
    with pytest.raises(MessageTooLargeError, match="max.request.size=1000"):
        routed(big, topic="a", limit=1000)


def test_routing_keeps_headers_with_their_rows() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "value": ["a", "b", "c"],
            "headers": pa.array(
                [[{"key": "n", "value": b"1"}], None, []],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            ),
        }
    )
    ((_, (_, values, headers)),) = routed(batch, topic="b").items()
    assert values == [b"a", b"b", b"c"] and headers == [[("n", b"1")], [], []]
    plain = pa.RecordBatch.from_pydict({"value": ["a"], "headers": batch.column(1).slice(2)})
    assert list(routed(plain, topic="b").values())[0][2] is None  # no headers anywhere


def test_fields_past_a_records_first_16_bytes_are_read_from_the_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each record's fields up to its key are read from a copy of its first 16 bytes
    (`_record_heads`); records whose fields run past them (a 10-byte timestamp delta, a
    9000-byte key) are read field by field from the records, with the same result."""
    import epochlog.spark.arrow_records as codec

    answers: list[bool] = []

    def record_heads(joined: bytes, starts: np.ndarray) -> object:
        heads = _record_heads(joined, starts)
        answers.append(heads is not None)
        return heads

    monkeypatch.setattr(codec, "_record_heads", record_heads)
    long_ones: list[Rec] = [(2**62, b"a", b"x", []), (-(2**62), b"k" * 9000, b"y" * 10, [])]
    same_as_fetch_decoder(build(0, long_ones), 0)
    assert answers == [False]
    same_as_fetch_decoder(
        build(0, [(1_700_000_000_000 + i, b"key", b"v", []) for i in range(3)]), 0
    )
    assert answers == [False, True]
