"""Sequence numbers and error decisions of the idempotent producer."""

from __future__ import annotations

from epochlog.client.accumulator import RecordAccumulator
from epochlog.client.idempotence import IdempotenceManager
from epochlog.client.metadata import TopicPartition
from epochlog.client.retries import Action, Verdict, decide_without_idempotence
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import decode_batch

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def leader_of(tp: TopicPartition) -> int:
    return 1


def setup(pid: int = 1000) -> tuple[RecordAccumulator, IdempotenceManager]:
    a = RecordAccumulator(batch_size=10**6, linger_ms=0, retry_backoff_ms=0)
    idem = IdempotenceManager()
    idem.set_producer_id(pid, 0)
    return a, idem


def send(a: RecordAccumulator, idem: IdempotenceManager, tp: TopicPartition, records: int):
    for _ in range(records):
        a.append(tp, 0, None, b"v", [], object(), 0)
    drained = a.drain(0, {1}, leader_of, 10**6, idem)
    return drained[1][0] if drained else None


def test_sequences_are_assigned_at_drain_per_partition() -> None:
    a, idem = setup()
    b1 = send(a, idem, T0, 3)
    b2 = send(a, idem, T0, 2)
    c1 = send(a, idem, T1, 4)
    assert (b1.base_sequence, b2.base_sequence, c1.base_sequence) == (0, 3, 0)
    assert idem.sequences(T0).next_sequence == 5
    h = decode_batch(b2.data).header
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (1000, 0, 3)


def test_no_batches_are_drained_without_a_producer_id() -> None:
    a = RecordAccumulator(batch_size=10**6, linger_ms=0)
    idem = IdempotenceManager()
    assert send(a, idem, T0, 1) is None
    idem.set_producer_id(5, 0)
    assert a.drain(0, {1}, leader_of, 10**6, idem)[1][0].base_sequence == 0


def test_at_most_five_unresolved_batches_per_partition() -> None:
    a, idem = setup()
    sent = [send(a, idem, T0, 1) for _ in range(5)]
    assert all(sent)
    assert send(a, idem, T0, 1) is None
    idem.resolve(sent[0], idem.decide(sent[0], ErrorCode.NONE, True))
    assert a.drain(0, {1}, leader_of, 10**6, idem)[1][0].base_sequence == 5
    assert idem.sequences(T0).last_acked == 0


def test_a_retry_keeps_its_sequence_and_goes_only_when_it_is_first_unresolved() -> None:
    a, idem = setup()
    b0, b1 = send(a, idem, T0, 1), send(a, idem, T0, 1)
    v1 = idem.decide(b1, ErrorCode.NOT_LEADER_OR_FOLLOWER, True)
    assert v1 == Verdict(Action.RETRY)
    idem.resolve(b1, v1)
    a.reenqueue(b1, 0)
    assert a.drain(0, {1}, leader_of, 10**6, idem) == {}  # b0 still unresolved
    idem.resolve(b0, idem.decide(b0, ErrorCode.NONE, True))
    (again,) = a.drain(0, {1}, leader_of, 10**6, idem)[1]
    assert again is b1 and again.base_sequence == 1


def test_duplicate_sequence_is_success() -> None:
    a, idem = setup()
    b = send(a, idem, T0, 2)
    assert idem.decide(b, ErrorCode.DUPLICATE_SEQUENCE_NUMBER, True).action is Action.SUCCESS


def test_out_of_order_behind_an_unresolved_batch_is_retried_without_reset() -> None:
    a, idem = setup()
    send(a, idem, T0, 1)
    b1 = send(a, idem, T0, 1)
    v = idem.decide(b1, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, True)
    assert v == Verdict(Action.RETRY, reset_producer_id=False)


def test_out_of_order_for_the_next_expected_batch_is_a_gap_and_resets() -> None:
    a, idem = setup()
    b0 = send(a, idem, T0, 1)
    v = idem.decide(b0, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, True)
    assert v == Verdict(Action.RETRY, reset_producer_id=True)
    idem.resolve(b0, v)
    assert idem.reset_pending and not idem.has_producer_id


def test_unknown_producer_id_is_retried_under_a_new_producer_id() -> None:
    a, idem = setup(pid=1)
    b0 = send(a, idem, T0, 3)
    b1 = send(a, idem, T0, 2)
    for b in (b0, b1):
        v = idem.decide(b, ErrorCode.UNKNOWN_PRODUCER_ID, True)
        assert v.action is Action.RETRY and v.reset_producer_id
        idem.resolve(b, v)
        a.reenqueue(b, 0)
    assert a.drain(0, {1}, leader_of, 10**6, idem) == {}  # reset pending: nothing goes
    idem.set_producer_id(2, 0)
    first = a.drain(0, {1}, leader_of, 10**6, idem)[1][0]
    assert first is b0 and (first.producer_id, first.base_sequence) == (2, 0)
    second = a.drain(0, {1}, leader_of, 10**6, idem)[1][0]
    assert second is b1 and second.base_sequence == 3
    assert decode_batch(second.data).header.producer_id == 2


def test_a_batch_that_fails_for_good_after_a_sequence_forces_a_reset() -> None:
    a, idem = setup()
    b = send(a, idem, T0, 1)
    v = idem.decide(b, ErrorCode.CORRUPT_MESSAGE, may_retry=False)
    assert v.action is Action.FAIL
    idem.resolve(b, v)
    assert idem.reset_pending


def test_errors_are_retried_only_if_retriable_and_within_budget() -> None:
    assert decide_without_idempotence(ErrorCode.NONE, True).action is Action.SUCCESS
    assert decide_without_idempotence(ErrorCode.NOT_ENOUGH_REPLICAS, True).action is Action.RETRY
    assert decide_without_idempotence(ErrorCode.NOT_ENOUGH_REPLICAS, False).action is Action.FAIL
    assert decide_without_idempotence(ErrorCode.MESSAGE_TOO_LARGE, True).action is Action.FAIL
