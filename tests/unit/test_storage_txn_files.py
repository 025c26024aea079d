"""Kafka's `.txnindex` and `.snapshot` files: golden bytes assembled by hand from Kafka's layout
(AbortedTxn.java, ProducerStateManager.java), and what the partition does with them on a real
log: aborts indexed in the segment holding their marker, truncated and deleted with the log,
rebuilt when corrupt or missing; producer snapshots at roll and close, so a restart replays only
what follows the latest one."""

from __future__ import annotations

import crc32c
import pytest

from epochlog.broker.partition import READ_COMMITTED, Partition, rebuild_producer_state
from epochlog.broker.producer_state import ProducerStateManager
from epochlog.storage import LogConfig, PartitionLog
from epochlog.storage.errors import CorruptIndexError
from epochlog.storage.producer_snapshot import (
    CorruptSnapshotError,
    ProducerSnapshotEntry,
    ProducerSnapshots,
    decode_snapshot,
    encode_snapshot,
)
from epochlog.storage.txn_index import (
    AbortedTxn,
    TransactionIndex,
    decode_txn_index,
    encode_aborted_txn,
)
from tests.kafka_wire import i16, i32, i64
from tests.unit.test_broker_transactions import ABORT, COMMIT, NOW, Producer, leader

TXN_INDEX = "00000000000000000000.txnindex"


def aborted_txn_bytes(pid: int, first: int, last: int, lso: int) -> bytes:
    # AbortedTxn.java: VERSION_OFFSET 0 (int16), PRODUCER_ID 2, FIRST_OFFSET 10, LAST_OFFSET 18,
    # LAST_STABLE_OFFSET 26, TOTAL_SIZE 34
    return i16(0) + i64(pid) + i64(first) + i64(last) + i64(lso)


def snapshot_entry_bytes(e: ProducerSnapshotEntry) -> bytes:
    # PRODUCER_SNAPSHOT_ENTRY_SCHEMA, in field order
    return (
        i64(e.producer_id)
        + i16(e.producer_epoch)
        + i32(e.last_sequence)
        + i64(e.last_offset)
        + i32(e.offset_delta)
        + i64(e.timestamp)
        + i32(e.coordinator_epoch)
        + i64(e.current_txn_first_offset)
    )


def snapshot_bytes(entries: list[ProducerSnapshotEntry]) -> bytes:
    body = i32(len(entries)) + b"".join(snapshot_entry_bytes(e) for e in entries)
    return i16(1) + crc32c.crc32c(body).to_bytes(4, "big") + body


ENTRY = ProducerSnapshotEntry(7, 3, 41, 1000, 4, NOW, 5, 990)
OPEN_LESS = ProducerSnapshotEntry(2**40, 0, -1, -1, 0, NOW - 1, -1, -1)


# ------------------------------------------------------------------------ golden bytes


def test_aborted_txn_entry_is_kafkas_34_bytes():
    raw = encode_aborted_txn(AbortedTxn(7, 100, 150, 120))
    assert raw == aborted_txn_bytes(7, 100, 150, 120)
    assert len(raw) == 34


def test_txn_index_decodes_kafkas_bytes_and_refuses_partial_or_other_versions():
    raw = aborted_txn_bytes(1, 0, 3, 4) + aborted_txn_bytes(2, 5, 9, 10)
    assert decode_txn_index(raw) == [AbortedTxn(1, 0, 3, 4), AbortedTxn(2, 5, 9, 10)]
    with pytest.raises(CorruptIndexError, match="33 bytes is not a whole number"):
        decode_txn_index(raw[:33])
    with pytest.raises(CorruptIndexError, match="version 1, expected 0"):
        decode_txn_index(i16(1) + raw[2:34])


def test_snapshot_is_kafkas_layout_with_crc32c_over_the_entries():
    raw = encode_snapshot([ENTRY, OPEN_LESS])
    assert raw == snapshot_bytes([ENTRY, OPEN_LESS])
    assert len(raw) == 2 + 4 + 4 + 2 * 46
    assert decode_snapshot(raw) == [ENTRY, OPEN_LESS]
    assert encode_snapshot([]) == i16(1) + crc32c.crc32c(i32(0)).to_bytes(4, "big") + i32(0)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda raw: raw[:5], "shorter than the header"),
        (lambda raw: i16(2) + raw[2:], "version 2, expected 1"),
        (lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]), "CRC"),
        (lambda raw: raw[:6] + i32(3) + raw[10:], "CRC"),
    ],
)
def test_a_damaged_snapshot_is_refused_naming_why(damage, message):
    with pytest.raises(CorruptSnapshotError, match=message):
        decode_snapshot(damage(encode_snapshot([ENTRY])), "x.snapshot")


