"""Compaction of transactions (Kafka's LogCleaner `shouldDiscardBatch`, CleanedTransactionMetadata
and KIP-534's delete horizon for markers): the rules as plain functions, then real cleaner passes
over a log holding committed and aborted transactions."""

from __future__ import annotations

import os

import pytest

from epochlog.protocol.control_records import (
    ControlType,
    EndTxnMarker,
    build_marker_batch,
    read_marker,
)
from epochlog.protocol.records import (
    DELETE_HORIZON_MASK,
    RecordBatchBuilder,
    decode_batches,
    parse_batch_header,
)
from epochlog.storage import LogConfig, PartitionLog
from epochlog.storage.compaction import CleanedTransactions, OffsetMap, filter_batch
from epochlog.storage.txn_index import AbortedTxn
from tests.unit.test_storage_cleaner import CRASH_STEPS, DAY, NOW, Clock, Crash, batch, started

COMMIT = EndTxnMarker(ControlType.COMMIT, 0)
ABORT = EndTxnMarker(ControlType.ABORT, 0)
CONFIG = LogConfig(
    segment_bytes=2048,
    cleanup_policy="compact",
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=DAY,
)


def txn_batch(pid: int, seq: int, records: list[tuple[bytes, bytes]]) -> bytes:
    builder = RecordBatchBuilder(
        producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True
    )
    for i, (key, value) in enumerate(records):
        builder.append(NOW + i, key, value)
    return builder.build()


def header_of(raw: bytes, base_offset: int):
    data = bytearray(raw)
    data[0:8] = base_offset.to_bytes(8, "big")
    return parse_batch_header(bytes(data))


# ----------------------------------------------------------------------- the rules alone


def test_batches_of_an_aborted_transaction_are_discarded_and_nothing_else():
    txns = CleanedTransactions([AbortedTxn(2, 10, 12, 13)])
    assert not txns.discard_data_batch(header_of(txn_batch(1, 0, [(b"a", b"1")]), 9))
    assert txns.discard_data_batch(header_of(txn_batch(2, 0, [(b"a", b"x")]), 10))
    assert not txns.discard_data_batch(header_of(batch([(b"a", b"2")]), 11))  # not transactional
    abort = header_of(build_marker_batch(2, 0, ABORT, NOW), 12)
    assert not txns.marker_removable(abort, ABORT)  # its data was seen: the marker stays
    assert txns.kept_aborted == [AbortedTxn(2, 10, 12, 13)]
    # The producer's next transaction, after the abort marker, is not aborted.
    assert not txns.discard_data_batch(header_of(txn_batch(2, 1, [(b"b", b"y")]), 13))


def test_a_marker_may_go_only_when_no_batch_of_its_transaction_is_left():
    txns = CleanedTransactions([AbortedTxn(2, 3, 5, 6)])
    commit = header_of(build_marker_batch(1, 0, COMMIT, NOW), 4)
    assert txns.marker_removable(commit, COMMIT)  # no batch of producer 1 seen in this pass
    assert not txns.discard_data_batch(header_of(txn_batch(1, 0, [(b"a", b"1")]), 6))
    assert not txns.marker_removable(header_of(build_marker_batch(1, 0, COMMIT, NOW), 7), COMMIT)
    abort = header_of(build_marker_batch(2, 0, ABORT, NOW), 5)
    assert txns.marker_removable(abort, ABORT)  # its data is gone already
    assert txns.kept_aborted == []


def test_a_removable_marker_first_gets_a_delete_horizon_then_goes_after_it():
    raw = build_marker_batch(2, 0, ABORT, NOW)
    kept = filter_batch(raw, 0, OffsetMap(10), NOW, DAY, marker_removable=False)
    assert kept.data == raw
    stamped = filter_batch(raw, 0, OffsetMap(10), NOW, DAY, marker_removable=True)
    header = parse_batch_header(stamped.data)
    assert header.attributes & DELETE_HORIZON_MASK and header.is_control
    assert header.base_timestamp == NOW + DAY
    assert read_marker(stamped.data) == ABORT  # the marker record itself is unchanged
    waiting = filter_batch(
        stamped.data, 0, OffsetMap(10), NOW + DAY - 1, DAY, marker_removable=True
    )
    assert waiting.data == stamped.data
    gone = filter_batch(stamped.data, 0, OffsetMap(10), NOW + DAY, DAY, marker_removable=True)
    assert gone.data is None


def test_a_discarded_batch_is_kept_empty_when_it_is_its_producers_last():
    raw = txn_batch(2, 0, [(b"a", b"1"), (b"b", b"2")])
    emptied = filter_batch(raw, 0, OffsetMap(10), NOW, DAY, discard_records=True, retain_empty=True)
    assert parse_batch_header(emptied.data).records_count == 0 and emptied.removed == 2
    assert filter_batch(raw, 0, OffsetMap(10), NOW, DAY, discard_records=True).data is None


# ----------------------------------------------------------------- real cleaner passes


