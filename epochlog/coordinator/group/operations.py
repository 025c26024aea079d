"""The group coordinator shard's inputs and outputs: requests and replies as plain values
(the broker's handlers translate Kafka's wire messages, every version, to and from these), the
`Effects` each call returns, and the timer keys it sets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from epochlog.coordinator.group.records import GroupRecord
from epochlog.protocol.errors import ErrorCode

UNKNOWN_MEMBER = ""
E = ErrorCode


@dataclass(frozen=True)
class GroupConfig:
    """Kafka's broker settings for groups, with Kafka's defaults."""

    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes


# --------------------------------------------------------------------------- requests, replies


@dataclass(frozen=True)
class JoinGroup:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool = True  # JoinGroup v4+ (KIP-394)


@dataclass(frozen=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupReply:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False  # v9: a static leader rejoining a stable group


@dataclass(frozen=True)
class SyncGroup:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


@dataclass(frozen=True)
class SyncGroupReply:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class Heartbeat:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class LeaveGroupReply:
    error: ErrorCode
    members: tuple[tuple[LeavingMember, ErrorCode], ...] = ()


@dataclass(frozen=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True)
class OffsetCommit:
    group_id: str
    generation: int  # -1: a consumer that commits without joining (assign())
    member_id: str
    group_instance_id: str | None
    offsets: list[OffsetToCommit]
    retention_ms: int = -1  # OffsetCommit v2-v4 only


@dataclass(frozen=True)
class TxnOffsetCommit:
    """TxnOffsetCommit: offsets that become the group's only when the producer's transaction
    commits. Before v3 there is no member (generation -1, member id "")."""

    group_id: str
    transactional_id: str
    producer_id: int
    producer_epoch: int
    generation: int
    member_id: str
    group_instance_id: str | None
    offsets: list[OffsetToCommit]


@dataclass(frozen=True)
class PartitionError:
    topic: str
    partition: int
    error: ErrorCode


@dataclass(frozen=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = E.NONE


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


# --------------------------------------------------------------------------- effects

TimerKey = tuple[Any, ...]


@dataclass
class Effects:
    """What a call asks of the runtime, in order: append `records` (acks=all), then send
    `replies` (request handle, reply), then `replay` the records; `timers` maps a timer key to
    its new deadline, or to None to cancel it."""

    records: list[GroupRecord] = field(default_factory=list)
    replies: list[tuple[Any, Any]] = field(default_factory=list)
    timers: dict[TimerKey, int | None] = field(default_factory=dict)

    def reply(self, handle: Any, value: Any) -> None:
        self.replies.append((handle, value))


def heartbeat_timer(group_id: str, member_id: str) -> TimerKey:
    return ("heartbeat", group_id, member_id)


def join_timer(group_id: str) -> TimerKey:
    return ("join", group_id)


def sync_timer(group_id: str) -> TimerKey:
    return ("sync", group_id)


def pending_member_timer(group_id: str, member_id: str) -> TimerKey:
    return ("pending", group_id, member_id)


EXPIRE_OFFSETS_TIMER: TimerKey = ("expire-offsets",)
