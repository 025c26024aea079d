"""The controller's handling of brokers' storage problems (issue 14): LeaderAndIsr answers and
log-dir event notifications, each handled as an event on the controller's one queue.

- Every LeaderAndIsr the controller sends has its answer come back as an event
  (`_watch_answer`). Per-partition KAFKA_STORAGE_ERROR takes those replicas offline
  (`decisions.on_replicas_offline`: leadership moves to another online ISR member, the replica
  leaves the ISR); an answer without error for an offline replica takes it back
  (`on_replicas_online`, which may elect it where a partition has no leader). A request that
  failed as a whole is resent with backoff, rebuilt from the context as it is then
  (`leader_and_isr_answers`).
- `/log_dir_event_notification` children (Kafka's LogDirEventNotification, written by a broker
  whose log dir went offline or came back, or whose led log was found damaged): each named live
  broker gets a LeaderAndIsr for every partition it hosts (Kafka's onBrokerLogDirFailure); its
  answers then say which replicas it can serve. The notifications are deleted once handled.
- A broker that (re)registers starts with every replica online (`clear_offline`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kazoo.client import KazooClient

from epochlog.controller import events as ev
from epochlog.controller.context import ControllerContext, TopicPartition
from epochlog.controller.decisions import Plan, on_replicas_offline, on_replicas_online
from epochlog.controller.leader_and_isr_answers import (
    partitions_of_request,
    read_answer,
    record_answer,
    retry_delay_ms,
)
from epochlog.controller.request_batch import ControlRequest
from epochlog.protocol.api import ApiKey
from epochlog.zk.log_dir_events import (
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    delete_log_dir_events,
    read_log_dir_events,
)
from epochlog.zk.session import WatchHandle, watch_children

log = logging.getLogger(__name__)


class StorageEvents:
    """Mixed into `Controller`; the attributes below are the controller's."""

    ctx: ControllerContext
    zk: KazooClient
    _enqueue: Callable[[ev.ControllerEvent], None]
    _execute: Callable[[Plan], Awaitable[list[asyncio.Future[Any]]]]
    _unclean: Callable[[str], bool]
    # broker -> resends of its failed LeaderAndIsr so far (reset by an answer that worked)
    _resends: dict[int, int]

    # ------------------------------------------------------------------- answers

    def _watch_answer(self, request: ControlRequest, future: asyncio.Future[Any]) -> None:
        """Handle the answer to a LeaderAndIsr as an event once it arrives."""
        if request.api_key is not ApiKey.LEADER_AND_ISR:
            return

        def answered(done: asyncio.Future[Any]) -> None:
            if done.cancelled() or done.exception() is not None:
                return
            response = done.result()
            self._enqueue(ev.LeaderAndIsrAnswered(request, response))

        future.add_done_callback(answered)

    async def _on_leader_and_isr_answer(self, event: ev.LeaderAndIsrAnswered) -> None:
        request, response = event.request, event.response
        names = {topic_id: topic for topic, topic_id in self.ctx.topic_ids.items()}
        answer = read_answer(response, names)
        broker = request.broker_id
        info = self.ctx.live_brokers.get(broker)
        if answer is None or info is None or info.epoch != request.broker_epoch:
            return  # no answer, or meant for a generation that is gone
        if answer.retry:
            self._schedule_resend(request, answer.error.name)
            return
        self._resends.pop(broker, None)
        newly, back = record_answer(self.ctx, broker, answer)
        if newly:
            log.warning(
                "broker %d cannot serve %d replicas (KAFKA_STORAGE_ERROR): %s; taking them offline",
                broker,
                len(newly),
                _short(newly),
            )
            await self._execute(
                on_replicas_offline(self.ctx, {tp: {broker} for tp in newly}, self._unclean)
            )
        if back:
            log.info("broker %d serves %d replicas again: %s", broker, len(back), _short(back))
            await self._execute(on_replicas_online(self.ctx, back, self._unclean))

    def _schedule_resend(self, request: ControlRequest, why: str) -> None:
        broker = request.broker_id
        attempt = self._resends.get(broker, 0) + 1
        self._resends[broker] = attempt
        delay_ms = retry_delay_ms(attempt)
        log.warning(
            "broker %d answered LeaderAndIsr with %s; resending it in %d ms (attempt %d)",
            broker,
            why,
            delay_ms,
            attempt,
        )
        resend = ev.LeaderAndIsrResend(
            broker,
            request.broker_epoch,
            tuple(partitions_of_request(request.body)),
            getattr(request.body, "type", 0) == 2,
        )
        asyncio.get_running_loop().call_later(delay_ms / 1000, self._enqueue, resend)

    async def _resend_leader_and_isr(self, event: ev.LeaderAndIsrResend) -> None:
        info = self.ctx.live_brokers.get(event.broker)
        if info is None or info.epoch != event.broker_epoch:
            return  # gone or bounced: a new generation gets a full LeaderAndIsr anyway
        await self._send_leader_and_isr(event.broker, list(event.partitions), event.full)

    async def _send_leader_and_isr(
        self, broker: int, partitions: list[TopicPartition], full: bool = False
    ) -> None:
        """A LeaderAndIsr to `broker` with the current state of `partitions` (those still
        known and not being deleted), nothing else."""
        plan = Plan()
        for tp in partitions:
            if tp in self.ctx.states and tp[0] not in self.ctx.topics_being_deleted:
                plan.batch.add_leader_and_isr([broker], tp)
        if full:
            plan.batch.mark_full(broker)
        plan.batch.changed_partitions.clear()  # nothing changed: no UpdateMetadata for all
        if plan.batch.leader_and_isr:
            await self._execute(plan)

    def clear_offline(self, broker: int) -> None:
        """A broker (re)registered: its replicas start online (it re-reports what it cannot
        serve in its answer to the startup LeaderAndIsr)."""
        self._resends.pop(broker, None)
        if self.ctx.offline_replicas.pop(broker, None):
            log.info("broker %d re-registered: its offline replicas are forgotten", broker)

    # ---------------------------------------------------------- log dir events

    def _watch_log_dir_events(self, loop: asyncio.AbstractEventLoop) -> WatchHandle:
        return watch_children(
            self.zk,
            LOG_DIR_EVENT_NOTIFICATION_PATH,
            loop,
            lambda children: self._enqueue(ev.LogDirEvents()) if children else None,
        )

    async def _log_dir_events(self, _event: ev.LogDirEvents) -> None:
        events = await asyncio.to_thread(read_log_dir_events, self.zk)
        if not events:
            return
        brokers = sorted({b for _, b in events if b is not None and b in self.ctx.live_brokers})
        log.info(
            "log dir events from brokers %s: resending each its LeaderAndIsr",
            brokers or "(none live)",
        )
        for broker in brokers:
            await self._send_leader_and_isr(broker, self.ctx.partitions_on(broker))
        await asyncio.to_thread(delete_log_dir_events, self.zk, [name for name, _ in events])


def _short(partitions: set[TopicPartition], limit: int = 10) -> str:
    names = [f"{t}-{p}" for t, p in sorted(partitions)]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more
