"""epochlog's Kafka client: producer, consumer (manual assignment) and admin.

An asyncio core (`AsyncProducer`, `AsyncConsumer`, `AsyncAdmin`) with blocking facades
(`Producer`, `Consumer`, `Admin`) that run the core on a background event loop thread. All are
configured like confluent-kafka, with a dict of Kafka's dotted config names (`config.SETTINGS`).
The client depends only on `epochlog.protocol`.

Layers, bottom up: `connection` (one broker connection: framing, pipelining, ApiVersions),
`connection_state` (sans-I/O reconnect backoff and node choice), `metadata` (sans-I/O cluster
view), `network` (connections to all brokers, bootstrap, metadata refresh; `recovery` is where
the rebootstrap decision plugs in), then `producer` (`partitioner`, `accumulator`,
`idempotence`), `consumer` (`subscription`, `fetch_decoder`) and `admin`; `sync` holds the
facades.
"""

from epochlog.client.admin import AsyncAdmin, ClusterDescription, NewTopic, TopicDescription
from epochlog.client.config import ClientConfig, Role, load_config
from epochlog.client.connection import BrokerConnection
from epochlog.client.consumer import AsyncConsumer, OffsetAndTimestamp
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
from epochlog.client.metadata import BrokerNode, ClusterMetadata, PartitionInfo, TopicPartition
from epochlog.client.partitioner import murmur2, partition_for_key
from epochlog.client.producer import AsyncProducer, RecordMetadata
from epochlog.client.sync import Admin, Consumer, Producer
from epochlog.protocol.messages.pin_controller import PinState, PinStatus

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
    "ConsumerRecord",
    "DeliveryTimeoutError",
    "IncompatibleBrokerError",
    "KafkaError",
    "MessageTooLargeError",
    "NewTopic",
    "NoOffsetForPartitionError",
    "NodeNotReadyError",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "PartitionInfo",
    "PinState",
    "PinStatus",
    "Producer",
    "RecordMetadata",
    "RequestTimedOutError",
    "Role",
    "TopicDescription",
    "TopicPartition",
    "load_config",
    "murmur2",
    "partition_for_key",
]
