"""The producer's batching decisions: linger, batch size, drain, retries, expiry."""

from __future__ import annotations

import pytest

from epochlog.client.accumulator import OrderingGate, RecordAccumulator
from epochlog.client.metadata import TopicPartition
from epochlog.protocol.compression import Compression
from epochlog.protocol.records import decode_batch

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
LEADERS = {T0: 1, T1: 2}


def leader_of(tp: TopicPartition) -> int | None:
    return LEADERS.get(tp)


def acc(**kw: object) -> RecordAccumulator:
    args: dict = {"batch_size": 1000, "linger_ms": 10, "retry_backoff_ms": 100}
    args.update(kw)
    return RecordAccumulator(**args)


def add(a: RecordAccumulator, tp: TopicPartition, now: float, size: int = 10) -> None:
    a.append(tp, 1000, b"k", b"x" * size, [("h", b"v")], object(), now)


def test_a_batch_is_not_ready_before_linger_ms_and_is_after() -> None:
    a = acc()
    add(a, T0, now=0)
    check = a.ready(5, leader_of)
    assert check.nodes == set() and check.next_check_ms == 5
    assert a.ready(10, leader_of).nodes == {1}


def test_a_full_batch_is_ready_at_once_and_the_next_record_starts_a_new_one() -> None:
    a = acc(batch_size=300)
    for _ in range(10):
        add(a, T0, now=0, size=50)
    batches = a.queued(T0)
    assert len(batches) > 1
    assert all(b.is_closed for b in batches[:-1])
    assert sum(b.record_count for b in batches) == 10
    assert a.ready(0, leader_of).nodes == {1}


def test_a_record_bigger_than_batch_size_gets_a_batch_of_its_own() -> None:
    a = acc(batch_size=100)
    add(a, T0, now=0, size=500)
    add(a, T0, now=0, size=5)
    first, second = a.queued(T0)
    assert first.record_count == 1 and first.is_closed
    assert second.record_count == 1 and not second.is_closed


def test_drain_takes_one_batch_per_partition_per_node() -> None:
    a = acc(batch_size=200)
    for _ in range(6):
        add(a, T0, now=0, size=60)
    add(a, T1, now=0)
    drained = a.drain(20, {1, 2}, leader_of, 10**6, OrderingGate(False))
    assert [b.tp for b in drained[1]] == [T0] and [b.tp for b in drained[2]] == [T1]
    assert len(a.queued(T0)) >= 1


def test_drain_stops_at_max_request_size_but_always_sends_one_batch() -> None:
    a = acc()
    LEADERS[TopicPartition("t", 2)] = 1
    try:
        add(a, T0, now=0, size=300)
        add(a, TopicPartition("t", 2), now=0, size=300)
        drained = a.drain(20, {1}, leader_of, 100, OrderingGate(False))
        assert len(drained[1]) == 1
        drained = a.drain(20, {1}, leader_of, 100, OrderingGate(False))
        assert len(drained[1]) == 1
        assert not a.has_queued()
    finally:
        del LEADERS[TopicPartition("t", 2)]


def test_partitions_without_a_leader_are_reported() -> None:
    a = acc()
    add(a, TopicPartition("nowhere", 0), now=0)
    check = a.ready(100, leader_of)
    assert check.unknown_leader_topics == {"nowhere"} and check.nodes == set()


def test_a_retried_batch_waits_retry_backoff_ms_and_goes_first() -> None:
    a = acc()
    add(a, T0, now=0)
    (batch,) = a.drain(10, {1}, leader_of, 10**6, OrderingGate(False))[1]
    add(a, T0, now=20)
    a.reenqueue(batch, now=50)
    assert batch.attempts == 1
    check = a.ready(100, leader_of)
    assert check.nodes == set() and check.next_check_ms == 50
    assert a.drain(100, {1}, leader_of, 10**6, OrderingGate(False)) == {}
    assert a.ready(150, leader_of).nodes == {1}
    assert a.drain(150, {1}, leader_of, 10**6, OrderingGate(False))[1] == [batch]


def test_retries_are_requeued_in_sequence_order() -> None:
    a = acc()
    batches = []
    for seq in (0, 5, 9):
        add(a, T0, now=0)
        (b,) = a.drain(10, {1}, leader_of, 10**6, OrderingGate(False))[1]
        b.stamp(7, 0, seq)
        batches.append(b)
    add(a, T0, now=20)  # a new, unsequenced batch
    for b in (batches[2], batches[0], batches[1]):
        a.reenqueue(b, now=30)
    queued = a.queued(T0)
    assert [b.base_sequence for b in queued[:3]] == [0, 5, 9]
    assert not queued[3].has_sequence


