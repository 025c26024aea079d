"""The shard's records as `__consumer_offsets` keys and values, in Kafka's own formats
(`protocol/consumer_offsets.py`), so Kafka's tooling reads what the coordinator writes and the
coordinator reads what Kafka wrote."""

from __future__ import annotations

import logging

from epochlog.coordinator.group.classic_group import CommittedOffset
from epochlog.coordinator.group.records import (
    GroupMetadataRecord,
    GroupRecord,
    GroupTombstone,
    MemberRecord,
    OffsetCommitRecord,
    OffsetTombstone,
)
from epochlog.protocol.consumer_offsets import (
    NO_EXPIRE_TIMESTAMP,
    decode_group_metadata_value,
    decode_offset_commit_value,
    decode_record_key,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from epochlog.protocol.messages import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey

log = logging.getLogger(__name__)


class ConsumerOffsetsCodec:
    def encode(self, record: GroupRecord) -> tuple[bytes, bytes | None]:
        if isinstance(record, OffsetCommitRecord):
            offset = record.offset
            return (
                encode_offset_commit_key(record.group_id, record.topic, record.partition),
                encode_offset_commit_value(
                    offset.offset,
                    offset.metadata,
                    offset.commit_timestamp_ms,
                    offset.leader_epoch,
                    offset.expire_timestamp_ms,
                ),
            )
        if isinstance(record, OffsetTombstone):
            return encode_offset_commit_key(record.group_id, record.topic, record.partition), None
        if isinstance(record, GroupMetadataRecord):
            value = GroupMetadataValue(
                protocol_type=record.protocol_type,
                generation=record.generation,
                protocol=record.protocol_name,
                leader=record.leader_id,
                current_state_timestamp=record.current_state_timestamp_ms,
                members=[
                    GroupMetadataValue.MemberMetadata(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        rebalance_timeout=m.rebalance_timeout_ms,
                        session_timeout=m.session_timeout_ms,
                        subscription=m.subscription,
                        assignment=m.assignment,
                    )
                    for m in record.members
                ],
            )
            return encode_group_metadata_key(record.group_id), encode_group_metadata_value(value)
        if isinstance(record, GroupTombstone):
            return encode_group_metadata_key(record.group_id), None
        raise TypeError(f"not a group coordinator record: {record!r}")

    def decode(self, key: bytes, value: bytes | None) -> GroupRecord | None:
        """The record, or None for a key type this coordinator does not read (Kafka skips
        those too)."""
        parsed = decode_record_key(key)
        if isinstance(parsed, OffsetCommitKey):
            committed = decode_offset_commit_value(value)
            if committed is None:
                return OffsetTombstone(parsed.group, parsed.topic, parsed.partition)
            expire = committed.expire_timestamp
            return OffsetCommitRecord(
                parsed.group,
                parsed.topic,
                parsed.partition,
                CommittedOffset(
                    committed.offset,
                    committed.leader_epoch,
                    committed.metadata,
                    committed.commit_timestamp,
                    None if expire == NO_EXPIRE_TIMESTAMP else expire,
                ),
            )
        if isinstance(parsed, GroupMetadataKey):
            group = decode_group_metadata_value(value)
            if group is None:
                return GroupTombstone(parsed.group)
            return GroupMetadataRecord(
                group_id=parsed.group,
                protocol_type=group.protocol_type,
                generation=group.generation,
                protocol_name=group.protocol,
                leader_id=group.leader,
                current_state_timestamp_ms=group.current_state_timestamp,
                members=tuple(
                    MemberRecord(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        rebalance_timeout_ms=m.rebalance_timeout,
                        session_timeout_ms=m.session_timeout,
                        subscription=m.subscription,
                        assignment=m.assignment,
                    )
                    for m in group.members
                ),
            )
        log.warning("__consumer_offsets: skipping a record with key type %r", parsed)
        return None