def test_snapshot_files_are_named_by_offset_and_kept_bounded(tmp_path):
    files = ProducerSnapshots(tmp_path, kept=3)
    for offset in (10, 20, 30, 40):
        files.write(offset, [ENTRY])
    assert files.offsets() == [20, 30, 40]
    assert (tmp_path / "00000000000000000040.snapshot").read_bytes() == snapshot_bytes([ENTRY])
    assert files.latest(0, 35) == (30, [ENTRY])
    (tmp_path / "00000000000000000030.snapshot").write_bytes(b"junk junk junk")
    assert files.latest(0, 35) == (20, [ENTRY])  # the corrupt one is deleted on the way
    assert files.offsets() == [20, 40]
    assert files.delete_above(20) == 1 and files.offsets() == [20]


def test_txn_index_file_appends_truncates_and_reports_corruption(tmp_path):
    index = TransactionIndex(tmp_path / TXN_INDEX)
    assert not index.path.exists()  # created with its first entry
    index.append(AbortedTxn(1, 0, 3, 4))
    index.append(AbortedTxn(2, 5, 9, 10))
    with pytest.raises(ValueError, match="not after the last one"):
        index.append(AbortedTxn(3, 6, 8, 10))
    index.flush()
    assert index.path.read_bytes() == aborted_txn_bytes(1, 0, 3, 4) + aborted_txn_bytes(2, 5, 9, 10)
    assert index.truncate_to(9) == 1
    assert index.path.read_bytes() == aborted_txn_bytes(1, 0, 3, 4)
    index.path.write_bytes(b"\x00" * 35)
    reopened = TransactionIndex(index.path)
    assert reopened.is_corrupt
    with pytest.raises(CorruptIndexError):
        reopened.sanity_check()


# ------------------------------------------------------------ the partition's txn index


def aborted_pair(p: Partition, pid: int, n: int = 2) -> None:
    Producer(pid).send(p, n)
    p.append_marker_as_leader(pid, 0, ABORT, NOW)


def committed_read_aborts(p: Partition, offset: int) -> list[tuple[int, int]]:
    read = p.read_records(
        fetch_offset=offset,
        current_leader_epoch=-1,
        last_fetched_epoch=-1,
        max_bytes=10**6,
        min_one_batch=True,
        up_to_high_watermark=True,
        isolation_level=READ_COMMITTED,
    )
    return [(t.producer_id, t.first_offset) for t in read.aborted_transactions or ()]


def test_an_abort_is_written_to_the_txnindex_of_the_segment_holding_its_marker(tmp_path):
    p = leader(tmp_path)
    Producer(2).send(p, 3)  # 0-2 in segment 0
    p.log.roll(NOW)
    p.append_marker_as_leader(2, 0, ABORT, NOW)  # 3, in segment 3
    p.log.flush()
    directory = tmp_path / "t-0"
    assert not (directory / TXN_INDEX).exists()
    assert (directory / "00000000000000000003.txnindex").read_bytes() == aborted_txn_bytes(
        2, 0, 3, 4
    )
    assert committed_read_aborts(p, 0) == [(2, 0)]  # found from the segment the fetch starts in
    assert committed_read_aborts(p, 4) == []


def test_truncation_cuts_the_txnindex_and_the_snapshots_above_it(tmp_path):
    p = leader(tmp_path)
    aborted_pair(p, 2)  # 0-1, marker 2
    p.log.roll(NOW)  # snapshot at 3
    aborted_pair(p, 3)  # 3-4, marker 5
    p.log.roll(NOW)  # snapshot at 6
    assert p.log.producer_snapshots.offsets() == [3, 6]
    p.truncate_as_follower(5, NOW)
    assert p.log.producer_snapshots.offsets() == [3]
    assert p.log.all_aborted_transactions() == [AbortedTxn(2, 0, 2, 3)]
    assert p.producer_state.entry(3).current_txn_first_offset == 3  # its marker went


# ----------------------------------------------------------------- restarts and snapshots


def fill(p: Partition, rounds: int) -> None:
    """`rounds` of: a committed transaction, an aborted one, an idempotent batch (7 offsets, 5
    batches), each by new producers."""
    for _ in range(rounds):
        r = len(p.producer_state)  # three new producers a round
        Producer(100 + r).send(p, 2)
        p.append_marker_as_leader(100 + r, 0, COMMIT, NOW)
        aborted_pair(p, 200 + r)
        Producer(300 + r).send(p, 1, txn=False)


def reopen(tmp_path) -> Partition:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    return Partition("t", 0, 1, log, ProducerStateManager("t-0"))


def test_a_restart_after_a_clean_close_replays_nothing(tmp_path):
    p = leader(tmp_path)
    fill(p, 20)
    Producer(9).send(p, 2)  # left open
    before = (p.producer_state.snapshot_entries(), p.log.all_aborted_transactions())
    p.log.close()
    again = reopen(tmp_path)
    assert rebuild_producer_state(again.producer_state, again.log, NOW) == 0
    assert again.producer_state.snapshot_entries() == before[0]
    assert again.log.all_aborted_transactions() == before[1]
    assert len(before[1]) == 20
    assert again.producer_state.first_unstable_offset(again.log_end_offset) == 140
    # The full replay (what a restart did before) reads every batch and agrees.
    assert rebuild_producer_state(again.producer_state, again.log, NOW, from_snapshot=False) == 101
    assert again.log.all_aborted_transactions() == before[1]