def test_a_later_batch_retried_after_a_split_stays_behind_the_halves() -> None:
    """Two batches in flight; the broker refuses the first as too large (it is split) and
    answers the second with a retriable error: the second must not overtake the halves, whose
    records come first, whatever order the answers arrive in."""
    for second_answered_first in (False, True):
        a = acc(batch_size=150)
        for i in range(4):  # two records a batch
            a.append(T0, 1000 + i, b"k", b"x" * 20, [], f"r{i}", now=0)
        gate = OrderingGate(False)
        (first,) = a.drain(10, {1}, leader_of, 10**6, gate)[1]
        (second,) = a.drain(10, {1}, leader_of, 10**6, gate)[1]
        second.stamp(7, 0, 2)  # it had a sequence, as under idempotence
        if second_answered_first:
            a.reenqueue(second, now=20)
            a.requeue_split(first.split(), now=30)
        else:
            a.requeue_split(first.split(), now=20)
            a.reenqueue(second, now=30)
        assert [b.handles for b in a.queued(T0)] == [["r0"], ["r1"], ["r2", "r3"]]


def test_batches_older_than_delivery_timeout_expire() -> None:
    a = acc()
    add(a, T0, now=0)
    add(a, T1, now=500)
    assert a.expire(999, 1000) == []
    expired = a.expire(1000, 1000)
    assert [b.tp for b in expired] == [T0]
    assert a.queued(T0) == ()


def test_the_fast_path_appends_to_an_open_batch_until_it_is_full_and_never_after_expiry() -> None:
    woken: list[int] = []
    a = RecordAccumulator(batch_size=300, linger_ms=0, wakeup=lambda: woken.append(1))
    batch = a.append(T0, 1000, b"k", b"x" * 10, [], "r0", now=0)
    assert woken == [1]  # a new batch: a new linger deadline
    for i in range(9):
        assert a.append(T0, 1001 + i, b"k", b"x" * 10, [], f"r{i + 1}") is batch
    assert batch.record_count == 10 and woken == [1]
    while batch.appendable:
        a.append(T0, 1000, b"k", b"x" * 10, [], "r", now=0)
    # full by the accumulator's bound (26 bytes + key + value): closed, and the sender told
    assert batch.record_count == len(batch.handles) and len(woken) >= 2
    assert batch.size <= 300 and not batch.appendable and batch.data is not None
    records = decode_batch(batch.data).records
    assert len(records) == batch.record_count == len(batch.handles) == len(batch.timestamps)
    assert [r.offset for r in records] == list(range(len(records)))
    # an expired (or aborted) open batch takes no more records, so none is lost with it
    other = a.append(T1, 1000, b"k", b"v", [], "x", now=0)
    assert other.appendable
    assert other in a.expire(10_000, 1000) and not other.appendable
    third = a.append(T1, 1000, b"k", b"v", [], "y", now=10_000)
    assert third is not other
    a.abort_all()
    assert not third.appendable


def test_an_append_without_now_dates_a_new_batch_by_the_clock() -> None:
    a = RecordAccumulator(batch_size=300, linger_ms=0, clock=lambda: 1234.0)
    assert a.append(T0, 1000, None, b"v", [], "r").created_ms == 1234.0
    with pytest.raises(ValueError, match="needs `now`"):
        RecordAccumulator(batch_size=300, linger_ms=0).append(T0, 1000, None, b"v", [], "r")


def test_flush_makes_lingering_batches_ready() -> None:
    a = acc(linger_ms=10_000)
    add(a, T0, now=0)
    assert a.ready(1, leader_of).nodes == set()
    a.begin_flush()
    assert a.ready(1, leader_of).nodes == {1}
    a.end_flush()


def test_closing_a_batch_is_reported_so_the_sticky_partition_moves() -> None:
    closed: list[TopicPartition] = []
    a = acc(batch_size=150, on_batch_closed=closed.append)
    add(a, T0, now=0, size=60)
    assert closed == []
    add(a, T0, now=0, size=60)  # does not fit: the first batch closes
    assert closed == [T0]
    a.drain(20, {1}, leader_of, 10**6, OrderingGate(False))
    assert closed == [T0]  # the drained batch was already closed
    a.drain(20, {1}, leader_of, 10**6, OrderingGate(False))
    assert closed == [T0, T0]  # draining closes the open one


def test_max_in_flight_one_mutes_a_partition_until_its_batch_is_answered() -> None:
    gate = OrderingGate(guarantee_order=True)
    a = acc(linger_ms=0)
    add(a, T0, now=0)
    (batch,) = a.drain(0, {1}, leader_of, 10**6, gate)[1]
    add(a, T0, now=0)
    assert a.drain(0, {1}, leader_of, 10**6, gate) == {}
    gate.on_complete(batch)
    assert len(a.drain(0, {1}, leader_of, 10**6, gate)[1]) == 1


def test_stamping_a_batch_sets_producer_fields_and_keeps_it_valid() -> None:
    a = acc(compression=Compression.ZSTD)
    for i in range(3):
        a.append(T0, 1000 + i, b"k%d" % i, b"v", [], object(), 0)
    (batch,) = a.drain(20, {1}, leader_of, 10**6, OrderingGate(False))[1]
    batch.stamp(4242, 3, 17)
    assert batch.data is not None
    decoded = decode_batch(batch.data)  # verifies the CRC
    h = decoded.header
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4242, 3, 17)
    assert h.compression is Compression.ZSTD
    assert [r.key for r in decoded.records] == [b"k0", b"k1", b"k2"]
    assert batch.last_sequence == 19
