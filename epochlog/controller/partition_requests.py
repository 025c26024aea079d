"""The controller's answers to CreatePartitions and ElectLeaders (mixed into `Controller`).

Each request is one event on the controller's queue, like CreateTopics. CreatePartitions checks
every topic (`partition_admin.new_partitions`), rewrites /brokers/topics/<t> with the grown
assignment (fenced, as every controller write), adds the partitions to the context and runs the
new-partition plan that Kafka's partition-modification watch would run: the first live replica
leads, the live replicas form the ISR, every live broker hears of them. It answers once the
brokers have applied the LeaderAndIsr (or the request's timeout, at most `REQUEST_WAIT_S`); a
timeout of 0 or less answers REQUEST_TIMED_OUT for topics that were grown, as Kafka does.
ElectLeaders runs `partition_admin.on_elect_leaders` and answers once the new leaders have
applied their LeaderAndIsr; with null partitions (every partition) ELECTION_NOT_NEEDED results
are left out of the answer, as Kafka's broker does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from epochlog.controller import events as ev
from epochlog.controller.context import ControllerContext, TopicPartition
from epochlog.controller.decisions import Plan, on_new_partitions
from epochlog.controller.partition_admin import (
    ElectionOutcome,
    ElectionType,
    PartitionAdminError,
    new_partitions,
    on_elect_leaders,
)
from epochlog.controller.reassignment import is_topic_being_reassigned
from epochlog.controller.requests import REQUEST_WAIT_S
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode
from epochlog.zk import controller_zk as zkc
from epochlog.zk.znodes import TopicAssignment


def _wait_s(timeout_ms: int) -> float:
    return min(REQUEST_WAIT_S, max(timeout_ms, 0) / 1000)


class PartitionRequests:
    """Mixed into `Controller`; the attributes below are the controller's."""

    ctx: ControllerContext
    writer: zkc.FencedWriter
    _enqueue_and_wait: Callable[[ev.ControllerEvent], Awaitable[Any]]
    _execute: Callable[[Plan], Awaitable[list[asyncio.Future[Any]]]]
    _wait: Callable[..., Awaitable[None]]

    async def create_partitions(self, request: Any) -> Any:
        """CreatePartitions: a result per distinct topic name of the request."""
        return await self._enqueue_and_wait(ev.CreatePartitions(request))

    async def _create_partitions(self, event: ev.CreatePartitions) -> Any:
        R = m.CreatePartitionsResponse
        request = event.request
        names = [t.name for t in request.topics]
        results: dict[str, Any] = {}
        grown: list[TopicPartition] = []
        for topic in request.topics:
            result = R.CreatePartitionsTopicResult(name=topic.name)
            results[topic.name] = result
            try:
                if names.count(topic.name) > 1:
                    raise PartitionAdminError(
                        ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
                    )
                grown += await self._grow_topic(topic, bool(request.validate_only))
            except PartitionAdminError as exc:
                result.error_code = exc.error
                result.error_message = str(exc)
        if grown:
            futures = await self._execute(on_new_partitions(self.ctx, grown))
            await self._wait(futures, _wait_s(request.timeout_ms))
            if request.timeout_ms <= 0:
                for name in {t for t, _ in grown}:
                    results[name].error_code = ErrorCode.REQUEST_TIMED_OUT
        return R(results=list(results.values()))

    async def _grow_topic(self, topic: Any, validate_only: bool) -> list[TopicPartition]:
        """Check and (unless validating) write one topic's new partitions; returns them."""
        if topic.name in self.ctx.topics_being_deleted:
            raise PartitionAdminError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion."
            )
        if is_topic_being_reassigned(self.ctx, topic.name):
            # Kafka's rule (ZkAdminManager): rewriting the topic znode now would race with the
            # reassignment's own writes of it
            raise PartitionAdminError(
                ErrorCode.REASSIGNMENT_IN_PROGRESS,
                f"A partition reassignment is in progress for the topic '{topic.name}'.",
            )
        existing = {p: r for (t, p), r in self.ctx.assignments.items() if t == topic.name}
        assignments = (
            None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        )
        added = new_partitions(
            topic.name, existing, topic.count, assignments, set(self.ctx.live_brokers)
        )
        if validate_only:
            return []
        topic_id = self.ctx.topic_ids[topic.name]
        await asyncio.to_thread(
            self.writer.set_topic_assignment,
            topic.name,
            TopicAssignment({**existing, **added}, topic_id),
        )
        self.ctx.add_topic(topic.name, topic_id, added)
        return [(topic.name, p) for p in sorted(added)]

    async def elect_leaders(
        self,
        partitions: Iterable[TopicPartition] | None,
        election_type: ElectionType,
        timeout_ms: int,
    ) -> dict[TopicPartition, ElectionOutcome]:
        """ElectLeaders: each partition's outcome (see the module docstring)."""
        wanted = None if partitions is None else tuple(partitions)
        return await self._enqueue_and_wait(ev.ElectLeaders(wanted, election_type, timeout_ms))

    async def _elect_leaders(self, event: ev.ElectLeaders) -> dict[TopicPartition, ElectionOutcome]:
        wanted = None if event.partitions is None else list(event.partitions)
        plan, outcomes = on_elect_leaders(self.ctx, wanted, event.election_type)
        if plan.updates:
            await self._wait(await self._execute(plan), _wait_s(event.timeout_ms))
        for tp, planned in plan.updates.items():
            state = self.ctx.states.get(tp)
            if state is None or state.leader_epoch != planned.leader_epoch:
                # ZooKeeper refused the write (the state moved meanwhile): not elected.
                error = (
                    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                    if event.election_type is ElectionType.PREFERRED
                    else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                )
                outcomes[tp] = ElectionOutcome(error, "the partition's state changed")
        if wanted is None:
            needed = ErrorCode.ELECTION_NOT_NEEDED
            outcomes = {tp: o for tp, o in outcomes.items() if o.error is not needed}
        return outcomes
