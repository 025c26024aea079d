"""What a group coordinator writes to its `__consumer_offsets` partition, as typed values.

The shard (`shard.py`) returns these; the runtime encodes them in Kafka's own key and value
formats (OffsetCommitKey/Value, GroupMetadataKey/Value) and appends them with acks=all; loading a
partition decodes them back and `GroupCoordinatorShard.replay` applies them. A tombstone (null
value) deletes: one committed offset, or a whole group.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.coordinator.group.classic_group import CommittedOffset


@dataclass(frozen=True)
class OffsetCommitRecord:
    group_id: str
    topic: str
    partition: int
    offset: CommittedOffset


@dataclass(frozen=True)
class OffsetTombstone:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataRecord:
    group_id: str
    protocol_type: str
    generation: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberRecord, ...]


@dataclass(frozen=True)
class GroupTombstone:
    group_id: str


GroupRecord = OffsetCommitRecord | OffsetTombstone | GroupMetadataRecord | GroupTombstone
