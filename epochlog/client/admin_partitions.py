"""The admin client's partition operations: create partitions, delete records, elect leaders.
Mixed into `AsyncAdmin`.

How it works. CreatePartitions goes to the controller through `AdminBase._to_controller` (as
CreateTopics: NOT_CONTROLLER and lost connections are retried after a metadata refresh) and
returns a result per topic (`None` on success, else the `KafkaError`). ElectLeaders goes to the
controller too, retried the same way when the whole answer is NOT_CONTROLLER; it returns a
result per partition (ELECTION_NOT_NEEDED is an error, as in Kafka's clients: the caller may
ignore it). DeleteRecords goes to each partition's leader, one request per leader in parallel;
a partition answered with an error that means the leader moved (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, ...) or whose leader cannot be reached is retried after a metadata
refresh until the timeout. It returns, per partition, the new low watermark (the smallest log
start offset of its live replicas) or the error.

Every call is bounded by its timeout (`default.api.timeout.ms` unless given), which is also
sent to the broker as the request's TimeoutMs.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from epochlog.client.admin_base import AdminBase
from epochlog.client.errors import ClientError, IncompatibleBrokerError, KafkaError
from epochlog.client.metadata import TopicPartition
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode


@dataclass(frozen=True)
class NewPartitions:
    """Grow a topic to `total_count` partitions; `assignments`, if given, lists the replicas of
    each new partition (one list per partition added, preferred leader first)."""

    total_count: int
    assignments: Sequence[Sequence[int]] | None = None


class ElectionType(enum.IntEnum):
    """ElectLeaders' election type (KIP-460)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class DeletedRecords:
    """One partition's DeleteRecords answer: the new low watermark, or the error."""

    low_watermark: int
    error: KafkaError | None = None


