"""The transactional producer's I/O glue (`client/transactional_sender.py`) against stub
coordinators: the requests it builds from the manager's calls, and how the answers (or
FindCoordinator's refusal) reach the state machine."""

from __future__ import annotations

import asyncio
from typing import Any

from epochlog.client.config import Role, load_config
from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.group_offsets import ConsumerGroupMetadata, OffsetAndMetadata
from epochlog.client.metadata import TopicPartition
from epochlog.client.network import NetworkClient
from epochlog.client.transaction_manager import TransactionManager, TxnState
from epochlog.client.transactional_sender import TransactionalSender
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode

A, B = TopicPartition("a", 0), TopicPartition("b", 1)


class StubConnection:
    """Answers each request with the next canned response of its type; records the requests."""

    def __init__(self, answers: dict[type, list[Any]]) -> None:
        self.answers = answers
        self.sent: list[tuple[Any, int | None]] = []

    def version_for(self, api_key: int, max_version: int | None = None) -> int:
        return 3 if max_version is None else min(3, max_version)

    async def send(self, request: Any, *, api_key: int, version: int | None = None) -> Any:
        self.sent.append((request, version))
        return self.answers[type(request)].pop(0)


class StubCoordinator:
    def __init__(self, conn: StubConnection | None, find_error: ErrorCode | None = None) -> None:
        self.conn = conn
        self.find_error = find_error
        self.lost_reasons: list[str] = []

    async def ready(self) -> StubConnection:
        if self.conn is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "stub")
        return self.conn

    def lost(self, reason: str) -> None:
        self.lost_reasons.append(reason)

    async def close(self) -> None:
        pass


def sender_with(coordinator: StubCoordinator, group: StubCoordinator | None = None) -> Any:
    config = load_config(
        Role.PRODUCER, {"bootstrap.servers": "localhost:1", "transactional.id": "tx-1"}
    )
    manager = TransactionManager("tx-1", 45000)
    failed: list[Exception] = []
    sender = TransactionalSender(
        manager, config, NetworkClient(config), failed.append, lambda: None
    )
    sender._coordinator = coordinator  # type: ignore[assignment]
    if group is not None:
        sender._group_coordinators["g"] = group  # type: ignore[assignment]
    return sender


async def step(sender: TransactionalSender, batches_pending: bool = False) -> None:
    """One poll, and the request it started carried to its end."""
    sender._retry_at_ms = 0.0
    sender.poll(0.0, batches_pending)
    if sender._task is not None:
        await sender._task


def init_ok() -> m.InitProducerIdResponse:
    return m.InitProducerIdResponse(error_code=0, producer_id=42, producer_epoch=1)


def test_a_transaction_goes_out_as_kafkas_requests() -> None:
    async def run() -> None:
        R = m.AddPartitionsToTxnResponse
        conn = StubConnection(
            {
                m.InitProducerIdRequest: [init_ok()],
                m.AddPartitionsToTxnRequest: [
                    R(
                        results_by_topic_v3_and_below=[
                            R.AddPartitionsToTxnTopicResult(
                                name=tp.topic,
                                results_by_partition=[
                                    R.AddPartitionsToTxnPartitionResult(
                                        partition_index=tp.partition, partition_error_code=0
                                    )
                                ],
                            )
                            for tp in (A, B)
                        ]
                    )
                ],
                m.AddOffsetsToTxnRequest: [m.AddOffsetsToTxnResponse(error_code=0)],
                m.EndTxnRequest: [m.EndTxnResponse(error_code=0)],
            }
        )
        T = m.TxnOffsetCommitResponse
        group_conn = StubConnection(
            {
                m.TxnOffsetCommitRequest: [
                    T(
                        topics=[
                            T.TxnOffsetCommitResponseTopic(
                                name="a",
                                partitions=[
                                    T.TxnOffsetCommitResponsePartition(
                                        partition_index=0, error_code=0
                                    )
                                ],
                            )
                        ]
                    )
                ]
            }
        )
        sender = sender_with(StubCoordinator(conn), StubCoordinator(group_conn))
        txn = sender.manager
        init = txn.initialize()
        await step(sender)
        assert init.done and init.error is None and (txn.producer_id, txn.producer_epoch) == (42, 1)
        (request, _), = conn.sent
        assert (request.transactional_id, request.transaction_timeout_ms) == ("tx-1", 45000)

        txn.begin()
        txn.add_partition(A)
        txn.add_partition(B)
        await step(sender)
        add, version = conn.sent[-1]
        assert version == 3  # the client form, never the brokers' v4+
        assert (add.v3_and_below_transactional_id, add.v3_and_below_producer_id) == ("tx-1", 42)
        assert sorted((t.name, t.partitions) for t in add.v3_and_below_topics) == [
            ("a", [0]),
            ("b", [1]),
        ]
        group = ConsumerGroupMetadata("g", generation_id=7, member_id="m-1", group_instance_id="i")
        offsets = txn.send_offsets({A: OffsetAndMetadata(11, "meta", leader_epoch=3)}, group)
        await step(sender)  # AddOffsetsToTxn
        assert conn.sent[-1][0].group_id == "g"
        await step(sender)  # TxnOffsetCommit, to the group's coordinator
        assert offsets.done and offsets.error is None
        (commit, _), = group_conn.sent
        assert (commit.group_id, commit.generation_id, commit.member_id) == ("g", 7, "m-1")
        assert (commit.group_instance_id, commit.producer_id, commit.producer_epoch) == (
            "i",
            42,
            1,
        )
        (partition,) = commit.topics[0].partitions
        assert (partition.committed_offset, partition.committed_leader_epoch) == (11, 3)
        assert partition.committed_metadata == "meta"

        end = txn.commit()
        await step(sender, batches_pending=True)
        assert not isinstance(conn.sent[-1][0], m.EndTxnRequest)  # waits for the batches
        await step(sender)
        assert conn.sent[-1][0].committed is True and end.done and end.error is None
        assert txn.state is TxnState.READY

    asyncio.run(run())


