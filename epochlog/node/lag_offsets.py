"""End offsets for consumer lag on partitions this broker does not host, asked at scrape time.

A group's coordinator knows the group's committed offsets; the end of a partition it does not
host is known only to that partition's leader (the metadata cache holds no offsets). Kafka's
brokers export no lag at all: Burrow and kafka_exporter ask the leaders with ListOffsets. Here
the coordinator does the same, only when Prometheus scrapes and only for the committed
partitions it does not host: one ListOffsets (LATEST, read_uncommitted, so the high watermark)
per leader over the inter-broker listener, all in parallel, the whole bounded by
`LOOKUP_BOUND_S`, and not more often than every `MIN_INTERVAL_S` (several scrapers share an
answer). A leader that does not answer in time, or answers with an error, leaves its
partitions without a reported lag for that scrape (rather than a stale one); the partitions
hosted here use their own high watermark, as before, with no request.

`leaders_to_ask` and `end_offsets_in` are the pure parts (unit-tested); `RemoteEndOffsets` does
the I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

from epochlog.aio import wait_for
from epochlog.node.broker_connections import BrokerConnections
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

LOOKUP_BOUND_S = 2.0  # a scrape waits at most this long for the leaders' answers
MIN_INTERVAL_S = 1.0  # answers younger than this are reused
LATEST_TIMESTAMP = -1


def leaders_to_ask(
    wanted: Iterable[TopicPartition], leader_of: Callable[[TopicPartition], int | None]
) -> dict[int, list[TopicPartition]]:
    """The partitions to ask each leader about (partitions with no known leader left out)."""
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp in sorted(set(wanted)):
        leader = leader_of(tp)
        if leader is not None and leader >= 0:
            by_leader.setdefault(leader, []).append(tp)
    return by_leader


def list_offsets_request(partitions: Collection[TopicPartition]) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(
            m.ListOffsetsRequest.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=LATEST_TIMESTAMP
            )
        )
    return m.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,  # read_uncommitted: the high watermark, as kafka_exporter's lag
        topics=[
            m.ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=p) for t, p in by_topic.items()
        ],
    )


def end_offsets_in(response: Any) -> dict[TopicPartition, int]:
    """The end offsets a ListOffsets answer gives (partitions answered with an error left out)."""
    ends: dict[TopicPartition, int] = {}
    for topic in response.topics:
        for p in topic.partitions:
            if ErrorCode.of(p.error_code) is ErrorCode.NONE and p.offset >= 0:
                ends[(topic.name, p.partition_index)] = p.offset
    return ends


class RemoteEndOffsets:
    """The last answers of other brokers' leaders, refreshed by `refresh` before a scrape."""

    def __init__(self, connections: BrokerConnections) -> None:
        self.connections = connections
        self.metadata_cache = connections.metadata_cache
        self.ends: dict[TopicPartition, int] = {}
        self._asked_at = -MIN_INTERVAL_S
        self._asked: frozenset[TopicPartition] = frozenset()

    def _leader_of(self, tp: TopicPartition) -> int | None:
        info = self.metadata_cache.partition(tp[0], tp[1])
        return info.leader if info is not None else None

    async def refresh(self, wanted: Collection[TopicPartition]) -> None:
        now = time.monotonic()
        wanted_set = frozenset(wanted)
        if wanted_set == self._asked and now - self._asked_at < MIN_INTERVAL_S:
            return
        self._asked, self._asked_at = wanted_set, now
        by_leader = leaders_to_ask(wanted_set, self._leader_of)
        answers = await asyncio.gather(
            *(self._ask(leader, partitions) for leader, partitions in by_leader.items())
        )
        ends: dict[TopicPartition, int] = {}
        for answer in answers:
            ends.update(answer)
        self.ends = ends

    async def _ask(
        self, leader: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        try:
            connection = await wait_for(self.connections.get(leader), LOOKUP_BOUND_S)
            if connection is None:
                return {}
            response = await wait_for(
                connection.send(list_offsets_request(partitions), api_key=ApiKey.LIST_OFFSETS),
                LOOKUP_BOUND_S,
            )
        except Exception as exc:  # a leader that does not answer: no lag reported for it
            log.debug("end offsets from broker %d for lag: %s", leader, exc)
            with contextlib.suppress(Exception):
                await self.connections.drop(leader)
            return {}
        return end_offsets_in(response)

    async def close(self) -> None:
        await self.connections.close()
