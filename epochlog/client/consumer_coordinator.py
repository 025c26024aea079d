"""The consumer's side of a classic group: the I/O shell around `membership` and `assignors`.

How it works. `ConsumerCoordinator` belongs to an `AsyncConsumer` with a `group.id`. It runs two
tasks on the consumer's loop, and does what `membership.GroupMembership` decides:

- The **group task** finds the coordinator (FindCoordinator to the least loaded broker, batched
  keys from v4), then, whenever the member must (re)join: prepares (auto commit, then the
  rebalance callbacks: under the eager protocol every partition is revoked; under the
  cooperative one only those of topics no longer subscribed; a member whose generation was
  reset *loses* its partitions instead), sends JoinGroup with one Subscription per configured
  assignor, runs the assignor if it is the leader, sends SyncGroup and takes the Assignment:
  partitions no longer assigned are revoked (cooperative: after committing them, and the member
  rejoins so the second rebalance can hand them over), new ones are assigned and start from the
  group's committed offsets (OffsetFetch; auto.offset.reset where none).
- The **heartbeat task** sends Heartbeat every heartbeat.interval.ms while SYNCING or STABLE,
  marks the coordinator unknown when no heartbeat got through within session.timeout.ms, and
  leaves the group when the application did not poll within max.poll.interval.ms (Kafka's
  semantics: the member is out and its partitions are lost; it rejoins at its next poll).

Group requests go over a connection of their own to the coordinator (Java's separate
coordinator node id): a JoinGroup can wait for the whole rebalance timeout, and the broker
answers each connection's requests in order, so sharing the fetch connection would stall
fetches. A connection failure or NOT_COORDINATOR drops it and the coordinator is looked up
again after retry.backoff.ms.

Commits (OffsetCommit, with the generation and member id, or generation -1 for a consumer that
assigns its partitions itself) and committed() (OffsetFetch, require_stable under
read_committed) go to the coordinator too, retried on retriable errors until their timeout.
Auto commit (enable.auto.commit) commits the positions returned so far from `poll()` every
auto.commit.interval.ms, before partitions are revoked, and on close.

Rebalance callbacks are awaited through `listener`, which the consumer supplies: the asyncio
consumer calls them on its loop, the blocking one hands them to the thread that polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from epochlog.aio import wait_for
from epochlog.client.assignors import ASSIGNORS, MemberSubscription, RebalanceProtocol
from epochlog.client.assignors import rebalance_protocol as protocol_of
from epochlog.client.config import ClientConfig
from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import ClientClosedError, ClientError, KafkaError
from epochlog.client.group_offsets import (
    OffsetAndMetadata,
    offset_commit_errors,
    offset_commit_request,
    offset_fetch_request,
    offset_fetch_result,
)
from epochlog.client.membership import (
    Generation,
    GroupMembership,
    HeartbeatTimers,
    MemberState,
    Outcome,
    Reaction,
    Reset,
)
from epochlog.client.metadata import TopicPartition
from epochlog.client.network import NetworkClient
from epochlog.client.subscription import SubscriptionState
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from epochlog.protocol.errors import DecodeError, ErrorCode

log = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0
ASSIGNED, REVOKED, LOST = "assigned", "revoked", "lost"
Listener = Callable[[str, list[TopicPartition]], Awaitable[None]]
_COORDINATOR_ERRORS = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
_GROUP_COMMIT_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.REBALANCE_IN_PROGRESS,
    }
)


class ConsumerCoordinator:
    """One consumer's group membership, commits and committed offsets; see the module docstring."""

    def __init__(
        self,
        config: ClientConfig,
        net: NetworkClient,
        subs: SubscriptionState,
        listener: Listener,
        wake_fetcher: Callable[[], None],
    ) -> None:
        self.config = config
        self.group_id: str = config["group.id"]
        self._net = net
        self._subs = subs
        self._listener = listener
        self._wake_fetcher = wake_fetcher
        self.membership = GroupMembership(self.group_id, config["group.instance.id"] or None)
        self.assignors: tuple[str, ...] = config["partition.assignment.strategy"]
        self.protocol = protocol_of(self.assignors)
        self._backoff_ms: int = config["retry.backoff.ms"]
        self._request_timeout_ms: int = config["request.timeout.ms"]
        self._rebalance_timeout_ms: int = config["max.poll.interval.ms"]
        self._auto_commit: bool = config["enable.auto.commit"]
        self._auto_commit_interval_ms: int = config["auto.commit.interval.ms"]
        self._require_stable = config["isolation.level"] == "read_committed"
        now = net.now_ms()
        self.timers = HeartbeatTimers(
            config["session.timeout.ms"],
            config["heartbeat.interval.ms"],
            config["max.poll.interval.ms"],
            self._backoff_ms,
            now,
        )
        self._next_auto_commit_ms = now + self._auto_commit_interval_ms
        # what the application subscribed to
        self._topics: frozenset[str] = frozenset()  # explicit topics, or the pattern's matches
        self._pattern: re.Pattern[str] | None = None
        self._subscribed = False
        self._joined_topics: frozenset[str] | None = None
        self._assignment_snapshot: dict[str, int] | None = None  # the leader's partition counts
        self._last_cluster: object = None
        # the coordinator and our connection to it
        self.coordinator_id: int | None = None
        self._coordinator_address: tuple[str, int] | None = None
        self._conn: BrokerConnection | None = None
        self._find_backoff_until_ms = 0.0
        self._join_backoff_until_ms = 0.0
        self._needs_join_prepare = True
        self._lost_to_report: set[TopicPartition] = set()
        self.revoking: set[TopicPartition] = set()  # poll() returns nothing of these
        self._waiting_for_poll = False  # left on max.poll.interval.ms: rejoin at the next poll
        self._errors: list[ClientError] = []  # raised by the next poll()
        self._fatal: ClientError | None = None
        self._commits: set[asyncio.Task[Any]] = set()
        self._wakeup = asyncio.Event()
        self._heartbeat_wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        net.add_listener(self._on_cluster_change)

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [
                loop.create_task(self._run(), name=f"group {self.group_id}"),
                loop.create_task(self._heartbeat_loop(), name=f"heartbeat {self.group_id}"),
            ]

    async def close(self, timeout_ms: float) -> None:
        """Commit (auto commit), revoke, leave (dynamic members), stop."""
        if self._closed:
            return
        try:
            await wait_for(
                self._leave_prepare_and_leave("the consumer is being closed"), timeout_ms / 1000
            )
        except (TimeoutError, ClientError) as exc:
            log.warning("group %s: closing without a clean leave: %s", self.group_id, exc)
        self._closed = True
        self.membership.close()
        for task in self._tasks:
            task.cancel()
        self._wakeup.set()
        self._heartbeat_wakeup.set()
        await asyncio.gather(*self._tasks, *self._commits, return_exceptions=True)
        await self._drop_connection()

    # ---------------------------------------------------------------- subscription

    @property
    def subscribed(self) -> bool:
        return self._subscribed

    def subscription(self) -> frozenset[str]:
        return self._topics

    def subscribe(self, topics: Iterable[str] | None, pattern: str | None) -> None:
        if pattern is not None:
            self._pattern = re.compile(pattern)
            self._net.want_all_topics()
            self._topics = self._matching_topics()
        else:
            self._pattern = None
            self._topics = frozenset(topics or ())
            self._net.want_topics(self._topics)
        self._subscribed = True
        if self._joined_topics is not None and self._joined_topics != self._topics:
            self.membership.request_rejoin("the subscription changed")
        self._wakeup.set()

    async def unsubscribe(self) -> None:
        await self._leave_prepare_and_leave("the consumer unsubscribed")
        self._subscribed = False
        self._topics = frozenset()
        self._pattern = None
        self._joined_topics = None

    def _matching_topics(self) -> frozenset[str]:
        assert self._pattern is not None
        exclude_internal = self.config["exclude.internal.topics"]
        return frozenset(
            name
            for name, info in self._net.cluster.topics.items()
            if self._pattern.fullmatch(name) and not (exclude_internal and info.is_internal)
        )

    def _on_cluster_change(self) -> None:
        """Metadata changed (or a connection did): re-evaluate the pattern, and, as the leader,
        rejoin when a subscribed topic's partition count changed."""
        cluster = self._net.cluster
        if cluster is self._last_cluster or self._closed:
            return
        self._last_cluster = cluster
        if self._pattern is not None and self._subscribed:
            matched = self._matching_topics()
            if matched != self._topics:
                log.info("group %s: pattern now matches %s", self.group_id, sorted(matched))
                self._topics = matched
                if self._joined_topics is not None and self._joined_topics != matched:
                    self.membership.request_rejoin("the pattern matches other topics")
                    self._wakeup.set()
        if self._assignment_snapshot is not None and self.membership.is_leader:
            for topic, count in self._assignment_snapshot.items():
                now_count = cluster.partition_count(topic)
                if now_count is not None and now_count != count:
                    self.membership.request_rejoin(f"{topic} has {now_count} partitions now")
                    self._assignment_snapshot = None
                    self._wakeup.set()
                    break

    # ---------------------------------------------------------------- called by the consumer

    def wake(self) -> None:
        """Something changed (an assign() in the group, say): look at it now."""
        self._wakeup.set()

    def polled(self) -> None:
        """The application polled: the poll interval starts again; rejoin if we had left."""
        self.timers.polled(self._net.now_ms())
        if self._waiting_for_poll:
            self._waiting_for_poll = False
            self._wakeup.set()
            self._heartbeat_wakeup.set()
        if self._auto_commit:
            self._maybe_auto_commit()

    def raise_pending_errors(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._errors:
            error = self._errors.pop(0)
            raise error

    def rebalancing(self) -> bool:
        return self._subscribed and self.membership.state is not MemberState.STABLE

    # ---------------------------------------------------------------- the group task

    async def _run(self) -> None:
        while not self._closed:
            self._wakeup.clear()
            try:
                wait_ms = await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("group %s: step failed", self.group_id)
                wait_ms = self._backoff_ms
            if wait_ms > 0:
                with contextlib.suppress(TimeoutError):
                    timeout = None if wait_ms == float("inf") else wait_ms / 1000
                    await wait_for(self._wakeup.wait(), timeout)

    async def _step(self) -> float:
        member = self.membership
        now = self._net.now_ms()
        if self._fatal is not None or member.state is MemberState.CLOSED:
            return float("inf")
        if self._subscribed and self._waiting_for_poll:
            return float("inf")
        if (
            member.state is MemberState.STABLE
            and self._joined_topics is not None
            and self._joined_topics != self._topics
        ):
            # Java's rejoinNeededOrPending: checked every time, not a one-shot flag, so a
            # change that arrived while a rebalance was completing is not forgotten
            member.request_rejoin("the subscription changed since the last join")
        needs_coordinator = (self._subscribed and member.needs_join()) or bool(
            self._subs.awaiting_committed()
        )
        if not needs_coordinator:
            return float("inf")
        if self.coordinator_id is None:
            if now < self._find_backoff_until_ms:
                return self._find_backoff_until_ms - now
            await self._find_coordinator()
            return 0
        if self._subscribed and member.needs_join():
            if now < self._join_backoff_until_ms:
                return self._join_backoff_until_ms - now
            if self._needs_join_prepare:
                await self._join_prepare()
                self._needs_join_prepare = False
            await self._join_and_sync()
            return 0
        await self._init_positions()
        return 0

    async def _find_coordinator(self) -> None:
        try:
            conn = await self._net.least_loaded_connection(self._request_timeout_ms)
            version = conn.version_for(ApiKey.FIND_COORDINATOR)
            if version >= 4:
                request = m.FindCoordinatorRequest(
                    key_type=GROUP_KEY_TYPE, coordinator_keys=[self.group_id]
                )
            else:
                request = m.FindCoordinatorRequest(key=self.group_id, key_type=GROUP_KEY_TYPE)
            response = await conn.send(request, api_key=ApiKey.FIND_COORDINATOR, version=version)
        except ClientError as exc:
            log.debug("group %s: FindCoordinator failed: %s", self.group_id, exc)
            self._find_backoff_until_ms = self._net.now_ms() + self._backoff_ms
            return
        found = response.coordinators[0] if version >= 4 else response
        code = ErrorCode.of(found.error_code)
        if code is not ErrorCode.NONE:
            log.debug("group %s: FindCoordinator: %s", self.group_id, code.name)
            self._find_backoff_until_ms = self._net.now_ms() + self._backoff_ms
            return
        log.info(
            "group %s: coordinator is broker %s (%s:%s)",
            self.group_id,
            found.node_id,
            found.host,
            found.port,
        )
        self.coordinator_id = found.node_id
        self._coordinator_address = (found.host, found.port)
        self.timers.received(self._net.now_ms())  # a fresh coordinator gets a fresh session

    async def _coordinator_connection(self) -> BrokerConnection:
        if self._conn is not None and self._conn.connected:
            return self._conn
        if self._coordinator_address is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {self.group_id}")
        host, port = self._coordinator_address
        conn = BrokerConnection(
            host,
            port,
            node_id=self.coordinator_id,
            client_id=self._net.client_id,
            request_timeout_ms=self._request_timeout_ms,
        )
        try:
            await wait_for(conn.connect(), self.config["socket.connection.setup.timeout.ms"] / 1000)
        except (ClientError, OSError, TimeoutError) as exc:
            await conn.close()
            self.coordinator_lost(f"cannot connect: {exc}")
            raise KafkaError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {self.group_id}", str(exc)
            ) from exc
        self._conn = conn
        return conn

    def coordinator_lost(self, reason: str) -> None:
        if self.coordinator_id is not None:
            log.info(
                "group %s: coordinator %s unknown: %s", self.group_id, self.coordinator_id, reason
            )
        self.coordinator_id = None
        self._coordinator_address = None
        self._find_backoff_until_ms = self._net.now_ms() + self._backoff_ms
        conn, self._conn = self._conn, None
        if conn is not None:
            asyncio.get_running_loop().create_task(conn.close())
        self._wakeup.set()

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    # ---------------------------------------------------------------- rebalance

    async def _join_prepare(self) -> None:
        """Before a JoinGroup (once per rebalance): commit, then revoke or lose partitions."""
        owned = self._subs.assignment() | self._lost_to_report
        self._lost_to_report = set()
        member = self.membership
        if not member.has_generation():
            if owned:
                self._subs.assign([])
                await self._call_listener(LOST, owned)
            return
        if self.protocol is RebalanceProtocol.EAGER:
            revoked = owned
        else:
            revoked = {tp for tp in owned if tp.topic not in self._topics}
        self.revoking = set(revoked)  # nothing more of these reaches the application
        try:
            if self._auto_commit and owned:
                await self._commit_quietly(self._subs.assignment(), "before revoking")
            if revoked:
                await self._call_listener(REVOKED, revoked)
                self._subs.assign(sorted(self._subs.assignment() - revoked), from_committed=True)
        finally:
            self.revoking = set()

    def _subscription_bytes(self) -> bytes:
        owned = self._subs.assignment() if self.protocol is RebalanceProtocol.COOPERATIVE else ()
        subscription = Subscription(
            topics=tuple(sorted(self._topics)),
            owned_partitions=tuple(sorted(owned)),
            generation_id=self.membership.generation_id,
            rack_id=self.config["client.rack"] or None,
        )
        return encode_subscription(subscription)

    async def _join_and_sync(self) -> None:
        member = self.membership
        metadata = self._subscription_bytes()
        self._joined_topics = self._topics
        try:
            conn = await self._coordinator_connection()
        except ClientError:
            return
        version = conn.version_for(ApiKey.JOIN_GROUP)
        request = m.JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.config["session.timeout.ms"],
            rebalance_timeout_ms=self._rebalance_timeout_ms,
            member_id=member.member_id,
            group_instance_id=member.group_instance_id if version >= 5 else None,
            protocol_type=PROTOCOL_TYPE,
            protocols=[
                m.JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata)
                for name in self.assignors
            ],
            reason=member.rejoin_reason[:255] if version >= 8 else None,
        )
        if member.group_instance_id is not None and version < 5:
            self._fail(
                KafkaError(ErrorCode.UNSUPPORTED_VERSION, "JoinGroup with group.instance.id")
            )
            return
        sent = member.join_sent()
        timeout = max(self._request_timeout_ms, self._rebalance_timeout_ms + 5000)
        try:
            joined = await conn.send(request, version=version, timeout_ms=timeout)
        except ClientError as exc:
            self._react(member.on_request_failed(sent), f"JoinGroup: {exc}")
            return
        outcome = member.on_join_response(
            sent,
            ErrorCode.of(joined.error_code),
            member_id=joined.member_id,
            generation_id=joined.generation_id,
            protocol_name=joined.protocol_name,
            leader_id=joined.leader,
        )
        if outcome.reaction is not Reaction.PROCEED:
            self._react(outcome, "JoinGroup")
            return
        log.info(
            "group %s: joined generation %s as %s%s (protocol %s)",
            self.group_id,
            joined.generation_id,
            joined.member_id,
            " (leader)" if member.is_leader else "",
            joined.protocol_name,
        )
        self.timers.reset_timeouts(self._net.now_ms())
        self._heartbeat_wakeup.set()
        assignments: dict[str, bytes] = {}
        if member.is_leader and not joined.skip_assignment:
            try:
                assignments = await self._assign(joined.protocol_name, joined.members)
            except ClientError as exc:
                log.warning("group %s: assignment failed: %s", self.group_id, exc)
                member.on_request_failed(member.generation)
                self._join_backoff_until_ms = self._net.now_ms() + self._backoff_ms
                return
        else:
            self._assignment_snapshot = None
        sync_version = conn.version_for(ApiKey.SYNC_GROUP)
        sync = m.SyncGroupRequest(
            group_id=self.group_id,
            generation_id=member.generation_id,
            member_id=member.member_id,
            group_instance_id=member.group_instance_id if sync_version >= 3 else None,
            protocol_type=PROTOCOL_TYPE if sync_version >= 5 else None,
            protocol_name=member.protocol_name if sync_version >= 5 else None,
            assignments=[
                m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=data)
                for mid, data in assignments.items()
            ],
        )
        sent = member.generation
        try:
            synced = await conn.send(sync, version=sync_version, timeout_ms=timeout)
        except ClientError as exc:
            self._react(member.on_request_failed(sent), f"SyncGroup: {exc}")
            return
        outcome = member.on_sync_response(sent, ErrorCode.of(synced.error_code))
        if outcome.reaction is not Reaction.PROCEED:
            self._react(outcome, "SyncGroup")
            return
        self._needs_join_prepare = True
        await self._on_join_complete(synced.assignment)

    async def _assign(self, protocol_name: str | None, members: list[Any]) -> dict[str, bytes]:
        """The leader's part: decode every member's Subscription, run the assignor over fresh
        metadata for all their topics, encode each member's Assignment."""
        info = ASSIGNORS.get(protocol_name or "")
        if info is None:
            raise KafkaError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"group {self.group_id}: the coordinator chose {protocol_name!r}, not ours",
            )
        subscriptions: dict[str, MemberSubscription] = {}
        for joined in members:
            try:
                sub = decode_subscription(joined.metadata)
            except DecodeError as exc:
                log.warning("member %s sent a bad subscription: %s", joined.member_id, exc)
                sub = Subscription(topics=())
            subscriptions[joined.member_id] = MemberSubscription(
                member_id=joined.member_id,
                topics=frozenset(sub.topics),
                owned_partitions=tuple(TopicPartition(t, p) for t, p in sub.owned_partitions),
                generation_id=sub.generation_id,
                group_instance_id=joined.group_instance_id,
                rack_id=sub.rack_id,
            )
        topics = set().union(*(s.topics for s in subscriptions.values()))
        self._net.want_topics(topics)
        cluster = await self._net.update_metadata(self._request_timeout_ms)
        counts = {t: n for t in sorted(topics) if (n := cluster.partition_count(t))}
        result = info.assign(counts, subscriptions)
        self._assignment_snapshot = counts
        log.info("group %s: %s assigned %s", self.group_id, info.name, _brief(result))
        return {
            member_id: encode_assignment(Assignment(tuple(result.get(member_id, []))))
            for member_id in subscriptions
        }

    async def _on_join_complete(self, assignment_bytes: bytes) -> None:
        try:
            assignment = decode_assignment(assignment_bytes)
        except DecodeError as exc:
            self.membership.request_rejoin(f"unreadable assignment: {exc}")
            return
        assigned = {TopicPartition(t, p) for t, p in assignment.partitions}
        unexpected = {tp.topic for tp in assigned} - self._topics
        if unexpected and self._pattern is None:
            self.membership.request_rejoin(f"assigned {sorted(unexpected)}, not subscribed")
        owned = self._subs.assignment()
        added = assigned - owned
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            revoked = owned - assigned
            if revoked:
                self.revoking = set(revoked)
                try:
                    if self._auto_commit:
                        await self._commit_quietly(revoked, "before handing over")
                    await self._call_listener(REVOKED, revoked)
                finally:
                    self.revoking = set()
                self.membership.request_rejoin("revoked partitions to hand over")
        self._subs.assign(sorted(assigned), from_committed=True)
        self._next_auto_commit_ms = self._net.now_ms() + self._auto_commit_interval_ms
        self._wakeup.set()
        await self._call_listener(ASSIGNED, added)
        self._wake_fetcher()

    def _react(self, outcome: Outcome, what: str) -> None:
        reaction = outcome.reaction
        if outcome.reset is not Reset.NOTHING:
            self._needs_join_prepare = True
        if reaction is Reaction.BACKOFF:
            self._join_backoff_until_ms = self._net.now_ms() + self._backoff_ms
        elif reaction is Reaction.FIND_COORDINATOR:
            self.coordinator_lost(f"{what}: {outcome.error.name}")
        elif reaction is Reaction.FAIL:
            self._join_backoff_until_ms = self._net.now_ms() + self._backoff_ms
            self._fail(KafkaError(outcome.error, f"group {self.group_id}: {what}"))
        elif reaction is Reaction.FENCED:
            self._fenced(what)
        log.info("group %s: %s: %s -> %s", self.group_id, what, outcome.error.name, reaction.value)

    def _fail(self, error: ClientError) -> None:
        self._errors.append(error)
        self._wake_fetcher()

    def _fenced(self, what: str) -> None:
        self._fatal = KafkaError(
            ErrorCode.FENCED_INSTANCE_ID,
            f"group {self.group_id}: {what}",
            f"another consumer took group.instance.id {self.membership.group_instance_id!r}",
        )
        self._lost_to_report |= self._subs.assignment()
        self._subs.assign([])
        self._wake_fetcher()

    async def _call_listener(self, kind: str, partitions: Iterable[TopicPartition]) -> None:
        try:
            await self._listener(kind, sorted(partitions))
        except Exception as exc:  # the application's bug: raised by its next poll
            log.exception("group %s: on_%s callback failed", self.group_id, kind)
            self._fail(ClientError(f"the on_{kind} callback raised {exc!r}"))

    # ---------------------------------------------------------------- leaving

    async def _leave_prepare_and_leave(self, reason: str) -> None:
        member = self.membership
        owned = self._subs.assignment() | self._lost_to_report
        self._lost_to_report = set()
        if self._subscribed and owned:
            self.revoking = set(owned)
            try:
                if member.has_generation() and member.state is MemberState.STABLE:
                    if self._auto_commit:
                        await self._commit_quietly(self._subs.assignment(), "on leaving")
                    await self._call_listener(REVOKED, owned)
                else:
                    await self._call_listener(LOST, owned)
            finally:
                self.revoking = set()
            self._subs.assign([])
        elif not self._subscribed and self._auto_commit:
            await self._commit_quietly(self._subs.assignment(), "on closing")
        await self._leave(reason)

    async def _leave(self, reason: str) -> None:
        member = self.membership
        if member.should_leave() and self.coordinator_id is not None:
            try:
                conn = await self._coordinator_connection()
                version = conn.version_for(ApiKey.LEAVE_GROUP)
                if version >= 3:
                    request = m.LeaveGroupRequest(
                        group_id=self.group_id,
                        members=[
                            m.LeaveGroupRequest.MemberIdentity(
                                member_id=member.member_id,
                                reason=reason[:255] if version >= 5 else None,
                            )
                        ],
                    )
                else:
                    request = m.LeaveGroupRequest(
                        group_id=self.group_id, member_id=member.member_id
                    )
                log.info("group %s: member %s leaves: %s", self.group_id, member.member_id, reason)
                await conn.send(request, version=version, timeout_ms=self._request_timeout_ms)
            except ClientError as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        if member.state not in (MemberState.FENCED, MemberState.CLOSED):
            member.left(reason)
        self._needs_join_prepare = True

    # ---------------------------------------------------------------- the heartbeat task

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            self._heartbeat_wakeup.clear()
            try:
                wait_ms = await self._heartbeat_step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("group %s: heartbeat failed", self.group_id)
                wait_ms = self._backoff_ms
            with contextlib.suppress(TimeoutError):
                timeout = None if wait_ms == float("inf") else max(wait_ms, 1) / 1000
                await wait_for(self._heartbeat_wakeup.wait(), timeout)

    async def _heartbeat_step(self) -> float:
        member, timers = self.membership, self.timers
        if not member.heartbeats() or self.coordinator_id is None:
            return float("inf") if self.coordinator_id is not None else self._backoff_ms
        now = self._net.now_ms()
        if timers.session_expired(now):
            self.coordinator_lost("no heartbeat got through within session.timeout.ms")
            timers.received(now)
            return self._backoff_ms
        if timers.poll_expired(now) and member.state is MemberState.STABLE:
            log.warning(
                "group %s: no poll() within max.poll.interval.ms=%s; leaving the group",
                self.group_id,
                self.config["max.poll.interval.ms"],
            )
            self._lost_to_report |= self._subs.assignment()
            self._subs.assign([])
            self._waiting_for_poll = True
            await self._leave("consumer poll timeout has expired")
            return float("inf")
        if not timers.should_heartbeat(now):
            return min(
                timers.time_to_next_heartbeat(now),
                timers.poll_deadline_ms - now,
                timers.session_deadline_ms - now,
            )
        timers.sent(now)
        sent = member.generation
        try:
            conn = await self._coordinator_connection()
            version = conn.version_for(ApiKey.HEARTBEAT)
            request = m.HeartbeatRequest(
                group_id=self.group_id,
                generation_id=sent.generation_id,
                member_id=sent.member_id,
                group_instance_id=member.group_instance_id if version >= 3 else None,
            )
            response = await conn.send(request, version=version)
        except ClientError as exc:
            log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
            timers.failed(self._net.now_ms())
            if self._conn is None or not self._conn.connected:
                self.coordinator_lost(f"heartbeat: {exc}")
            return self._backoff_ms
        code = ErrorCode.of(response.error_code)
        outcome = member.on_heartbeat_response(sent, code)
        now = self._net.now_ms()
        if outcome.reaction in (Reaction.PROCEED, Reaction.REJOIN, Reaction.IGNORE):
            timers.received(now)  # the coordinator answered: the session is alive
        else:
            timers.failed(now)
        if outcome.reaction is not Reaction.PROCEED:
            if outcome.reaction is not Reaction.IGNORE:
                self._react(outcome, "Heartbeat")
            self._wakeup.set()
        return 0

    # ---------------------------------------------------------------- positions

    async def _init_positions(self) -> None:
        """OffsetFetch for partitions waiting for their committed offset."""
        waiting = self._subs.awaiting_committed()
        if not waiting:
            return
        try:
            found = await self.fetch_committed(list(waiting), self._request_timeout_ms)
        except ClientError as exc:
            log.debug("group %s: committed offsets not fetched: %s", self.group_id, exc)
            await asyncio.sleep(self._backoff_ms / 1000)
            return
        for tp, generation in waiting.items():
            committed = found.get(tp)
            if committed is None:
                self._subs.complete_committed(tp, generation, -1)
            else:
                self._subs.complete_committed(
                    tp, generation, committed.offset, committed.leader_epoch
                )
        self._wake_fetcher()

    # ---------------------------------------------------------------- commits

    def positions_to_commit(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        positions = self._subs.positions()
        wanted = (
            positions
            if partitions is None
            else {tp: positions[tp] for tp in partitions if tp in positions}
        )
        return {tp: OffsetAndMetadata(offset, "", epoch) for tp, (offset, epoch) in wanted.items()}

    def _maybe_auto_commit(self) -> None:
        now = self._net.now_ms()
        if now < self._next_auto_commit_ms or self.revoking:
            return
        if self._subscribed and self.membership.state is not MemberState.STABLE:
            return
        self._next_auto_commit_ms = now + self._auto_commit_interval_ms
        offsets = self.positions_to_commit()
        if offsets:
            self.commit_in_background(offsets)

    def commit_in_background(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(
            self.commit(offsets, self._request_timeout_ms), name=f"commit {self.group_id}"
        )
        self._commits.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._commits.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.info("group %s: async commit failed: %s", self.group_id, t.exception())

        task.add_done_callback(done)
        return task

    async def _commit_quietly(self, partitions: Iterable[TopicPartition], why: str) -> None:
        offsets = self.positions_to_commit(partitions)
        if not offsets:
            return
        try:
            await self.commit(offsets, self._request_timeout_ms)
        except ClientError as exc:
            log.warning("group %s: auto commit %s failed: %s", self.group_id, why, exc)

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float
    ) -> None:
        """OffsetCommit, retried on retriable errors until `timeout_ms`; group errors (the member
        was fenced, the generation moved on) raise at once, as Java's CommitFailedException."""
        if not offsets:
            return
        deadline = self._net.now_ms() + timeout_ms
        while True:
            if self._closed:
                raise ClientClosedError("consumer is closed")
            error = await self._commit_once(offsets)
            if error is None:
                return
            if not error.retriable or error.code in _GROUP_COMMIT_ERRORS:
                raise error
            remaining = deadline - self._net.now_ms()
            if remaining <= 0:
                raise error
            await asyncio.sleep(min(self._backoff_ms, remaining) / 1000)

    def _commit_generation(self) -> Generation:
        """The generation a commit is sent under: the member's in a group it subscribed to, -1
        for a consumer that assigns partitions itself."""
        member = self.membership
        if not self._subscribed:
            return Generation(-1, "")
        if member.state is not MemberState.STABLE or not member.has_generation():
            code = (
                ErrorCode.REBALANCE_IN_PROGRESS
                if member.state in (MemberState.JOINING, MemberState.SYNCING)
                or member.has_generation()
                else ErrorCode.ILLEGAL_GENERATION
            )
            raise KafkaError(code, f"group {self.group_id}: commit while {member.state.value}")
        return member.generation

    async def _commit_once(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> KafkaError | None:
        try:
            sent = self._commit_generation()
        except KafkaError as exc:
            return exc
        try:
            conn = await self._ready_coordinator()
            version = conn.version_for(ApiKey.OFFSET_COMMIT)
            instance_id = self.membership.group_instance_id if self._subscribed else None
            request = offset_commit_request(
                version, self.group_id, sent.generation_id, sent.member_id, instance_id, offsets
            )
            response = await conn.send(request, version=version)
        except KafkaError as exc:
            return exc
        except ClientError as exc:
            self.coordinator_lost(f"OffsetCommit: {exc}")
            return KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "OffsetCommit", str(exc))
        first: KafkaError | None = None
        for tp, code in offset_commit_errors(response).items():
            if code in _COORDINATOR_ERRORS:
                self.coordinator_lost(f"OffsetCommit: {code.name}")
            elif code in _GROUP_COMMIT_ERRORS and self._subscribed:
                outcome = self.membership.on_commit_error(sent, code)
                if outcome.reaction is not Reaction.IGNORE:
                    self._react(outcome, "OffsetCommit")
                    self._wakeup.set()
            first = first or KafkaError(code, f"group {self.group_id}: OffsetCommit {tp}")
        return first

    async def _ready_coordinator(self) -> BrokerConnection:
        """The coordinator's connection, finding the coordinator first if needed."""
        if self.coordinator_id is None:
            await self._find_coordinator()
            if self.coordinator_id is None:
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {self.group_id}")
        return await self._coordinator_connection()

    async def fetch_committed(
        self, partitions: list[TopicPartition], timeout_ms: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where none), retrying until `timeout_ms`."""
        deadline = self._net.now_ms() + timeout_ms
        while True:
            if self._closed:
                raise ClientClosedError("consumer is closed")
            try:
                return await self._fetch_committed_once(partitions)
            except KafkaError as exc:
                remaining = deadline - self._net.now_ms()
                if not exc.retriable or remaining <= 0:
                    raise
                await asyncio.sleep(min(self._backoff_ms, remaining) / 1000)
            except ClientError as exc:
                self.coordinator_lost(f"OffsetFetch: {exc}")
                remaining = deadline - self._net.now_ms()
                if remaining <= 0:
                    raise
                await asyncio.sleep(min(self._backoff_ms, remaining) / 1000)

    async def _fetch_committed_once(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        conn = await self._ready_coordinator()
        version = conn.version_for(ApiKey.OFFSET_FETCH)
        request = offset_fetch_request(version, self.group_id, partitions, self._require_stable)
        result = offset_fetch_result(version, await conn.send(request, version=version))
        if result.error is not ErrorCode.NONE:
            if result.error in _COORDINATOR_ERRORS:
                self.coordinator_lost(f"OffsetFetch: {result.error.name}")
            raise KafkaError(result.error, f"group {self.group_id}: OffsetFetch")
        for tp, code in result.partition_errors.items():
            raise KafkaError(code, f"group {self.group_id}: OffsetFetch {tp}")
        return dict(result.offsets)


def _brief(assignment: Mapping[str, list[TopicPartition]]) -> str:
    return "; ".join(
        f"{member}: {', '.join(str(tp) for tp in tps) or '-'}"
        for member, tps in sorted(assignment.items())
    )
