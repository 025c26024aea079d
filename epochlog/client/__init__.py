"""epochlog's Kafka client: producer, consumer (manual assignment or a consumer group) and admin.

An asyncio core (`AsyncProducer`, `AsyncConsumer`, `AsyncAdmin`) with blocking facades
(`Producer`, `Consumer`, `Admin`) that run the core on a background event loop thread. All are
configured like confluent-kafka, with a dict of Kafka's dotted config names (`config.SETTINGS`).
The client depends only on `epochlog.protocol`.

Layers, bottom up: `connection` (one broker connection: framing, pipelining, ApiVersions;
`framed_connection` is one for bulk readers, responses read into pooled frames),
`connection_state` (sans-I/O reconnect backoff and node choice), `metadata` (sans-I/O cluster
view), `network` (connections to all brokers, bootstrap, metadata refresh; `recovery` is where
the rebootstrap decision plugs in), then `producer` (`partitioner`, `accumulator` of
`producer_batch`es, `sender`, deciding through `retries` and `idempotence`, completing through
`delivery`; with a transactional.id the sans-I/O `transaction_manager` and its I/O,
`transactional_sender`), `consumer` (`subscription`, `fetch_decoder`; in a group
`consumer_coordinator` with `coordinator_connection`, `group_heartbeat` and `offset_committer`,
deciding through the sans-I/O `membership`, `rebalance`, `group_subscription`, `assignors`,
`group_requests` and `group_offsets`) and `admin`; `sync` holds the facades.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from epochlog.client.admin import AsyncAdmin, ClusterDescription, NewTopic, TopicDescription
    from epochlog.client.admin_partitions import DeletedRecords, ElectionType, NewPartitions
    from epochlog.client.admin_reassign import PartitionReassignment
    from epochlog.client.config import ClientConfig, Role, load_config
    from epochlog.client.connection import BrokerConnection
    from epochlog.client.consumer import AsyncConsumer
    from epochlog.client.errors import (
        ClientClosedError,
        ClientError,
        ConfigError,
        ConnectionFailedError,
        DeliveryTimeoutError,
        IncompatibleBrokerError,
        KafkaError,
        MessageTooLargeError,
        NodeNotReadyError,
        NoOffsetForPartitionError,
        OffsetOutOfRangeError,
        RequestTimedOutError,
    )
    from epochlog.client.fetch_decoder import ConsumerRecord
    from epochlog.client.group_admin_protocol import (
        GroupDescription,
        GroupListing,
        MemberDescription,
    )
    from epochlog.client.group_offsets import ConsumerGroupMetadata, OffsetAndMetadata
    from epochlog.client.list_offsets import OffsetAndTimestamp
    from epochlog.client.metadata import BrokerNode, ClusterMetadata, PartitionInfo, TopicPartition
    from epochlog.client.partitioner import murmur2, partition_for_key
    from epochlog.client.producer import AsyncProducer, RecordMetadata
    from epochlog.client.sync import Admin, Consumer
    from epochlog.client.sync_producer import Producer
    from epochlog.client.transaction_manager import (
        TransactionAbortedError,
        TransactionStateError,
    )
    from epochlog.protocol.messages.pin_controller import PinState, PinStatus

# Names are imported on first use (PEP 562), so importing one submodule (say
# `epochlog.client.config`) does not load the whole client: Spark starts a Python process per
# streaming query whose driver side needs only part of it.
_EXPORTS: dict[str, str] = {
    "Admin": "epochlog.client.sync",
    "AsyncAdmin": "epochlog.client.admin",
    "AsyncConsumer": "epochlog.client.consumer",
    "AsyncProducer": "epochlog.client.producer",
    "BrokerConnection": "epochlog.client.connection",
    "BrokerNode": "epochlog.client.metadata",
    "ClientClosedError": "epochlog.client.errors",
    "ClientConfig": "epochlog.client.config",
    "ClientError": "epochlog.client.errors",
    "ClusterDescription": "epochlog.client.admin",
    "ClusterMetadata": "epochlog.client.metadata",
    "ConfigError": "epochlog.client.errors",
    "ConnectionFailedError": "epochlog.client.errors",
    "Consumer": "epochlog.client.sync",
    "ConsumerGroupMetadata": "epochlog.client.group_offsets",
    "ConsumerRecord": "epochlog.client.fetch_decoder",
    "DeletedRecords": "epochlog.client.admin_partitions",
    "DeliveryTimeoutError": "epochlog.client.errors",
    "ElectionType": "epochlog.client.admin_partitions",
    "GroupDescription": "epochlog.client.group_admin_protocol",
    "GroupListing": "epochlog.client.group_admin_protocol",
    "IncompatibleBrokerError": "epochlog.client.errors",
    "KafkaError": "epochlog.client.errors",
    "MemberDescription": "epochlog.client.group_admin_protocol",
    "MessageTooLargeError": "epochlog.client.errors",
    "NewPartitions": "epochlog.client.admin_partitions",
    "NewTopic": "epochlog.client.admin",
    "NoOffsetForPartitionError": "epochlog.client.errors",
    "NodeNotReadyError": "epochlog.client.errors",
    "OffsetAndMetadata": "epochlog.client.group_offsets",
    "OffsetAndTimestamp": "epochlog.client.list_offsets",
    "OffsetOutOfRangeError": "epochlog.client.errors",
    "PartitionInfo": "epochlog.client.metadata",
    "PartitionReassignment": "epochlog.client.admin_reassign",
    "PinState": "epochlog.protocol.messages.pin_controller",
    "PinStatus": "epochlog.protocol.messages.pin_controller",
    "Producer": "epochlog.client.sync_producer",
    "RecordMetadata": "epochlog.client.producer",
    "RequestTimedOutError": "epochlog.client.errors",
    "Role": "epochlog.client.config",
    "TopicDescription": "epochlog.client.admin",
    "TopicPartition": "epochlog.client.metadata",
    "TransactionAbortedError": "epochlog.client.transaction_manager",
    "TransactionStateError": "epochlog.client.transaction_manager",
    "load_config": "epochlog.client.config",
    "murmur2": "epochlog.client.partitioner",
    "partition_for_key": "epochlog.client.partitioner",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncProducer",
    "BrokerConnection",
    "BrokerNode",
    "ClientClosedError",
    "ClientConfig",
    "ClientError",
    "ClusterDescription",
    "ClusterMetadata",
    "ConfigError",
    "ConnectionFailedError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "DeletedRecords",
    "DeliveryTimeoutError",
    "ElectionType",
    "GroupDescription",
    "GroupListing",
    "IncompatibleBrokerError",
    "KafkaError",
    "MemberDescription",
    "MessageTooLargeError",
    "NewPartitions",
    "NewTopic",
    "NoOffsetForPartitionError",
    "NodeNotReadyError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "PartitionInfo",
    "PartitionReassignment",
    "PinState",
    "PinStatus",
    "Producer",
    "RecordMetadata",
    "RequestTimedOutError",
    "Role",
    "TopicDescription",
    "TopicPartition",
    "TransactionAbortedError",
    "TransactionStateError",
    "load_config",
    "murmur2",
    "partition_for_key",
]
