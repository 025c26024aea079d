"""The transaction coordinator's runtime, its marker decisions and its wire service, with fakes
for the partition log, the marker channel and the producer id source (no sockets, no ZooKeeper).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from epochlog.coordinator.transaction.markers import (
    MarkerDelivery,
    combined_request,
    split_response,
)
from epochlog.coordinator.transaction.operations import TxnConfig, WriteMarkers
from epochlog.coordinator.transaction.record_codec import TransactionStateCodec
from epochlog.coordinator.transaction.runtime import (
    CoordinatorError,
    EncodedRecord,
    TransactionCoordinatorRuntime,
    partition_for_transactional_id,
)
from epochlog.coordinator.transaction.service import TransactionService
from epochlog.coordinator.transaction.state import TxnState
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode

E = ErrorCode
PARTITIONS = 3
TXN_ID = "txn-a"
PARTITION = partition_for_transactional_id(TXN_ID, PARTITIONS)


class FakeLog:
    def __init__(self) -> None:
        self.records: dict[int, list[EncodedRecord]] = {}
        self.fail_with: ErrorCode | None = None

    async def append(self, partition: int, records: Sequence[EncodedRecord]) -> None:
        await asyncio.sleep(0)
        if self.fail_with is not None:
            raise CoordinatorError(self.fail_with)
        self.records.setdefault(partition, []).extend(records)

    async def read(self, partition: int) -> AsyncIterator[EncodedRecord]:
        for record in list(self.records.get(partition, [])):
            yield record

    def states(self, partition: int = PARTITION) -> list[str]:
        codec = TransactionStateCodec()
        decoded = [codec.decode(k, v) for k, v in self.records.get(partition, [])]
        return [r.metadata.state.kafka_name for r in decoded if hasattr(r, "metadata")]


class FakeMarkers:
    """Holds every delivery until the test releases it (or reports it fenced)."""

    def __init__(self) -> None:
        self.sent: list[WriteMarkers] = []
        self.results: dict[str, asyncio.Future[bool]] = {}
        self.currents: list[Callable[[], bool]] = []

    async def write(self, markers: WriteMarkers, still_current: Callable[[], bool]) -> bool:
        self.sent.append(markers)
        self.currents.append(still_current)
        future = self.results.setdefault(
            markers.transactional_id, asyncio.get_running_loop().create_future()
        )
        return await future

    def release(self, transactional_id: str, written: bool = True) -> None:
        self.results.setdefault(
            transactional_id, asyncio.get_running_loop().create_future()
        ).set_result(written)


class FakeIds:
    def __init__(self) -> None:
        self.next = 1000

    async def next_producer_id(self) -> int:
        self.next += 1
        return self.next


def make_runtime(
    log: FakeLog, markers: FakeMarkers, **config: Any
) -> TransactionCoordinatorRuntime:
    return TransactionCoordinatorRuntime(
        log,
        TransactionStateCodec(),
        markers,
        FakeIds(),
        PARTITIONS,
        TxnConfig(**config),
    )


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def loaded(runtime: TransactionCoordinatorRuntime, epoch: int = 0) -> None:
    runtime.elected(PARTITION, epoch)
    await settle()


def init(version: int = 4, txn_id: str = TXN_ID, pid: int = -1, epoch: int = -1) -> Any:
    return m.InitProducerIdRequest(
        transactional_id=txn_id,
        transaction_timeout_ms=60_000,
        producer_id=pid,
        producer_epoch=epoch,
    )


def add(pid: int, epoch: int, txn_id: str = TXN_ID) -> Any:
    R = m.AddPartitionsToTxnRequest
    return R(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[R.AddPartitionsToTxnTopic(name="t", partitions=[0, 1])],
    )


def end(pid: int, epoch: int, commit: bool = True) -> Any:
    return m.EndTxnRequest(
        transactional_id=TXN_ID, producer_id=pid, producer_epoch=epoch, committed=commit
    )


def add_errors(response: Any) -> set[int]:
    return {
        p.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


async def begin(service: TransactionService) -> tuple[int, int]:
    answer = await service.handle(22, 4, init())
    assert answer.error_code == E.NONE
    assert add_errors(
        await service.handle(24, 3, add(answer.producer_id, answer.producer_epoch))
    ) == {0}
    return answer.producer_id, answer.producer_epoch


# ------------------------------------------------------------------------------ the runtime


async def test_requests_wait_for_the_load_and_go_elsewhere_when_not_ours() -> None:
    runtime = make_runtime(FakeLog(), FakeMarkers())
    service = TransactionService(runtime)
    assert (await service.handle(22, 4, init())).error_code == E.NOT_COORDINATOR
    runtime.elected(PARTITION, 0)
    assert (await service.handle(22, 4, init())).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    await settle()
    answer = await service.handle(22, 4, init())
    assert (answer.error_code, answer.producer_epoch) == (E.NONE, 0)
    assert answer.producer_id == 1001


async def test_no_producer_id_to_be_had_is_coordinator_not_available() -> None:
    runtime = make_runtime(FakeLog(), FakeMarkers())
    await loaded(runtime)

    async def unreachable() -> int:
        raise ConnectionError("ZooKeeper is unreachable")

    runtime.producer_ids.next_producer_id = unreachable  # type: ignore[method-assign]
    answer = await TransactionService(runtime).handle(22, 4, init())
    assert (answer.error_code, answer.producer_id) == (E.COORDINATOR_NOT_AVAILABLE, -1)


async def test_a_commit_is_answered_after_prepare_then_completed_once_the_markers_are_written() -> (
    None
):
    log, markers = FakeLog(), FakeMarkers()
    runtime = make_runtime(log, markers)
    await loaded(runtime)
    service = TransactionService(runtime)
    pid, epoch = await begin(service)
    assert (await service.handle(26, 3, end(pid, epoch))).error_code == E.NONE
    await settle()
    assert log.states() == ["Empty", "Ongoing", "PrepareCommit"]
    assert [(w.producer_id, w.commit, w.partitions) for w in markers.sent] == [
        (pid, True, (("t", 0), ("t", 1)))
    ]
    markers.release(TXN_ID)
    await settle()
    assert log.states() == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    assert runtime.read(TXN_ID).transactions[TXN_ID].state is TxnState.COMPLETE_COMMIT


async def test_adding_to_a_transaction_still_completing_waits_for_its_complete_record() -> None:
    log, markers = FakeLog(), FakeMarkers()
    runtime = make_runtime(log, markers)
    await loaded(runtime)
    service = TransactionService(runtime)
    pid, epoch = await begin(service)
    assert (await service.handle(26, 3, end(pid, epoch))).error_code == E.NONE
    await settle()
    # the next transaction's AddPartitionsToTxn arrives before the markers are written
    adding = asyncio.ensure_future(service.handle(24, 3, add(pid, epoch)))
    await settle()
    assert not adding.done()
    markers.release(TXN_ID)
    assert add_errors(await adding) == {E.NONE}
    assert log.states() == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing"]


async def test_adding_while_the_markers_are_held_is_concurrent_transactions_after_the_wait() -> (
    None
):
    log, markers = FakeLog(), FakeMarkers()
    runtime = make_runtime(log, markers)
    await loaded(runtime)
    service = TransactionService(runtime)
    pid, epoch = await begin(service)
    await service.handle(26, 3, end(pid, epoch))
    await settle()
    assert add_errors(await service.handle(24, 3, add(pid, epoch))) == {E.CONCURRENT_TRANSACTIONS}
    offsets = m.AddOffsetsToTxnRequest(
        transactional_id=TXN_ID, producer_id=pid, producer_epoch=epoch, group_id="g"
    )
    assert (await service.handle(25, 3, offsets)).error_code == E.CONCURRENT_TRANSACTIONS
    assert log.states()[-1] == "PrepareCommit"
    assert not runtime._owned[PARTITION].completion_waiters  # nothing left behind


async def test_a_resignation_wakes_the_calls_waiting_for_a_completion() -> None:
    log, markers = FakeLog(), FakeMarkers()
    runtime = make_runtime(log, markers)
    await loaded(runtime)
    service = TransactionService(runtime)
    pid, epoch = await begin(service)
    await service.handle(26, 3, end(pid, epoch))
    await settle()
    adding = asyncio.ensure_future(service.handle(24, 3, add(pid, epoch)))
    await settle()
    runtime.resigned(PARTITION)
    await settle()
    assert adding.done()
    assert add_errors(adding.result()) == {E.NOT_COORDINATOR}


async def test_a_failed_append_answers_its_error_and_changes_nothing() -> None:
    log, markers = FakeLog(), FakeMarkers()
    runtime = make_runtime(log, markers)
    await loaded(runtime)
    service = TransactionService(runtime)
    pid, epoch = await begin(service)
    log.fail_with = E.NOT_ENOUGH_REPLICAS
    # the runtime's mapping is the log adapter's: here the fake raises it as it is
    assert (await service.handle(26, 3, end(pid, epoch))).error_code == E.NOT_ENOUGH_REPLICAS
    assert runtime.read(TXN_ID).transactions[TXN_ID].state is TxnState.ONGOING
    log.fail_with = None
    assert (await service.handle(26, 3, end(pid, epoch))).error_code == E.NONE  # not pending


async def test_a_new_coordinator_finishes_the_commit_its_predecessor_prepared() -> None:
    log, first_markers = FakeLog(), FakeMarkers()
    first = make_runtime(log, first_markers)
    await loaded(first, epoch=0)
    service = TransactionService(first)
    pid, epoch = await begin(service)
    assert (await service.handle(26, 3, end(pid, epoch))).error_code == E.NONE
    await settle()
    first.resigned(PARTITION)  # killed before its markers were written
    await settle()
    assert log.states()[-1] == "PrepareCommit"

    next_markers = FakeMarkers()
    successor = make_runtime(log, next_markers)
    await loaded(successor, epoch=1)
    assert [(w.producer_id, w.commit, w.coordinator_epoch) for w in next_markers.sent] == [
        (pid, True, 1)
    ]
    next_markers.release(TXN_ID)
    await settle()
    assert log.states()[-1] == "CompleteCommit"
    assert log.states().count("CompleteCommit") == 1


async def test_a_resigned_coordinator_stops_its_markers_and_writes_nothing_more() -> None:
    log, markers = FakeLog(), FakeMarkers()
    runtime = make_runtime(log, markers)
    await loaded(runtime)
    service = TransactionService(runtime)
    pid, epoch = await begin(service)
    await service.handle(26, 3, end(pid, epoch, commit=False))
    await settle()
    assert markers.currents[0]()
    runtime.resigned(PARTITION)
    assert not markers.currents[0]()
    assert (await service.handle(22, 4, init())).error_code == E.NOT_COORDINATOR
    assert log.states()[-1] == "PrepareAbort"


async def test_a_transaction_past_its_timeout_is_aborted_with_a_bumped_epoch() -> None:
    log, markers = FakeLog(), FakeMarkers()
    now = [1_000_000]
    runtime = make_runtime(log, markers, abort_timed_out_interval_ms=1)
    runtime.clock_ms = lambda: now[0]
    await loaded(runtime)
    service = TransactionService(runtime)
    pid, epoch = await begin(service)
    now[0] += 61_000  # past the 60 s transaction timeout
    for _ in range(200):
        if markers.sent:
            break
        await asyncio.sleep(0.005)
    assert [(w.commit, w.producer_epoch) for w in markers.sent] == [(False, epoch + 1)]
    assert (await service.handle(26, 3, end(pid, epoch))).error_code == E.PRODUCER_FENCED


# ------------------------------------------------------------------------------ the service


async def test_producer_fenced_is_invalid_producer_epoch_for_versions_before_kip_588() -> None:
    runtime = make_runtime(FakeLog(), FakeMarkers())
    await loaded(runtime)
    service = TransactionService(runtime)
    pid, epoch = await begin(service)
    assert (await service.handle(26, 1, end(pid, epoch - 1))).error_code == E.INVALID_PRODUCER_EPOCH
    assert (await service.handle(26, 2, end(pid, epoch - 1))).error_code == E.PRODUCER_FENCED
    assert add_errors(await service.handle(24, 1, add(pid, epoch - 1))) == {
        E.INVALID_PRODUCER_EPOCH
    }


async def test_add_partitions_v4_answers_each_transaction_and_the_verify_only_form() -> None:
    runtime = make_runtime(FakeLog(), FakeMarkers())
    await loaded(runtime)
    service = TransactionService(runtime)
    pid, epoch = await begin(service)
    R = m.AddPartitionsToTxnRequest
    topics = [R.AddPartitionsToTxnTopic(name="t", partitions=[1, 2])]
    response = await service.handle(
        24,
        4,
        R(
            transactions=[
                R.AddPartitionsToTxnTransaction(
                    transactional_id=TXN_ID,
                    producer_id=pid,
                    producer_epoch=epoch,
                    verify_only=True,
                    topics=topics,
                ),
                R.AddPartitionsToTxnTransaction(
                    transactional_id="elsewhere-id",
                    producer_id=pid,
                    producer_epoch=epoch,
                    verify_only=False,
                    topics=topics,
                ),
            ]
        ),
    )
    verified, elsewhere = response.results_by_transaction
    assert {
        p.partition_index: p.partition_error_code
        for p in verified.topic_results[0].results_by_partition
    } == {1: E.NONE, 2: E.TRANSACTION_ABORTABLE}
    expected = (
        E.INVALID_PRODUCER_ID_MAPPING
        if partition_for_transactional_id("elsewhere-id", PARTITIONS) == PARTITION
        else E.NOT_COORDINATOR
    )
    assert {p.partition_error_code for p in elsewhere.topic_results[0].results_by_partition} == {
        expected
    }


async def test_describe_and_list_transactions() -> None:
    runtime = make_runtime(FakeLog(), FakeMarkers())
    await loaded(runtime)
    service = TransactionService(runtime)
    pid, _ = await begin(service)
    described = await service.handle(
        65, 0, m.DescribeTransactionsRequest(transactional_ids=[TXN_ID, "unknown-id"])
    )
    first, second = described.transaction_states
    assert (first.error_code, first.transaction_state, first.producer_id) == (0, "Ongoing", pid)
    assert [(t.topic, t.partitions) for t in first.topics] == [("t", [0, 1])]
    assert second.error_code in (E.TRANSACTIONAL_ID_NOT_FOUND, E.NOT_COORDINATOR)
    listed = await service.handle(
        66,
        1,
        m.ListTransactionsRequest(state_filters=["Ongoing", "Nonsense"], producer_id_filters=[]),
    )
    assert listed.error_code == 0
    assert listed.unknown_state_filters == ["Nonsense"]
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        (TXN_ID, "Ongoing")
    ]


# ------------------------------------------------------------------------------ marker decisions


def markers_for(*partitions: tuple[str, int]) -> WriteMarkers:
    return WriteMarkers(TXN_ID, 7, 2, True, 5, tuple(partitions))


def test_markers_are_planned_per_leader_and_a_deleted_topic_needs_none() -> None:
    delivery = MarkerDelivery(markers_for(("a", 0), ("a", 1), ("b", 0), ("gone", 0)))
    leaders = {("a", 0): 1, ("a", 1): 2, ("b", 0): 1}
    plan = delivery.plan(lambda tp: leaders.get(tp, -1), lambda topic: topic != "gone")
    assert plan == {1: [("a", 0), ("b", 0)], 2: [("a", 1)]}
    assert delivery.pending == {("a", 0), ("a", 1), ("b", 0)}


def test_a_partition_without_a_leader_waits_for_the_next_round() -> None:
    delivery = MarkerDelivery(markers_for(("a", 0)))
    assert delivery.plan(lambda tp: -1, lambda topic: True) == {}
    assert not delivery.finished


@pytest.mark.parametrize(
    "error",
    [
        E.NOT_LEADER_OR_FOLLOWER,
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.NOT_ENOUGH_REPLICAS,
        E.REQUEST_TIMED_OUT,
        E.KAFKA_STORAGE_ERROR,
    ],
)
def test_retriable_answers_keep_the_partition_pending(error: ErrorCode) -> None:
    delivery = MarkerDelivery(markers_for(("a", 0), ("a", 1)))
    delivery.record(("a", 0), E.NONE)
    delivery.record(("a", 1), error)
    assert delivery.pending == {("a", 1)} and not delivery.finished


@pytest.mark.parametrize(
    "error", [E.TRANSACTION_COORDINATOR_FENCED, E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED]
)
def test_a_fenced_answer_abandons_the_transactions_markers(error: ErrorCode) -> None:
    delivery = MarkerDelivery(markers_for(("a", 0), ("a", 1)))
    delivery.record(("a", 0), error)
    assert delivery.finished and not delivery.done and delivery.fenced_by is error


def test_the_request_and_the_response_round_trip_through_the_delivery() -> None:
    delivery = MarkerDelivery(markers_for(("a", 0), ("a", 1), ("b", 3)))
    request = delivery.request([("a", 0), ("a", 1), ("b", 3)])
    (marker,) = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch) == (7, 2, 5)
    assert marker.transaction_result is True
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("a", [0, 1]), ("b", [3])]
    R = m.WriteTxnMarkersResponse
    response = R(
        markers=[
            R.WritableTxnMarkerResult(
                producer_id=7,
                topics=[
                    R.WritableTxnMarkerTopicResult(
                        name="a",
                        partitions=[
                            R.WritableTxnMarkerPartitionResult(partition_index=0, error_code=0),
                            R.WritableTxnMarkerPartitionResult(partition_index=1, error_code=6),
                        ],
                    )
                ],
            )
        ]
    )
    delivery.record_response([("a", 0), ("a", 1), ("b", 3)], response)
    assert delivery.pending == {("a", 1), ("b", 3)}  # NOT_LEADER, and left out: both retried


def test_several_transactions_rounds_go_as_one_request_and_each_gets_its_own_answer() -> None:
    first = MarkerDelivery(WriteMarkers("one", 7, 2, True, 5, (("a", 0),)))
    second = MarkerDelivery(WriteMarkers("two", 8, 0, False, 5, (("a", 0), ("b", 1))))
    request = combined_request([(first, [("a", 0)]), (second, [("a", 0), ("b", 1)])])
    assert [(w.producer_id, w.transaction_result) for w in request.markers] == [
        (7, True),
        (8, False),
    ]
    R = m.WriteTxnMarkersResponse

    def result(pid: int, errors: dict[tuple[str, int], int]) -> Any:
        return R.WritableTxnMarkerResult(
            producer_id=pid,
            topics=[
                R.WritableTxnMarkerTopicResult(
                    name=topic,
                    partitions=[
                        R.WritableTxnMarkerPartitionResult(partition_index=index, error_code=code)
                    ],
                )
                for (topic, index), code in errors.items()
            ],
        )

    response = R(markers=[result(7, {("a", 0): 0}), result(8, {("a", 0): 0, ("b", 1): 6})])
    one, two = split_response(response, 2)
    first.record_response([("a", 0)], one)
    second.record_response([("a", 0), ("b", 1)], two)
    assert first.done
    assert second.pending == {("b", 1)}  # NOT_LEADER_OR_FOLLOWER: retried


def test_a_combined_response_with_a_marker_missing_answers_none_of_them() -> None:
    delivery = MarkerDelivery(markers_for(("a", 0)))
    (answer, other) = split_response(m.WriteTxnMarkersResponse(markers=[]), 2)
    delivery.record_response([("a", 0)], answer)
    assert delivery.pending == {("a", 0)} and other.markers == []
