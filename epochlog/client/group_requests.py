"""A group member's JoinGroup, SyncGroup, Heartbeat and LeaveGroup, built for any version: sans-I/O.

Version differences live here: the static member's group.instance.id goes out from JoinGroup v5,
SyncGroup v3, Heartbeat v3 and LeaveGroup v3 (KIP-345; a static member cannot join a broker older
than JoinGroup v5, `static_join_supported`); JoinGroup v8+ and LeaveGroup v5+ carry a reason
(KIP-800, at most 255 characters); SyncGroup v5+ repeats the protocol type and name (KIP-559);
LeaveGroup v3+ lists the members leaving (KIP-345). FindCoordinator is the admin client's
(`group_admin_protocol.find_coordinator_requests`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from epochlog.protocol import messages as m
from epochlog.protocol.consumer_protocol import PROTOCOL_TYPE

MAX_REASON = 255
FIRST_STATIC_JOIN_GROUP = 5


def static_join_supported(version: int) -> bool:
    return version >= FIRST_STATIC_JOIN_GROUP


def join_group_request(
    version: int,
    group_id: str,
    member_id: str,
    group_instance_id: str | None,
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
    protocols: Iterable[tuple[str, bytes]],
    reason: str,
) -> Any:
    """`protocols`: each assignor's name with the Subscription it carries."""
    return m.JoinGroupRequest(
        group_id=group_id,
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        member_id=member_id,
        group_instance_id=group_instance_id if version >= 5 else None,
        protocol_type=PROTOCOL_TYPE,
        protocols=[
            m.JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata)
            for name, metadata in protocols
        ],
        reason=reason[:MAX_REASON] if version >= 8 else None,
    )


def sync_group_request(
    version: int,
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    protocol_name: str | None,
    assignments: Mapping[str, bytes],
) -> Any:
    """`assignments`: every member's Assignment from the leader, nothing from the others."""
    return m.SyncGroupRequest(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id if version >= 3 else None,
        protocol_type=PROTOCOL_TYPE if version >= 5 else None,
        protocol_name=protocol_name if version >= 5 else None,
        assignments=[
            m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=data)
            for mid, data in assignments.items()
        ],
    )


def heartbeat_request(
    version: int, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
) -> Any:
    return m.HeartbeatRequest(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id if version >= 3 else None,
    )


def leave_group_request(version: int, group_id: str, member_id: str, reason: str) -> Any:
    if version >= 3:
        return m.LeaveGroupRequest(
            group_id=group_id,
            members=[
                m.LeaveGroupRequest.MemberIdentity(
                    member_id=member_id, reason=reason[:MAX_REASON] if version >= 5 else None
                )
            ],
        )
    return m.LeaveGroupRequest(group_id=group_id, member_id=member_id)
