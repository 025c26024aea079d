"""The client's view of the cluster, built from Metadata responses: sans-I/O.

`metadata_request(version, topics)` builds the request for a negotiated version: topics by name
(v10 and v11 carry a TopicId field that must stay zero, v12+ could name topics by id but we never
need to), `None` for all topics (an empty list in v0, null from v1).

`apply_metadata_response(old, response, version, wanted)` returns the next `ClusterMetadata`:
brokers and controller are replaced by the response's (every response lists all live brokers),
topics named in the response replace the old entries, and topics absent from it are kept only if
the caller still wants them and the response was not for all topics. A partition whose new leader
epoch is older than the one already known keeps the known entry (KIP-320: a lagging broker must
not move a client back to an old leader). Topic ids come from v10+, the top-level error code
(REBOOTSTRAP_REQUIRED, KIP-1102) from v13+; both default to "none" for older versions.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode

ZERO_UUID = uuid.UUID(int=0)


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = -1  # the broker epoch (KIP-380), from epochlog's DescribeCluster; -1 unknown


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1 when the partition has no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionInfo]
    is_internal: bool = False
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class ClusterMetadata:
    """One consistent snapshot; a new one replaces it on every update."""

    brokers: Mapping[int, BrokerNode] = field(default_factory=dict)
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    _available: dict[str, list[int]] = field(default_factory=dict, repr=False, compare=False)

    def topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def partition_count(self, topic: str) -> int | None:
        info = self.topics.get(topic)
        if info is None or info.error is not ErrorCode.NONE or not info.partitions:
            return None
        return len(info.partitions)

    def partition(self, tp: tuple[str, int]) -> PartitionInfo | None:
        info = self.topics.get(tp[0])
        return None if info is None else info.partitions.get(tp[1])

    def leader_for(self, tp: tuple[str, int]) -> int | None:
        """The leader's node id, if the partition has one that is a known broker."""
        part = self.partition(tp)
        if part is None or part.leader < 0 or part.leader not in self.brokers:
            return None
        return part.leader

    def available_partitions(self, topic: str) -> list[int]:
        """Partitions of `topic` whose leader is a known broker (computed once per snapshot)."""
        cached = self._available.get(topic)
        if cached is None:
            info = self.topics.get(topic)
            cached = (
                []
                if info is None
                else sorted(p for p, part in info.partitions.items() if part.leader in self.brokers)
            )
            self._available[topic] = cached
        return cached

    def topic_id(self, topic: str) -> uuid.UUID:
        info = self.topics.get(topic)
        return ZERO_UUID if info is None else info.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for info in self.topics.values():
            if info.topic_id == topic_id:
                return info.name
        return None


@dataclass(frozen=True)
class MetadataUpdate:
    cluster: ClusterMetadata
    error: ErrorCode  # top-level (v13+)
    topic_errors: Mapping[str, ErrorCode]
    brokers_seen: int  # how many brokers the response listed


def metadata_request(
    version: int, topics: Collection[str] | None, allow_auto_topic_creation: bool = True
) -> Any:
    """A MetadataRequest for `topics` (None: all topics) at `version`."""
    if topics is None:
        wanted: list[Any] | None = [] if version == 0 else None
    else:
        wanted = [m.MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(topics)]
    request = m.MetadataRequest(topics=wanted)
    if version >= 4:  # older versions always allow it (the broker's setting decides)
        request.allow_auto_topic_creation = allow_auto_topic_creation
    return request


def apply_metadata_response(
    old: ClusterMetadata,
    response: Any,
    version: int,
    wanted: Iterable[str] | None,
) -> MetadataUpdate:
    """The cluster after `response`; `wanted` is the topics asked for (None: all)."""
    error = ErrorCode.of(response.error_code) if version >= 13 else ErrorCode.NONE
    brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
    if error is not ErrorCode.NONE and not brokers:
        return MetadataUpdate(old, error, {}, 0)
    topics: dict[str, TopicInfo] = {}
    if wanted is not None:
        keep = set(wanted)
        topics.update({name: info for name, info in old.topics.items() if name in keep})
    topic_errors: dict[str, ErrorCode] = {}
    for t in response.topics:
        if t.name is None:
            continue
        topic_error = ErrorCode.of(t.error_code)
        if topic_error is not ErrorCode.NONE:
            topic_errors[t.name] = topic_error
        previous = old.topics.get(t.name)
        topic_id = t.topic_id if version >= 10 and t.topic_id is not None else ZERO_UUID
        partitions = {}
        for p in t.partitions:
            part = PartitionInfo(
                topic=t.name,
                partition=p.partition_index,
                leader=p.leader_id,
                leader_epoch=p.leader_epoch if version >= 7 else -1,
                replicas=tuple(p.replica_nodes),
                isr=tuple(p.isr_nodes),
                offline_replicas=tuple(p.offline_replicas) if version >= 5 else (),
                error=ErrorCode.of(p.error_code),
            )
            known = None if previous is None else previous.partitions.get(p.partition_index)
            if (
                known is not None
                and previous is not None
                and previous.topic_id == topic_id
                and part.leader_epoch >= 0
                and known.leader_epoch > part.leader_epoch
            ):
                part = known  # stale answer from a lagging broker
            partitions[p.partition_index] = part
        topics[t.name] = TopicInfo(t.name, topic_id, partitions, t.is_internal, topic_error)
    cluster = ClusterMetadata(
        brokers=brokers,
        topics=topics,
        controller_id=response.controller_id if version >= 1 else -1,
        cluster_id=response.cluster_id if version >= 2 else None,
    )
    return MetadataUpdate(cluster, error, topic_errors, len(brokers))
