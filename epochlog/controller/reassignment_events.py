"""The controller's partition reassignments (KIP-455): AlterPartitionReassignments and
ListPartitionReassignments, and carrying each reassignment through to its end.

Every request is one event on the controller's queue. Each partition's step comes from
`reassignment` (no I/O) and is performed here: the topic znode
(`/brokers/topics/<t>` with "adding_replicas" and "removing_replicas") and the partition state,
in the order the step says (a start writes the znode first, a completion last), then the
context, then the requests. A reassignment moves on when an accepted AlterPartition grows its
ISR (`_after_isr_change`), when brokers come and go, and when a new controller has loaded the
znodes (`_resume_reassignments`), so one that a controller failover interrupts is finished by
the next controller.

The ZooKeeper-mode request, the /admin/reassign_partitions znode (`zk.reassign_partitions`), is
honoured as Kafka's controller honours it: its entries start when it is created or when a
controller takes over, each leaves it when its reassignment completes or an
AlterPartitionReassignments request supersedes it (entries refused by the API's checks leave at
once), and the znode is deleted when empty.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from epochlog.controller import events as ev
from epochlog.controller.channel import ControllerChannel
from epochlog.controller.context import ControllerContext, TopicPartition
from epochlog.controller.decisions import Plan
from epochlog.controller.reassignment import (
    ReassignmentStep,
    Refusal,
    assignment_of,
    continue_reassignments,
    reassigning_partitions,
    start_reassignment,
    validate_reassignment,
)
from epochlog.controller.request_batch import ControlRequest
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode
from epochlog.zk import controller_zk as zkc
from epochlog.zk.reassign_partitions import (
    REASSIGN_PARTITIONS_PATH,
    decode_reassign_partitions,
    encode_reassign_partitions,
)
from epochlog.zk.session import TransactionFailedError, WatchHandle, watch_data
from epochlog.zk.znodes import TopicAssignment, ZNodeDecodeError

log = logging.getLogger(__name__)


class ReassignmentEvents:
    """Mixed into `Controller`; the attributes below are the controller's."""

    ctx: ControllerContext
    zk: KazooClient
    writer: zkc.FencedWriter
    channel: ControllerChannel
    # /admin/reassign_partitions as this controller last wrote or read it, and the creation
    # (czxid) of the znode it has handled: its own rewrites do not start anything again
    _zk_reassignments: dict[TopicPartition, tuple[int, ...]]
    _zk_reassignments_czxid: int
    _enqueue: Callable[[ev.ControllerEvent], None]
    _enqueue_and_wait: Callable[[ev.ControllerEvent], Awaitable[Any]]
    _write: Callable[[Plan], Awaitable[set[TopicPartition]]]
    _watch_answer: Callable[[ControlRequest, asyncio.Future[Any]], None]

    # ------------------------------------------------------------------- requests

    async def alter_partition_reassignments(self, request: Any, version: int) -> Any:
        """Start, replace or cancel (null replicas) each partition's reassignment; answered
        once each has been started (its znode written and its replicas told), as Kafka does."""
        return await self._enqueue_and_wait(ev.AlterPartitionReassignments(request))

    async def _alter_partition_reassignments(self, event: ev.AlterPartitionReassignments) -> Any:
        R = m.AlterPartitionReassignmentsResponse
        responses = []
        for topic in event.request.topics:
            partitions = []
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                target = None if p.replicas is None else tuple(p.replicas)
                error, message = await self._reassign(tp, target)
                partitions.append(
                    R.ReassignablePartitionResponse(
                        partition_index=p.partition_index,
                        error_code=error,
                        error_message=message,
                    )
                )
            responses.append(R.ReassignableTopicResponse(name=topic.name, partitions=partitions))
        return R(error_code=ErrorCode.NONE, responses=responses)

    async def _reassign(
        self, tp: TopicPartition, target: tuple[int, ...] | None
    ) -> tuple[ErrorCode, str | None]:
        verdict = validate_reassignment(self.ctx, tp, target)
        if isinstance(verdict, Refusal):
            return verdict.error, verdict.message
        if target is None:
            log.info("reassignment of %s-%d cancelled: back to %s", *tp, list(verdict.target))
        else:
            log.info(
                "reassignment of %s-%d: replicas %s -> %s (adding %s, removing %s)",
                *tp,
                list(self.ctx.assignments[tp]),
                list(verdict.target),
                list(verdict.adding),
                list(verdict.removing),
            )
        await self._drop_zk_reassignment(tp)  # the latest request wins
        try:
            await self._perform(start_reassignment(self.ctx, tp, verdict))
        except zkc.ControllerMovedError:
            raise
        except Exception as exc:
            log.exception("reassignment of %s-%d failed", *tp)
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"{tp[0]}-{tp[1]}: {exc}"
        return ErrorCode.NONE, None

    async def list_partition_reassignments(self, request: Any, version: int) -> Any:
        """The reassignments in progress: all of them (null topics), or those of the named
        partitions (partitions not being reassigned are left out, as Kafka leaves them)."""
        return await self._enqueue_and_wait(ev.ListPartitionReassignments(request))

    async def _list_partition_reassignments(self, event: ev.ListPartitionReassignments) -> Any:
        R = m.ListPartitionReassignmentsResponse
        request = event.request
        if request.topics is None:
            partitions = reassigning_partitions(self.ctx)
        else:
            wanted = {(t.name, p) for t in request.topics for p in t.partition_indexes}
            partitions = [tp for tp in reassigning_partitions(self.ctx) if tp in wanted]
        by_topic: dict[str, list[Any]] = {}
        for topic, partition in partitions:
            tp = (topic, partition)
            by_topic.setdefault(topic, []).append(
                R.OngoingPartitionReassignment(
                    partition_index=partition,
                    replicas=list(self.ctx.assignments[tp]),
                    adding_replicas=list(self.ctx.adding_replicas.get(tp, ())),
                    removing_replicas=list(self.ctx.removing_replicas.get(tp, ())),
                )
            )
        return R(
            error_code=ErrorCode.NONE,
            topics=[
                R.OngoingTopicReassignment(name=name, partitions=entries)
                for name, entries in sorted(by_topic.items())
            ],
        )

    # ------------------------------------------------------------------- progress

    def _after_isr_change(self, partitions: Iterable[TopicPartition]) -> None:
        """Accepted ISR changes: reassignments they may complete run as the next event."""
        reassigning = [
            tp
            for tp in partitions
            if tp in self.ctx.adding_replicas or tp in self.ctx.removing_replicas
        ]
        if reassigning:
            self._enqueue(ev.ReassignmentIsrChanged(tuple(reassigning)))

    async def _reassignment_isr_changed(self, event: ev.ReassignmentIsrChanged) -> None:
        await self._continue_reassignments(event.partitions)

    async def _resume_reassignments(self) -> None:
        """After a failover or a broker change: finish what is complete. The failover plan
        already told every live replica (the new ones too) the partition's state."""
        partitions = reassigning_partitions(self.ctx)
        if partitions:
            log.info("%d partition reassignments in progress", len(partitions))
            await self._continue_reassignments(partitions)

    async def _continue_reassignments(self, partitions: Iterable[TopicPartition]) -> None:
        for step in continue_reassignments(self.ctx, partitions):
            await self._perform(step)

    # ------------------------------------------------------------------- /admin/reassign_partitions

    def _watch_zk_reassignments(self, loop: asyncio.AbstractEventLoop) -> WatchHandle:
        def changed(_data: bytes | None, stat: ZnodeStat | None) -> None:
            if stat is not None and stat.czxid != self._zk_reassignments_czxid:
                self._zk_reassignments_czxid = stat.czxid
                self._enqueue(ev.ZkReassignment())

        return watch_data(self.zk, REASSIGN_PARTITIONS_PATH, loop, changed)

    async def _zk_reassignment_request(self, _event: ev.ZkReassignment) -> None:
        def read() -> bytes | None:
            try:
                return self.zk.get(REASSIGN_PARTITIONS_PATH)[0]
            except NoNodeError:
                return None

        data = await asyncio.to_thread(read)
        if data is None:
            return
        try:
            entries = decode_reassign_partitions(data)
        except ZNodeDecodeError as exc:
            log.warning("%s; deleting it", exc)
            await asyncio.to_thread(self.writer.delete_paths, [REASSIGN_PARTITIONS_PATH])
            return
        kept: dict[TopicPartition, tuple[int, ...]] = {}
        starts = []
        for tp, target in entries.items():
            verdict = validate_reassignment(self.ctx, tp, target)
            if isinstance(verdict, Refusal):
                log.warning("%s: %s (dropped)", REASSIGN_PARTITIONS_PATH, verdict.message)
                continue
            kept[tp] = target
            current = assignment_of(self.ctx, tp)
            if not (current.is_being_reassigned and verdict == current):  # else: running
                starts.append((tp, verdict))
        self._zk_reassignments = kept
        if self._zk_reassignments != entries:
            await self._write_zk_reassignments()
        log.info("%s: %d partition reassignments", REASSIGN_PARTITIONS_PATH, len(starts))
        for tp, verdict in starts:
            await self._perform(start_reassignment(self.ctx, tp, verdict))

    async def _drop_zk_reassignment(self, tp: TopicPartition) -> None:
        if self._zk_reassignments.pop(tp, None) is not None:
            await self._write_zk_reassignments()

    async def _write_zk_reassignments(self) -> None:
        if self._zk_reassignments:
            data = encode_reassign_partitions(self._zk_reassignments)
            op = zkc.WriteOp("set", REASSIGN_PARTITIONS_PATH, data)
            try:
                await asyncio.to_thread(self.writer.commit, [op])
            except TransactionFailedError as exc:  # deleted by an operator meanwhile
                log.warning("cannot rewrite %s: %s", REASSIGN_PARTITIONS_PATH, exc.error)
                self._zk_reassignments.clear()
        else:
            await asyncio.to_thread(self.writer.delete_paths, [REASSIGN_PARTITIONS_PATH])

    # ------------------------------------------------------------------- I/O

    async def _perform(self, step: ReassignmentStep) -> None:
        """Write the step (znode and state in its order), commit it, send its requests."""
        tp = step.tp
        if not step.complete:
            await self._write_assignment(step)
        refused = await self._write(step.plan) if step.plan.updates else set()
        if tp in refused:
            # Another writer moved the state (the context now holds ZooKeeper's): a start
            # keeps its znode and continues on the next ISR change; a completion waits for it.
            log.warning("reassignment of %s-%d: its state changed meanwhile", *tp)
            return
        if step.complete:
            await self._write_assignment(step)
            log.info(
                "reassignment of %s-%d complete: replicas %s", *tp, list(step.assignment.replicas)
            )
            if self._zk_reassignments.get(tp) == step.assignment.replicas:
                await self._drop_zk_reassignment(tp)
        for request in step.plan.batch.build(self.ctx):
            future = self.channel.send(request)
            self._watch_answer(request, future)

    async def _write_assignment(self, step: ReassignmentStep) -> None:
        topic, partition = step.tp
        ctx = self.ctx
        replicas = {p: ctx.assignments[(topic, p)] for _, p in ctx.partitions_of(topic)}
        adding = {p: r for (t, p), r in ctx.adding_replicas.items() if t == topic}
        removing = {p: r for (t, p), r in ctx.removing_replicas.items() if t == topic}
        new = step.assignment
        replicas[partition] = new.replicas
        for recorded, value in ((adding, new.adding), (removing, new.removing)):
            if value:
                recorded[partition] = value
            else:
                recorded.pop(partition, None)
        await asyncio.to_thread(
            self.writer.set_topic_assignment,
            topic,
            TopicAssignment(replicas, ctx.topic_ids[topic], adding, removing),
        )
        ctx.assignments[step.tp] = new.replicas
        for recorded_in_ctx, value in (
            (ctx.adding_replicas, new.adding),
            (ctx.removing_replicas, new.removing),
        ):
            if value:
                recorded_in_ctx[step.tp] = value
            else:
                recorded_in_ctx.pop(step.tp, None)
