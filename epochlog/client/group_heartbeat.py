"""The consumer's heartbeat task: Heartbeat every heartbeat.interval.ms while SYNCING or STABLE.

`membership.next_heartbeat` decides each turn; this task does it. No heartbeat got through within
session.timeout.ms: the coordinator is forgotten (the group task finds it again). The application
did not poll within max.poll.interval.ms: `on_poll_timeout` makes the member leave (Kafka's
semantics: it is out and its partitions are lost; it rejoins at its next poll). Every answer goes
to `GroupMembership.on_heartbeat_response`; an outcome other than PROCEED goes to `on_outcome`
(REBALANCE_IN_PROGRESS: rejoin; UNKNOWN_MEMBER_ID: reset; FENCED_INSTANCE_ID: fatal; ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from epochlog.aio import wait_for
from epochlog.client.coordinator_connection import CoordinatorConnection
from epochlog.client.errors import ClientError
from epochlog.client.group_requests import heartbeat_request
from epochlog.client.membership import (
    GroupMembership,
    HeartbeatStep,
    HeartbeatTimers,
    Outcome,
    Reaction,
    next_heartbeat,
)
from epochlog.client.network import NetworkClient
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class GroupHeartbeat:
    """One member's heartbeat task; `wakeup` makes it look again at once (a join completed, the
    application polled after leaving, the consumer closes)."""

    def __init__(
        self,
        group_id: str,
        net: NetworkClient,
        membership: GroupMembership,
        timers: HeartbeatTimers,
        coordinator: CoordinatorConnection,
        backoff_ms: int,
        *,
        on_poll_timeout: Callable[[], Awaitable[None]],
        on_outcome: Callable[[Outcome], None],
    ) -> None:
        self.group_id = group_id
        self._net = net
        self._membership = membership
        self._timers = timers
        self._coordinator = coordinator
        self._backoff_ms = backoff_ms
        self._on_poll_timeout = on_poll_timeout
        self._on_outcome = on_outcome
        self.wakeup = asyncio.Event()

    async def run(self, closed: Callable[[], bool]) -> None:
        while not closed():
            self.wakeup.clear()
            try:
                wait_ms = await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("group %s: heartbeat failed", self.group_id)
                wait_ms = self._backoff_ms
            with contextlib.suppress(TimeoutError):
                timeout = None if wait_ms == float("inf") else max(wait_ms, 1) / 1000
                await wait_for(self.wakeup.wait(), timeout)

    async def _step(self) -> float:
        """One turn; returns how long to wait before the next (inf: until woken)."""
        member, timers = self._membership, self._timers
        if not self._coordinator.known:
            return self._backoff_ms
        now = self._net.now_ms()
        decision = next_heartbeat(member, timers, now)
        if decision.step is HeartbeatStep.IDLE:
            return float("inf")
        if decision.step is HeartbeatStep.SESSION_EXPIRED:
            self._coordinator.lost("no heartbeat got through within session.timeout.ms")
            timers.received(now)
            return self._backoff_ms
        if decision.step is HeartbeatStep.POLL_EXPIRED:
            await self._on_poll_timeout()
            return float("inf")
        if decision.step is HeartbeatStep.WAIT:
            return decision.wait_ms
        timers.sent(now)
        sent = member.generation
        try:
            conn = await self._coordinator.connection()
            version = conn.version_for(ApiKey.HEARTBEAT)
            request = heartbeat_request(
                version, self.group_id, sent.generation_id, sent.member_id, member.group_instance_id
            )
            response = await conn.send(request, version=version)
        except ClientError as exc:
            log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
            timers.failed(self._net.now_ms())
            if not self._coordinator.connected:
                self._coordinator.lost(f"heartbeat: {exc}")
            return self._backoff_ms
        outcome = member.on_heartbeat_response(sent, ErrorCode.of(response.error_code))
        timers.answered(outcome.reaction, self._net.now_ms())
        if outcome.reaction is not Reaction.PROCEED:
            self._on_outcome(outcome)
        return 0
