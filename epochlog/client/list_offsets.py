"""ListOffsets for the admin client: log start, log end, or the first offset at a timestamp.

`list_offsets(net, query, ...)` asks each partition's leader (one request per leader, in
parallel) for the offset at the query's timestamp: `EARLIEST_TIMESTAMP` (-2) is the log start
offset, `LATEST_TIMESTAMP` (-1) the log end offset (the high watermark, read_uncommitted), any
other value the first offset whose timestamp is at or after it (offset -1 when there is none).
Errors that mean the leader moved refresh metadata and are retried after `retry.backoff.ms`
until the timeout; a partition the cluster's metadata does not have, after a refresh, is
UNKNOWN_TOPIC_OR_PARTITION at once, naming it, rather than a timeout.

The consumer uses the same loop with its isolation level (`read_committed`), and waits out
partitions its metadata does not have yet instead of failing at once (`fail_unknown=False`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.metadata import TopicPartition
from epochlog.client.network import NetworkClient
from epochlog.client.subscription import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

__all__ = ["EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "OffsetAndTimestamp", "list_offsets"]


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int
    leader_epoch: int = -1


async def list_offsets(
    net: NetworkClient,
    query: Mapping[TopicPartition, int],
    timeout_ms: float,
    retry_backoff_ms: float,
    *,
    read_committed: bool = False,
    fail_unknown: bool = True,
) -> dict[TopicPartition, OffsetAndTimestamp]:
    """The offset at each partition's timestamp (see the module docstring)."""
    net.want_topics({tp.topic for tp in query})
    deadline = net.now_ms() + timeout_ms
    results: dict[TopicPartition, OffsetAndTimestamp] = {}
    last_error: Exception | None = None
    refreshed = False
    while True:
        todo = {tp: ts for tp, ts in query.items() if tp not in results}
        if not todo:
            return results
        unknown = [tp for tp in todo if net.cluster.partition(tp) is None] if fail_unknown else []
        if unknown:
            if refreshed:
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"ListOffsets for {', '.join(map(str, unknown))}",
                    "not in the cluster's metadata",
                )
            await net.update_metadata(max(deadline - net.now_ms(), 0))
            refreshed = True
            continue
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, ts in todo.items():
            leader = net.cluster.leader_for(tp)
            if leader is None:
                net.request_update()
            else:
                by_leader.setdefault(leader, {})[tp] = ts
        outcomes = await asyncio.gather(
            *(
                _list_offsets_on(net, node, part, read_committed)
                for node, part in by_leader.items()
            ),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, ClientError):
                    raise outcome
                last_error = outcome
                continue
            found, error = outcome
            results.update(found)
            last_error = error or last_error
        if len(results) == len(query):
            return results
        if isinstance(last_error, KafkaError) and not last_error.retriable:
            raise last_error
        remaining = deadline - net.now_ms()
        if remaining <= 0:
            missing = ", ".join(str(tp) for tp in query if tp not in results)
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"ListOffsets for {missing}",
                str(last_error) if last_error else None,
            )
        await asyncio.sleep(min(retry_backoff_ms, remaining) / 1000)


async def _list_offsets_on(
    net: NetworkClient, node: int, query: dict[TopicPartition, int], read_committed: bool
) -> tuple[dict[TopicPartition, OffsetAndTimestamp], KafkaError | None]:
    by_topic: dict[str, list[Any]] = {}
    for tp, ts in query.items():
        part = net.cluster.partition(tp)
        by_topic.setdefault(tp.topic, []).append(
            m.ListOffsetsRequest.ListOffsetsPartition(
                partition_index=tp.partition,
                current_leader_epoch=part.leader_epoch if part else -1,
                timestamp=ts,
            )
        )
    request = m.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            m.ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=p) for t, p in by_topic.items()
        ],
    )
    conn = await net.ready(node)
    version = conn.version_for(ApiKey.LIST_OFFSETS)
    if version >= 2:
        request.isolation_level = 1 if read_committed else 0
    response = await conn.send(request, api_key=ApiKey.LIST_OFFSETS, version=version)
    results: dict[TopicPartition, OffsetAndTimestamp] = {}
    error: KafkaError | None = None
    for t in response.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            code = ErrorCode.of(p.error_code)
            if code is ErrorCode.NONE:
                results[tp] = OffsetAndTimestamp(p.offset, p.timestamp, p.leader_epoch)
            else:
                net.handle_error_code(code)
                error = KafkaError(code, f"ListOffsets for {tp}")
    return results, error
