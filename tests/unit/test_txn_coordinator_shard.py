"""The transaction coordinator shard driven directly, as its runtime will: each call's records are
encoded in Kafka's format and appended to a list standing for the partition, then replayed; a new
shard loaded (decoded and replayed) from that list must rebuild the same state."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

from epochlog.coordinator.transaction.operations import (
    ABORT_TIMED_OUT_TIMER,
    EXPIRE_IDS_TIMER,
    AddOffsets,
    AddPartitions,
    AddPartitionsReply,
    Effects,
    EndTxn,
    ErrorReply,
    InitProducerId,
    InitProducerIdReply,
    TxnConfig,
    WriteMarkers,
)
from epochlog.coordinator.transaction.record_codec import TransactionStateCodec
from epochlog.coordinator.transaction.records import TxnRecord, TxnTombstone
from epochlog.coordinator.transaction.shard import TransactionCoordinatorShard
from epochlog.coordinator.transaction.state import (
    VALID_PREVIOUS_STATES,
    IllegalTxnTransitionError,
    TxnMetadata,
    TxnState,
    check_transition,
)
from epochlog.protocol.errors import ErrorCode

E = ErrorCode
S = TxnState
TIMEOUT = 60_000
CODEC = TransactionStateCodec()


class Coordinator:
    """A shard and its partition (a list of encoded records), run the way the runtime will."""

    def __init__(self, log: list[tuple[bytes, bytes | None]] | None = None, epoch: int = 1):
        self.ids = itertools.count(1000)
        self.log: list[tuple[bytes, bytes | None]] = log if log is not None else []
        self.shard = TransactionCoordinatorShard(lambda: next(self.ids), epoch, TxnConfig())
        for key, value in self.log:
            record = CODEC.decode(key, value)
            assert record is not None
            self.shard.replay(record)
        self.on_load = self.shard.loaded(0)

    def run(self, effects: Effects) -> Effects:
        for record in effects.records:
            self.log.append(CODEC.encode(record))
            self.shard.replay(record)  # the runtime replays what it appended, as Kafka does
        return effects

    def reply(self, effects: Effects) -> Any:
        assert len(effects.replies) == 1
        return effects.replies[0][1]

    def init(self, txn: str, now: int = 0, expected: tuple[int, int] = (-1, -1)) -> Any:
        request = InitProducerId(txn, TIMEOUT, *expected)
        return self.reply(self.run(self.shard.init_producer_id(request, "h", now)))

    def add(self, txn: str, pid: int, epoch: int, *tps: tuple[str, int], now: int = 0) -> Any:
        request = AddPartitions(txn, pid, epoch, tps)
        return self.reply(self.run(self.shard.add_partitions(request, "h", now)))

    def end(self, txn: str, pid: int, epoch: int, commit: bool, now: int = 0) -> Effects:
        return self.run(self.shard.end_txn(EndTxn(txn, pid, epoch, commit), "h", now))

    def state(self, txn: str) -> TxnMetadata:
        return self.shard.transactions[txn]


def begun(c: Coordinator, txn: str = "tx") -> InitProducerIdReply:
    producer = c.init(txn)
    assert c.add(txn, producer.producer_id, producer.producer_epoch, ("t", 0), ("t", 1)).errors == {
        ("t", 0): E.NONE,
        ("t", 1): E.NONE,
    }
    return producer


# --------------------------------------------------------------------------- the table


def test_the_table_is_kafkas() -> None:
    assert VALID_PREVIOUS_STATES[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    check_transition("tx", S.ONGOING, S.PREPARE_COMMIT)
    with pytest.raises(IllegalTxnTransitionError, match="'tx' cannot move from Empty to Prepare"):
        check_transition("tx", S.EMPTY, S.PREPARE_COMMIT)


# --------------------------------------------------------------------------- InitProducerId


def test_a_new_transactional_id_gets_a_producer_id_and_epoch_0() -> None:
    c = Coordinator()
    assert c.init("tx") == InitProducerIdReply(E.NONE, 1000, 0)
    assert c.state("tx").state is S.EMPTY and c.state("tx").timeout_ms == TIMEOUT


def test_init_again_bumps_the_epoch_and_fences_the_old_producer() -> None:
    c = Coordinator()
    c.init("tx")
    assert c.init("tx") == InitProducerIdReply(E.NONE, 1000, 1)
    assert c.add("tx", 1000, 0, ("t", 0)).errors == {("t", 0): E.PRODUCER_FENCED}
    assert c.reply(c.end("tx", 1000, 0, True)) == ErrorReply(E.PRODUCER_FENCED)


def test_bad_requests_are_refused_and_change_nothing() -> None:
    c = Coordinator()
    assert c.init("") == InitProducerIdReply(E.INVALID_REQUEST)
    too_long = InitProducerId("tx", 900_001)
    assert c.reply(c.run(c.shard.init_producer_id(too_long, "h", 0))).error is (
        E.INVALID_TRANSACTION_TIMEOUT
    )
    assert c.shard.transactions == {} and c.log == []


def test_init_during_an_ongoing_transaction_aborts_it_with_the_bumped_epoch() -> None:
    c = Coordinator()
    begun(c)
    effects = c.run(c.shard.init_producer_id(InitProducerId("tx", TIMEOUT), "h", 5))
    assert c.reply(effects) == InitProducerIdReply(E.CONCURRENT_TRANSACTIONS)
    assert c.state("tx").state is S.PREPARE_ABORT and c.state("tx").producer_epoch == 1
    assert effects.markers == [WriteMarkers("tx", 1000, 1, False, 1, (("t", 0), ("t", 1)))]
    # the client retries while the markers are written: still concurrent
    assert c.init("tx") == InitProducerIdReply(E.CONCURRENT_TRANSACTIONS)
    c.run(c.shard.markers_written("tx", 1000, 1, 6))
    assert c.state("tx").state is S.COMPLETE_ABORT
    assert c.init("tx") == InitProducerIdReply(E.NONE, 1000, 2)
    # the zombie at epoch 0 is fenced
    assert c.reply(c.end("tx", 1000, 0, True)) == ErrorReply(E.PRODUCER_FENCED)


def test_a_request_while_a_record_is_in_flight_is_concurrent() -> None:
    c = Coordinator()
    c.init("tx")
    in_flight = c.shard.init_producer_id(InitProducerId("tx", TIMEOUT), "h", 0)  # not yet appended
    assert c.init("tx") == InitProducerIdReply(E.CONCURRENT_TRANSACTIONS)
    assert c.add("tx", 1000, 0, ("t", 0)).errors == {("t", 0): E.CONCURRENT_TRANSACTIONS}
    c.shard.append_failed(in_flight.records)
    assert c.state("tx").producer_epoch == 0  # the failed bump left nothing behind
    assert c.init("tx") == InitProducerIdReply(E.NONE, 1000, 1)


def test_epoch_exhaustion_rotates_to_a_new_producer_id() -> None:
    c = Coordinator()
    c.init("tx")
    c.shard.replay(TxnRecord(replace(c.state("tx"), producer_epoch=32766)))
    assert c.init("tx") == InitProducerIdReply(E.NONE, 1001, 0)
    assert c.state("tx").previous_producer_id == 1000


# --------------------------------------------------------------------------- KIP-360


def test_kip360_recovery_with_the_current_epoch_bumps_it() -> None:
    c = Coordinator()
    c.init("tx")
    assert c.init("tx", expected=(1000, 0)) == InitProducerIdReply(E.NONE, 1000, 1)


def test_kip360_retry_of_a_bump_whose_answer_was_lost_gets_the_same_epoch() -> None:
    c = Coordinator()
    c.init("tx")
    assert c.init("tx", expected=(1000, 0)) == InitProducerIdReply(E.NONE, 1000, 1)
    assert c.init("tx", expected=(1000, 0)) == InitProducerIdReply(E.NONE, 1000, 1)


def test_kip360_with_a_stale_epoch_or_a_foreign_producer_id_is_fenced() -> None:
    c = Coordinator()
    c.init("tx")
    c.init("tx")
    c.init("tx")  # epoch 2, last epoch unknown
    assert c.init("tx", expected=(1000, 0)) == InitProducerIdReply(E.PRODUCER_FENCED)
    assert c.init("tx", expected=(77, 2)) == InitProducerIdReply(E.PRODUCER_FENCED)
    assert c.state("tx").producer_epoch == 2


def test_kip360_retry_of_a_rotation_is_recognised_by_the_previous_producer_id() -> None:
    c = Coordinator()
    c.init("tx")
    c.shard.replay(TxnRecord(replace(c.state("tx"), producer_epoch=32766)))
    assert c.init("tx", expected=(1000, 32766)) == InitProducerIdReply(E.NONE, 1001, 0)
    # the answer was lost; the producer asks again with its old id and exhausted epoch
    assert c.init("tx", expected=(1000, 32766)) == InitProducerIdReply(E.NONE, 1001, 0)


# --------------------------------------------------------------------------- adding, ending


def test_add_partitions_begins_a_transaction_and_adds_more() -> None:
    c = Coordinator()
    begun(c)
    assert c.state("tx").state is S.ONGOING
    before = len(c.log)
    assert c.add("tx", 1000, 0, ("t", 1)).errors == {("t", 1): E.NONE}
    assert len(c.log) == before  # already there: no write
    c.add("tx", 1000, 0, ("u", 3))
    assert c.state("tx").partitions == {("t", 0), ("t", 1), ("u", 3)}


def test_add_partitions_with_unknown_id_or_producer_id_is_a_mapping_error() -> None:
    c = Coordinator()
    assert c.add("nope", 1, 0, ("t", 0)).errors == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    c.init("tx")
    assert c.add("tx", 999, 0, ("t", 0)).errors == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}


def test_verify_only_answers_whether_each_partition_was_added() -> None:
    c = Coordinator()
    begun(c)
    request = AddPartitions("tx", 1000, 0, (("t", 0), ("t", 9)), verify_only=True)
    effects = c.run(c.shard.add_partitions(request, "h", 0))
    assert effects.records == []
    assert c.reply(effects) == AddPartitionsReply(
        "tx", {("t", 0): E.NONE, ("t", 9): E.TRANSACTION_ABORTABLE}
    )
    c.end("tx", 1000, 0, True)
    effects = c.run(c.shard.add_partitions(request, "h", 0))
    assert c.reply(effects).errors == dict.fromkeys(request.partitions, E.CONCURRENT_TRANSACTIONS)
    stale = AddPartitions("tx", 1000, 5, (("t", 0),), verify_only=True)
    assert c.reply(c.run(c.shard.add_partitions(stale, "h", 0))).errors == {
        ("t", 0): E.PRODUCER_FENCED
    }


def test_add_offsets_adds_the_groups_consumer_offsets_partition() -> None:
    c = Coordinator()
    c.init("tx")
    reply = c.reply(c.run(c.shard.add_offsets(AddOffsets("tx", 1000, 0, "my-group"), "h", 0)))
    assert reply == ErrorReply(E.NONE)
    # abs(javaStringHashCode("my-group")) % 50, as Kafka's GroupCoordinator.partitionFor
    expected = abs(sum(ord(ch) * 31 ** (7 - i) for i, ch in enumerate("my-group")) % 2**32)
    expected = expected - 2**32 if expected >= 2**31 else expected
    assert c.state("tx").partitions == {("__consumer_offsets", abs(expected) % 50)}


def test_commit_writes_prepare_then_markers_then_complete() -> None:
    c = Coordinator()
    begun(c)
    effects = c.end("tx", 1000, 0, True, now=10)
    assert c.reply(effects) == ErrorReply(E.NONE)
    assert c.state("tx").state is S.PREPARE_COMMIT
    assert effects.markers == [WriteMarkers("tx", 1000, 0, True, 1, (("t", 0), ("t", 1)))]
    assert c.reply(c.end("tx", 1000, 0, True)) == ErrorReply(E.CONCURRENT_TRANSACTIONS)
    assert c.reply(c.end("tx", 1000, 0, False)) == ErrorReply(E.INVALID_TXN_STATE)
    assert c.run(c.shard.markers_written("tx", 1000, 7, 11)).records == []  # stale: ignored
    c.run(c.shard.markers_written("tx", 1000, 0, 11))
    done = c.state("tx")
    assert (done.state, done.partitions, done.last_update_ms) == (S.COMPLETE_COMMIT, set(), 11)
    assert c.reply(c.end("tx", 1000, 0, True)) == ErrorReply(E.NONE)  # a retried commit
    assert c.reply(c.end("tx", 1000, 0, False)) == ErrorReply(E.INVALID_TXN_STATE)


def test_abort_goes_through_prepare_abort_to_complete_abort() -> None:
    c = Coordinator()
    begun(c)
    effects = c.end("tx", 1000, 0, False)
    assert effects.markers[0].commit is False and c.state("tx").state is S.PREPARE_ABORT
    c.run(c.shard.markers_written("tx", 1000, 0, 1))
    assert c.state("tx").state is S.COMPLETE_ABORT
    # the next transaction begins from CompleteAbort
    assert c.add("tx", 1000, 0, ("t", 5), now=2).errors == {("t", 5): E.NONE}
    assert c.state("tx").start_ms == 2 and c.state("tx").partitions == {("t", 5)}


def test_end_without_a_transaction_is_an_invalid_state() -> None:
    c = Coordinator()
    c.init("tx")
    assert c.reply(c.end("tx", 1000, 0, True)) == ErrorReply(E.INVALID_TXN_STATE)
    assert c.reply(c.end("other", 1000, 0, True)) == ErrorReply(E.INVALID_PRODUCER_ID_MAPPING)


# --------------------------------------------------------------------------- timers


def test_a_timed_out_transaction_is_aborted_with_an_epoch_bump() -> None:
    c = Coordinator()
    begun(c)
    assert c.run(c.shard.on_timer(ABORT_TIMED_OUT_TIMER, TIMEOUT)).records == []  # not yet
    effects = c.run(c.shard.on_timer(ABORT_TIMED_OUT_TIMER, TIMEOUT + 1))
    assert effects.markers == [WriteMarkers("tx", 1000, 1, False, 1, (("t", 0), ("t", 1)))]
    assert effects.timers[ABORT_TIMED_OUT_TIMER] == TIMEOUT + 1 + 10_000
    assert c.state("tx").state is S.PREPARE_ABORT
    # the timed-out producer's commit is fenced
    assert c.reply(c.end("tx", 1000, 0, True)) == ErrorReply(E.PRODUCER_FENCED)


def test_an_idle_transactional_id_expires_and_a_busy_one_does_not() -> None:
    c = Coordinator()
    c.init("idle", now=0)
    begun(c, "busy")
    week = TxnConfig().id_expiration_ms
    effects = c.run(c.shard.on_timer(EXPIRE_IDS_TIMER, week))
    assert effects.records == [TxnTombstone("idle")]
    assert set(c.shard.transactions) == {"busy"}
    assert c.log[-1][1] is None  # a tombstone in the partition
    assert c.init("idle").producer_id == 1002  # a new producer id after expiry


# --------------------------------------------------------------------------- load


def test_a_loaded_coordinator_rebuilds_the_same_state() -> None:
    c = Coordinator()
    begun(c, "a")
    begun(c, "b")
    c.end("b", 1001, 0, False)
    c.run(c.shard.markers_written("b", 1001, 0, 3))
    c.init("c")
    loaded = Coordinator(list(c.log), epoch=2)
    assert loaded.shard.transactions == {
        txn: replace(m, last_producer_epoch=-1) for txn, m in c.shard.transactions.items()
    }
    assert loaded.on_load.markers == []
    assert set(loaded.on_load.timers) == {ABORT_TIMED_OUT_TIMER, EXPIRE_IDS_TIMER}


def test_a_coordinator_that_loads_a_prepare_commit_finishes_it() -> None:
    c = Coordinator()
    begun(c)
    c.end("tx", 1000, 0, True)  # the old coordinator dies before the markers
    successor = Coordinator(list(c.log), epoch=2)
    assert successor.on_load.markers == [WriteMarkers("tx", 1000, 0, True, 2, (("t", 0), ("t", 1)))]
    successor.run(successor.shard.markers_written("tx", 1000, 0, 50))
    assert successor.state("tx").state is S.COMPLETE_COMMIT
    assert successor.reply(successor.end("tx", 1000, 0, True)) == ErrorReply(E.NONE)


# --------------------------------------------------------------------------- reads


def test_describe_and_list_transactions() -> None:
    c = Coordinator()
    begun(c, "a")
    c.init("b")
    described = c.shard.describe(["a", "missing", ""])
    assert described[2].error is E.INVALID_REQUEST
    assert described[0].state == "Ongoing" and described[0].topics == {"t": (0, 1)}
    assert (described[0].producer_id, described[0].timeout_ms) == (1000, TIMEOUT)
    assert described[1].error is E.TRANSACTIONAL_ID_NOT_FOUND
    everything = c.shard.list_transactions()
    assert [(t.transactional_id, t.state) for t in everything.transactions] == [
        ("a", "Ongoing"),
        ("b", "Empty"),
    ]
    ongoing = c.shard.list_transactions(["Ongoing", "Bogus"], [1000])
    assert [t.transactional_id for t in ongoing.transactions] == ["a"]
    assert ongoing.unknown_state_filters == ("Bogus",)
    assert c.shard.list_transactions(duration_filter_ms=100, now_ms=50).transactions == ()
    assert len(c.shard.list_transactions(duration_filter_ms=100, now_ms=101).transactions) == 1
