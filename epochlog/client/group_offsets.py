"""OffsetCommit and OffsetFetch for a consumer group, built and read for any version: sans-I/O.

`offset_commit_request` writes a commit under a generation and member id (generation -1 and no
member for a consumer that assigns its partitions itself), with each offset's leader epoch
(v6+) and the static member's instance id (v7+); `offset_commit_errors` reads back the error of
every partition. `offset_fetch_request` asks for partitions' committed offsets, one group per
request, in the layout of the version (v8+ lists groups), with `require_stable` (v7+, set under
read_committed as Java does, KIP-447); `offset_fetch_result` returns the group-level error
(v2+) and each partition's `OffsetAndMetadata`, None where nothing is committed (offset -1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.client.metadata import TopicPartition
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset: the next offset to read, the leader epoch of the record before it
    (-1 unknown) and the commit's metadata string."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """A consumer's place in its group, as a transactional producer's TxnOffsetCommit carries
    it (Kafka's ConsumerGroupMetadata): a member of an older generation is refused."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


def offset_commit_request(
    version: int,
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for tp, om in sorted(offsets.items()):
        by_topic.setdefault(tp.topic, []).append(
            m.OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata,
            )
        )
    return m.OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id if version >= 7 else None,
        topics=[
            m.OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=parts)
            for t, parts in by_topic.items()
        ],
    )


def offset_commit_errors(response: Any) -> dict[TopicPartition, ErrorCode]:
    """Every partition that was not committed, with its error."""
    return {
        TopicPartition(t.name, p.partition_index): ErrorCode.of(p.error_code)
        for t in response.topics
        for p in t.partitions
        if p.error_code != ErrorCode.NONE
    }


def offset_fetch_request(
    version: int, group_id: str, partitions: Iterable[TopicPartition], require_stable: bool
) -> Any:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if version >= 8:
        return m.OffsetFetchRequest(
            groups=[
                m.OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group_id,
                    topics=[
                        m.OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ],
            require_stable=require_stable,
        )
    request = m.OffsetFetchRequest(
        group_id=group_id,
        topics=[
            m.OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
            for t, ps in by_topic.items()
        ],
    )
    if version >= 7:
        request.require_stable = require_stable
    return request


@dataclass(frozen=True)
class OffsetFetchResult:
    error: ErrorCode  # the group's (v2+), else NONE
    partition_errors: Mapping[TopicPartition, ErrorCode]
    offsets: Mapping[TopicPartition, OffsetAndMetadata | None]


def offset_fetch_result(version: int, response: Any) -> OffsetFetchResult:
    if version >= 8:
        group = response.groups[0]
        error, topics = ErrorCode.of(group.error_code), group.topics
    else:
        error = ErrorCode.of(response.error_code) if version >= 2 else ErrorCode.NONE
        topics = response.topics
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata | None] = {}
    for t in topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            code = ErrorCode.of(p.error_code)
            if code is not ErrorCode.NONE:
                errors[tp] = code
            elif p.committed_offset >= 0:
                epoch = p.committed_leader_epoch if version >= 5 else -1
                offsets[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "", epoch)
            else:
                offsets[tp] = None
    return OffsetFetchResult(error, errors, offsets)
