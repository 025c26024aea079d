"""A group consumer's commits and committed offsets: OffsetCommit and OffsetFetch through the
coordinator, and auto commit.

`commit` sends OffsetCommit under the member's generation and member id (generation -1 and no
member for a consumer that assigns its partitions itself), retried on retriable errors until its
timeout; a group error (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID,
REBALANCE_IN_PROGRESS) raises at once, as Java's CommitFailedException, after the membership
has been told (it may have to rejoin). `fetch_committed` sends OffsetFetch (require_stable under
read_committed), retried likewise; `start_from_committed` gives partitions waiting for their
start position the group's committed offset (auto.offset.reset where none). A coordinator error
or a failed connection forgets the coordinator. Auto commit (enable.auto.commit) commits the
positions returned so far from `poll()` every auto.commit.interval.ms; the coordinator also
commits quietly (failures logged) before revoking partitions and on close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from epochlog.client.config import ClientConfig
from epochlog.client.coordinator_connection import CoordinatorConnection
from epochlog.client.errors import ClientClosedError, ClientError, KafkaError
from epochlog.client.group_offsets import (
    OffsetAndMetadata,
    offset_commit_errors,
    offset_commit_request,
    offset_fetch_request,
    offset_fetch_result,
)
from epochlog.client.membership import Generation, GroupMembership, Outcome, Reaction
from epochlog.client.metadata import TopicPartition
from epochlog.client.network import NetworkClient
from epochlog.client.subscription import SubscriptionState
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

COORDINATOR_ERRORS = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
GROUP_COMMIT_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.REBALANCE_IN_PROGRESS,
    }
)


class OffsetCommitter:
    """One group consumer's commits; see the module docstring.

    `subscribed()` says whether the consumer is in the group by subscription (commits then carry
    its generation); `closed()` ends retries; `on_group_error` gets the membership's outcome of
    a group error in an OffsetCommit."""

    def __init__(
        self,
        config: ClientConfig,
        net: NetworkClient,
        subs: SubscriptionState,
        membership: GroupMembership,
        coordinator: CoordinatorConnection,
        *,
        subscribed: Callable[[], bool],
        closed: Callable[[], bool],
        on_group_error: Callable[[Outcome], None],
        wake_fetcher: Callable[[], None],
    ) -> None:
        self.group_id: str = config["group.id"]
        self._net = net
        self._subs = subs
        self._membership = membership
        self._coordinator = coordinator
        self._subscribed = subscribed
        self._closed = closed
        self._on_group_error = on_group_error
        self._wake_fetcher = wake_fetcher
        self._backoff_ms: int = config["retry.backoff.ms"]
        self._request_timeout_ms: int = config["request.timeout.ms"]
        self._require_stable = config["isolation.level"] == "read_committed"
        self._auto_commit_interval_ms: int = config["auto.commit.interval.ms"]
        self._next_auto_commit_ms = net.now_ms() + self._auto_commit_interval_ms
        self.in_flight: set[asyncio.Task[Any]] = set()  # commit_in_background's

    # ---------------------------------------------------------------- what to commit

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

    # ---------------------------------------------------------------- auto commit

    def restart_auto_commit_interval(self) -> None:
        self._next_auto_commit_ms = self._net.now_ms() + self._auto_commit_interval_ms

    def auto_commit_if_due(self) -> None:
        """Commit every position in the background if auto.commit.interval.ms has passed."""
        now = self._net.now_ms()
        if now < self._next_auto_commit_ms:
            return
        self._next_auto_commit_ms = now + self._auto_commit_interval_ms
        offsets = self.positions_to_commit()
        if offsets:
            self.commit_in_background(offsets)

    async def commit_quietly(self, partitions: Iterable[TopicPartition], why: str) -> None:
        """Auto commit before a revocation or a close: a failure is logged, not raised."""
        offsets = self.positions_to_commit(partitions)
        if not offsets:
            return
        try:
            await self.commit(offsets, self._request_timeout_ms)
        except ClientError as exc:
            log.warning("group %s: auto commit %s failed: %s", self.group_id, why, exc)

    # ---------------------------------------------------------------- OffsetCommit

    def commit_in_background(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(
            self.commit(offsets, self._request_timeout_ms), name=f"commit {self.group_id}"
        )
        self.in_flight.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self.in_flight.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.info("group %s: async commit failed: %s", self.group_id, t.exception())

        task.add_done_callback(done)
        return task

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float
    ) -> None:
        """OffsetCommit, retried on retriable errors until `timeout_ms`; group errors (the member
        was fenced, the generation moved on) raise at once, as Java's CommitFailedException."""
        if not offsets:
            return
        deadline = self._net.now_ms() + timeout_ms
        while True:
            if self._closed():
                raise ClientClosedError("consumer is closed")
            error = await self._commit_once(offsets)
            if error is None:
                return
            if not error.retriable or error.code in GROUP_COMMIT_ERRORS:
                raise error
            remaining = deadline - self._net.now_ms()
            if remaining <= 0:
                raise error
            await asyncio.sleep(min(self._backoff_ms, remaining) / 1000)

    def _commit_generation(self) -> Generation:
        """The generation a commit is sent under: the member's in a group it subscribed to, -1
        for a consumer that assigns partitions itself."""
        member = self._membership
        if not self._subscribed():
            return Generation(-1, "")
        refusal = member.commit_refusal()
        if refusal is not None:
            raise KafkaError(refusal, f"group {self.group_id}: commit while {member.state.value}")
        return member.generation

    async def _commit_once(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> KafkaError | None:
        try:
            sent = self._commit_generation()
        except KafkaError as exc:
            return exc
        try:
            conn = await self._coordinator.ready()
            version = conn.version_for(ApiKey.OFFSET_COMMIT)
            instance_id = self._membership.group_instance_id if self._subscribed() else None
            request = offset_commit_request(
                version, self.group_id, sent.generation_id, sent.member_id, instance_id, offsets
            )
            response = await conn.send(request, version=version)
        except KafkaError as exc:
            return exc
        except ClientError as exc:
            self._coordinator.lost(f"OffsetCommit: {exc}")
            return KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "OffsetCommit", str(exc))
        first: KafkaError | None = None
        for tp, code in offset_commit_errors(response).items():
            if code in COORDINATOR_ERRORS:
                self._coordinator.lost(f"OffsetCommit: {code.name}")
            elif code in GROUP_COMMIT_ERRORS and self._subscribed():
                outcome = self._membership.on_commit_error(sent, code)
                if outcome.reaction is not Reaction.IGNORE:
                    self._on_group_error(outcome)
            first = first or KafkaError(code, f"group {self.group_id}: OffsetCommit {tp}")
        return first

    # ---------------------------------------------------------------- OffsetFetch

    async def fetch_committed(
        self, partitions: list[TopicPartition], timeout_ms: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where none), retrying until `timeout_ms`."""
        deadline = self._net.now_ms() + timeout_ms
        while True:
            if self._closed():
                raise ClientClosedError("consumer is closed")
            try:
                return await self._fetch_committed_once(partitions)
            except KafkaError as exc:
                remaining = deadline - self._net.now_ms()
                if not exc.retriable or remaining <= 0:
                    raise
                await asyncio.sleep(min(self._backoff_ms, remaining) / 1000)
            except ClientError as exc:
                self._coordinator.lost(f"OffsetFetch: {exc}")
                remaining = deadline - self._net.now_ms()
                if remaining <= 0:
                    raise
                await asyncio.sleep(min(self._backoff_ms, remaining) / 1000)

    async def _fetch_committed_once(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        conn = await self._coordinator.ready()
        version = conn.version_for(ApiKey.OFFSET_FETCH)
        request = offset_fetch_request(version, self.group_id, partitions, self._require_stable)
        result = offset_fetch_result(version, await conn.send(request, version=version))
        if result.error is not ErrorCode.NONE:
            if result.error in COORDINATOR_ERRORS:
                self._coordinator.lost(f"OffsetFetch: {result.error.name}")
            raise KafkaError(result.error, f"group {self.group_id}: OffsetFetch")
        for tp, code in result.partition_errors.items():
            raise KafkaError(code, f"group {self.group_id}: OffsetFetch {tp}")
        return dict(result.offsets)

    async def start_from_committed(self) -> None:
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