def append(log: PartitionLog, raw: bytes) -> int:
    return log.append_as_leader(raw, 0, NOW, validated=parse_batch_header(raw)).first_offset


def abort(log: PartitionLog, pid: int, first: int) -> int:
    marker = append(log, build_marker_batch(pid, 0, ABORT, NOW))
    log.append_aborted_txn(AbortedTxn(pid, first, marker, marker + 1))
    return marker


def data_records(log: PartitionLog) -> dict[bytes | None, bytes | None]:
    """Key -> value of every data record in the log (control records left out), in order."""
    raw = b"".join(
        log.read(segment.base_offset, 1 << 20).read_bytes()
        for segment in log.segments
        if not segment.is_empty
    )
    return {
        r.key: r.value for b in decode_batches(raw) if not b.header.is_control for r in b.records
    }


def control_batches(log: PartitionLog) -> list[tuple[int, int, bool]]:
    return [
        (h.producer_id, h.base_offset, bool(h.attributes & DELETE_HORIZON_MASK))
        for h in log.iter_headers()
        if h.is_control
    ]


def test_a_pass_removes_aborted_records_keeps_committed_ones_and_then_the_markers_go(tmp_path):
    clock = Clock()
    manager = started(tmp_path / "d", clock, CONFIG)
    log = manager.get_or_create_log("t", 0, config=CONFIG)
    append(log, txn_batch(1, 0, [(b"k1", b"committed"), (b"k2", b"committed")]))  # 0-1
    append(log, build_marker_batch(1, 0, COMMIT, NOW))  # 2
    append(log, txn_batch(2, 0, [(b"k1", b"aborted"), (b"k3", b"aborted")]))  # 3-4
    assert abort(log, 2, 3) == 5
    append(log, txn_batch(2, 1, [(b"k4", b"later")]))  # 6, producer 2's last batch
    append(log, build_marker_batch(2, 0, COMMIT, NOW))  # 7
    log.roll()
    append(log, batch([(b"tail", b"x")]))  # 8, in the active segment
    assert manager.cleaner.clean_once()
    assert data_records(log) == {
        b"k1": b"committed",  # an aborted k1 later in the log does not supersede it
        b"k2": b"committed",
        b"k4": b"later",
        b"tail": b"x",
    }
    # Both transactions' data was seen in this pass: every marker stays, without a horizon.
    assert control_batches(log) == [(1, 2, False), (2, 5, False), (2, 7, False)]
    assert log.all_aborted_transactions() == [AbortedTxn(2, 3, 5, 6)]
    # Another pass (new dirty data): the aborted data is gone, so its marker gets a horizon and
    # leaves the cleaned segment's .txnindex; the commit markers still have data.
    append(log, batch([(b"tail", b"y")]))
    log.roll()
    append(log, batch([(b"tail2", b"z")]))
    assert manager.cleaner.clean_once()
    assert control_batches(log) == [(1, 2, False), (2, 5, True), (2, 7, False)]
    assert log.all_aborted_transactions() == []
    assert not list((tmp_path / "d" / "t-0").glob("*.txnindex"))
    clock.now += DAY  # past the horizon: the expired horizon alone is worth a pass
    assert manager.cleaner.clean_once()
    assert control_batches(log) == [(1, 2, False), (2, 7, False)]
    assert set(data_records(log)) == {b"k1", b"k2", b"k4", b"tail", b"tail2"}
    manager.shutdown()


@pytest.mark.parametrize("step", CRASH_STEPS)
def test_a_crash_at_each_step_of_a_swap_keeps_the_abort_indexed(tmp_path, step):
    clock = Clock()
    manager = started(tmp_path / "d", clock, CONFIG)
    log = manager.get_or_create_log("t", 0, config=CONFIG)
    append(log, txn_batch(1, 0, [(b"k1", b"committed")]))  # 0
    append(log, build_marker_batch(1, 0, COMMIT, NOW))  # 1
    log.roll()
    append(log, txn_batch(2, 0, [(b"k1", b"aborted")]))  # 2, in the segment at 2
    abort(log, 2, 2)  # 3
    log.roll()
    append(log, batch([(b"tail", b"x")]))  # 4
    log.flush()

    def crash(name: str) -> None:
        if name == step:
            raise Crash(name)

    manager.cleaner.on_step = crash
    with pytest.raises(Crash):
        manager.cleaner.clean_once()
    os.close(manager._locks.pop(manager.log_dirs[0]))  # the process dies here
    reopened = started(tmp_path / "d", clock, CONFIG).get_log("t", 0)
    names = [p.name for p in (tmp_path / "d" / "t-0").iterdir()]
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
    assert reopened.all_aborted_transactions() == [AbortedTxn(2, 2, 3, 4)]
    assert reopened.collect_aborted_transactions(0, 5) == [AbortedTxn(2, 2, 3, 4)]
    swapped = CRASH_STEPS.index(step) >= CRASH_STEPS.index("swap-committed")
    # Folded without regard to transactions: the aborted record is gone once the swap stands.
    assert data_records(reopened)[b"k1"] == (b"committed" if swapped else b"aborted")
