"""The partition side of transactions on a real log (temp dir): transactional batches, commit and
abort markers, the last stable offset, the aborted-transaction list, read_committed reads and
ListOffsets, followers copying markers, and the state rebuilt from the log after a restart."""

from __future__ import annotations

import pytest

from epochlog.broker.partition import (
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    Partition,
    PartitionError,
    PartitionState,
    rebuild_producer_state,
)
from epochlog.broker.produce_validation import validate_partition_records
from epochlog.broker.producer_state import AbortedTxn, ProducerStateManager
from epochlog.protocol.control_records import (
    ControlType,
    EndTxnMarker,
    build_marker_batch,
    read_marker,
)
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import (
    RecordBatchBuilder,
    decode_batches,
    iter_batches,
    parse_batch_header,
)
from epochlog.storage import LogConfig, PartitionLog

NOW = 1_700_000_000_000
COMMIT = EndTxnMarker(ControlType.COMMIT, 0)
ABORT = EndTxnMarker(ControlType.ABORT, 0)


def open_partition(tmp_path, local=1) -> Partition:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    return Partition("t", 0, local, log, ProducerStateManager("t-0"))


def leader(tmp_path, isr=(1,), replicas=(1,)) -> Partition:
    p = open_partition(tmp_path)
    p.make_leader(PartitionState(leader=1, leader_epoch=0, isr=isr, replicas=replicas), NOW)
    return p