def test_find_coordinators_refusal_decides_as_in_kafka() -> None:
    async def run() -> None:
        refused = StubCoordinator(None, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        sender = sender_with(refused)
        init = sender.manager.initialize()
        await step(sender)
        assert sender.manager.state is TxnState.FATAL_ERROR
        assert isinstance(init.error, KafkaError)
        assert init.error.code is ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    asyncio.run(run())


def test_an_unreachable_coordinator_is_looked_up_again_and_the_call_retried() -> None:
    async def run() -> None:
        missing = StubCoordinator(None, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        sender = sender_with(missing)
        init = sender.manager.initialize()
        await step(sender)
        assert not init.done and sender.manager.state is TxnState.INITIALIZING
        assert missing.lost_reasons and sender.last_failure is not None
        assert "COORDINATOR_NOT_AVAILABLE" in sender.last_failure
        missing.conn = StubConnection({m.InitProducerIdRequest: [init_ok()]})
        await step(sender)
        assert init.done and init.error is None

    asyncio.run(run())


def test_a_fenced_end_txn_is_fatal_and_fails_queued_batches() -> None:
    async def run() -> None:
        conn = StubConnection(
            {
                m.InitProducerIdRequest: [init_ok()],
                m.AddOffsetsToTxnRequest: [m.AddOffsetsToTxnResponse(error_code=0)],
                m.EndTxnRequest: [m.EndTxnResponse(error_code=ErrorCode.PRODUCER_FENCED)],
            }
        )
        group_conn = StubConnection(
            {m.TxnOffsetCommitRequest: [m.TxnOffsetCommitResponse(topics=[])]}
        )
        sender = sender_with(StubCoordinator(conn), StubCoordinator(group_conn))
        txn = sender.manager
        txn.initialize()
        await step(sender)
        txn.begin()
        txn.send_offsets({A: OffsetAndMetadata(1)}, ConsumerGroupMetadata("g"))
        await step(sender)
        await step(sender)
        end = txn.commit()
        await step(sender)
        assert txn.state is TxnState.FATAL_ERROR
        assert isinstance(end.error, KafkaError) and end.error.code is ErrorCode.PRODUCER_FENCED
        failed: list[Exception] = []
        sender._fail_queued = failed.append
        sender.poll(0.0, False)
        assert failed == [txn.last_error]

    asyncio.run(run())


def test_no_answer_is_retried_after_a_new_lookup() -> None:
    async def run() -> None:
        class Dropping(StubConnection):
            async def send(self, request: Any, **kwargs: Any) -> Any:
                raise ClientError("connection reset")

        coordinator = StubCoordinator(Dropping({}))
        sender = sender_with(coordinator)
        sender.manager.initialize()
        await step(sender)
        assert coordinator.lost_reasons and "connection reset" in (sender.last_failure or "")
        assert sender.manager.state is TxnState.INITIALIZING

    asyncio.run(run())
