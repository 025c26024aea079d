"""Kafka's group APIs on the wire, every version, translated to and from the shard's operations.

The broker hands each group request here as decoded (api key, version, body) with the client's
id and host; this module turns it into a call on the runtime (which finds the group's shard) and
the shard's answer into the response of that version: JoinGroup v0 has no rebalance timeout
(the session timeout is used), v4+ requires a member id (KIP-394), v5+ carries static member ids;
LeaveGroup v0-2 names one member, v3+ a batch; OffsetCommit v0 has no generation, v2-v4 a
retention time; OffsetFetch v2+ may ask for all of a group's offsets (null topics), v7 for stable
ones, v8+ for several groups; TxnOffsetCommit v0-2 has no member, v3+ the member's id,
generation and static id (KIP-447); and so on. A group whose coordinator is not (or not yet) this
broker gets NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS in the place that version has for it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from epochlog.coordinator.group.operations import (
    UNKNOWN_MEMBER,
    Heartbeat,
    JoinGroup,
    LeavingMember,
    OffsetCommit,
    OffsetToCommit,
    SyncGroup,
    TxnOffsetCommit,
)
from epochlog.coordinator.group.runtime import CoordinatorError, GroupCoordinatorRuntime
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

E = ErrorCode
UNKNOWN_AUTHORIZED_OPERATIONS = -(2**31)


class GroupService:
    def __init__(self, runtime: GroupCoordinatorRuntime) -> None:
        self.runtime = runtime
        self._handlers = {
            ApiKey.JOIN_GROUP: self.join_group,
            ApiKey.SYNC_GROUP: self.sync_group,
            ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave_group,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.DESCRIBE_GROUPS: self.describe_groups,
            ApiKey.LIST_GROUPS: self.list_groups,
            ApiKey.DELETE_GROUPS: self.delete_groups,
            ApiKey.OFFSET_DELETE: self.offset_delete,
            ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
        }

    @property
    def api_keys(self) -> frozenset[int]:
        return frozenset(self._handlers)

    async def handle(
        self, api_key: int, version: int, body: Any, client_id: str, client_host: str
    ) -> Any:
        return await self._handlers[ApiKey(api_key)](body, version, client_id, client_host)

    # ------------------------------------------------------------------ membership

    async def join_group(self, body: Any, version: int, client_id: str, host: str) -> Any:
        request = JoinGroup(
            group_id=body.group_id,
            member_id=body.member_id,
            group_instance_id=body.group_instance_id if version >= 5 else None,
            client_id=client_id,
            client_host=host,
            session_timeout_ms=body.session_timeout_ms,
            rebalance_timeout_ms=(
                body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms
            ),
            protocol_type=body.protocol_type,
            protocols=[(p.name, p.metadata) for p in body.protocols],
            require_known_member_id=version >= 4,
        )
        try:
            reply = await self.runtime.call_with_reply(
                body.group_id, lambda shard, handle, now: shard.join_group(request, handle, now)
            )
        except CoordinatorError as exc:
            return m.JoinGroupResponse(
                error_code=exc.error, member_id=body.member_id, protocol_name=_name(None, version)
            )
        return m.JoinGroupResponse(
            error_code=reply.error,
            generation_id=reply.generation,
            protocol_type=reply.protocol_type,
            protocol_name=_name(reply.protocol_name, version),
            leader=reply.leader_id,
            skip_assignment=reply.skip_assignment and version >= 9,  # KIP-814
            member_id=reply.member_id,
            members=[
                m.JoinGroupResponse.JoinGroupResponseMember(
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                    metadata=member.metadata,
                )
                for member in reply.members
            ],
        )

    async def sync_group(self, body: Any, version: int, client_id: str, host: str) -> Any:
        request = SyncGroup(
            group_id=body.group_id,
            generation=body.generation_id,
            member_id=body.member_id,
            group_instance_id=body.group_instance_id if version >= 3 else None,
            protocol_type=body.protocol_type if version >= 5 else None,
            protocol_name=body.protocol_name if version >= 5 else None,
            assignments={a.member_id: a.assignment for a in body.assignments},
        )
        try:
            reply = await self.runtime.call_with_reply(
                body.group_id, lambda shard, handle, now: shard.sync_group(request, handle, now)
            )
        except CoordinatorError as exc:
            return m.SyncGroupResponse(error_code=exc.error, assignment=b"")
        return m.SyncGroupResponse(
            error_code=reply.error,
            protocol_type=reply.protocol_type,
            protocol_name=reply.protocol_name,
            assignment=reply.assignment,
        )

    async def heartbeat(self, body: Any, version: int, client_id: str, host: str) -> Any:
        request = Heartbeat(
            body.group_id,
            body.generation_id,
            body.member_id,
            body.group_instance_id if version >= 3 else None,
        )
        try:
            error = await self.runtime.call(
                body.group_id, lambda shard, now: shard.heartbeat(request, now)
            )
        except CoordinatorError as exc:
            error = exc.error
        return m.HeartbeatResponse(error_code=error)

    async def leave_group(self, body: Any, version: int, client_id: str, host: str) -> Any:
        if version >= 3:
            leaving = [LeavingMember(x.member_id, x.group_instance_id) for x in body.members]
        else:
            leaving = [LeavingMember(body.member_id)]
        try:
            reply = await self.runtime.call(
                body.group_id, lambda shard, now: shard.leave_group(body.group_id, leaving, now)
            )
        except CoordinatorError as exc:
            return m.LeaveGroupResponse(error_code=exc.error)
        if version < 3:
            error = reply.error
            if error is E.NONE and reply.members:
                error = reply.members[0][1]
            return m.LeaveGroupResponse(error_code=error)
        return m.LeaveGroupResponse(
            error_code=reply.error,
            members=[
                m.LeaveGroupResponse.MemberResponse(
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                    error_code=error,
                )
                for member, error in reply.members
            ],
        )

    # ------------------------------------------------------------------ offsets

    async def offset_commit(self, body: Any, version: int, client_id: str, host: str) -> Any:
        return await self.start_offset_commit(body, version, client_id, host)

    def start_offset_commit(
        self, body: Any, version: int, client_id: str, host: str
    ) -> asyncio.Future[Any]:
        """OffsetCommit, begun now (see `GroupCoordinatorRuntime.start_call`): the future gets
        the response body once the commit is replicated."""
        request = OffsetCommit(
            group_id=body.group_id,
            generation=body.generation_id_or_member_epoch if version >= 1 else -1,
            member_id=body.member_id if version >= 1 else UNKNOWN_MEMBER,
            group_instance_id=body.group_instance_id if version >= 7 else None,
            offsets=[
                OffsetToCommit(
                    topic.name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch if version >= 6 else -1,
                    p.committed_metadata,
                )
                for topic in body.topics
                for p in topic.partitions
            ],
            retention_ms=body.retention_time_ms if 2 <= version <= 4 else -1,
        )
        committing = self.runtime.start_call(
            body.group_id, lambda shard, now: shard.commit_offsets(request, now)
        )
        return asyncio.ensure_future(self._offset_commit_response(body, request, committing))

    async def _offset_commit_response(
        self, body: Any, request: OffsetCommit, committing: asyncio.Future[Any]
    ) -> Any:
        try:
            results = await committing
            errors = {(r.topic, r.partition): r.error for r in results}
        except CoordinatorError as exc:
            errors = {(o.topic, o.partition): exc.error for o in request.offsets}
        R = m.OffsetCommitResponse
        return R(
            topics=[
                R.OffsetCommitResponseTopic(
                    name=topic.name,
                    partitions=[
                        R.OffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=errors[(topic.name, p.partition_index)],
                        )
                        for p in topic.partitions
                    ],
                )
                for topic in body.topics
            ]
        )

    async def txn_offset_commit(self, body: Any, version: int, client_id: str, host: str) -> Any:
        """TxnOffsetCommit: the offsets are appended in the producer's transactional batch and
        answered once replicated; they count as the group's when the transaction commits."""
        request = TxnOffsetCommit(
            group_id=body.group_id,
            transactional_id=body.transactional_id,
            producer_id=body.producer_id,
            producer_epoch=body.producer_epoch,
            generation=body.generation_id if version >= 3 else -1,
            member_id=body.member_id if version >= 3 else UNKNOWN_MEMBER,
            group_instance_id=body.group_instance_id if version >= 3 else None,
            offsets=[
                OffsetToCommit(
                    topic.name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch if version >= 2 else -1,
                    p.committed_metadata,
                )
                for topic in body.topics
                for p in topic.partitions
            ],
        )
        errors: dict[tuple[str, int], ErrorCode]
        if not body.group_id:
            errors = {(o.topic, o.partition): E.INVALID_GROUP_ID for o in request.offsets}
        else:
            try:
                results = await self.runtime.call(
                    body.group_id,
                    lambda shard, now: shard.commit_transactional_offsets(request, now),
                )
                errors = {(r.topic, r.partition): r.error for r in results}
            except CoordinatorError as exc:
                errors = {(o.topic, o.partition): exc.error for o in request.offsets}
        R = m.TxnOffsetCommitResponse
        return R(
            topics=[
                R.TxnOffsetCommitResponseTopic(
                    name=topic.name,
                    partitions=[
                        R.TxnOffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=errors[(topic.name, p.partition_index)],
                        )
                        for p in topic.partitions
                    ],
                )
                for topic in body.topics
            ]
        )

    def _fetch_group(
        self, group_id: str, topics: Any, require_stable: bool
    ) -> tuple[ErrorCode, dict[str, list[Any]]]:
        """One group's offsets as {topic: [FetchedOffset]}, or an error for the group."""
        wanted = (
            None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
        )
        try:
            fetched = self.runtime.read(
                group_id, lambda shard: shard.fetch_offsets(group_id, wanted, require_stable)
            )
        except CoordinatorError as exc:
            return exc.error, {}
        by_topic: dict[str, list[Any]] = {}
        for f in fetched:
            by_topic.setdefault(f.topic, []).append(f)
        return E.NONE, by_topic

    async def offset_fetch(self, body: Any, version: int, client_id: str, host: str) -> Any:
        R = m.OffsetFetchResponse
        stable = bool(body.require_stable) if version >= 7 else False
        if version >= 8:
            groups = []
            for group in body.groups:
                error, by_topic = self._fetch_group(group.group_id, group.topics, stable)
                topics = _fetched_topics(
                    by_topic, R.OffsetFetchResponseTopics, R.OffsetFetchResponsePartitions
                )
                groups.append(
                    R.OffsetFetchResponseGroup(
                        group_id=group.group_id, error_code=error, topics=topics
                    )
                )
            return R(groups=groups)
        wanted = body.topics if (version >= 2 or body.topics is not None) else []
        error, by_topic = self._fetch_group(body.group_id, wanted, stable)
        if error is not E.NONE and wanted is not None:
            # Before v2 there is no group error: each partition carries it.
            by_topic = {
                t.name: [_Missing(t.name, p, error) for p in t.partition_indexes] for t in wanted
            }
        return R(
            error_code=error,
            topics=_fetched_topics(
                by_topic, R.OffsetFetchResponseTopic, R.OffsetFetchResponsePartition
            ),
        )

    async def offset_delete(self, body: Any, version: int, client_id: str, host: str) -> Any:
        R = m.OffsetDeleteResponse
        wanted = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
        try:
            error, results = await self.runtime.call(
                body.group_id,
                lambda shard, now: _offset_delete(shard, body.group_id, wanted),
            )
        except CoordinatorError as exc:
            return R(error_code=exc.error, topics=[])
        by_topic: dict[str, list[Any]] = {}
        for r in results:
            by_topic.setdefault(r.topic, []).append(
                R.OffsetDeleteResponsePartition(partition_index=r.partition, error_code=r.error)
            )
        return R(
            error_code=error,
            topics=[
                R.OffsetDeleteResponseTopic(name=name, partitions=partitions)
                for name, partitions in by_topic.items()
            ],
        )

    # ------------------------------------------------------------------ admin

    async def describe_groups(self, body: Any, version: int, client_id: str, host: str) -> Any:
        R = m.DescribeGroupsResponse
        described = []
        for group_id in body.groups:
            try:
                (d,) = self.runtime.read(
                    group_id, lambda shard, g=group_id: shard.describe_groups([g])
                )
            except CoordinatorError as exc:
                described.append(
                    R.DescribedGroup(
                        error_code=exc.error,
                        group_id=group_id,
                        group_state="",
                        protocol_type="",
                        protocol_data="",
                        members=[],
                        authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
                    )
                )
                continue
            described.append(
                R.DescribedGroup(
                    error_code=d.error,
                    group_id=d.group_id,
                    group_state=d.state,
                    protocol_type=d.protocol_type,
                    protocol_data=d.protocol_name,
                    members=[
                        R.DescribedGroupMember(
                            member_id=x.member_id,
                            group_instance_id=x.group_instance_id,
                            client_id=x.client_id,
                            client_host=x.client_host,
                            member_metadata=x.metadata,
                            member_assignment=x.assignment,
                        )
                        for x in d.members
                    ],
                    authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
                )
            )
        return R(groups=described)

    async def list_groups(self, body: Any, version: int, client_id: str, host: str) -> Any:
        R = m.ListGroupsResponse
        states = list(body.states_filter or []) if version >= 4 else []
        types = {t.lower() for t in (body.types_filter or [])} if version >= 5 else set()
        listed = []
        if not types or "classic" in types:
            for shard in self.runtime.shards():
                listed.extend(shard.list_groups(states))
        return R(
            error_code=E.NONE,
            groups=[
                R.ListedGroup(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                    group_type="classic",
                )
                for g in sorted(listed, key=lambda g: g.group_id)
            ],
        )

    async def delete_groups(self, body: Any, version: int, client_id: str, host: str) -> Any:
        R = m.DeleteGroupsResponse
        results = []
        for group_id in body.groups_names:
            try:
                errors = await self.runtime.call(
                    group_id, lambda shard, now, g=group_id: shard.delete_groups([g], now)
                )
                error = errors[group_id]
            except CoordinatorError as exc:
                error = exc.error
            results.append(R.DeletableGroupResult(group_id=group_id, error_code=error))
        return R(results=results)


