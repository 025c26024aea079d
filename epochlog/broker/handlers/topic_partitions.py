"""DescribeTopicPartitions (v0, KIP-966): topics and partitions from the metadata cache, a page
at a time.

Which topics and partitions a page holds, and its NextCursor, are `broker.topic_pages`'
decision (Kafka 3.9's rules). Each partition is described as Kafka's KRaft cache does: the
leader, or -1 when it is not a live broker; the leader epoch; replicas and ISR as assigned
(not filtered to live brokers); offline replicas: those the controller reported offline and
those on brokers that are not live. epochlog has no eligible leader replicas (KIP-966's ELR is
KRaft's): both ELR lists are empty. With no authorizer every topic operation is authorized, so
TopicAuthorizedOperations has the bit of each operation Kafka supports on a topic.
"""

from __future__ import annotations

import uuid
from typing import Any

from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.metadata_cache import PartitionInfo
from epochlog.broker.topic_pages import InvalidPageRequest, page_limit, plan_page
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode
from epochlog.storage.layout import validate_topic_name

R = m.DescribeTopicPartitionsResponse
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# Kafka's AclOperation codes supported on a topic: READ 3, WRITE 4, CREATE 5, DELETE 6,
# ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11 (AclEntry.supportedOperations).
TOPIC_OPERATIONS = (3, 4, 5, 6, 7, 8, 10, 11)
ALL_TOPIC_OPERATIONS = sum(1 << op for op in TOPIC_OPERATIONS)


def _name_error(name: str) -> ErrorCode | None:
    try:
        validate_topic_name(name)
    except ValueError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return None


def _is_alive(services: BrokerServices, broker_id: int) -> bool:
    return broker_id == services.broker_id or services.metadata_cache.is_alive(broker_id)


def describe_partition(services: BrokerServices, info: PartitionInfo) -> Any:
    leader = info.leader if info.leader >= 0 and _is_alive(services, info.leader) else -1
    offline = set(info.offline_replicas)
    return R.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.NONE,
        partition_index=info.partition,
        leader_id=leader,
        leader_epoch=info.leader_epoch,
        replica_nodes=list(info.replicas),
        isr_nodes=list(info.isr),
        eligible_leader_replicas=[],
        last_known_elr=[],
        offline_replicas=[r for r in info.replicas if r in offline or not _is_alive(services, r)],
    )


async def handle_describe_topic_partitions(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    body = request.body
    cache = services.metadata_cache
    requested = [t.name for t in body.topics]
    cursor = (body.cursor.topic_name, body.cursor.partition_index) if body.cursor else None

    def partition_count(name: str) -> int | None:
        if not cache.has_topic(name):
            return None
        partitions = cache.partitions(name)
        return max(partitions) + 1 if partitions else 0

    try:
        page = plan_page(
            requested,
            cache.topics(),
            partition_count,
            cursor,
            page_limit(body.response_partition_limit),
            _name_error,
        )
    except InvalidPageRequest:
        return R(
            topics=[
                R.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.INVALID_REQUEST, name=name, partitions=[]
                )
                for name in requested
            ]
        )
    response = R(
        next_cursor=(
            R.Cursor(topic_name=page.next_cursor[0], partition_index=page.next_cursor[1])
            if page.next_cursor is not None
            else None
        )
    )
    for part in page.topics:
        topic = R.DescribeTopicPartitionsResponseTopic(
            error_code=part.error,
            name=part.name,
            topic_id=cache.topic_id(part.name) or uuid.UUID(int=0),
            is_internal=part.name in INTERNAL_TOPICS,
        )
        if part.error == ErrorCode.NONE:
            partitions = cache.partitions(part.name)
            topic.partitions = [
                describe_partition(services, partitions[i])
                for i in range(part.first, part.end)
                if i in partitions
            ]
            topic.topic_authorized_operations = ALL_TOPIC_OPERATIONS
        response.topics.append(topic)
    return response
