"""The group coordinator for one `__consumer_offsets` partition, without I/O (Kafka's classic
group protocol as its GroupCoordinator runs it).

How it works. Every request is a method call that takes plain values and `now_ms` and returns
`Effects`: records to append to the offsets partition, replies to send, timers to set or cancel.
A reply to a JoinGroup or SyncGroup that must wait for the rest of the group is held by the
member (`Member.awaiting_join` / `awaiting_sync` hold the caller's request handle) and returned
in the `Effects` of whichever later call or timer completes the phase. The runtime around the
shard appends `records` with acks=all, then sends `replies` (so a commit is answered only once
it is replicated), then calls `replay` for each record it appended; it calls `on_timer(key)`
when a timer's deadline passes.

State that must survive a failover reaches the log first: committed offsets, each group's
generation, members and assignment (written when the leader's SyncGroup completes a rebalance
and when a group becomes empty), and deletions as tombstones. `replay` is the only mutator of
committed offsets and the only way a group is rebuilt when a partition is loaded; membership
between two records (joins, heartbeats, leaves) is the live, in-memory part, as in Kafka.

Offsets committed in a transaction (TxnOffsetCommit, KIP-98; member checks of v3, KIP-447) are
appended in the producer's transactional batch and replayed as pending for that producer id,
not as the group's offsets. The transaction's marker (`TxnMarkerRecord`, read from the log on
load or reported by the node when WriteTxnMarkers writes it) makes them committed (COMMIT) or
drops them (ABORT). As in Kafka, a pending offset becomes committed only if no offset for the
same partition was replayed after it (Kafka compares record offsets; replay follows log order,
so the shard compares replay positions). OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT for a partition with pending transactional offsets, and a group with an
open transaction neither expires nor has its pending offsets expire.

The group state machine is in `classic_group.py`; this module holds the decisions: Kafka's
checks in Kafka's order, and its error for each fenced case (UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID, MEMBER_ID_REQUIRED, ...).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from epochlog.coordinator.group.classic_group import (
    ClassicGroup,
    CommittedOffset,
    GroupState,
    Member,
)
from epochlog.coordinator.group.operations import (
    EXPIRE_OFFSETS_TIMER,
    UNKNOWN_MEMBER,
    DescribedMember,
    Effects,
    FetchedOffset,
    GroupConfig,
    GroupDescription,
    Heartbeat,
    JoinedMember,
    JoinGroup,
    JoinGroupReply,
    LeaveGroupReply,
    LeavingMember,
    ListedGroup,
    OffsetCommit,
    PartitionError,
    SyncGroup,
    SyncGroupReply,
    TimerKey,
    TxnOffsetCommit,
    heartbeat_timer,
    join_timer,
    pending_member_timer,
    sync_timer,
)
from epochlog.coordinator.group.records import (
    GroupMetadataRecord,
    GroupRecord,
    GroupTombstone,
    MemberRecord,
    OffsetCommitRecord,
    OffsetTombstone,
    TxnMarkerRecord,
)
from epochlog.protocol.errors import ErrorCode

S = GroupState
E = ErrorCode
NO_OFFSET = -1

OffsetKey = tuple[str, str, int]  # group id, topic, partition


@dataclass(frozen=True)
class PendingTxnOffset:
    """An offset replayed from a producer's transactional batch, not yet committed or aborted;
    `position` is its place in replay (log) order."""

    offset: CommittedOffset
    position: int


# --------------------------------------------------------------------------- the shard


class GroupCoordinatorShard:
    def __init__(self, config: GroupConfig | None = None, *, new_member_id: Any = None) -> None:
        self.config = config or GroupConfig()
        self.groups: dict[str, ClassicGroup] = {}
        self.loading = True  # until the runtime has replayed the partition (`loaded`)
        # offsets appended but not yet replicated, per group (OffsetFetch's require_stable)
        self.pending_offsets: dict[str, dict[tuple[str, int], int]] = {}
        # transactional offsets replayed, by producer id, until its transaction's marker
        self.pending_txn_offsets: dict[int, dict[OffsetKey, PendingTxnOffset]] = {}
        # where in replay order each committed offset was replayed (Kafka's record offset)
        self._committed_at: dict[OffsetKey, int] = {}
        self._replayed = 0
        # Since this shard loaded (metrics): rebalances completed, offsets committed
        self.completed_rebalances = 0
        self.offset_commits = 0
        self._new_member_id = new_member_id or (lambda prefix: f"{prefix}-{uuid.uuid4()}")

    # ------------------------------------------------------------------------ loading

    def replay(self, record: GroupRecord) -> None:
        """Apply a record read back from the partition, or one just appended."""
        self._replayed += 1
        if isinstance(record, OffsetCommitRecord):
            group = self._group_for_replay(record.group_id)
            key = (record.topic, record.partition)
            full_key = (record.group_id, record.topic, record.partition)
            if record.is_transactional:
                self.pending_txn_offsets.setdefault(record.producer_id, {})[full_key] = (
                    PendingTxnOffset(record.offset, self._replayed)
                )
            else:
                group.offsets[key] = record.offset
                self._committed_at[full_key] = self._replayed
            self._settle_pending(record.group_id, key)
        elif isinstance(record, OffsetTombstone):
            group = self.groups.get(record.group_id)
            if group is not None:
                group.offsets.pop((record.topic, record.partition), None)
            full_key = (record.group_id, record.topic, record.partition)
            self._committed_at.pop(full_key, None)
            self._drop_pending_txn(lambda k: k == full_key)
            self._settle_pending(record.group_id, (record.topic, record.partition))
        elif isinstance(record, GroupMetadataRecord):
            if self.loading:  # live membership is newer than anything this record says
                self._load_group(record)
        elif isinstance(record, GroupTombstone):
            self.groups.pop(record.group_id, None)
            self.pending_offsets.pop(record.group_id, None)
            self._drop_pending_txn(lambda k: k[0] == record.group_id)
            for key in [k for k in self._committed_at if k[0] == record.group_id]:
                del self._committed_at[key]
        elif isinstance(record, TxnMarkerRecord):
            self._end_transaction(record.producer_id, record.committed)

    def _end_transaction(self, producer_id: int, committed: bool) -> None:
        """The producer's marker: its pending offsets become committed, or are dropped. A
        pending offset older (in replay order) than the partition's committed one is not
        applied: the later commit wins, as Kafka keeps the offset of the later record."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if pending is None or not committed:
            return
        for (group_id, topic, partition), entry in pending.items():
            full_key = (group_id, topic, partition)
            if self._committed_at.get(full_key, -1) > entry.position:
                continue
            self._group_for_replay(group_id).offsets[(topic, partition)] = entry.offset
            self._committed_at[full_key] = entry.position

    def _drop_pending_txn(self, matches: Callable[[OffsetKey], bool]) -> None:
        for producer_id in list(self.pending_txn_offsets):
            pending = self.pending_txn_offsets[producer_id]
            for key in [k for k in pending if matches(k)]:
                del pending[key]
            if not pending:
                del self.pending_txn_offsets[producer_id]

    def has_pending_txn_offset(self, group_id: str, topic: str, partition: int) -> bool:
        key = (group_id, topic, partition)
        return any(key in pending for pending in self.pending_txn_offsets.values())

    def open_transactions(self, group_id: str) -> set[int]:
        """Producer ids with pending offsets for the group."""
        return {
            producer_id
            for producer_id, pending in self.pending_txn_offsets.items()
            if any(k[0] == group_id for k in pending)
        }

    def loaded(self, now_ms: int) -> Effects:
        """The partition has been replayed: members of loaded groups get heartbeat timers."""
        self.loading = False
        effects = Effects()
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_heartbeat(effects, group, member, now_ms)
        effects.timers[EXPIRE_OFFSETS_TIMER] = now_ms + 60_000
        return effects

    def append_failed(self, records: Iterable[GroupRecord]) -> None:
        """Records the runtime could not append: their offsets are no longer pending."""
        for record in records:
            if isinstance(record, (OffsetCommitRecord, OffsetTombstone)):
                self._settle_pending(record.group_id, (record.topic, record.partition))

    def _group_for_replay(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id)
        return group

    def _load_group(self, record: GroupMetadataRecord) -> None:
        group = self._group_for_replay(record.group_id)
        group.members.clear()
        group.static_members.clear()
        group.generation = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol_name = record.protocol_name
        group.leader_id = record.leader_id
        group.state_timestamp_ms = record.current_state_timestamp_ms
        for m in record.members:
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocol_type=record.protocol_type,
                protocols=[(record.protocol_name or "", m.subscription)],
                assignment=m.assignment,
            )
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        group.state = S.STABLE if group.members else S.EMPTY
        if not group.members:
            group.leader_id = None

    def _settle_pending(self, group_id: str, key: tuple[str, int]) -> None:
        pending = self.pending_offsets.get(group_id)
        if pending is None or key not in pending:
            return
        pending[key] -= 1
        if pending[key] <= 0:
            del pending[key]
        if not pending:
            del self.pending_offsets[group_id]

    # ------------------------------------------------------------------------ JoinGroup

    def join_group(self, request: JoinGroup, handle: Any, now_ms: int) -> Effects:
        effects = Effects()

        def fail(error: ErrorCode, member_id: str = request.member_id) -> Effects:
            effects.reply(handle, JoinGroupReply(error, member_id=member_id))
            return effects

        if not request.group_id:
            return fail(E.INVALID_GROUP_ID)
        if not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return fail(E.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return fail(E.UNKNOWN_MEMBER_ID)
            group = self.groups[request.group_id] = ClassicGroup(request.group_id)
            group.state_timestamp_ms = now_ms
        if group.in_state(S.DEAD):
            return fail(E.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(request.protocol_type, request.protocols):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        if request.member_id == UNKNOWN_MEMBER:
            return self._join_unknown_member(group, request, handle, now_ms, effects)
        return self._join_known_member(group, request, handle, now_ms, effects)

    def _group_full(self, group: ClassicGroup) -> bool:
        return len(group.members) + len(group.pending_members) >= self.config.max_size

    def _join_unknown_member(
        self, group: ClassicGroup, request: JoinGroup, handle: Any, now_ms: int, effects: Effects
    ) -> Effects:
        instance_id = request.group_instance_id
        if self._group_full(group) and group.static_member_id(instance_id) is None:
            effects.reply(handle, JoinGroupReply(E.GROUP_MAX_SIZE_REACHED))
            return effects
        new_id = self._new_member_id(instance_id or request.client_id)
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                return self._rejoin_static_member(group, request, old_id, new_id, handle, now_ms)
            self._add_member_and_rebalance(group, request, new_id, handle, now_ms, effects)
            return effects
        if request.require_known_member_id:
            # KIP-394: hand out the id first; it counts as a member until it joins or expires.
            group.pending_members.add(new_id)
            effects.timers[pending_member_timer(group.group_id, new_id)] = (
                now_ms + request.session_timeout_ms
            )
            effects.reply(handle, JoinGroupReply(E.MEMBER_ID_REQUIRED, member_id=new_id))
            return effects
        self._add_member_and_rebalance(group, request, new_id, handle, now_ms, effects)
        return effects

    def _rejoin_static_member(
        self,
        group: ClassicGroup,
        request: JoinGroup,
        old_id: str,
        new_id: str,
        handle: Any,
        now_ms: int,
    ) -> Effects:
        """A static member restarted (KIP-345): its new id replaces the old, which is fenced."""
        effects = Effects()
        old = group.members[old_id]
        if old.awaiting_join is not None:
            effects.reply(old.awaiting_join, JoinGroupReply(E.FENCED_INSTANCE_ID, member_id=old_id))
            old.awaiting_join = None
        if old.awaiting_sync is not None:
            effects.reply(old.awaiting_sync, SyncGroupReply(E.FENCED_INSTANCE_ID))
            old.awaiting_sync = None
        effects.timers[heartbeat_timer(group.group_id, old_id)] = None
        assert request.group_instance_id is not None
        member = group.replace_static_member(request.group_instance_id, old_id, new_id)
        unchanged = member.same_protocols(request.protocols)
        member.client_id, member.client_host = request.client_id, request.client_host
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.protocols = list(request.protocols)
        if group.in_state(S.STABLE) and unchanged:
            # Nothing changed but the id: it keeps its assignment, no rebalance. A leader gets
            # the members back (told to skip the assignment where the version allows).
            is_leader = group.leader_id == new_id
            effects.reply(
                handle,
                self._join_reply(group, new_id, with_members=is_leader, skip=is_leader),
            )
            self._schedule_heartbeat(effects, group, member, now_ms)
            return effects
        member.awaiting_join = handle
        if group.in_state(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms, effects)
        elif group.in_state(S.PREPARING_REBALANCE):
            self._maybe_complete_join(group, now_ms, effects)
        return effects

    def _join_known_member(
        self, group: ClassicGroup, request: JoinGroup, handle: Any, now_ms: int, effects: Effects
    ) -> Effects:
        member_id = request.member_id
        if member_id in group.pending_members:
            effects.timers[pending_member_timer(group.group_id, member_id)] = None
            self._add_member_and_rebalance(group, request, member_id, handle, now_ms, effects)
            return effects
        error = self._member_error(group, member_id, request.group_instance_id)
        if error is not None:
            effects.reply(handle, JoinGroupReply(error, member_id=member_id))
            return effects
        member = group.members[member_id]
        if group.in_state(S.PREPARING_REBALANCE):
            self._update_member(member, request, handle)
            self._maybe_complete_join(group, now_ms, effects)
        elif group.in_state(S.COMPLETING_REBALANCE):
            if member.same_protocols(request.protocols):
                # A retried JoinGroup: the same answer again.
                is_leader = group.leader_id == member_id
                effects.reply(handle, self._join_reply(group, member_id, with_members=is_leader))
            else:
                self._update_member(member, request, handle)
                self._prepare_rebalance(group, now_ms, effects)
        elif group.in_state(S.STABLE):
            if group.leader_id == member_id or not member.same_protocols(request.protocols):
                self._update_member(member, request, handle)
                self._prepare_rebalance(group, now_ms, effects)
            else:
                effects.reply(handle, self._join_reply(group, member_id, with_members=False))
        else:  # Empty or Dead: nobody is a member
            effects.reply(handle, JoinGroupReply(E.UNKNOWN_MEMBER_ID, member_id=member_id))
        return effects

    def _member_error(
        self, group: ClassicGroup, member_id: str, instance_id: str | None
    ) -> ErrorCode | None:
        """Kafka's member checks: a static id bound to another member is fenced; an id the group
        does not know is unknown."""
        if instance_id is not None:
            bound = group.static_member_id(instance_id)
            if bound is not None and bound != member_id:
                return E.FENCED_INSTANCE_ID
        if not group.has_member(member_id):
            return E.UNKNOWN_MEMBER_ID
        return None

    @staticmethod
    def _update_member(member: Member, request: JoinGroup, handle: Any) -> None:
        member.protocols = list(request.protocols)
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.client_id, member.client_host = request.client_id, request.client_host
        member.awaiting_join = handle

    def _add_member_and_rebalance(
        self,
        group: ClassicGroup,
        request: JoinGroup,
        member_id: str,
        handle: Any,
        now_ms: int,
        effects: Effects,
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=list(request.protocols),
            awaiting_join=handle,
        )
        group.add_member(member)
        group.last_member_joined_ms = now_ms
        if group.in_state(S.PREPARING_REBALANCE):
            self._maybe_complete_join(group, now_ms, effects)
        else:
            self._prepare_rebalance(group, now_ms, effects)

    # ------------------------------------------------------------------------ the join phase

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int, effects: Effects) -> None:
        if group.in_state(S.COMPLETING_REBALANCE):
            # Members waiting for the assignment of a generation that will not be: they rejoin.
            for member in group.members.values():
                if member.awaiting_sync is not None:
                    effects.reply(member.awaiting_sync, SyncGroupReply(E.REBALANCE_IN_PROGRESS))
                    member.awaiting_sync = None
            effects.timers[sync_timer(group.group_id)] = None
        was_empty = group.in_state(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE, now_ms)
        group.last_member_joined_ms = None
        if was_empty and self.config.initial_rebalance_delay_ms > 0:
            # KIP-134's initial delay: wait for more members to arrive, the delay running again
            # from each new member's join, up to the rebalance timeout. (Kafka's
            # InitialDelayedJoin checks only at the end of each delay and then waits a whole
            # one more, so members that all start together wait twice the delay there.)
            group.join_deadline_ms = now_ms + self.config.initial_rebalance_delay_ms
            group.initial_join_deadline_limit_ms = now_ms + group.rebalance_timeout_ms()
        else:
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
            group.initial_join_deadline_limit_ms = None
            self._maybe_complete_join(group, now_ms, effects)
        if group.in_state(S.PREPARING_REBALANCE):
            effects.timers[join_timer(group.group_id)] = group.join_deadline_ms

    def _initial_delay_extended_to(self, group: ClassicGroup) -> int | None:
        """When the initial delay ends given the latest member's join (None outside it)."""
        limit, last = group.initial_join_deadline_limit_ms, group.last_member_joined_ms
        if limit is None or last is None:
            return None
        return min(last + self.config.initial_rebalance_delay_ms, limit)

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int, effects: Effects) -> None:
        if group.initial_join_deadline_limit_ms is not None:
            return  # the initial delay runs its course
        if group.all_members_joined():
            self._complete_join(group, now_ms, effects)

    def _complete_join(self, group: ClassicGroup, now_ms: int, effects: Effects) -> None:
        effects.timers[join_timer(group.group_id)] = None
        group.join_deadline_ms = group.initial_join_deadline_limit_ms = None
        # Dynamic members that did not rejoin in time are gone; static ones keep their place.
        for member in list(group.members.values()):
            if member.awaiting_join is None and member.group_instance_id is None:
                group.remove_member(member.member_id)
                effects.timers[heartbeat_timer(group.group_id, member.member_id)] = None
        group.generation += 1
        self.completed_rebalances += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition_to(S.EMPTY, now_ms)
            effects.records.append(self._group_record(group, now_ms))
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id is None or group.members[group.leader_id].awaiting_join is None:
            joined = [m.member_id for m in group.members.values() if m.awaiting_join is not None]
            group.leader_id = joined[0] if joined else next(iter(group.members))
        group.transition_to(S.COMPLETING_REBALANCE, now_ms)
        for member in group.members.values():
            if member.awaiting_join is not None:
                is_leader = member.member_id == group.leader_id
                effects.reply(
                    member.awaiting_join,
                    self._join_reply(group, member.member_id, with_members=is_leader),
                )
                member.awaiting_join = None
            self._schedule_heartbeat(effects, group, member, now_ms)
        effects.timers[sync_timer(group.group_id)] = now_ms + group.rebalance_timeout_ms()

    def _join_reply(
        self, group: ClassicGroup, member_id: str, *, with_members: bool, skip: bool = False
    ) -> JoinGroupReply:
        members: tuple[JoinedMember, ...] = ()
        if with_members and group.protocol_name is not None:
            members = tuple(
                JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            )
        return JoinGroupReply(
            E.NONE,
            member_id=member_id,
            generation=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            members=members,
            skip_assignment=skip,
        )

    # ------------------------------------------------------------------------ SyncGroup

    def sync_group(self, request: SyncGroup, handle: Any, now_ms: int) -> Effects:
        effects = Effects()
        group = self.groups.get(request.group_id)
        error: ErrorCode | None
        if group is None or group.in_state(S.DEAD):
            error = E.UNKNOWN_MEMBER_ID if group is None else E.COORDINATOR_NOT_AVAILABLE
        else:
            error = self._member_error(group, request.member_id, request.group_instance_id)
        if error is None and group is not None:
            if request.generation != group.generation:
                error = E.ILLEGAL_GENERATION
            elif (request.protocol_type and request.protocol_type != group.protocol_type) or (
                request.protocol_name and request.protocol_name != group.protocol_name
            ):
                error = E.INCONSISTENT_GROUP_PROTOCOL
            elif group.in_state(S.EMPTY):
                error = E.UNKNOWN_MEMBER_ID
            elif group.in_state(S.PREPARING_REBALANCE):
                error = E.REBALANCE_IN_PROGRESS
        if error is not None or group is None:
            effects.reply(handle, SyncGroupReply(error or E.UNKNOWN_MEMBER_ID))
            return effects
        member = group.members[request.member_id]
        self._schedule_heartbeat(effects, group, member, now_ms)
        if group.in_state(S.STABLE):
            effects.reply(handle, self._sync_reply(group, member))
            return effects
        # CompletingRebalance: wait for the leader's assignment.
        member.awaiting_sync = handle
        if request.member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = request.assignments.get(m.member_id, b"")
            effects.records.append(self._group_record(group, now_ms))
            group.transition_to(S.STABLE, now_ms)
            effects.timers[sync_timer(group.group_id)] = None
            for m in group.members.values():
                if m.awaiting_sync is not None:
                    effects.reply(m.awaiting_sync, self._sync_reply(group, m))
                    m.awaiting_sync = None
        return effects

    @staticmethod
    def _sync_reply(group: ClassicGroup, member: Member) -> SyncGroupReply:
        return SyncGroupReply(E.NONE, group.protocol_type, group.protocol_name, member.assignment)

    # ------------------------------------------------------------------------ Heartbeat

    def heartbeat(self, request: Heartbeat, now_ms: int) -> tuple[ErrorCode, Effects]:
        effects = Effects()
        group = self.groups.get(request.group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID, effects
        if group.in_state(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, effects
        if group.in_state(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID, effects
        error = self._member_error(group, request.member_id, request.group_instance_id)
        if error is not None:
            return error, effects
        if request.generation != group.generation:
            return E.ILLEGAL_GENERATION, effects
        self._schedule_heartbeat(effects, group, group.members[request.member_id], now_ms)
        if group.in_state(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS, effects
        return E.NONE, effects

    def _schedule_heartbeat(
        self, effects: Effects, group: ClassicGroup, member: Member, now_ms: int
    ) -> None:
        effects.timers[heartbeat_timer(group.group_id, member.member_id)] = (
            now_ms + member.session_timeout_ms
        )

    # ------------------------------------------------------------------------ LeaveGroup

    def leave_group(
        self, group_id: str, leaving: list[LeavingMember], now_ms: int
    ) -> tuple[LeaveGroupReply, Effects]:
        effects = Effects()
        group = self.groups.get(group_id)
        if group is None:
            return LeaveGroupReply(E.UNKNOWN_MEMBER_ID), effects
        if group.in_state(S.DEAD):
            return LeaveGroupReply(E.COORDINATOR_NOT_AVAILABLE), effects
        results: list[tuple[LeavingMember, ErrorCode]] = []
        removed = False
        for leaver in leaving:
            member_id = leaver.member_id
            if leaver.group_instance_id is not None:
                bound = group.static_member_id(leaver.group_instance_id)
                if bound is None:
                    results.append((leaver, E.UNKNOWN_MEMBER_ID))
                    continue
                if member_id not in (UNKNOWN_MEMBER, bound):
                    results.append((leaver, E.FENCED_INSTANCE_ID))
                    continue
                member_id = bound
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                effects.timers[pending_member_timer(group_id, member_id)] = None
                results.append((leaver, E.NONE))
                removed = True
                continue
            if not group.has_member(member_id):
                results.append((leaver, E.UNKNOWN_MEMBER_ID))
                continue
            self._remove_member(group, member_id, effects)
            results.append((leaver, E.NONE))
            removed = True
        if removed:
            self._after_member_removed(group, now_ms, effects)
        return LeaveGroupReply(E.NONE, tuple(results)), effects

    def _remove_member(self, group: ClassicGroup, member_id: str, effects: Effects) -> None:
        member = group.remove_member(member_id)
        effects.timers[heartbeat_timer(group.group_id, member_id)] = None
        if member is not None and member.awaiting_join is not None:
            effects.reply(member.awaiting_join, JoinGroupReply(E.UNKNOWN_MEMBER_ID, member_id))
        if member is not None and member.awaiting_sync is not None:
            effects.reply(member.awaiting_sync, SyncGroupReply(E.UNKNOWN_MEMBER_ID))

    def _after_member_removed(self, group: ClassicGroup, now_ms: int, effects: Effects) -> None:
        if group.in_state(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms, effects)
        elif group.in_state(S.PREPARING_REBALANCE):
            self._maybe_complete_join(group, now_ms, effects)

    # ------------------------------------------------------------------------ timers

    def on_timer(self, key: TimerKey, now_ms: int) -> Effects:
        effects = Effects()
        kind = key[0]
        if kind == EXPIRE_OFFSETS_TIMER[0]:
            self._expire_offsets(now_ms, effects)
            effects.timers[EXPIRE_OFFSETS_TIMER] = now_ms + 60_000
            return effects
        group = self.groups.get(key[1])
        if group is None:
            return effects
        if kind == "heartbeat":
            member = group.members.get(key[2])
            if member is None:
                return effects
            if member.awaiting_join is not None:
                # A member waiting in JoinGroup cannot heartbeat; the join phase's deadline
                # decides for it.
                self._schedule_heartbeat(effects, group, member, now_ms)
                return effects
            self._remove_member(group, member.member_id, effects)
            self._after_member_removed(group, now_ms, effects)
        elif kind == "pending":
            if key[2] in group.pending_members:
                group.pending_members.discard(key[2])
                if group.in_state(S.PREPARING_REBALANCE):
                    self._maybe_complete_join(group, now_ms, effects)
        elif kind == "join" and group.in_state(S.PREPARING_REBALANCE):
            extended = self._initial_delay_extended_to(group)
            if extended is not None and extended > now_ms:
                group.join_deadline_ms = extended
                effects.timers[join_timer(group.group_id)] = extended
            else:
                self._complete_join(group, now_ms, effects)
        elif kind == "sync" and group.in_state(S.COMPLETING_REBALANCE):
            # The leader never sent the assignment: members that did not sync leave, the rest
            # rejoin.
            for member in list(group.members.values()):
                if member.awaiting_sync is None:
                    self._remove_member(group, member.member_id, effects)
            self._prepare_rebalance(group, now_ms, effects)
        return effects

    # ------------------------------------------------------------------------ offsets

    def commit_offsets(
        self, request: OffsetCommit, now_ms: int
    ) -> tuple[list[PartitionError], Effects]:
        effects = Effects()
        group = self.groups.get(request.group_id)
        error: ErrorCode | None = None
        if not request.group_id:
            error = E.INVALID_GROUP_ID
        elif group is None:
            if request.generation < 0:  # a consumer that assigns partitions itself
                group = self.groups[request.group_id] = ClassicGroup(request.group_id)
                group.state_timestamp_ms = now_ms
            else:
                error = E.ILLEGAL_GENERATION
        elif group.in_state(S.DEAD):
            error = E.COORDINATOR_NOT_AVAILABLE
        elif request.generation < 0 and group.in_state(S.EMPTY):
            pass
        elif group.in_state(S.COMPLETING_REBALANCE):
            error = E.REBALANCE_IN_PROGRESS
        else:
            error = self._member_error(group, request.member_id, request.group_instance_id)
            if error is None and request.generation != group.generation:
                error = E.ILLEGAL_GENERATION
            if error is None:
                member = group.members[request.member_id]
                self._schedule_heartbeat(effects, group, member, now_ms)
        results: list[PartitionError] = []
        for item in request.offsets:
            item_error = error
            if item_error is None and len((item.metadata or "").encode()) > (
                self.config.offset_metadata_max_bytes
            ):
                item_error = E.OFFSET_METADATA_TOO_LARGE
            results.append(PartitionError(item.topic, item.partition, item_error or E.NONE))
            if item_error is None:
                expire = now_ms + request.retention_ms if request.retention_ms >= 0 else None
                offset = CommittedOffset(
                    item.offset, item.leader_epoch, item.metadata or "", now_ms, expire
                )
                effects.records.append(
                    OffsetCommitRecord(request.group_id, item.topic, item.partition, offset)
                )
                self.offset_commits += 1
                pending = self.pending_offsets.setdefault(request.group_id, {})
                key = (item.topic, item.partition)
                pending[key] = pending.get(key, 0) + 1
        return results, effects

    def commit_transactional_offsets(
        self, request: TxnOffsetCommit, now_ms: int
    ) -> tuple[list[PartitionError], Effects]:
        """TxnOffsetCommit: Kafka's checks (a group that does not exist is created for a
        request without a generation; a member that names itself must be the group's, at its
        generation; a transactional commit is not refused during a rebalance), then one record
        per partition in the producer's transactional batch. The offsets stay pending until the
        transaction's marker."""
        effects = Effects()
        group = self.groups.get(request.group_id)
        error: ErrorCode | None = None
        if not request.group_id:
            error = E.INVALID_GROUP_ID
        elif request.producer_id < 0:
            error = E.INVALID_REQUEST  # only a producer's batch can be transactional
        elif group is None:
            if request.generation < 0:
                group = self.groups[request.group_id] = ClassicGroup(request.group_id)
                group.state_timestamp_ms = now_ms
            else:
                error = E.ILLEGAL_GENERATION
        elif group.in_state(S.DEAD):
            error = E.COORDINATOR_NOT_AVAILABLE
        elif request.generation < 0 and group.in_state(S.EMPTY):
            pass
        elif (
            request.generation >= 0
            or request.member_id != UNKNOWN_MEMBER
            or request.group_instance_id is not None
        ):
            error = self._txn_member_error(group, request)
            if error is None and request.generation != group.generation:
                error = E.ILLEGAL_GENERATION
        results: list[PartitionError] = []
        for item in request.offsets:
            item_error = error
            if item_error is None and len((item.metadata or "").encode()) > (
                self.config.offset_metadata_max_bytes
            ):
                item_error = E.OFFSET_METADATA_TOO_LARGE
            results.append(PartitionError(item.topic, item.partition, item_error or E.NONE))
            if item_error is None:
                offset = CommittedOffset(
                    item.offset, item.leader_epoch, item.metadata or "", now_ms, None
                )
                effects.records.append(
                    OffsetCommitRecord(
                        request.group_id,
                        item.topic,
                        item.partition,
                        offset,
                        producer_id=request.producer_id,
                        producer_epoch=request.producer_epoch,
                    )
                )
                pending = self.pending_offsets.setdefault(request.group_id, {})
                key = (item.topic, item.partition)
                pending[key] = pending.get(key, 0) + 1
        return results, effects

    @staticmethod
    def _txn_member_error(group: ClassicGroup, request: TxnOffsetCommit) -> ErrorCode | None:
        """Kafka's ClassicGroup.validateMember: a static id must be bound to this member."""
        if request.group_instance_id is not None:
            bound = group.static_member_id(request.group_instance_id)
            if bound is None:
                return E.UNKNOWN_MEMBER_ID
            if bound != request.member_id:
                return E.FENCED_INSTANCE_ID
            return None
        if not group.has_member(request.member_id):
            return E.UNKNOWN_MEMBER_ID
        return None

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[tuple[str, int]] | None,
        require_stable: bool = False,
    ) -> list[FetchedOffset]:
        """Committed offsets (-1 where none); all of the group's when `partitions` is None."""
        group = self.groups.get(group_id)
        committed = group.offsets if group is not None else {}
        pending = self.pending_offsets.get(group_id, {}) if require_stable else {}
        keys = sorted(committed) if partitions is None else partitions
        result = []
        for topic, partition in keys:
            if (topic, partition) in pending or (
                require_stable and self.has_pending_txn_offset(group_id, topic, partition)
            ):
                result.append(
                    FetchedOffset(topic, partition, NO_OFFSET, -1, "", E.UNSTABLE_OFFSET_COMMIT)
                )
                continue
            found = committed.get((topic, partition))
            if found is None:
                result.append(FetchedOffset(topic, partition, NO_OFFSET, -1, ""))
            else:
                result.append(
                    FetchedOffset(
                        topic, partition, found.offset, found.leader_epoch, found.metadata
                    )
                )
        return result

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, list[PartitionError], Effects]:
        """OffsetDelete: refused per partition while a live consumer group subscribes to it."""
        effects = Effects()
        group = self.groups.get(group_id)
        if group is None or group.in_state(S.DEAD):
            return E.GROUP_ID_NOT_FOUND, [], effects
        subscribed: set[str] = set()
        if not group.in_state(S.EMPTY):
            topics = group.subscribed_topics()
            if topics is None and group.protocol_type is not None:
                return E.NON_EMPTY_GROUP, [], effects
            subscribed = topics or set()
        results = []
        for topic, partition in partitions:
            if topic in subscribed:
                results.append(PartitionError(topic, partition, E.GROUP_SUBSCRIBED_TO_TOPIC))
                continue
            results.append(PartitionError(topic, partition, E.NONE))
            if (topic, partition) in group.offsets:
                effects.records.append(OffsetTombstone(group_id, topic, partition))
        return E.NONE, results, effects

    def _expire_offsets(self, now_ms: int, effects: Effects) -> None:
        """offsets.retention.minutes: an empty group's offsets expire that long after it became
        empty; a consumer group's offsets of topics it no longer subscribes to, that long after
        their commit. A group left with neither members nor offsets is deleted."""
        retention = self.config.offsets_retention_ms
        for group in list(self.groups.values()):
            if group.in_state(S.DEAD):
                continue
            subscribed = None if group.in_state(S.EMPTY) else group.subscribed_topics()
            if not group.in_state(S.EMPTY) and subscribed is None:
                continue
            expired = []
            for (topic, partition), committed in group.offsets.items():
                if self.has_pending_txn_offset(group.group_id, topic, partition):
                    continue  # its transaction decides first
                if committed.expire_timestamp_ms is not None:
                    due = committed.expire_timestamp_ms
                elif group.in_state(S.EMPTY):
                    due = (group.state_timestamp_ms or committed.commit_timestamp_ms) + retention
                else:
                    if subscribed is not None and topic in subscribed:
                        continue
                    due = committed.commit_timestamp_ms + retention
                if now_ms >= due:
                    expired.append((topic, partition))
            for topic, partition in expired:
                effects.records.append(OffsetTombstone(group.group_id, topic, partition))
            if (
                group.in_state(S.EMPTY)
                and len(expired) == len(group.offsets)
                and not self.open_transactions(group.group_id)
            ):
                effects.records.append(GroupTombstone(group.group_id))
                group.transition_to(S.DEAD, now_ms)

    # ------------------------------------------------------------------------ admin

    def describe_groups(self, group_ids: list[str]) -> list[GroupDescription]:
        result = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                result.append(GroupDescription(group_id, E.NONE, S.DEAD.value, "", ""))
                continue
            stable = group.in_state(S.STABLE)
            members = tuple(
                DescribedMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata_for(group.protocol_name)
                    if stable and group.protocol_name and m.supports(group.protocol_name)
                    else b"",
                    m.assignment if stable else b"",
                )
                for m in group.members.values()
            )
            result.append(
                GroupDescription(
                    group_id,
                    E.NONE,
                    group.state.value,
                    group.protocol_type or "",
                    group.protocol_name or "" if stable else "",
                    members,
                )
            )
        return result

    def list_groups(self, states: Iterable[str] = ()) -> list[ListedGroup]:
        wanted = {s.lower() for s in states}
        return [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.in_state(S.DEAD) and (not wanted or g.state.value.lower() in wanted)
        ]

    def delete_groups(
        self, group_ids: list[str], now_ms: int
    ) -> tuple[dict[str, ErrorCode], Effects]:
        effects = Effects()
        errors: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.in_state(S.DEAD):
                errors[group_id] = E.GROUP_ID_NOT_FOUND
            elif not group.in_state(S.EMPTY):
                errors[group_id] = E.NON_EMPTY_GROUP
            else:
                # Kafka (3.8+) deletes pending transactional offsets with the group: one
                # tombstone per partition, committed or pending.
                pending = {
                    (k[1], k[2])
                    for producer in self.pending_txn_offsets.values()
                    for k in producer
                    if k[0] == group_id
                }
                for topic, partition in sorted(set(group.offsets) | pending):
                    effects.records.append(OffsetTombstone(group_id, topic, partition))
                effects.records.append(GroupTombstone(group_id))
                group.transition_to(S.DEAD, now_ms)
                errors[group_id] = E.NONE
        return errors, effects

    # ------------------------------------------------------------------------ records

    def _group_record(self, group: ClassicGroup, now_ms: int) -> GroupMetadataRecord:
        protocol = group.protocol_name
        return GroupMetadataRecord(
            group_id=group.group_id,
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol_name=protocol,
            leader_id=group.leader_id,
            current_state_timestamp_ms=now_ms,
            members=tuple(
                MemberRecord(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata_for(protocol) if protocol else b"",
                    assignment=m.assignment,
                )
                for m in group.members.values()
            ),
        )
