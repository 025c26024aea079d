"""DescribeProducers (v0): the idempotent producers a partition's replica remembers (KIP-664).

As Kafka's `KafkaApis.handleDescribeProducersRequest` and `Partition.activeProducerState`: an
illegal topic name is INVALID_TOPIC_EXCEPTION and a topic the metadata cache does not know
UNKNOWN_TOPIC_OR_PARTITION, for each partition asked. Otherwise each partition is answered by
this broker's replica, leader or follower (followers track producers from the batches they
copy, which is what Kafka's `--broker-id` option of kafka-transactions.sh reads): its producer
state's entries. A partition not hosted here is NOT_LEADER_OR_FOLLOWER, one in an offline log
dir KAFKA_STORAGE_ERROR. CoordinatorEpoch is that of the producer's last marker and
CurrentTxnStartOffset the first offset of its open transaction (-1 for none, as Kafka).
"""

from __future__ import annotations

from typing import Any

from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.partition import PartitionError
from epochlog.broker.producer_state import ProducerEntry
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode
from epochlog.storage.layout import validate_topic_name

R = m.DescribeProducersResponse


def producer_state_entry(entry: ProducerEntry) -> Any:
    return R.ProducerState(
        producer_id=entry.producer_id,
        producer_epoch=entry.epoch,
        last_sequence=entry.last_seq,
        last_timestamp=entry.last_timestamp,
        coordinator_epoch=entry.coordinator_epoch,
        current_txn_start_offset=entry.current_txn_first_offset,
    )


def _topic_error(services: BrokerServices, topic: str) -> tuple[ErrorCode, str] | None:
    try:
        validate_topic_name(topic)
    except ValueError as exc:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)
    if not services.metadata_cache.has_topic(topic):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {topic}"
    return None


def describe_partition_producers(services: BrokerServices, topic: str, index: int) -> Any:
    try:
        partition = services.replica_manager.partition_or_error(topic, index)
    except PartitionError as exc:
        return R.PartitionResponse(
            partition_index=index, error_code=exc.error_code, error_message=str(exc)
        )
    return R.PartitionResponse(
        partition_index=index,
        error_code=ErrorCode.NONE,
        active_producers=[
            producer_state_entry(e) for e in partition.producer_state.active_producers()
        ],
    )


async def handle_describe_producers(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    topics = []
    for requested in request.body.topics:
        error = _topic_error(services, requested.name)
        partitions = [
            R.PartitionResponse(partition_index=i, error_code=error[0], error_message=error[1])
            if error is not None
            else describe_partition_producers(services, requested.name, i)
            for i in requested.partition_indexes
        ]
        topics.append(R.TopicResponse(name=requested.name, partitions=partitions))
    return R(topics=topics)
