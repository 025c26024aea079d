"""What the consumer makes of fetched bytes, and its per-partition positions."""

from __future__ import annotations

import struct

import pytest

from epochlog.client.fetch_decoder import decode_partition_records
from epochlog.client.metadata import TopicPartition
from epochlog.client.subscription import EARLIEST, LATEST, SubscriptionState
from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import CorruptRecordError
from epochlog.protocol.records import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    RecordBatchBuilder,
    batch_crc,
)

TP = TopicPartition("t", 0)


def batch(base: int, n: int, *, pid: int = -1, txn: bool = False, compression=Compression.NONE):
    b = RecordBatchBuilder(
        compression,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_offset=base,
        is_transactional=txn,
    )
    for i in range(n):
        b.append(100 + i, b"k%d" % (base + i), b"v%d" % (base + i), [("h", b"%d" % i)])
    return b.build()


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


def test_records_come_back_with_keys_values_headers_and_next_offset() -> None:
    out = decode_partition_records("t", 0, batch(0, 3) + batch(3, 2), 0)
    assert [r.offset for r in out.records] == [0, 1, 2, 3, 4]
    assert out.records[4].key == b"k4" and out.records[4].value == b"v4"
    assert out.records[1].headers == [("h", b"1")]
    assert out.next_offset == 5


def test_records_before_the_fetch_offset_in_a_compressed_batch_are_skipped() -> None:
    out = decode_partition_records("t", 0, batch(10, 5, compression=Compression.GZIP), 12)
    assert [r.offset for r in out.records] == [12, 13, 14]


def test_a_partial_batch_at_the_end_is_left_for_the_next_fetch() -> None:
    data = batch(0, 2) + batch(2, 2)[:-5]
    out = decode_partition_records("t", 0, data, 0)
    assert [r.offset for r in out.records] == [0, 1] and out.next_offset == 2


def test_control_batches_are_skipped_but_advance_the_next_offset() -> None:
    out = decode_partition_records("t", 0, marker(7, 1, commit=True), 7)
    assert out.records == [] and out.next_offset == 8
    assert decode_partition_records("t", 0, None, 3).next_offset == 3


def test_read_committed_drops_aborted_transactions() -> None:
    data = batch(0, 2, pid=1, txn=True) + batch(2, 2, pid=2, txn=True) + marker(4, 1, False)
    data += marker(5, 2, True) + batch(6, 1, pid=1, txn=True)
    committed = decode_partition_records("t", 0, data, 0, read_committed=True, aborted=[(1, 0)])
    assert [r.offset for r in committed.records] == [2, 3, 6]
    uncommitted = decode_partition_records("t", 0, data, 0, aborted=[(1, 0)])
    assert [r.offset for r in uncommitted.records] == [0, 1, 2, 3, 6]


def test_assign_wants_a_reset_per_auto_offset_reset() -> None:
    s = SubscriptionState(LATEST)
    s.assign([("t", 0), ("t", 1)])
    assert s.needing_reset() == [TP, TopicPartition("t", 1)]
    assert s.fetchable(0) == []
    none = SubscriptionState("none")
    none.assign([("t", 0)])
    assert none.needing_reset() == [] and none.missing_position() == [TP]


def test_a_reset_sets_the_position_unless_a_seek_came_first() -> None:
    s = SubscriptionState(EARLIEST)
    s.assign([("t", 0)])
    strategy, gen = s.begin_reset(TP)
    assert strategy == EARLIEST and s.needing_reset() == []
    s.complete_reset(TP, gen, 42)
    assert s.position(TP) == 42 and s.fetchable(0) == [TP]
    s.request_reset(TP, LATEST)
    _, gen = s.begin_reset(TP)
    s.seek(TP, 7)
    s.complete_reset(TP, gen, 99)
    assert s.position(TP) == 7


def test_a_failed_reset_is_tried_again() -> None:
    s = SubscriptionState(EARLIEST)
    s.assign([("t", 0)])
    _, gen = s.begin_reset(TP)
    s.complete_reset(TP, gen, None)
    assert s.needing_reset() == [TP]


def test_seek_invalidates_fetched_data_and_backoff() -> None:
    s = SubscriptionState(EARLIEST)
    s.assign([("t", 0)])
    s.seek(TP, 5)
    gen = s.state(TP).generation
    s.back_off(TP, 1000)
    assert s.fetchable(500) == []
    s.state(TP).buffered = True
    s.seek(TP, 9)
    assert s.fetchable(500) == [TP]
    assert not s.advance(TP, gen, 6, 0)  # a result from before the seek is dropped
    assert s.position(TP) == 9
    with pytest.raises(ValueError, match="negative offset"):
        s.seek(TP, -1)


def test_reassigning_keeps_positions_of_kept_partitions() -> None:
    s = SubscriptionState(EARLIEST)
    s.assign([("t", 0), ("t", 1)])
    s.seek(TP, 3)
    s.assign([("t", 0), ("u", 0)])
    assert s.position(TP) == 3
    assert s.assignment() == {TP, TopicPartition("u", 0)}
    with pytest.raises(KeyError, match="t-1 is not assigned"):
        s.position(("t", 1))


def test_read_committed_follows_each_producer_from_its_first_offset_to_its_abort_marker() -> None:
    # pid 1 aborts twice (offsets 0-1, then 6), commits in between (3); pid 2 commits across
    data = batch(0, 2, pid=1, txn=True) + marker(2, 1, False) + batch(3, 1, pid=1, txn=True)
    data += batch(4, 1, pid=2, txn=True) + marker(5, 1, True) + batch(6, 1, pid=1, txn=True)
    data += batch(7, 1, pid=2, txn=True) + marker(8, 1, False) + marker(9, 2, True)
    data += batch(10, 1)  # not transactional: always read
    aborted = [(1, 6), (1, 0)]  # the broker's order is not relied upon
    out = decode_partition_records("t", 0, data, 0, read_committed=True, aborted=aborted)
    assert [r.offset for r in out.records] == [3, 4, 7, 10]
    assert out.next_offset == 11  # past the markers


def test_read_committed_from_inside_an_aborted_transaction_drops_its_rest() -> None:
    # the fetch starts at 1, after the transaction's first offset (0), which is not fetched
    data = batch(1, 2, pid=5, txn=True) + marker(3, 5, False) + batch(4, 1, pid=5, txn=True)
    out = decode_partition_records("t", 0, data, 1, read_committed=True, aborted=[(5, 0)])
    assert [r.offset for r in out.records] == [4]


def test_only_control_batches_move_the_position_past_them() -> None:
    data = marker(3, 1, False) + marker(4, 2, True)
    out = decode_partition_records("t", 0, data, 3, read_committed=True, aborted=[(1, 0)])
    assert out.records == [] and out.next_offset == 5


def test_check_crcs_off_reads_a_batch_whose_crc_is_wrong() -> None:
    # librdkafka's mock cluster writes its control batches with CRC 0
    bad = bytearray(marker(0, 1, True) + batch(1, 1))
    struct.pack_into(">I", bad, CRC_OFFSET, 0)
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_partition_records("t", 0, bytes(bad), 0)
    out = decode_partition_records("t", 0, bytes(bad), 0, check_crcs=False)
    assert [r.offset for r in out.records] == [1] and out.next_offset == 2
