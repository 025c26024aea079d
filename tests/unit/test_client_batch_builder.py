"""The producer's fast batch builder writes exactly the bytes of the protocol's builder."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.client.batch_builder import ProducerBatchBuilder
from epochlog.client.metadata import TopicPartition
from epochlog.client.producer_batch import ProducerBatch
from epochlog.protocol.compression import Compression
from epochlog.protocol.records import RecordBatchBuilder, decode_batch

# lengths on both sides of the varint table's end (16384) are built from a repeated byte
big = st.integers(16380, 16390).map(lambda n: b"b" * n)
blobs = st.one_of(st.none(), st.binary(max_size=300), big)
headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=20))))
records = st.lists(st.tuples(st.integers(0, 10**13), blobs, blobs, headers), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(records)
def test_same_bytes_as_the_protocol_builder(items: list) -> None:
    ours, reference = ProducerBatchBuilder(), RecordBatchBuilder()
    for timestamp, key, value, hdrs in items:
        assert ours.append(timestamp, key, value, hdrs) == reference.append(
            timestamp, key, value, hdrs
        )
    assert ours.build() == reference.build()


plain_records = st.lists(st.tuples(st.integers(0, 10**13), blobs, blobs), min_size=2, max_size=8)


@settings(max_examples=60, deadline=None)
@given(plain_records, st.integers(100, 40000))
def test_the_fast_path_writes_the_bytes_of_append_within_batch_size(
    items: list, batch_size: int
) -> None:
    """`ProducerBatch.try_append_plain`, the producer's path for records without headers,
    including timestamps before the batch's first one (a negative delta) and lengths past the
    varint table: the same bytes as the protocol's builder, and a record is refused exactly
    when the accumulator's bound would not fit."""
    ours = ProducerBatch(TopicPartition("t", 0), Compression.NONE, 0)
    reference = RecordBatchBuilder()
    first, rest = items[0], items[1:]
    ours.append(first[0], first[1], first[2], [], "first")
    reference.append(first[0], first[1], first[2])
    for i, (timestamp, key, value) in enumerate(rest):
        before = ours.size
        fits = before + 26 + len(key or b"") + len(value or b"") <= batch_size  # accumulator
        grown = ours.try_append_plain(timestamp, key, value, i, batch_size)
        if not fits:
            assert grown == 0 and ours.size == before
            break
        reference.append(timestamp, key, value)
        after = ours.size
        assert grown == (before - after if after >= batch_size else after - before) != 0
    assert ours.record_count == len(reference) and ours.size == reference.estimated_size
    assert ours.timestamps == [r.timestamp for r in decode_batch(reference.build()).records]
    ours.close()
    assert ours.data == reference.build()


def test_many_records_and_large_deltas_round_trip() -> None:
    builder = ProducerBatchBuilder(Compression.LZ4)
    for i in range(20000):
        builder.append(1_000_000 + i * 3, b"k%d" % i, b"v" * (i % 50), [("h", b"x")])
    batch = decode_batch(builder.build())
    assert [r.offset for r in batch.records] == list(range(20000))
    assert batch.records[-1].timestamp == 1_000_000 + 19999 * 3
    assert batch.records[-1].key == b"k19999" and batch.records[-1].headers[0].value == b"x"
