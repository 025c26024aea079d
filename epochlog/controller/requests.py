"""The controller's answers to admin requests: CreateTopics, DeleteTopics, AlterPartition and
ControlledShutdown.

Each request becomes one event on the controller's queue (an `events` value given to
`_enqueue_and_wait`, handled by the `_<request>` method here), so it sees and changes the context
like any other event; it returns once ZooKeeper holds the change and, where
the client waits for it (topic creation and deletion, controlled shutdown), once the brokers
answered the control requests or the wait timed out.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kazoo.client import KazooClient

from epochlog.config.broker import BrokerConfig
from epochlog.config.topic import TopicConfigError, validate_topic_configs
from epochlog.controller import events as ev
from epochlog.controller.alter_partition import (
    AlterPartitionDecision,
    IsrProposal,
    decide_alter_partition,
)
from epochlog.controller.assignment import AssignmentError, assign_replicas
from epochlog.controller.channel import ControllerChannel
from epochlog.controller.context import ControllerContext, TopicPartition
from epochlog.controller.decisions import Plan, on_controlled_shutdown
from epochlog.metrics.process_stats import STATS
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode
from epochlog.storage.layout import validate_topic_name
from epochlog.zk import controller_zk as zkc
from epochlog.zk.znodes import TopicAssignment

REQUEST_WAIT_S = 10.0  # how long an admin request waits for brokers to apply a change


class ControllerRequests:
    """Mixed into `Controller`; the attributes below are the controller's."""

    ctx: ControllerContext
    config: BrokerConfig
    zk: KazooClient
    writer: zkc.FencedWriter
    channel: ControllerChannel
    _enqueue_and_wait: Callable[[ev.ControllerEvent], Awaitable[Any]]
    _topic_change: Callable[[ev.TopicChange], Awaitable[list[asyncio.Future[Any]]]]
    _delete_topics: Callable[[list[str]], Awaitable[None]]
    _write: Callable[[Plan], Awaitable[set[TopicPartition]]]
    _execute: Callable[[Plan], Awaitable[list[asyncio.Future[Any]]]]
    _after_isr_change: Callable[[Iterable[TopicPartition]], None]

    @staticmethod
    async def _wait(
        futures: Iterable[asyncio.Future[Any]], timeout_s: float = REQUEST_WAIT_S
    ) -> None:
        pending = list(futures)
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)

    async def create_topics(self, request: Any, version: int) -> Any:
        """CreateTopics, answered once the brokers have the new partitions (or the timeout)."""
        return await self._enqueue_and_wait(ev.CreateTopics(request))

    async def _create_topics(self, event: ev.CreateTopics) -> Any:
        request = event.request
        results = []
        created: list[str] = []
        for topic in request.topics:
            result = await self._create_topic(topic, bool(request.validate_only))
            results.append(result)
            if result.error_code == ErrorCode.NONE and not request.validate_only:
                created.append(topic.name)
        if created:
            futures = await self._topic_change(ev.TopicChange())
            await self._wait(futures, min(REQUEST_WAIT_S, max(request.timeout_ms, 0) / 1000))
            for result in results:
                if result.name in self.ctx.topic_ids:
                    result.topic_id = self.ctx.topic_ids[result.name]
        return m.CreateTopicsResponse(topics=results)

    async def _create_topic(self, topic: Any, validate_only: bool) -> Any:
        result = m.CreateTopicsResponse.CreatableTopicResult(name=topic.name)

        def fail(error: ErrorCode, message: str) -> Any:
            result.error_code = error
            result.error_message = message
            return result

        try:
            validate_topic_name(topic.name)
        except ValueError as exc:
            return fail(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc))
        if topic.name in self.ctx.topic_ids:
            return fail(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists")
        try:
            validate_topic_configs({c.name: c.value for c in topic.configs})
        except TopicConfigError as exc:
            return fail(ErrorCode.INVALID_CONFIG, str(exc))
        configs = {c.name: c.value for c in topic.configs if c.value is not None}
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                return fail(
                    ErrorCode.INVALID_REQUEST,
                    "give either assignments or partitions and replication factor, not both",
                )
            assignment = {a.partition_index: tuple(a.broker_ids) for a in topic.assignments}
            if sorted(assignment) != list(range(len(assignment))):
                return fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be 0..n-1")
            for replicas in assignment.values():
                if not replicas or len(set(replicas)) != len(replicas):
                    return fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"bad replicas {replicas}")
                unknown = [b for b in replicas if b not in self.ctx.live_brokers]
                if unknown:
                    return fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"unknown brokers {unknown}")
        else:
            partitions = topic.num_partitions
            if partitions == -1:
                partitions = self.config["num.partitions"]
            factor = topic.replication_factor
            if factor == -1:
                factor = self.config["default.replication.factor"]
            try:
                assignment = self.assign(partitions, factor)
            except AssignmentError as exc:
                return fail(ErrorCode[exc.error], str(exc))
        result.num_partitions = len(assignment)
        result.replication_factor = len(next(iter(assignment.values())))
        if validate_only:
            return result
        topic_id = uuid.uuid4()
        try:
            await asyncio.to_thread(
                self.writer.create_topic,
                topic.name,
                TopicAssignment(assignment, topic_id),
                {},
                configs,
            )
        except zkc.TopicAlreadyExistsError:
            return fail(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists")
        result.topic_id = topic_id
        return result

    def assign(self, partitions: int, replication_factor: int) -> dict[int, tuple[int, ...]]:
        brokers = sorted(self.ctx.live_brokers)
        n = max(len(brokers), 1)
        return assign_replicas(
            brokers, partitions, replication_factor, random.randrange(n), random.randrange(n)
        )

    async def delete_topics(self, names: list[str]) -> dict[str, ErrorCode]:
        """DeleteTopics: marks, deletes, and answers once the brokers dropped the partitions."""
        return await self._enqueue_and_wait(ev.DeleteTopics(tuple(names)))

    async def _delete_topics_request(self, event: ev.DeleteTopics) -> dict[str, ErrorCode]:
        names = event.names
        errors: dict[str, ErrorCode] = {}
        if not self.config["delete.topic.enable"]:
            return dict.fromkeys(names, ErrorCode.TOPIC_DELETION_DISABLED)
        existing = []
        for name in names:
            if name not in self.ctx.topic_ids:
                errors[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                errors[name] = ErrorCode.NONE
                existing.append(name)
        for name in existing:
            await asyncio.to_thread(zkc.mark_topic_for_deletion, self.zk, name)
        await self._delete_topics([t for t in existing if t in self.ctx.topic_ids])
        return errors

    async def alter_partition(self, request: Any, version: int) -> Any:
        """AlterPartition from a leader: validate (KIP-903), write the accepted ISRs, announce them
        with UpdateMetadata, and answer each partition with its committed state or an error."""
        return await self._enqueue_and_wait(ev.AlterPartition(request))

    async def _alter_partition(self, event: ev.AlterPartition) -> Any:
        request = event.request
        proposals = [
            IsrProposal(
                topic.topic_id,
                p.partition_index,
                p.leader_epoch,
                p.partition_epoch,
                tuple((s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs),
            )
            for topic in request.topics
            for p in topic.partitions
        ]
        decision = decide_alter_partition(
            self.ctx,
            request.broker_id,
            request.broker_epoch,
            proposals,
            kip903=self.config.enabled("epochlog.test.kip903.enabled"),
            check_requester_epoch=self.config.enabled("epochlog.test.kip380.enabled"),
        )
        if decision.top_error != ErrorCode.NONE:
            STATS.count_fenced(decision.top_error.name, "AlterPartition")
            return m.AlterPartitionResponse(error_code=decision.top_error)
        ineligible = sum(
            1 for error in decision.errors.values() if error == ErrorCode.INELIGIBLE_REPLICA
        )
        if ineligible:  # KIP-903: counted per partition refused
            STATS.count_fenced(ErrorCode.INELIGIBLE_REPLICA.name, "AlterPartition", ineligible)
        plan = Plan(updates=dict(decision.accepted))
        plan.batch.add_changed_partitions(decision.accepted)
        refused = await self._write(plan)
        for request_to_send in plan.batch.build(self.ctx):
            self.channel.send(request_to_send)
        self._after_isr_change(set(decision.accepted) - refused)  # reassignments
        return self._alter_partition_response(proposals, decision, refused)

    def _alter_partition_response(
        self,
        proposals: list[IsrProposal],
        decision: AlterPartitionDecision,
        refused: set[TopicPartition],
    ) -> Any:
        names = {topic_id: name for name, topic_id in self.ctx.topic_ids.items()}
        by_topic: dict[uuid.UUID, list[Any]] = {}
        for proposal in proposals:
            key = (proposal.topic_id, proposal.partition)
            tp = (names.get(proposal.topic_id, ""), proposal.partition)
            error = decision.errors.get(key)
            if error is None and tp in refused:
                error = ErrorCode.INVALID_UPDATE_VERSION
            state = self.ctx.states.get(tp)
            entry = m.AlterPartitionResponse.PartitionData(
                partition_index=proposal.partition, error_code=error or ErrorCode.NONE
            )
            if error is None and state is not None:
                entry.leader_id = state.leader
                entry.leader_epoch = state.leader_epoch
                entry.isr = list(state.isr)
                entry.partition_epoch = state.partition_epoch
            by_topic.setdefault(proposal.topic_id, []).append(entry)
        return m.AlterPartitionResponse(
            topics=[
                m.AlterPartitionResponse.TopicData(topic_id=topic_id, partitions=partitions)
                for topic_id, partitions in by_topic.items()
            ]
        )

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        """Move leadership off the broker; answer the partitions it still leads."""
        return await self._enqueue_and_wait(ev.ControlledShutdown(broker_id, broker_epoch))

    async def _controlled_shutdown(
        self, event: ev.ControlledShutdown
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        broker_id = event.broker_id
        known = self.ctx.live_brokers.get(broker_id)
        if (
            self.config.enabled("epochlog.test.kip380.enabled")
            and known is not None
            and event.broker_epoch != -1
            and event.broker_epoch < known.epoch
        ):
            STATS.count_fenced(ErrorCode.STALE_BROKER_EPOCH.name, "ControlledShutdown")
            return ErrorCode.STALE_BROKER_EPOCH, []
        if known is None:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        self.ctx.shutting_down.add(broker_id)
        await self._wait(await self._execute(on_controlled_shutdown(self.ctx, broker_id)))
        remaining = [
            tp for tp in self.ctx.partitions_led_by(broker_id) if len(self.ctx.replicas(tp)) > 1
        ]
        return ErrorCode.NONE, remaining