class Producer:
    """Numbers one producer's batches as a client would."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def batch(self, n: int = 2, txn: bool = True) -> bytes:
        b = RecordBatchBuilder(
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=self.seq,
            is_transactional=txn,
        )
        for i in range(n):
            b.append(NOW + i, f"p{self.pid}-{self.seq + i}".encode(), b"v")
        self.seq += n
        return b.build()

    def send(self, p: Partition, n: int = 2, txn: bool = True):
        raw = self.batch(n, txn)
        header = validate_partition_records(raw, version=9, max_message_bytes=10**6, where="t-0")
        return p.append_records_as_leader(raw, header, 1, 1, NOW)


def keys_read(p: Partition, offset: int = 0, committed: bool = True) -> list[bytes]:
    read = p.read_records(
        fetch_offset=offset,
        current_leader_epoch=-1,
        last_fetched_epoch=-1,
        max_bytes=10**6,
        min_one_batch=True,
        up_to_high_watermark=True,
        isolation_level=READ_COMMITTED if committed else 0,
    )
    return [
        r.key
        for batch in decode_batches(read.records.read_bytes())
        if not batch.header.is_control
        for r in batch.records
    ]


def test_marker_batch_is_kafkas_control_record_format():
    raw = build_marker_batch(7, 3, EndTxnMarker(ControlType.COMMIT, 5), NOW)
    header = parse_batch_header(raw)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, -1)
    (batch,) = decode_batches(raw)
    assert batch.records[0].key == b"\x00\x00\x00\x01"  # version 0, type 1 (COMMIT)
    assert batch.records[0].value == b"\x00\x00\x00\x00\x00\x05"  # version 0, coordinator epoch
    assert read_marker(raw) == EndTxnMarker(ControlType.COMMIT, 5)


def test_open_transaction_holds_the_lso_at_its_first_offset(tmp_path):
    p = leader(tmp_path)
    Producer(1).send(p, 2, txn=False)  # offsets 0-1, idempotent only
    Producer(2).send(p, 3)  # offsets 2-4, transaction opens at 2
    assert p.high_watermark == 5
    assert p.last_stable_offset == 2
    assert p.producer_state.entry(2).current_txn_first_offset == 2
    assert keys_read(p) == [b"p1-0", b"p1-1"]
    assert len(keys_read(p, committed=False)) == 5


def test_commit_marker_moves_the_lso_past_the_marker(tmp_path):
    p = leader(tmp_path)
    producer = Producer(2)
    producer.send(p, 3)
    producer.send(p, 1)  # same transaction: it still starts at 0
    result = p.append_marker_as_leader(2, 0, COMMIT, NOW)
    assert result.first_offset == 4
    assert p.high_watermark == 5 and p.last_stable_offset == 5
    assert p.producer_state.entry(2).current_txn_first_offset == -1
    assert p.log.all_aborted_transactions() == []
    assert len(keys_read(p)) == 4


def test_abort_is_listed_for_reads_that_overlap_it(tmp_path):
    p = leader(tmp_path)
    Producer(2).send(p, 3)  # 0-2
    p.append_marker_as_leader(2, 0, ABORT, NOW)  # 3
    Producer(3).send(p, 1, txn=False)  # 4
    assert p.last_stable_offset == 5
    assert p.log.all_aborted_transactions() == [AbortedTxn(2, 0, 3, 4)]
    read = p.read_records(
        fetch_offset=0,
        current_leader_epoch=-1,
        last_fetched_epoch=-1,
        max_bytes=10**6,
        min_one_batch=True,
        up_to_high_watermark=True,
        isolation_level=READ_COMMITTED,
    )
    assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions] == [(2, 0)]
    assert read.last_stable_offset == 5
    assert p.log.collect_aborted_transactions(4, 5) == []  # past the marker: not listed


def test_aborted_entry_records_the_lso_an_older_open_transaction_holds(tmp_path):
    p = leader(tmp_path)
    Producer(1).send(p, 2)  # 0-1, stays open
    Producer(2).send(p, 2)  # 2-3
    p.append_marker_as_leader(2, 0, ABORT, NOW)  # 4
    assert p.log.all_aborted_transactions() == [AbortedTxn(2, 2, 4, 0)]
    assert p.last_stable_offset == 0
    assert keys_read(p) == []


def test_lso_waits_for_the_marker_to_be_replicated(tmp_path):
    p = leader(tmp_path, isr=(1, 2), replicas=(1, 2))
    Producer(2).send(p, 2)  # 0-1
    p.update_follower_fetch_state(2, 2, 0, 1, p.log_end_offset, NOW)
    assert p.high_watermark == 2 and p.last_stable_offset == 0
    p.append_marker_as_leader(2, 0, COMMIT, NOW)  # 2
    assert p.high_watermark == 2 and p.last_stable_offset == 0  # marker not yet in the ISR
    p.update_follower_fetch_state(2, 3, 0, 1, p.log_end_offset, NOW)
    assert p.high_watermark == 3 and p.last_stable_offset == 3


def test_list_offsets_latest_is_the_lso_for_read_committed(tmp_path):
    p = leader(tmp_path)
    Producer(1).send(p, 2, txn=False)
    Producer(2).send(p, 2)

    def latest(isolation: int) -> int:
        found = p.fetch_offset_for_timestamp(
            LATEST_TIMESTAMP,
            current_leader_epoch=-1,
            is_client=True,
            fetch_only_from_leader=True,
            version=7,
            isolation_level=isolation,
        )
        return found.offset

    assert (latest(0), latest(READ_COMMITTED)) == (4, 2)
    p.append_marker_as_leader(2, 0, COMMIT, NOW)
    assert (latest(0), latest(READ_COMMITTED)) == (5, 5)


def test_marker_from_an_older_producer_epoch_is_refused_and_changes_nothing(tmp_path):
    p = leader(tmp_path)
    Producer(2, epoch=4).send(p, 2)
    with pytest.raises(PartitionError) as info:
        p.append_marker_as_leader(2, 3, ABORT, NOW)
    assert info.value.error_code is ErrorCode.INVALID_PRODUCER_EPOCH
    assert p.log_end_offset == 2 and p.last_stable_offset == 0


def test_marker_from_an_older_coordinator_epoch_is_fenced(tmp_path):
    p = leader(tmp_path)
    Producer(2).send(p, 1)
    p.append_marker_as_leader(2, 0, EndTxnMarker(ControlType.COMMIT, 9), NOW)
    with pytest.raises(PartitionError) as info:
        p.append_marker_as_leader(2, 0, EndTxnMarker(ControlType.ABORT, 8), NOW)
    assert info.value.error_code is ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert p.log_end_offset == 2


def test_marker_on_a_follower_is_not_leader(tmp_path):
    p = open_partition(tmp_path)
    p.make_follower(PartitionState(leader=2, leader_epoch=0, isr=(1, 2), replicas=(1, 2)))
    with pytest.raises(PartitionError) as info:
        p.append_marker_as_leader(2, 0, COMMIT, NOW)
    assert info.value.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_non_transactional_batch_inside_an_open_transaction_is_invalid_txn_state(tmp_path):
    p = leader(tmp_path)
    producer = Producer(2)
    producer.send(p, 1)
    with pytest.raises(PartitionError) as info:
        producer.send(p, 1, txn=False)
    assert info.value.error_code is ErrorCode.INVALID_TXN_STATE
    assert p.log_end_offset == 1


def test_follower_copies_markers_and_rebuilds_the_same_state(tmp_path):
    lead = leader(tmp_path / "a")
    Producer(1).send(lead, 2)  # 0-1 open
    Producer(2).send(lead, 2)  # 2-3
    lead.append_marker_as_leader(2, 0, ABORT, NOW)  # 4
    follower = open_partition(tmp_path / "b", local=2)
    follower.make_follower(PartitionState(leader=1, leader_epoch=0, isr=(1, 2), replicas=(1, 2)))
    raw = lead.log.read(0, 10**6, None, True).read_bytes()
    follower.append_records_as_follower(raw, NOW)
    follower.update_follower_high_watermark(5)
    assert follower.log.all_aborted_transactions() == lead.log.all_aborted_transactions()
    assert follower.last_stable_offset == 0
    assert follower.producer_state.entry(1).current_txn_first_offset == 0


def test_restart_rebuilds_open_transactions_and_aborted_list(tmp_path):
    p = leader(tmp_path)
    Producer(1).send(p, 2)  # 0-1, left open
    Producer(2).send(p, 2)  # 2-3
    p.append_marker_as_leader(2, 0, ABORT, NOW)  # 4
    Producer(3).send(p, 1)  # 5
    p.append_marker_as_leader(3, 0, COMMIT, NOW)  # 6
    before = p.log.all_aborted_transactions()
    p.log.close()
    reopened = open_partition(tmp_path)
    rebuild_producer_state(reopened.producer_state, reopened.log, NOW)
    reopened.make_leader(PartitionState(leader=1, leader_epoch=1, isr=(1,), replicas=(1,)), NOW)
    assert reopened.log.all_aborted_transactions() == before == [AbortedTxn(2, 2, 4, 0)]
    assert reopened.producer_state.entry(1).current_txn_first_offset == 0
    assert reopened.last_stable_offset == 0
    reopened.append_marker_as_leader(1, 0, COMMIT, NOW)
    assert reopened.last_stable_offset == reopened.log_end_offset == 8


def test_truncation_below_a_marker_reopens_its_transaction(tmp_path):
    p = open_partition(tmp_path)
    p.make_follower(PartitionState(leader=2, leader_epoch=0, isr=(1, 2), replicas=(1, 2)))
    lead = leader(tmp_path / "lead")
    Producer(2).send(lead, 2)  # 0-1
    lead.append_marker_as_leader(2, 0, ABORT, NOW)  # 2
    p.append_records_as_follower(lead.log.read(0, 10**6, None, True).read_bytes(), NOW)
    assert len(p.log.all_aborted_transactions()) == 1
    p.truncate_as_follower(2, NOW)
    assert p.log.all_aborted_transactions() == []
    assert p.producer_state.entry(2).current_txn_first_offset == 0


def test_control_batches_parse_from_a_log_read(tmp_path):
    p = leader(tmp_path)
    Producer(2).send(p, 1)
    p.append_marker_as_leader(2, 0, ABORT, NOW)
    raw = p.log.read(0, 10**6, None, True).read_bytes()
    controls = [pos for pos, h in iter_batches(raw) if h.is_control]
    assert [read_marker(raw, pos) for pos in controls] == [ABORT]


def test_aborts_go_with_the_segment_holding_their_marker(tmp_path):
    p = leader(tmp_path)
    Producer(2).send(p, 1)  # 0
    p.append_marker_as_leader(2, 0, ABORT, NOW)  # 1
    p.log.roll(NOW)
    Producer(3).send(p, 1)  # 2
    p.append_marker_as_leader(3, 0, ABORT, NOW)  # 3
    p.log.maybe_increment_log_start_offset(2, p.high_watermark)
    assert p.log.delete_old_segments(NOW, p.high_watermark) == 1
    assert [t.producer_id for t in p.log.all_aborted_transactions()] == [3]
    assert not (tmp_path / "t-0" / "00000000000000000000.txnindex").exists()


def test_a_producer_with_an_open_transaction_does_not_expire(tmp_path):
    p = leader(tmp_path)
    Producer(2).send(p, 1)
    Producer(3).send(p, 1, txn=False)
    assert p.producer_state.remove_expired(NOW + 10**9, 1000) == 1
    assert p.producer_state.entry(2) is not None and p.producer_state.entry(3) is None


def test_the_group_coordinators_transactional_offsets_batch_skips_sequence_checks(tmp_path):
    # Kafka's AppendOrigin.COORDINATOR: each TxnOffsetCommit batch starts at sequence 0, a
    # client batch that did so again would be a duplicate; only an older epoch is refused.
    p = leader(tmp_path)

    def coordinator_batch(epoch: int, value: bytes) -> tuple[bytes, object]:
        b = RecordBatchBuilder(
            producer_id=7, producer_epoch=epoch, base_sequence=0, is_transactional=True
        )
        b.append(NOW, b"offset-key", value)
        raw = b.build()
        return raw, validate_partition_records(raw, version=9, max_message_bytes=10**6, where="t-0")

    raw, header = coordinator_batch(1, b"first")
    first = p.append_records_as_leader(raw, header, 1, 1, NOW, from_coordinator=True)
    p.append_marker_as_leader(7, 1, COMMIT, NOW)
    raw, header = coordinator_batch(1, b"second")
    second = p.append_records_as_leader(raw, header, 1, 1, NOW, from_coordinator=True)
    assert not second.duplicate and second.first_offset > first.first_offset
    raw, header = coordinator_batch(1, b"third")
    duplicate = p.append_records_as_leader(raw, header, 1, 1, NOW)  # as a client's batch
    assert duplicate.duplicate
    raw, header = coordinator_batch(0, b"fenced")
    with pytest.raises(PartitionError) as err:
        p.append_records_as_leader(raw, header, 1, 1, NOW, from_coordinator=True)
    assert err.value.error_code is ErrorCode.INVALID_PRODUCER_EPOCH
