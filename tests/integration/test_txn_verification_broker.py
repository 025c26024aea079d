"""The leader's side of KIP-890 part 1 on one in-process broker, with a scripted coordinator
(a `TransactionVerifier` whose answers and timing the test controls): what is verified, what
the producer is told, the guard a marker clears while the question is out, the order of a
connection's appends while one waits, and the dynamic switch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from epochlog.broker.harness import BrokerThread, RawClient, become_leader
from epochlog.config.broker import BrokerConfig
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, decode_response
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder

TOPIC = "v"


class ScriptedCoordinator:
    """Answers every verification with `verdict`; while `held` is set the answers wait."""

    def __init__(self) -> None:
        self.verdict = ErrorCode.NONE
        self.asked: list[tuple[str, int, int, tuple[tuple[str, int], ...]]] = []
        self.held: asyncio.Event | None = None
        self.release: asyncio.Event | None = None

    def hold(self) -> None:
        """From now on questions wait for `release`; `held` is set when the first arrives."""
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: tuple[tuple[str, int], ...],
    ) -> dict[tuple[str, int], Any]:
        self.asked.append((transactional_id, producer_id, producer_epoch, partitions))
        if self.release is not None:
            assert self.held is not None
            self.held.set()
            await self.release.wait()
        return {tp: self.verdict for tp in partitions}


@pytest.fixture
def broker(tmp_path) -> Iterator[tuple[BrokerThread, ScriptedCoordinator]]:
    thread = BrokerThread(
        {
            "broker.id": 1,
            "zookeeper.connect": "unused:2181",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "logs"),
        }
    ).start()
    coordinator = ScriptedCoordinator()
    assert thread.broker is not None
    thread.broker.services.txn_verifier = coordinator
    with RawClient("127.0.0.1", thread.port) as client:
        become_leader(client, broker_id=1, port=thread.port, topic=TOPIC, partitions=2)
    yield thread, coordinator
    thread.stop()


def txn_batch(pid: int, seq: int, value: bytes = b"x") -> bytes:
    builder = RecordBatchBuilder(
        producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True
    )
    builder.append(1_700_000_000_000, None, value)
    return builder.build()


def plain_batch() -> bytes:
    builder = RecordBatchBuilder()
    builder.append(1_700_000_000_000, None, b"plain")
    return builder.build()


def produce_body(records: dict[int, bytes], txn_id: str | None = "tx") -> Any:
    P = m.ProduceRequest
    return P(
        transactional_id=txn_id,
        acks=1,
        timeout_ms=10_000,
        topic_data=[
            P.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    P.PartitionProduceData(index=p, records=r) for p, r in records.items()
                ],
            )
        ],
    )


def answers(response: Any) -> dict[int, tuple[ErrorCode, int]]:
    return {
        p.index: (ErrorCode(p.error_code), p.base_offset)
        for t in response.responses
        for p in t.partition_responses
    }


def produce(client: RawClient, records: dict[int, bytes], txn_id: str | None = "tx") -> Any:
    return answers(client.request(ApiKey.PRODUCE, 9, produce_body(records, txn_id)))


def abort_marker(client: RawClient, pid: int, partition: int = 0) -> ErrorCode:
    R = m.WriteTxnMarkersRequest
    response = client.request(
        ApiKey.WRITE_TXN_MARKERS,
        1,
        R(
            markers=[
                R.WritableTxnMarker(
                    producer_id=pid,
                    producer_epoch=0,
                    transaction_result=False,
                    topics=[R.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[partition])],
                    coordinator_epoch=0,
                )
            ]
        ),
    )
    return ErrorCode(response.markers[0].topics[0].partitions[0].error_code)


def test_a_write_opening_a_transaction_is_verified_once_per_partition(broker) -> None:
    thread, coordinator = broker
    with RawClient("127.0.0.1", thread.port) as client:
        first = produce(client, {0: txn_batch(7, 0), 1: txn_batch(7, 0)})
        assert first == {0: (ErrorCode.NONE, 0), 1: (ErrorCode.NONE, 0)}
        assert coordinator.asked == [("tx", 7, 0, ((TOPIC, 0), (TOPIC, 1)))]
        # the transaction is open on both partitions now: nothing more to ask
        assert produce(client, {0: txn_batch(7, 1)}) == {0: (ErrorCode.NONE, 1)}
        assert produce(client, {0: plain_batch()}, txn_id=None) == {0: (ErrorCode.NONE, 2)}
        assert len(coordinator.asked) == 1


@pytest.mark.parametrize(
    ("verdict", "answer"),
    [
        (ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NETWORK_EXCEPTION, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_EPOCH),
    ],
)
def test_a_refused_verification_appends_nothing(broker, verdict, answer) -> None:
    thread, coordinator = broker
    coordinator.verdict = verdict
    with RawClient("127.0.0.1", thread.port) as client:
        assert produce(client, {0: txn_batch(7, 0)}) == {0: (answer, -1)}
        assert produce(client, {0: plain_batch()}, txn_id=None) == {0: (ErrorCode.NONE, 0)}


def test_a_marker_while_the_question_is_out_voids_the_verification(broker) -> None:
    thread, coordinator = broker
    assert thread.loop is not None
    coordinator.hold()
    with (
        RawClient("127.0.0.1", thread.port) as late,
        RawClient("127.0.0.1", thread.port) as control,
    ):
        late.send_only(ApiKey.PRODUCE, 9, produce_body({0: txn_batch(7, 0)}))
        thread.call(coordinator.held.wait())
        assert abort_marker(control, 7) is ErrorCode.NONE  # the coordinator ends the txn
        thread.loop.call_soon_threadsafe(coordinator.release.set)
        refused = read_produce_answer(late)
    # verified as part of the transaction, but the marker ended it first: refused
    assert refused == {0: (ErrorCode.INVALID_TXN_STATE, -1)}
    assert produce_after(thread) == {0: (ErrorCode.NONE, 1)}  # only the marker is at 0


def read_produce_answer(client: RawClient) -> dict[int, tuple[ErrorCode, int]]:
    _, response = decode_response(ApiKey.PRODUCE, 9, client.read_frame())
    return answers(response)


def send_produce_held_in_verification(
    client: RawClient, thread: BrokerThread, coordinator: ScriptedCoordinator
) -> None:
    """Send a transactional produce for partition 0 and return once the coordinator holds its
    verification."""
    coordinator.hold()
    client.send_only(ApiKey.PRODUCE, 9, produce_body({0: txn_batch(7, 0)}))
    thread.call(coordinator.held.wait())


def produce_after(thread: BrokerThread) -> dict[int, tuple[ErrorCode, int]]:
    with RawClient("127.0.0.1", thread.port) as client:
        return produce(client, {0: plain_batch()}, txn_id=None)


def test_later_produces_of_the_connection_append_after_the_one_being_verified(broker) -> None:
    thread, coordinator = broker
    assert thread.loop is not None
    with RawClient("127.0.0.1", thread.port) as client:
        send_produce_held_in_verification(client, thread, coordinator)
        client.send_only(ApiKey.PRODUCE, 9, produce_body({0: plain_batch()}, txn_id=None))
        thread.loop.call_soon_threadsafe(coordinator.release.set)
        first = read_produce_answer(client)
        second = read_produce_answer(client)
    assert (first, second) == ({0: (ErrorCode.NONE, 0)}, {0: (ErrorCode.NONE, 1)})


def test_a_produce_asks_the_coordinator_while_an_earlier_one_is_still_verified(broker) -> None:
    """librdkafka pipelines a transaction's produces, one a partition: each must not wait for the
    one before it to be verified (and replicated) before its own question goes out; only the
    appends keep the connection's order."""
    thread, coordinator = broker
    assert thread.loop is not None
    with RawClient("127.0.0.1", thread.port) as client:
        send_produce_held_in_verification(client, thread, coordinator)
        client.send_only(ApiKey.PRODUCE, 9, produce_body({1: txn_batch(7, 1)}))
        deadline = time.monotonic() + 5
        while len(coordinator.asked) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        asked_while_held = len(coordinator.asked)
        thread.loop.call_soon_threadsafe(coordinator.release.set)
        first = read_produce_answer(client)
        second = read_produce_answer(client)
    assert asked_while_held == 2
    assert (first, second) == ({0: (ErrorCode.NONE, 0)}, {1: (ErrorCode.NONE, 0)})


def test_the_switch_is_dynamic(broker) -> None:
    thread, coordinator = broker
    assert thread.broker is not None
    coordinator.verdict = ErrorCode.INVALID_TXN_STATE
    config = BrokerConfig.from_dict(
        {**thread.broker.config.as_dict(), "transaction.partition.verification.enable": False}
    )
    thread.call(thread.broker.reconfigure(config))
    with RawClient("127.0.0.1", thread.port) as client:
        assert produce(client, {0: txn_batch(7, 0)}) == {0: (ErrorCode.NONE, 0)}
    assert coordinator.asked == []
