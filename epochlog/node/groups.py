"""The group coordinator assembled into a broker process.

- `ReplicaManagerOffsets` is the coordinator's narrow view of the partition layer
  (`coordinator.group.runtime.OffsetsPartitions`): append records to a `__consumer_offsets`
  partition this broker leads, with acks=all, and read one back from its start. A producer's
  transactional offsets go in a transactional batch with its id and epoch, appended as Kafka's
  coordinator appends (no sequence checks, an older epoch refused); reading yields them with
  their producer id, and each transaction marker (control batch) as a `TxnMarkerRecord`.
- `ZkGroupCoordinator` is what the broker's handlers call (`broker.collaborators.
  GroupCoordinatorGateway`): the group service over the runtime, Kafka's group -> partition
  mapping, and the creation of `__consumer_offsets` on first need, with Kafka's settings:
  `offsets.topic.num.partitions` partitions, `offsets.topic.replication.factor` replicas (fewer
  when fewer brokers are registered, said in the log), compacted, `offsets.topic.segment.bytes`.
- `attach_group_coordinator` follows the replica manager's leadership changes: a broker that
  becomes leader of an offsets partition loads its groups; one that stops leading it unloads them.
  WriteTxnMarkers reports each marker it writes in an offsets partition through the gateway's
  `transaction_completed`, which reaches the partition's shard.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from kazoo.client import KazooClient

from epochlog.broker.broker import Broker
from epochlog.config.broker import BrokerConfig
from epochlog.coordinator.group.operations import GroupConfig
from epochlog.coordinator.group.record_codec import ConsumerOffsetsCodec
from epochlog.coordinator.group.records import TxnMarkerRecord
from epochlog.coordinator.group.runtime import (
    OFFSETS_TOPIC,
    GroupCoordinatorRuntime,
    LoggedRecord,
    TransactionalRecord,
    partition_for_group,
)
from epochlog.coordinator.group.service import GroupService
from epochlog.node.coordinator_log import CoordinatorTopicLog
from epochlog.node.internal_topics import InternalTopic, create_internal_topic, follow_leadership
from epochlog.protocol.control_records import marker_of
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# Kafka's answers to a failed append of group records (GroupMetadataManager's error mapping).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    # a transactional commit of a fenced producer: the client's to handle, as in Kafka
    ErrorCode.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
}


def group_config_from(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=config["group.min.session.timeout.ms"],
        max_session_timeout_ms=config["group.max.session.timeout.ms"],
        initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
        max_size=config["group.max.size"],
        offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
        offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
    )


class ReplicaManagerOffsets(CoordinatorTopicLog):
    def __init__(self, broker: Broker, commit_timeout_ms: int) -> None:
        super().__init__(broker, OFFSETS_TOPIC, commit_timeout_ms, _APPEND_ERRORS)

    async def read(self, partition: int) -> AsyncIterator[LoggedRecord]:
        async for batch, offset in self.batches(partition):
            header = batch.header
            if header.is_control:
                if batch.base_offset >= offset and batch.records:
                    first = batch.records[0]
                    marker = marker_of(header, first.key, first.value)
                    if marker is not None:
                        yield TxnMarkerRecord(header.producer_id, marker.is_commit)
                continue
            for record in batch.records:
                if record.offset >= offset and record.key is not None:
                    if header.is_transactional:
                        yield TransactionalRecord(record.key, record.value, header.producer_id)
                    else:
                        yield record.key, record.value


class ZkGroupCoordinator:
    def __init__(self, zk: KazooClient, config: BrokerConfig, broker: Broker) -> None:
        self.zk = zk
        self.config = config
        self.runtime = GroupCoordinatorRuntime(
            ReplicaManagerOffsets(broker, config["offsets.commit.timeout.ms"]),
            ConsumerOffsetsCodec(),
            config["offsets.topic.num.partitions"],
            group_config_from(config),
        )
        self.service = GroupService(self.runtime)
        self._creating: asyncio.Task[None] | None = None

    @property
    def api_keys(self) -> frozenset[int]:
        return self.service.api_keys

    @property
    def partition_count(self) -> int:
        return self.runtime.partition_count

    def partition_of(self, group_id: str) -> int:
        return partition_for_group(group_id, self.runtime.partition_count)

    async def handle(
        self, api_key: int, version: int, body: Any, client_id: str, client_host: str
    ) -> Any:
        return await self.service.handle(api_key, version, body, client_id, client_host)

    def start_offset_commit(
        self, version: int, body: Any, client_id: str, client_host: str
    ) -> asyncio.Future[Any]:
        return self.service.start_offset_commit(body, version, client_id, client_host)

    def transaction_completed(self, partition: int, producer_id: int, committed: bool) -> None:
        self.runtime.transaction_completed(partition, producer_id, committed)

    async def create_offsets_topic(self) -> None:
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(
                asyncio.to_thread(self._create_offsets_topic)
            )
        await asyncio.shield(self._creating)

    def _create_offsets_topic(self) -> None:
        create_internal_topic(
            self.zk,
            InternalTopic(
                OFFSETS_TOPIC,
                partitions=self.config["offsets.topic.num.partitions"],
                replication_factor=self.config["offsets.topic.replication.factor"],
                replication_factor_key="offsets.topic.replication.factor",
                configs=lambda _factor: {
                    "cleanup.policy": "compact",
                    "compression.type": "producer",
                    "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
                },
            ),
        )


def attach_group_coordinator(broker: Broker, coordinator: ZkGroupCoordinator) -> None:
    """Load and unload shards as this broker's leadership of offsets partitions changes."""
    runtime = coordinator.runtime
    follow_leadership(
        broker.replica_manager,
        OFFSETS_TOPIC,
        elected=lambda partition, _leader_epoch: runtime.elected(partition),
        resigned=runtime.resigned,
    )
    broker.services.group_coordinator = coordinator
