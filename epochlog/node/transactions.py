"""The transaction coordinator assembled into a broker process.

- `ReplicaManagerTransactionLog`: the runtime's view of `__transaction_state` (append as leader
  with acks=all, read a partition from its start), through the replica manager.
- `NetworkMarkerWriter`: Kafka's TransactionMarkerChannelManager. For one transaction's markers
  it asks `MarkerDelivery` (sans-I/O) which partitions to send to which leader, queues them for
  that broker, feeds the answers back, and retries what is left with fresh metadata after
  `RETRY_BACKOFF_S`, until every marker is written, the transaction is fenced, or this broker
  stops coordinating it.
  One request in flight per broker: what queued meanwhile (other transactions' markers) goes
  as one WriteTxnMarkers v1, as Kafka's channel drains its per-broker queue. The partitions
  this broker leads take the same request without the network: the WriteTxnMarkers handler's
  own function, called here (same appends, same wait for replication, same answer). The fault
  injector is consulted before each request, local ones included (tests hold the markers of a
  coordinator they are about to kill).
- `ZkTransactionCoordinator`: what the handlers call (`TransactionCoordinatorGateway`), and the
  creation of `__transaction_state` on first need with Kafka's settings:
  `transaction.state.log.num.partitions`, `.replication.factor` (capped by the registered
  brokers with a warning, as `__consumer_offsets`), `.min.isr` as the topic's
  min.insync.replicas (capped by the replication factor), `.segment.bytes`, compacted.
- `attach_transaction_coordinator` follows leadership of `__transaction_state` partitions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient

from epochlog.broker.broker import Broker
from epochlog.broker.handlers.txn_markers import write_txn_markers
from epochlog.config.broker import BrokerConfig
from epochlog.coordinator.transaction.markers import (
    MarkerDelivery,
    TopicPartition,
    combined_request,
    split_response,
)
from epochlog.coordinator.transaction.operations import TxnConfig, WriteMarkers
from epochlog.coordinator.transaction.record_codec import TransactionStateCodec
from epochlog.coordinator.transaction.runtime import (
    TRANSACTION_STATE_TOPIC,
    EncodedRecord,
    ProducerIds,
    TransactionCoordinatorRuntime,
)
from epochlog.coordinator.transaction.service import TransactionService
from epochlog.node.broker_connections import BrokerConnections
from epochlog.node.coordinator_log import CoordinatorTopicLog
from epochlog.node.internal_topics import InternalTopic, create_internal_topic, follow_leadership
from epochlog.node.txn_verification import NetworkTransactionVerifier
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1  # Kafka's marker channel retries after retry.backoff.ms (100)
MARKER_REQUEST_VERSION = 1

# Kafka's TransactionStateManager: how a failed append of a transaction record is answered.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


def txn_config_from(config: BrokerConfig) -> TxnConfig:
    return TxnConfig(
        max_timeout_ms=config["transaction.max.timeout.ms"],
        id_expiration_ms=config["transactional.id.expiration.ms"],
        abort_timed_out_interval_ms=config[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        ],
        remove_expired_interval_ms=config[
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        ],
        offsets_topic_partitions=config["offsets.topic.num.partitions"],
        fence_producer_epochs=config.enabled("epochlog.test.txn.fencing.enabled"),
    )


class ReplicaManagerTransactionLog(CoordinatorTopicLog):
    def __init__(self, broker: Broker, timeout_ms: int) -> None:
        super().__init__(broker, TRANSACTION_STATE_TOPIC, timeout_ms, _APPEND_ERRORS)

    async def read(self, partition: int) -> AsyncIterator[EncodedRecord]:
        async for batch, offset in self.batches(partition):
            for record in batch.records:
                if record.offset >= offset and record.key is not None:
                    yield record.key, record.value


@dataclass
class _QueuedRound:
    """One transaction's partitions for one broker, waiting for the broker's next request."""

    delivery: MarkerDelivery
    partitions: list[TopicPartition]
    answered: asyncio.Future[None]


class NetworkMarkerWriter:
    def __init__(self, broker: Broker, request_timeout_ms: int) -> None:
        self.broker_id = broker.broker_id
        self.services = broker.services
        self.metadata_cache = broker.metadata_cache
        self.faults = broker.replica_manager.faults
        self.connections = BrokerConnections(broker, "txn-markers", request_timeout_ms)
        self._queues: dict[int, list[_QueuedRound]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}

    def _leader_of(self, tp: TopicPartition) -> int | None:
        info = self.metadata_cache.partitions(tp[0]).get(tp[1])
        return info.leader if info is not None else None

    async def write(self, markers: WriteMarkers, still_current: Callable[[], bool]) -> bool:
        delivery = MarkerDelivery(markers)
        while not delivery.finished and still_current():
            plan = delivery.plan(self._leader_of, self.metadata_cache.has_topic)
            if plan:
                await asyncio.gather(
                    *(self._send(delivery, leader, tps) for leader, tps in plan.items())
                )
            if not delivery.finished:
                await asyncio.sleep(RETRY_BACKOFF_S)
        if delivery.fenced_by is not None:
            log.info(
                "markers of %r (producer %d epoch %d) stopped: %s",
                markers.transactional_id,
                markers.producer_id,
                markers.producer_epoch,
                delivery.fenced_by.name,
            )
        return delivery.done and still_current()

    async def _send(
        self, delivery: MarkerDelivery, leader: int, partitions: list[TopicPartition]
    ) -> None:
        """Queue the round for the leader; return once its answer is fed back (or lost)."""
        loop = asyncio.get_running_loop()
        queued = _QueuedRound(delivery, partitions, loop.create_future())
        self._queues.setdefault(leader, []).append(queued)
        sender = self._senders.get(leader)
        if sender is None or sender.done():
            self._senders[leader] = loop.create_task(
                self._drain(leader), name=f"txn markers to broker {leader}"
            )
        await asyncio.shield(queued.answered)

    async def _drain(self, leader: int) -> None:
        while self._queues.get(leader):
            rounds = self._queues.pop(leader)
            try:
                await self._send_rounds(leader, rounds)
            finally:
                for queued in rounds:
                    if not queued.answered.done():
                        queued.answered.set_result(None)

    async def _send_rounds(self, leader: int, rounds: list[_QueuedRound]) -> None:
        if not await self.faults.before_send(ApiKey.WRITE_TXN_MARKERS, self.broker_id, leader):
            return  # dropped by a test rule: retried as a lost request
        request = combined_request([(q.delivery, q.partitions) for q in rounds])
        try:
            if leader == self.broker_id:
                response = await write_txn_markers(self.services, request)
            else:
                connection = await self.connections.get(leader)
                if connection is None:
                    return
                response = await connection.send(
                    request, api_key=ApiKey.WRITE_TXN_MARKERS, version=MARKER_REQUEST_VERSION
                )
        except Exception as exc:  # a lost connection or a timeout: retried
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            await self.connections.drop(leader)
            return
        for queued, answer in zip(rounds, split_response(response, len(rounds)), strict=True):
            queued.delivery.record_response(queued.partitions, answer)

    async def close(self) -> None:
        for sender in self._senders.values():
            sender.cancel()
        self._senders.clear()
        self._queues.clear()
        await self.connections.close()


class ZkTransactionCoordinator:
    def __init__(
        self, zk: KazooClient, config: BrokerConfig, broker: Broker, producer_ids: ProducerIds
    ) -> None:
        self.zk = zk
        self.config = config
        self.markers = NetworkMarkerWriter(broker, config["request.timeout.ms"])
        self.runtime = TransactionCoordinatorRuntime(
            ReplicaManagerTransactionLog(broker, config["request.timeout.ms"]),
            TransactionStateCodec(),
            self.markers,
            producer_ids,
            config["transaction.state.log.num.partitions"],
            txn_config_from(config),
        )
        self.service = TransactionService(self.runtime)
        self.verifier = NetworkTransactionVerifier(
            broker, self.runtime.partition_of, config["request.timeout.ms"]
        )
        self._creating: asyncio.Task[None] | None = None

    @property
    def api_keys(self) -> frozenset[int]:
        return self.service.api_keys

    def partition_of(self, transactional_id: str) -> int:
        return self.runtime.partition_of(transactional_id)

    async def handle(self, api_key: int, version: int, body: Any) -> Any:
        return await self.service.handle(api_key, version, body)

    async def close(self) -> None:
        await self.runtime.close()
        await self.markers.close()
        await self.verifier.close()

    async def create_state_topic(self) -> None:
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(
                asyncio.to_thread(self._create_state_topic)
            )
        await asyncio.shield(self._creating)

    def _create_state_topic(self) -> None:
        create_internal_topic(
            self.zk,
            InternalTopic(
                TRANSACTION_STATE_TOPIC,
                partitions=self.config["transaction.state.log.num.partitions"],
                replication_factor=self.config["transaction.state.log.replication.factor"],
                replication_factor_key="transaction.state.log.replication.factor",
                configs=lambda factor: {
                    "cleanup.policy": "compact",
                    "compression.type": "producer",
                    "min.insync.replicas": str(
                        min(self.config["transaction.state.log.min.isr"], factor)
                    ),
                    "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
                },
            ),
        )


def attach_transaction_coordinator(broker: Broker, coordinator: ZkTransactionCoordinator) -> None:
    """Load and unload shards as this broker's leadership of `__transaction_state` changes."""
    follow_leadership(
        broker.replica_manager,
        TRANSACTION_STATE_TOPIC,
        elected=coordinator.runtime.elected,
        resigned=coordinator.runtime.resigned,
    )
    broker.services.transaction_coordinator = coordinator
    broker.services.txn_verifier = coordinator.verifier  # KIP-890: leaders ask before appending
