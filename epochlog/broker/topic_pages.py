"""Which topics and partitions one DescribeTopicPartitions answer holds (KIP-966's paging).

Kafka 3.9's rules (`DescribeTopicPartitionsRequestHandler`, `KRaftMetadataCache
.getTopicMetadataForDescribeTopicResponse`), decided here without I/O:

- an empty topic list means every topic; the topics are taken in name order, from the cursor's
  topic on (names >= it). A named list must contain the cursor's topic, and the cursor's
  partition must not be negative: otherwise the request is INVALID_REQUEST.
- the page holds at most `max(min(max.request.partition.size.limit, ResponsePartitionLimit), 1)`
  partitions. The cursor's topic starts at the cursor's partition, every later one at 0.
- a topic that does not fit whole ends the page: its partitions up to the limit are in it, and
  NextCursor names the topic and its first partition left out. When the limit is used up exactly
  and topics remain, NextCursor names the next topic at partition 0 (that topic may not exist).
- a named topic that does not exist is an entry with UNKNOWN_TOPIC_OR_PARTITION (an illegal
  name: INVALID_TOPIC_EXCEPTION) and takes no room; with the all-topics form there are none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from epochlog.protocol.errors import ErrorCode

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default


class InvalidPageRequest(ValueError):
    """The request's cursor does not fit its topic list (INVALID_REQUEST)."""


@dataclass(frozen=True, slots=True)
class TopicSlice:
    """One topic of the page: its partitions [first, end), or an error and none."""

    name: str
    first: int = 0
    end: int = 0
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class Page:
    topics: list[TopicSlice]
    next_cursor: tuple[str, int] | None


def page_limit(requested: int, server_limit: int = MAX_REQUEST_PARTITION_SIZE_LIMIT) -> int:
    return max(min(server_limit, requested), 1)


def plan_page(
    requested_topics: Iterable[str],
    all_topics: Iterable[str],
    partition_count: Callable[[str], int | None],
    cursor: tuple[str, int] | None,
    limit: int,
    name_error: Callable[[str], ErrorCode | None] = lambda name: None,
) -> Page:
    """The page for a request naming `requested_topics` (empty: all) with `cursor`.

    `partition_count(topic)` is None for a topic that does not exist; `name_error(topic)` says
    whether a missing topic's name is illegal. Raises InvalidPageRequest for a bad cursor.
    """
    requested = list(requested_topics)
    fetch_all = not requested
    cursor_topic = cursor[0] if cursor is not None else ""
    names = set(all_topics) if fetch_all else set(requested)
    names = {name for name in names if name >= cursor_topic}
    if cursor is not None and not fetch_all and cursor[0] not in names:
        raise InvalidPageRequest(
            f"DescribeTopicPartitions topic list should contain the cursor topic {cursor[0]!r}"
        )
    if cursor is not None and cursor[1] < 0:
        raise InvalidPageRequest(
            f"DescribeTopicPartitions cursor partition must be valid: {cursor[1]}"
        )
    remaining = limit
    topics: list[TopicSlice] = []
    for name in sorted(names):
        if remaining <= 0:
            return Page(topics, (name, 0))
        count = partition_count(name)
        if count is None:
            if not fetch_all:
                topics.append(
                    TopicSlice(name, error=name_error(name) or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
            continue
        first = cursor[1] if cursor is not None and name == cursor_topic else 0
        end = min(count, first + remaining)
        topics.append(TopicSlice(name, first, max(end, first)))
        if end < count:
            return Page(topics, (name, end))
        remaining -= max(end - first, 0)
    return Page(topics, None)
