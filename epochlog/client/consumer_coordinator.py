"""The consumer's side of a classic group: the I/O shell around `membership` and `rebalance`.

How it works. `ConsumerCoordinator` belongs to an `AsyncConsumer` with a `group.id`. It runs two
tasks on the consumer's loop, and does what `membership` and `rebalance` decide:

- The **group task** (`membership.next_group_step` decides each turn) finds the coordinator
  (`coordinator_connection`), then, whenever the member must (re)join: prepares (auto commit,
  then the rebalance callbacks for what `rebalance.release_before_join` gives up), sends JoinGroup
  with one Subscription per configured assignor, runs the assignor if it is the leader, sends
  SyncGroup and takes the Assignment (`rebalance.assignment_change`: under the cooperative
  protocol partitions no longer assigned are committed and revoked, and the member rejoins so
  the second rebalance can hand them over); new partitions start from the group's committed
  offsets (OffsetFetch; auto.offset.reset where none).
- The **heartbeat task** (`group_heartbeat`) keeps the session alive, and makes the member leave
  when the application did not poll within max.poll.interval.ms.

Commits and committed offsets, auto commit included, are `offset_committer`'s; a group error in
an OffsetCommit comes back here as an outcome of the membership. Every request goes over the
coordinator's own connection (`coordinator_connection`); the requests are `group_requests`'.

Rebalance callbacks are awaited through `listener`, which the consumer supplies: the asyncio
consumer calls them on its loop, the blocking one hands them to the thread that polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from epochlog.aio import wait_for
from epochlog.client.assignors import ASSIGNORS
from epochlog.client.assignors import rebalance_protocol as protocol_of
from epochlog.client.config import ClientConfig
from epochlog.client.coordinator_connection import CoordinatorConnection
from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.group_heartbeat import GroupHeartbeat
from epochlog.client.group_offsets import OffsetAndMetadata
from epochlog.client.group_requests import (
    join_group_request,
    leave_group_request,
    static_join_supported,
    sync_group_request,
)
from epochlog.client.group_subscription import GroupSubscription
from epochlog.client.membership import (
    GroupMembership,
    GroupStep,
    HeartbeatTimers,
    MemberState,
    Outcome,
    Reaction,
    Reset,
    next_group_step,
)
from epochlog.client.metadata import TopicPartition
from epochlog.client.network import NetworkClient
from epochlog.client.offset_committer import OffsetCommitter
from epochlog.client.rebalance import (
    ASSIGNED,
    LOST,
    REVOKED,
    assignment_change,
    describe_assignment,
    encoded_assignments,
    member_subscriptions,
    release_before_join,
    release_on_leave,
    subscription_metadata,
)
from epochlog.client.subscription import SubscriptionState
from epochlog.protocol.api import ApiKey
from epochlog.protocol.consumer_protocol import decode_assignment
from epochlog.protocol.errors import DecodeError, ErrorCode

__all__ = ["ASSIGNED", "LOST", "REVOKED", "ConsumerCoordinator", "Listener"]

log = logging.getLogger(__name__)

Listener = Callable[[str, list[TopicPartition]], Awaitable[None]]


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
        self.timers = HeartbeatTimers(
            config["session.timeout.ms"],
            config["heartbeat.interval.ms"],
            config["max.poll.interval.ms"],
            self._backoff_ms,
            net.now_ms(),
        )
        self._subscription = GroupSubscription(config["exclude.internal.topics"])
        self._last_cluster: object = None
        self._join_backoff_until_ms = 0.0
        self._needs_join_prepare = True
        self._lost_to_report: set[TopicPartition] = set()
        self.revoking: set[TopicPartition] = set()  # poll() returns nothing of these
        self._waiting_for_poll = False  # left on max.poll.interval.ms: rejoin at the next poll
        self._errors: list[ClientError] = []  # raised by the next poll()
        self._fatal: ClientError | None = None
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        self.coordinator = CoordinatorConnection(
            self.group_id,
            config,
            net,
            # a fresh coordinator gets a fresh session
            on_found=lambda: self.timers.received(self._net.now_ms()),
            on_lost=self._wakeup.set,
        )
        self.committer = OffsetCommitter(
            config,
            net,
            subs,
            self.membership,
            self.coordinator,
            subscribed=lambda: self._subscription.subscribed,
            closed=lambda: self._closed,
            on_group_error=self._on_commit_group_error,
            wake_fetcher=wake_fetcher,
        )
        self.heartbeat = GroupHeartbeat(
            self.group_id,
            net,
            self.membership,
            self.timers,
            self.coordinator,
            self._backoff_ms,
            on_poll_timeout=self._leave_on_poll_timeout,
            on_outcome=self._on_heartbeat_outcome,
        )
        net.add_listener(self._on_cluster_change)

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [
                loop.create_task(self._run(), name=f"group {self.group_id}"),
                loop.create_task(
                    self.heartbeat.run(lambda: self._closed), name=f"heartbeat {self.group_id}"
                ),
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
        self.heartbeat.wakeup.set()
        await asyncio.gather(*self._tasks, *self.committer.in_flight, return_exceptions=True)
        await self.coordinator.close()

    # ---------------------------------------------------------------- subscription

    @property
    def subscribed(self) -> bool:
        return self._subscription.subscribed

    def subscription(self) -> frozenset[str]:
        return self._subscription.topics

    def subscribe(self, topics: Iterable[str] | None, pattern: str | None) -> None:
        wanted = self._subscription
        if pattern is not None:
            wanted.subscribe_pattern(pattern, self._net.cluster)
            self._net.want_all_topics()
        else:
            wanted.subscribe_topics(topics or ())
            self._net.want_topics(wanted.topics)
        if wanted.changed_since_join:
            self.membership.request_rejoin("the subscription changed")
        self._wakeup.set()

    async def unsubscribe(self) -> None:
        await self._leave_prepare_and_leave("the consumer unsubscribed")
        self._subscription.unsubscribe()

    def _on_cluster_change(self) -> None:
        """Metadata changed (or a connection did): re-evaluate the pattern, and, as the leader,
        rejoin when a subscribed topic's partition count changed."""
        cluster = self._net.cluster
        if cluster is self._last_cluster or self._closed:
            return
        self._last_cluster = cluster
        wanted = self._subscription
        if wanted.rematch(cluster):
            log.info("group %s: pattern now matches %s", self.group_id, sorted(wanted.topics))
            if wanted.changed_since_join:
                self.membership.request_rejoin("the pattern matches other topics")
                self._wakeup.set()
        if self.membership.is_leader:
            resized = wanted.resized_topic(cluster)
            if resized is not None:
                topic, now_count = resized
                self.membership.request_rejoin(f"{topic} has {now_count} partitions now")
                wanted.assigned(None)
                self._wakeup.set()

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
            self.heartbeat.wakeup.set()
        if self._auto_commit and not self.revoking and not self.rebalancing():
            self.committer.auto_commit_if_due()

    def raise_pending_errors(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._errors:
            error = self._errors.pop(0)
            raise error

    def rebalancing(self) -> bool:
        return self._subscription.subscribed and self.membership.state is not MemberState.STABLE

    def positions_to_commit(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.committer.positions_to_commit(partitions)

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float
    ) -> None:
        await self.committer.commit(offsets, timeout_ms)

    def commit_in_background(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> asyncio.Task[None]:
        return self.committer.commit_in_background(offsets)

    async def fetch_committed(
        self, partitions: list[TopicPartition], timeout_ms: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await self.committer.fetch_committed(partitions, timeout_ms)

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
        decision = next_group_step(
            self.membership,
            self._net.now_ms(),
            failed=self._fatal is not None,
            subscribed=self._subscription.subscribed,
            waiting_for_poll=self._waiting_for_poll,
            subscription_changed=self._subscription.changed_since_join,
            awaiting_committed=bool(self._subs.awaiting_committed()),
            coordinator_known=self.coordinator.known,
            find_backoff_until_ms=self.coordinator.find_backoff_until_ms,
            join_backoff_until_ms=self._join_backoff_until_ms,
        )
        step = decision.step
        if step is GroupStep.IDLE:
            return float("inf")
        if step is GroupStep.WAIT:
            return decision.wait_ms
        if step is GroupStep.FIND_COORDINATOR:
            await self.coordinator.find()
        elif step is GroupStep.JOIN:
            if self._needs_join_prepare:
                await self._join_prepare()
                self._needs_join_prepare = False
            await self._join_and_sync()
        else:
            await self.committer.start_from_committed()
        return 0

    # ---------------------------------------------------------------- rebalance

    async def _join_prepare(self) -> None:
        """Before a JoinGroup (once per rebalance): commit, then revoke or lose partitions."""
        owned = self._subs.assignment() | self._lost_to_report
        self._lost_to_report = set()
        has_generation = self.membership.has_generation()
        release = release_before_join(
            self.protocol, has_generation, owned, self._subscription.topics
        )
        if not has_generation:
            if release.lost:
                self._subs.assign([])
                await self._call_listener(LOST, release.lost)
            return
        revoked = release.revoked
        self.revoking = set(revoked)  # nothing more of these reaches the application
        try:
            if self._auto_commit and owned:
                await self.committer.commit_quietly(self._subs.assignment(), "before revoking")
            if revoked:
                await self._call_listener(REVOKED, revoked)
                self._subs.assign(sorted(self._subs.assignment() - revoked), from_committed=True)
        finally:
            self.revoking = set()

    async def _join_and_sync(self) -> None:
        member = self.membership
        metadata = subscription_metadata(
            self.protocol,
            self._subscription.topics,
            self._subs.assignment(),
            member.generation_id,
            self.config["client.rack"] or None,
        )
        self._subscription.joined()
        try:
            conn = await self.coordinator.connection()
        except ClientError:
            return
        version = conn.version_for(ApiKey.JOIN_GROUP)
        request = join_group_request(
            version,
            self.group_id,
            member.member_id,
            member.group_instance_id,
            self.config["session.timeout.ms"],
            self._rebalance_timeout_ms,
            [(name, metadata) for name in self.assignors],
            member.rejoin_reason,
        )
        if member.group_instance_id is not None and not static_join_supported(version):
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
        self.heartbeat.wakeup.set()
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
            self._subscription.assigned(None)
        sync_version = conn.version_for(ApiKey.SYNC_GROUP)
        sync = sync_group_request(
            sync_version,
            self.group_id,
            member.generation_id,
            member.member_id,
            member.group_instance_id,
            member.protocol_name,
            assignments,
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
        subscriptions = member_subscriptions(members)
        topics = set().union(*(s.topics for s in subscriptions.values()))
        self._net.want_topics(topics)
        cluster = await self._net.update_metadata(self._request_timeout_ms)
        counts = {t: n for t in sorted(topics) if (n := cluster.partition_count(t))}
        result = info.assign(counts, subscriptions)
        self._subscription.assigned(counts)
        log.info("group %s: %s assigned %s", self.group_id, info.name, describe_assignment(result))
        return encoded_assignments(result, subscriptions)

    async def _on_join_complete(self, assignment_bytes: bytes) -> None:
        try:
            assignment = decode_assignment(assignment_bytes)
        except DecodeError as exc:
            self.membership.request_rejoin(f"unreadable assignment: {exc}")
            return
        assigned = {TopicPartition(t, p) for t, p in assignment.partitions}
        change = assignment_change(
            self.protocol,
            self._subs.assignment(),
            assigned,
            self._subscription.topics,
            by_pattern=self._subscription.by_pattern,
        )
        if change.unexpected_topics:
            self.membership.request_rejoin(
                f"assigned {sorted(change.unexpected_topics)}, not subscribed"
            )
        if change.revoked:
            self.revoking = set(change.revoked)
            try:
                if self._auto_commit:
                    await self.committer.commit_quietly(change.revoked, "before handing over")
                await self._call_listener(REVOKED, change.revoked)
            finally:
                self.revoking = set()
            self.membership.request_rejoin("revoked partitions to hand over")
        self._subs.assign(sorted(assigned), from_committed=True)
        self.committer.restart_auto_commit_interval()
        self._wakeup.set()
        await self._call_listener(ASSIGNED, change.added)
        self._wake_fetcher()

    def _react(self, outcome: Outcome, what: str) -> None:
        reaction = outcome.reaction
        if outcome.reset is not Reset.NOTHING:
            self._needs_join_prepare = True
        if reaction is Reaction.BACKOFF:
            self._join_backoff_until_ms = self._net.now_ms() + self._backoff_ms
        elif reaction is Reaction.FIND_COORDINATOR:
            self.coordinator.lost(f"{what}: {outcome.error.name}")
        elif reaction is Reaction.FAIL:
            self._join_backoff_until_ms = self._net.now_ms() + self._backoff_ms
            self._fail(KafkaError(outcome.error, f"group {self.group_id}: {what}"))
        elif reaction is Reaction.FENCED:
            self._fenced(what)
        log.info("group %s: %s: %s -> %s", self.group_id, what, outcome.error.name, reaction.value)

    def _on_heartbeat_outcome(self, outcome: Outcome) -> None:
        if outcome.reaction is not Reaction.IGNORE:
            self._react(outcome, "Heartbeat")
        self._wakeup.set()

    def _on_commit_group_error(self, outcome: Outcome) -> None:
        self._react(outcome, "OffsetCommit")
        self._wakeup.set()

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
        if self._subscription.subscribed and owned:
            stable = member.has_generation() and member.state is MemberState.STABLE
            release = release_on_leave(stable, owned)
            self.revoking = set(owned)
            try:
                if release.revoked:
                    if self._auto_commit:
                        await self.committer.commit_quietly(self._subs.assignment(), "on leaving")
                    await self._call_listener(REVOKED, release.revoked)
                else:
                    await self._call_listener(LOST, release.lost)
            finally:
                self.revoking = set()
            self._subs.assign([])
        elif not self._subscription.subscribed and self._auto_commit:
            await self.committer.commit_quietly(self._subs.assignment(), "on closing")
        await self._leave(reason)

    async def _leave_on_poll_timeout(self) -> None:
        log.warning(
            "group %s: no poll() within max.poll.interval.ms=%s; leaving the group",
            self.group_id,
            self.config["max.poll.interval.ms"],
        )
        self._lost_to_report |= self._subs.assignment()
        self._subs.assign([])
        self._waiting_for_poll = True
        await self._leave("consumer poll timeout has expired")

    async def _leave(self, reason: str) -> None:
        member = self.membership
        if member.should_leave() and self.coordinator.known:
            try:
                conn = await self.coordinator.connection()
                version = conn.version_for(ApiKey.LEAVE_GROUP)
                request = leave_group_request(version, self.group_id, member.member_id, reason)
                log.info("group %s: member %s leaves: %s", self.group_id, member.member_id, reason)
                await conn.send(request, version=version, timeout_ms=self._request_timeout_ms)
            except ClientError as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        if member.state not in (MemberState.FENCED, MemberState.CLOSED):
            member.left(reason)
        self._needs_join_prepare = True
