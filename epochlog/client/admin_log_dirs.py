"""The admin client's log-dir, producer and paginated topic operations. Mixed into `AsyncAdmin`.

- `describe_log_dirs(brokers)`: DescribeLogDirs to each broker (all of them by default), every
  replica (a null topic list); per broker, per log dir, a `LogDirDescription` as Kafka's
  `Admin.describeLogDirs` gives it: the dir's error (KAFKA_STORAGE_ERROR when offline), its
  volume's total and usable bytes (v4+, else -1), and its replicas with size, offset lag and
  whether each is a future replica (one being moved there).
- `alter_replica_log_dirs({TopicPartitionReplica: dir})`: AlterReplicaLogDirs to each broker
  named; the result per replica is None or the `KafkaError` (LOG_DIR_NOT_FOUND,
  KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE, ...), like `delete_topics`.
- `describe_producers(partitions, broker_id=None)`: DescribeProducers to each partition's leader
  (from metadata), or to `broker_id` for every partition; NOT_LEADER_OR_FOLLOWER from a leader
  that moved refreshes metadata and asks again until the call's timeout. A partition error
  raises `KafkaError` naming the partition.
- `describe_topic_partitions(topics)`: DescribeTopicPartitions (KIP-966) to one broker, following
  NextCursor page by page (`page_size` partitions a page) until the broker has no more; a topic
  answered with an error raises `KafkaError` naming it.

Requests are built and answers read by the plain functions below (no I/O); the methods send.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from epochlog.client.admin_base import AdminBase
from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.metadata import PartitionInfo, TopicPartition
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

DEFAULT_PAGE_SIZE = 2000


class TopicPartitionReplica(NamedTuple):
    topic: str
    partition: int
    broker_id: int


@dataclass(frozen=True)
class ReplicaInfo:
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    path: str
    error: KafkaError | None
    total_bytes: int
    usable_bytes: int
    replicas: dict[TopicPartition, ReplicaInfo] = field(default_factory=dict)


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True)
class TopicPartitionsDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[PartitionInfo]
    authorized_operations: int


# ------------------------------------------------------------------- requests and answers


def read_describe_log_dirs(response: Any, broker_id: int) -> dict[str, LogDirDescription]:
    code = ErrorCode.of(getattr(response, "error_code", 0))
    if code is not ErrorCode.NONE:
        raise KafkaError(code, f"DescribeLogDirs on broker {broker_id}")
    dirs: dict[str, LogDirDescription] = {}
    for result in response.results:
        error = ErrorCode.of(result.error_code)
        dirs[result.log_dir] = LogDirDescription(
            result.log_dir,
            None
            if error is ErrorCode.NONE
            else KafkaError(error, f"log dir {result.log_dir} on broker {broker_id}"),
            result.total_bytes,
            result.usable_bytes,
            {
                TopicPartition(topic.name, p.partition_index): ReplicaInfo(
                    p.partition_size, p.offset_lag, p.is_future_key
                )
                for topic in result.topics
                for p in topic.partitions
            },
        )
    return dirs


def alter_replica_log_dirs_requests(
    assignments: Mapping[TopicPartitionReplica, str],
) -> dict[int, Any]:
    """One AlterReplicaLogDirs request per broker, its replicas grouped by dir and topic."""
    R = m.AlterReplicaLogDirsRequest
    by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
    for replica, path in assignments.items():
        topics = by_broker.setdefault(replica.broker_id, {}).setdefault(path, {})
        topics.setdefault(replica.topic, []).append(replica.partition)
    return {
        broker: R(
            dirs=[
                R.AlterReplicaLogDir(
                    path=path,
                    topics=[
                        R.AlterReplicaLogDirTopic(name=name, partitions=partitions)
                        for name, partitions in topics.items()
                    ],
                )
                for path, topics in dirs.items()
            ]
        )
        for broker, dirs in by_broker.items()
    }


def read_alter_replica_log_dirs(
    response: Any, broker_id: int
) -> dict[TopicPartitionReplica, KafkaError | None]:
    results: dict[TopicPartitionReplica, KafkaError | None] = {}
    for topic in response.results:
        for p in topic.partitions:
            replica = TopicPartitionReplica(topic.topic_name, p.partition_index, broker_id)
            code = ErrorCode.of(p.error_code)
            results[replica] = (
                None
                if code is ErrorCode.NONE
                else KafkaError(
                    code,
                    f"AlterReplicaLogDirs {topic.topic_name}-{p.partition_index}"
                    f" on broker {broker_id}",
                )
            )
    return results


def describe_producers_request(partitions: Iterable[TopicPartition]) -> Any:
    R = m.DescribeProducersRequest
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return R(topics=[R.TopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()])


def read_describe_producers(
    response: Any,
) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
    results: dict[TopicPartition, list[ProducerState] | KafkaError] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            code = ErrorCode.of(p.error_code)
            if code is not ErrorCode.NONE:
                results[tp] = KafkaError(code, f"DescribeProducers {tp}", p.error_message)
                continue
            results[tp] = [
                ProducerState(
                    s.producer_id,
                    s.producer_epoch,
                    s.last_sequence,
                    s.last_timestamp,
                    s.coordinator_epoch,
                    s.current_txn_start_offset,
                )
                for s in p.active_producers
            ]
    return results


def describe_topic_partitions_request(
    topics: list[str], page_size: int, cursor: tuple[str, int] | None
) -> Any:
    R = m.DescribeTopicPartitionsRequest
    return R(
        topics=[R.TopicRequest(name=t) for t in topics],
        response_partition_limit=page_size,
        cursor=R.Cursor(topic_name=cursor[0], partition_index=cursor[1]) if cursor else None,
    )


def read_describe_topic_partitions_page(
    response: Any, into: dict[str, TopicPartitionsDescription]
) -> tuple[str, int] | None:
    """Add the page's topics and partitions to `into`; the next cursor (None: done)."""
    for topic in response.topics:
        code = ErrorCode.of(topic.error_code)
        if code is not ErrorCode.NONE:
            raise KafkaError(code, f"DescribeTopicPartitions topic {topic.name!r}")
        partitions = [
            PartitionInfo(
                topic.name,
                p.partition_index,
                p.leader_id,
                p.leader_epoch,
                tuple(p.replica_nodes),
                tuple(p.isr_nodes),
                tuple(p.offline_replicas),
                ErrorCode.of(p.error_code),
            )
            for p in topic.partitions
        ]
        known = into.get(topic.name)
        if known is None:
            into[topic.name] = TopicPartitionsDescription(
                topic.name,
                topic.topic_id,
                topic.is_internal,
                partitions,
                topic.topic_authorized_operations,
            )
        else:
            known.partitions.extend(partitions)
    cursor = response.next_cursor
    return (cursor.topic_name, cursor.partition_index) if cursor is not None else None


