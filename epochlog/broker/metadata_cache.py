"""What this broker knows about the cluster, as the controller last told it (UpdateMetadata).

The cache holds the live brokers (id, endpoints per listener, rack, and the broker epoch the
controller holds for each: epochlog's tagged field in UpdateMetadata v6+, which KIP-903 leaders
compare with a follower's fetch epoch), the controller id, the topics with their ids, and the
state of every partition (leader, leader epoch, ISR, replicas, offline replicas).

`apply_update_metadata` follows Kafka's ZK metadata cache: the live-broker list is replaced
whole; partition states are a delta (only the partitions named change); a partition whose leader
is -2 (LeaderDuringDelete) is being deleted and leaves the cache, and a topic with no partitions
left goes with it. Readers: Metadata, DescribeCluster, Fetch by topic id, Produce's choice
between NOT_LEADER_OR_FOLLOWER and UNKNOWN_TOPIC_OR_PARTITION. Plain state, no I/O.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from epochlog.protocol.schema import ZERO_UUID

LEADER_DURING_DELETE = -2
NO_LEADER = -1
NO_CONTROLLER = -1

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    listener: str
    host: str
    port: int
    security_protocol: int = 0  # PLAINTEXT


@dataclass(frozen=True, slots=True)
class LiveBroker:
    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    epoch: int = -1

    def endpoint_for(self, listener: str) -> BrokerEndpoint | None:
        """The endpoint on `listener`, else the first one (so every live broker is listed)."""
        for endpoint in self.endpoints:
            if endpoint.listener == listener:
                return endpoint
        return self.endpoints[0] if self.endpoints else None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    partition_epoch: int = 0
    controller_epoch: int = 0


def _topic_id(value: uuid.UUID | None) -> uuid.UUID | None:
    return None if value is None or value == ZERO_UUID else value


class MetadataCache:
    def __init__(self) -> None:
        self.controller_id: int = NO_CONTROLLER
        self.controller_epoch: int = -1
        self._brokers: dict[int, LiveBroker] = {}
        self._partitions: dict[str, dict[int, PartitionInfo]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._topic_names: dict[uuid.UUID, str] = {}

    # --------------------------------------------------------------------------- updates

    def learn_controller(
        self, controller_id: int | None, registration: LiveBroker | None = None
    ) -> None:
        """The controller as ZooKeeper's /controller names it now (None: being elected). It
        is ahead of UpdateMetadata, which the new controller sends only after loading.

        `registration` is the controller's /brokers/ids entry: a controller this cache does not
        list yet (a cluster starting, before any UpdateMetadata) is added to the live brokers,
        so that a Metadata response naming it also says where it is. The next UpdateMetadata
        replaces the list whole, as always."""
        self.controller_id = NO_CONTROLLER if controller_id is None else controller_id
        if (
            registration is not None
            and registration.broker_id == controller_id
            and controller_id not in self._brokers
        ):
            self._brokers[controller_id] = registration

    def controller_for_clients(self, own_broker_id: int) -> int:
        """The controller id a Metadata or DescribeCluster response names: the known controller
        only if the response also lists it (a live broker, or this one), else -1.

        librdkafka looks the named controller up among the brokers it knows and, when it is not
        there, waits for a broker state change that never comes: a CreateTopics sent then gets
        no answer until the request times out. A controller of -1 makes it refresh metadata."""
        controller = self.controller_id
        if controller == own_broker_id or controller in self._brokers:
            return controller
        return NO_CONTROLLER

    def apply_update_metadata(self, request: Any) -> list[TopicPartition]:
        """Apply an UpdateMetadata body (v5-7); return the partitions deleted from the cache."""
        self.controller_id = request.controller_id if request.controller_id >= 0 else NO_CONTROLLER
        self.controller_epoch = max(self.controller_epoch, request.controller_epoch)
        brokers: dict[int, LiveBroker] = {}
        for broker in request.live_brokers:
            endpoints = tuple(
                BrokerEndpoint(e.listener, e.host, e.port, e.security_protocol)
                for e in broker.endpoints
            )
            brokers[broker.id] = LiveBroker(
                broker.id, endpoints, broker.rack or None, broker.broker_epoch
            )
        self._brokers = brokers
        deleted: list[TopicPartition] = []
        for topic_state in request.topic_states:
            topic = topic_state.topic_name
            topic_id = _topic_id(getattr(topic_state, "topic_id", None))
            for state in topic_state.partition_states:
                if state.leader == LEADER_DURING_DELETE:
                    if self._remove_partition(topic, state.partition_index):
                        deleted.append((topic, state.partition_index))
                    continue
                self.put_partition(
                    PartitionInfo(
                        topic=topic,
                        partition=state.partition_index,
                        leader=state.leader,
                        leader_epoch=state.leader_epoch,
                        isr=tuple(state.isr),
                        replicas=tuple(state.replicas),
                        offline_replicas=tuple(state.offline_replicas),
                        partition_epoch=state.zk_version,
                        controller_epoch=state.controller_epoch,
                    ),
                    topic_id,
                )
        return deleted

    def put_partition(self, info: PartitionInfo, topic_id: uuid.UUID | None = None) -> None:
        self._partitions.setdefault(info.topic, {})[info.partition] = info
        topic_id = _topic_id(topic_id)
        if topic_id is not None:
            old = self._topic_ids.get(info.topic)
            if old is not None and old != topic_id:
                self._topic_names.pop(old, None)
            self._topic_ids[info.topic] = topic_id
            self._topic_names[topic_id] = info.topic

    def _remove_partition(self, topic: str, partition: int) -> bool:
        partitions = self._partitions.get(topic)
        if partitions is None or partitions.pop(partition, None) is None:
            return False
        if not partitions:
            del self._partitions[topic]
            topic_id = self._topic_ids.pop(topic, None)
            if topic_id is not None:
                self._topic_names.pop(topic_id, None)
        return True

    # ----------------------------------------------------------------------------- reads

    def live_brokers(self) -> list[LiveBroker]:
        return [self._brokers[i] for i in sorted(self._brokers)]

    def broker(self, broker_id: int) -> LiveBroker | None:
        return self._brokers.get(broker_id)

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self._brokers

    def broker_epoch(self, broker_id: int) -> int:
        """The epoch the controller holds for a live broker, -1 if unknown."""
        broker = self._brokers.get(broker_id)
        return broker.epoch if broker is not None else -1

    def topics(self) -> list[str]:
        return sorted(self._partitions)

    def has_topic(self, topic: str) -> bool:
        return topic in self._partitions

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self._topic_ids.get(topic)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._topic_names.get(topic_id)

    def partitions(self, topic: str) -> dict[int, PartitionInfo]:
        return dict(self._partitions.get(topic, {}))

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        return self._partitions.get(topic, {}).get(partition)

    def contains(self, topic: str, partition: int) -> bool:
        return self.partition(topic, partition) is not None