class _Missing:
    """A partition's place in a pre-v2 OffsetFetch answer when the group cannot be read here."""

    def __init__(self, topic: str, partition: int, error: ErrorCode) -> None:
        self.topic, self.partition, self.error = topic, partition, error
        self.offset, self.leader_epoch, self.metadata = -1, -1, ""


def _fetched_topics(
    by_topic: dict[str, list[Any]], topic_cls: Any, partition_cls: Any
) -> list[Any]:
    """OffsetFetch's topics: v0-7 and v8+ name their structs differently, same fields."""
    return [
        topic_cls(
            name=topic,
            partitions=[
                partition_cls(
                    partition_index=f.partition,
                    committed_offset=f.offset,
                    committed_leader_epoch=f.leader_epoch,
                    metadata=f.metadata,
                    error_code=f.error,
                )
                for f in offsets
            ],
        )
        for topic, offsets in by_topic.items()
    ]


def _offset_delete(shard: Any, group_id: str, wanted: list[tuple[str, int]]) -> Any:
    error, results, effects = shard.delete_offsets(group_id, wanted)
    return (error, results), effects


def _name(protocol_name: str | None, version: int) -> str | None:
    """JoinGroupResponse's ProtocolName may be null only from v7."""
    return protocol_name if protocol_name is not None or version >= 7 else ""
