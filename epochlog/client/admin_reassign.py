"""The admin client's partition reassignments (KIP-455): alter and list. Mixed into `AsyncAdmin`.

Both requests go to the controller (Metadata's ControllerId). A top-level NOT_CONTROLLER (a
broker that is not, or no longer, the controller) or a connection that fails is retried after
a metadata refresh until the call's timeout (`default.api.timeout.ms` unless given), so a
controller move during the call is invisible to the caller, as with CreateTopics.

`alter_partition_reassignments` takes {(topic, partition): replicas} where None cancels the
partition's reassignment, and returns one result per partition: None when the controller
started it, else the `KafkaError` (INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
UNKNOWN_TOPIC_OR_PARTITION, ...). `list_partition_reassignments` returns the reassignments in
progress, of every partition or of those asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from epochlog.client.admin_base import AdminBase
from epochlog.client.errors import ClientError, IncompatibleBrokerError, KafkaError
from epochlog.client.metadata import TopicPartition
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode


@dataclass(frozen=True)
class PartitionReassignment:
    """A reassignment in progress: the full replica set and the replicas moving in and out."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


class ReassignmentAdminOperations(AdminBase):
    """`AsyncAdmin`'s reassignment operations (see the module docstring); expects `_net`,
    `_retry_backoff_ms`, `start()` and `_timeout_ms()` from the class it is mixed into."""

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[tuple[str, int], Sequence[int] | None],
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        wanted = {TopicPartition(t, p): target for (t, p), target in reassignments.items()}
        for tp, target in wanted.items():
            if target is not None and any(not isinstance(b, int) for b in target):
                raise ValueError(
                    f"reassignment of {tp.topic}-{tp.partition}: broker ids must be "
                    f"integers, got {list(target)}"
                )
        R = m.AlterPartitionReassignmentsRequest
        by_topic: dict[str, list[Any]] = {}
        for tp, target in wanted.items():
            by_topic.setdefault(tp.topic, []).append(
                R.ReassignablePartition(
                    partition_index=tp.partition,
                    replicas=None if target is None else list(target),
                )
            )

        def build(timeout_ms: int) -> Any:
            return R(
                timeout_ms=timeout_ms,
                topics=[R.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
            )

        response = await self._ask_controller_retrying(
            "AlterPartitionReassignments", build, ApiKey.ALTER_PARTITION_REASSIGNMENTS, timeout
        )
        results: dict[TopicPartition, KafkaError | None] = {}
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                code = ErrorCode.of(p.error_code)
                results[tp] = (
                    None
                    if code is ErrorCode.NONE
                    else KafkaError(
                        code,
                        f"AlterPartitionReassignments for {tp.topic}-{tp.partition}",
                        p.error_message,
                    )
                )
        for tp in wanted:
            results.setdefault(
                tp,
                KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"AlterPartitionReassignments: no result for {tp.topic}-{tp.partition}",
                ),
            )
        return {tp: results[tp] for tp in wanted}

    async def list_partition_reassignments(
        self,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]:
        R = m.ListPartitionReassignmentsRequest
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [
                R.ListPartitionReassignmentsTopics(name=t, partition_indexes=sorted(ps))
                for t, ps in by_topic.items()
            ]

        def build(timeout_ms: int) -> Any:
            return R(timeout_ms=timeout_ms, topics=topics)

        response = await self._ask_controller_retrying(
            "ListPartitionReassignments", build, ApiKey.LIST_PARTITION_REASSIGNMENTS, timeout
        )
        return {
            TopicPartition(topic.name, p.partition_index): PartitionReassignment(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
            )
            for topic in response.topics
            for p in topic.partitions
        }

    async def _ask_controller_retrying(
        self, what: str, build: Callable[[int], Any], api_key: int, timeout: float | None
    ) -> Any:
        """The controller's answer; NOT_CONTROLLER and lost connections are retried after a
        metadata refresh, any other top-level error raises KafkaError."""
        await self.start()
        deadline = self._net.now_ms() + self._timeout_ms(timeout)
        last_error: Exception | None = None
        while True:
            remaining = deadline - self._net.now_ms()
            if remaining <= 0:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT, what, str(last_error) if last_error else None
                )
            try:
                conn = await self._controller_connection(remaining, what)
                version = conn.version_for(api_key)
                response = await conn.send(build(int(remaining)), api_key=api_key, version=version)
                code = ErrorCode.of(response.error_code)
                if code is ErrorCode.NOT_CONTROLLER:
                    raise KafkaError(code, what, response.error_message)
            except ClientError as exc:
                if isinstance(exc, IncompatibleBrokerError):
                    raise
                last_error = exc
                self._net.request_update()
                await asyncio.sleep(min(self._retry_backoff_ms, max(remaining, 0)) / 1000)
                continue
            if code is not ErrorCode.NONE:
                raise KafkaError(code, what, response.error_message)
            return response