# ---------------------------------------------------------------------------- operations


class LogDirAdminOperations(AdminBase):
    """`AsyncAdmin`'s log-dir, producer and topic-partition operations (see the module
    docstring); expects `_net`, `_retry_backoff_ms`, `start()` and `_timeout_ms()`."""

    async def _brokers(self, brokers: Iterable[int] | None, timeout_ms: float) -> list[int]:
        if brokers is not None:
            return sorted(set(brokers))
        cluster = await self._net.update_metadata(timeout_ms)
        return sorted(cluster.brokers)

    async def describe_log_dirs(
        self, brokers: Iterable[int] | None = None, *, timeout: float | None = None
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Every log dir of each broker (all brokers by default) with the replicas it holds."""
        await self.start()
        timeout_ms = self._timeout_ms(timeout)
        out: dict[int, dict[str, LogDirDescription]] = {}
        for broker in await self._brokers(brokers, timeout_ms):
            response = await self._send_to(
                broker, m.DescribeLogDirsRequest(topics=None), ApiKey.DESCRIBE_LOG_DIRS, timeout_ms
            )
            out[broker] = read_describe_log_dirs(response, broker)
        return out

    async def alter_replica_log_dirs(
        self,
        assignments: Mapping[TopicPartitionReplica, str],
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartitionReplica, KafkaError | None]:
        """Move each replica to the named absolute dir of its broker; a result per replica."""
        await self.start()
        timeout_ms = self._timeout_ms(timeout)
        results: dict[TopicPartitionReplica, KafkaError | None] = {}
        for broker, request in alter_replica_log_dirs_requests(assignments).items():
            response = await self._send_to(
                broker, request, ApiKey.ALTER_REPLICA_LOG_DIRS, timeout_ms
            )
            results.update(read_alter_replica_log_dirs(response, broker))
        for replica in assignments:
            results.setdefault(
                replica,
                KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for {replica}"),
            )
        return results

    async def describe_producers(
        self,
        partitions: Iterable[TopicPartition],
        *,
        broker_id: int | None = None,
        timeout: float | None = None,
    ) -> dict[TopicPartition, list[ProducerState]]:
        """The active producers of each partition, from its leader (or from `broker_id`)."""
        await self.start()
        timeout_ms = self._timeout_ms(timeout)
        deadline = self._net.now_ms() + timeout_ms
        todo = [TopicPartition(*tp) for tp in partitions]
        found: dict[TopicPartition, list[ProducerState]] = {}
        while todo:
            remaining = max(deadline - self._net.now_ms(), 0)
            targets: dict[int, list[TopicPartition]] = {}
            if broker_id is not None:
                targets[broker_id] = todo
            else:
                cluster = await self._net.update_metadata(remaining)
                for tp in todo:
                    info = cluster.topic(tp.topic)
                    partition = info.partitions.get(tp.partition) if info is not None else None
                    if partition is None:
                        raise KafkaError(
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"DescribeProducers {tp}"
                        )
                    targets.setdefault(partition.leader, []).append(tp)
            retry: list[TopicPartition] = []
            for node, tps in targets.items():
                if node < 0:
                    retry += tps
                    continue
                response = await self._send_to(
                    node, describe_producers_request(tps), ApiKey.DESCRIBE_PRODUCERS, remaining
                )
                for tp, answer in read_describe_producers(response).items():
                    if not isinstance(answer, KafkaError):
                        found[tp] = answer
                    elif (
                        broker_id is None
                        and answer.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
                        and self._net.now_ms() < deadline
                    ):
                        retry.append(tp)
                    else:
                        raise answer
            if retry and self._net.now_ms() >= deadline:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT, f"DescribeProducers {', '.join(map(str, retry))}"
                )
            if retry:
                self._net.request_update()
                await asyncio.sleep(self._retry_backoff_ms / 1000)
            todo = retry
        return found

    async def describe_topic_partitions(
        self,
        topics: Iterable[str] | None = None,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        timeout: float | None = None,
    ) -> dict[str, TopicPartitionsDescription]:
        """The named topics (all by default), read `page_size` partitions at a time."""
        await self.start()
        timeout_ms = self._timeout_ms(timeout)
        names = sorted(set(topics)) if topics is not None else []
        (node, *_) = await self._brokers(None, timeout_ms)
        described: dict[str, TopicPartitionsDescription] = {}
        cursor: tuple[str, int] | None = None
        while True:
            response = await self._send_to(
                node,
                describe_topic_partitions_request(names, page_size, cursor),
                ApiKey.DESCRIBE_TOPIC_PARTITIONS,
                timeout_ms,
            )
            cursor = read_describe_topic_partitions_page(response, described)
            if cursor is None:
                return described
            if names and cursor[0] not in names:
                return described  # the cursor names a topic past those asked for

    async def _send_to(self, broker: int, request: Any, api_key: ApiKey, timeout_ms: float) -> Any:
        """Send to one broker, retrying a connection that fails until the timeout."""
        deadline = self._net.now_ms() + timeout_ms
        while True:
            try:
                return await self._net.send(broker, request, api_key=api_key)
            except KafkaError:
                raise
            except ClientError as exc:
                if self._net.now_ms() >= deadline:
                    raise KafkaError(
                        ErrorCode.REQUEST_TIMED_OUT, f"{api_key.name} to broker {broker}", str(exc)
                    ) from exc
                await asyncio.sleep(self._retry_backoff_ms / 1000)
