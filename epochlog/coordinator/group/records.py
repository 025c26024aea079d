"""What a group coordinator writes to its `__consumer_offsets` partition, as typed values.

The shard (`shard.py`) returns these; the runtime encodes them in Kafka's own key and value
formats (OffsetCommitKey/Value, GroupMetadataKey/Value) and appends them with acks=all; loading a
partition decodes them back and `GroupCoordinatorShard.replay` applies them. A tombstone (null
value) deletes: one committed offset, or a whole group.

An offset committed inside a transaction (TxnOffsetCommit) is the same OffsetCommit key and value
in a transactional batch of the producer: `OffsetCommitRecord.producer_id` says which producer's
batch it is in (-1: an ordinary commit). `TxnMarkerRecord` is the commit or abort marker (a
control batch, written by WriteTxnMarkers) that ends the producer's transaction; the coordinator
never writes one, it learns it from the log and from the marker's writer.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.coordinator.group.classic_group import CommittedOffset

NO_PRODUCER_ID = -1


@dataclass(frozen=True)
class OffsetCommitRecord:
    group_id: str
    topic: str
    partition: int
    offset: CommittedOffset
    producer_id: int = NO_PRODUCER_ID  # >= 0: pending in this producer's transaction
    producer_epoch: int = -1

    @property
    def is_transactional(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID


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


@dataclass(frozen=True)
class TxnMarkerRecord:
    """The end of `producer_id`'s transaction in this partition: COMMIT or ABORT."""

    producer_id: int
    committed: bool


GroupRecord = (
    OffsetCommitRecord | OffsetTombstone | GroupMetadataRecord | GroupTombstone | TxnMarkerRecord
)