def test_a_restart_after_a_crash_replays_from_the_last_roll(tmp_path):
    p = leader(tmp_path)
    fill(p, 5)  # 35 offsets, 25 batches
    p.log.roll(NOW)  # snapshot at 35
    fill(p, 2)  # 10 batches more
    expected_state = p.producer_state.snapshot_entries()
    expected_aborts = p.log.all_aborted_transactions()
    p.log.flush()  # no close: no snapshot at the end
    again = reopen(tmp_path)
    assert rebuild_producer_state(again.producer_state, again.log, NOW) == 10
    assert again.producer_state.snapshot_entries() == expected_state
    # The LSO field is a search hint Kafka computes from the transactions it still tracks; a
    # replay may know fewer of them than the live leader did.
    assert [key(t) for t in again.log.all_aborted_transactions()] == [
        key(t) for t in expected_aborts
    ]


def key(txn: AbortedTxn) -> tuple[int, int, int]:
    return (txn.producer_id, txn.first_offset, txn.last_offset)


def test_a_retry_of_the_last_batch_is_still_a_duplicate_after_a_snapshot_restart(tmp_path):
    p = leader(tmp_path)
    producer = Producer(5)
    producer.send(p, 2, txn=False)
    retry = Producer(5)
    retry.seq = 0
    p.log.close()
    again = reopen(tmp_path)
    rebuild_producer_state(again.producer_state, again.log, NOW)
    again.make_leader(p_state(), NOW)
    result = retry.send(again, 2, txn=False)
    assert result.duplicate and (result.first_offset, result.last_offset) == (0, 1)


def p_state():
    from epochlog.broker.partition import PartitionState

    return PartitionState(leader=1, leader_epoch=1, isr=(1,), replicas=(1,))


def test_a_corrupt_txnindex_is_rebuilt_by_a_full_replay(tmp_path):
    p = leader(tmp_path)
    fill(p, 3)
    p.log.roll(NOW)
    fill(p, 1)
    expected = p.log.all_aborted_transactions()
    p.log.close()
    damaged = tmp_path / "t-0" / TXN_INDEX
    good = damaged.read_bytes()
    damaged.write_bytes(good[:-3])
    again = reopen(tmp_path)
    assert rebuild_producer_state(again.producer_state, again.log, NOW) == 20  # all of it
    assert again.log.all_aborted_transactions() == expected
    assert damaged.read_bytes() == good


def test_missing_txnindex_and_snapshots_are_rebuilt_from_the_log(tmp_path):
    p = leader(tmp_path)
    fill(p, 3)
    expected = p.log.all_aborted_transactions()
    p.log.close()
    directory = tmp_path / "t-0"
    good = (directory / TXN_INDEX).read_bytes()
    for path in [*directory.glob("*.snapshot"), directory / TXN_INDEX]:
        path.unlink()
    again = reopen(tmp_path)
    assert rebuild_producer_state(again.producer_state, again.log, NOW) == 15
    assert again.log.all_aborted_transactions() == expected
    again.log.flush()
    assert (directory / TXN_INDEX).read_bytes() == good
    assert committed_read_aborts(again_leader(again), 0) == [(200, 3), (203, 10), (206, 17)]


def again_leader(p: Partition) -> Partition:
    p.make_leader(p_state(), NOW)
    return p


def test_a_segment_changed_after_the_snapshot_means_a_full_replay(tmp_path):
    p = leader(tmp_path)
    fill(p, 2)
    p.log.close()
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    segment.write_bytes(segment.read_bytes())  # rewritten while the broker was down
    again = reopen(tmp_path)
    assert rebuild_producer_state(again.producer_state, again.log, NOW) == 10


def test_retention_deletes_snapshots_below_the_first_segment(tmp_path):
    p = leader(tmp_path)
    fill(p, 1)
    p.log.roll(NOW)
    fill(p, 1)
    p.log.roll(NOW)
    assert p.log.producer_snapshots.offsets() == [7, 14]
    p.log.maybe_increment_log_start_offset(14, p.high_watermark)
    p.log.delete_old_segments(NOW, p.high_watermark)
    assert p.log.producer_snapshots.offsets() == [14]
    assert p.log.all_aborted_transactions() == []


def test_a_log_moved_to_another_dir_keeps_the_aborts_and_takes_snapshots(tmp_path):
    p = leader(tmp_path / "a")
    fill(p, 2)
    moved = PartitionLog.open(tmp_path / "b" / "t-0", LogConfig())
    moved.append_as_follower(p.log.read_for_copy(0, 10**6).read_bytes(), NOW)
    assert moved.all_aborted_transactions() == []  # a copy does not index aborts itself
    before = p.log.all_aborted_transactions()
    p.use_moved_log(moved)
    assert p.log is moved and moved.all_aborted_transactions() == before
    assert committed_read_aborts(p, 0) == [(200, 3), (203, 10)]
    moved.roll(NOW)
    assert moved.producer_snapshots.offsets() == [14]