class PartitionAdminOperations(AdminBase):
    """Partition operations for `AsyncAdmin`; see the module docstring."""

    # ---------------------------------------------------------------- CreatePartitions

    async def create_partitions(
        self,
        topics: Mapping[str, int | NewPartitions],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> dict[str, KafkaError | None]:
        """Grow each topic to its new partition count (an int, or `NewPartitions` with explicit
        assignments). INVALID_PARTITIONS when the count is not larger, INVALID_REPLICA_ASSIGNMENT
        for bad assignments, UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist."""
        wanted = {
            name: spec if isinstance(spec, NewPartitions) else NewPartitions(spec)
            for name, spec in topics.items()
        }
        for name, spec in wanted.items():
            if spec.total_count <= 0:
                raise ValueError(
                    f"create_partitions: the partition count of {name!r} must be > 0, "
                    f"got {spec.total_count}"
                )

        def build(names: list[str], timeout_ms: int, version: int) -> Any:
            R = m.CreatePartitionsRequest
            return R(
                topics=[
                    R.CreatePartitionsTopic(
                        name=n,
                        count=wanted[n].total_count,
                        assignments=None
                        if wanted[n].assignments is None
                        else [
                            R.CreatePartitionsAssignment(broker_ids=list(replicas))
                            for replicas in wanted[n].assignments or ()
                        ],
                    )
                    for n in names
                ],
                timeout_ms=timeout_ms,
                validate_only=validate_only,
            )

        def parse(response: Any) -> dict[str, tuple[ErrorCode, str | None]]:
            return {r.name: (ErrorCode.of(r.error_code), r.error_message) for r in response.results}

        results = await self._to_controller(
            "CreatePartitions", list(wanted), build, parse, ApiKey.CREATE_PARTITIONS, timeout
        )
        if not validate_only and any(r is None for r in results.values()):
            self._net.request_update()  # the new partitions show up in metadata
        return results

    # ---------------------------------------------------------------- ElectLeaders

    async def elect_leaders(
        self,
        election_type: ElectionType | int,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Elect the preferred (or, unclean, any live) replica as leader of `partitions` (None:
        every partition; then partitions that need no election are left out)."""
        kind = ElectionType(election_type)
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        await self.start()
        timeout_ms = self._timeout_ms(timeout)
        deadline = self._net.now_ms() + timeout_ms
        last_error: Exception | None = None
        while True:
            remaining = deadline - self._net.now_ms()
            if remaining <= 0:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    "ElectLeaders",
                    str(last_error) if last_error else None,
                )
            try:
                response = await self._send_to_controller(
                    ApiKey.ELECT_LEADERS,
                    lambda version, ms=int(remaining): _elect_leaders_request(
                        kind, wanted, ms, version
                    ),
                    remaining,
                )
            except ClientError as exc:
                if isinstance(exc, IncompatibleBrokerError):
                    raise
                last_error = exc
                self._net.request_update()
                await asyncio.sleep(min(self._retry_backoff_ms, max(remaining, 0)) / 1000)
                continue
            top = ErrorCode.of(getattr(response, "error_code", 0))
            if top is not ErrorCode.NONE:
                raise KafkaError(top, "ElectLeaders")
            results: dict[TopicPartition, KafkaError | None] = {}
            for topic in response.replica_election_results:
                for p in topic.partition_result:
                    tp = TopicPartition(topic.topic, p.partition_id)
                    code = ErrorCode.of(p.error_code)
                    results[tp] = (
                        None
                        if code is ErrorCode.NONE
                        else KafkaError(code, f"ElectLeaders for {tp}", p.error_message)
                    )
            moved = [e for e in results.values() if e is not None]
            if results and all(e.code is ErrorCode.NOT_CONTROLLER for e in moved) and moved:
                last_error = moved[0]
                self._net.request_update()
                await asyncio.sleep(self._retry_backoff_ms / 1000)
                continue
            self._net.request_update()  # leaders moved
            return results

    async def _send_to_controller(self, api_key: int, build: Any, remaining_ms: float) -> Any:
        conn = await self._controller_connection(remaining_ms, "ElectLeaders")
        version = conn.version_for(api_key)
        return await conn.send(build(version), api_key=api_key, version=version)

    # ---------------------------------------------------------------- DeleteRecords

    async def delete_records(
        self, offsets: Mapping[tuple[str, int], int], *, timeout: float | None = None
    ) -> dict[TopicPartition, DeletedRecords]:
        """Delete the records of each partition below its offset (-1: the high watermark):
        the log start offset moves there. Returns each partition's new low watermark or error
        (OFFSET_OUT_OF_RANGE beyond the high watermark)."""
        wanted = {TopicPartition(*tp): offset for tp, offset in offsets.items()}
        for tp, offset in wanted.items():
            if offset < -1:
                raise ValueError(f"delete_records: offset of {tp} must be >= -1, got {offset}")
        await self.start()
        net = self._net
        net.want_topics({tp.topic for tp in wanted})
        timeout_ms = self._timeout_ms(timeout)
        deadline = net.now_ms() + timeout_ms
        results: dict[TopicPartition, DeletedRecords] = {}
        last_error: Exception | None = None
        refreshed = False
        while True:
            todo = {tp: o for tp, o in wanted.items() if tp not in results}
            remaining = deadline - net.now_ms()
            if not todo:
                return {tp: results[tp] for tp in wanted}
            if remaining <= 0:
                for tp in todo:
                    results[tp] = DeletedRecords(
                        -1,
                        KafkaError(
                            ErrorCode.REQUEST_TIMED_OUT,
                            f"DeleteRecords for {tp}",
                            str(last_error) if last_error else None,
                        ),
                    )
                continue
            unknown = [tp for tp in todo if net.cluster.partition(tp) is None]
            if unknown and not refreshed:
                await net.update_metadata(max(remaining, 0))
                refreshed = True
                continue
            for tp in unknown:
                results[tp] = DeletedRecords(
                    -1,
                    KafkaError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"DeleteRecords for {tp}",
                        "not in the cluster's metadata",
                    ),
                )
            by_leader: dict[int, dict[TopicPartition, int]] = {}
            for tp, offset in todo.items():
                if tp in results:
                    continue
                leader = net.cluster.leader_for(tp)
                if leader is None:
                    net.request_update()
                else:
                    by_leader.setdefault(leader, {})[tp] = offset
            outcomes = await asyncio.gather(
                *(
                    self._delete_records_on(node, part, int(remaining))
                    for node, part in by_leader.items()
                ),
                return_exceptions=True,
            )
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    if not isinstance(outcome, ClientError):
                        raise outcome
                    last_error = outcome
                    net.request_update()
                    continue
                for tp, answer in outcome.items():
                    error = answer.error
                    if (
                        error is not None
                        and (error.retriable or error.invalidates_metadata)
                        and error.code is not ErrorCode.REQUEST_TIMED_OUT
                    ):
                        last_error = error  # the leader moved: ask the new one
                        net.handle_error_code(error.code)
                        continue
                    results[tp] = answer
            if len(results) < len(wanted):
                await asyncio.sleep(
                    min(self._retry_backoff_ms, max(deadline - net.now_ms(), 0)) / 1000
                )

    async def _delete_records_on(
        self, node: int, offsets: dict[TopicPartition, int], timeout_ms: int
    ) -> dict[TopicPartition, DeletedRecords]:
        R = m.DeleteRecordsRequest
        by_topic: dict[str, list[Any]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                R.DeleteRecordsPartition(partition_index=tp.partition, offset=offset)
            )
        request = R(
            topics=[R.DeleteRecordsTopic(name=t, partitions=p) for t, p in by_topic.items()],
            timeout_ms=timeout_ms,
        )
        conn = await self._net.ready(node)
        response = await conn.send(request, api_key=ApiKey.DELETE_RECORDS)
        answers: dict[TopicPartition, DeletedRecords] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                code = ErrorCode.of(p.error_code)
                answers[tp] = DeletedRecords(
                    p.low_watermark,
                    None if code is ErrorCode.NONE else KafkaError(code, f"DeleteRecords for {tp}"),
                )
        return answers


def _elect_leaders_request(
    kind: ElectionType, partitions: list[TopicPartition] | None, timeout_ms: int, version: int
) -> Any:
    R = m.ElectLeadersRequest
    if version < 1 and kind is not ElectionType.PREFERRED:
        # v0 has no ElectionType: it elects preferred leaders only
        raise IncompatibleBrokerError(ApiKey.ELECT_LEADERS, (0, version), (1, 2))
    by_topic: dict[str, list[int]] = {}
    for tp in partitions or ():
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    request = R(
        topic_partitions=None
        if partitions is None
        else [R.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()],
        timeout_ms=timeout_ms,
    )
    if version >= 1:
        request.election_type = int(kind)
    return request
