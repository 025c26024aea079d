"""What a group consumer subscribes to, and when that calls for a rejoin: sans-I/O.

The application subscribes to topics, or to a pattern whose matches are re-evaluated on every
metadata update (internal topics left out under exclude.internal.topics). A rejoin is due when
the topics differ from those the last JoinGroup carried (`changed_since_join`), and, on the
leader, when a topic it assigned now has another partition count (`resized_topic`, against the
counts recorded by `assigned`). The caller says what metadata to ask for and does the rejoin.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from epochlog.client.metadata import ClusterMetadata


class GroupSubscription:
    def __init__(self, exclude_internal: bool) -> None:
        self.exclude_internal = exclude_internal
        self.subscribed = False
        self.topics: frozenset[str] = frozenset()  # explicit topics, or the pattern's matches
        self.pattern: re.Pattern[str] | None = None
        self.joined_topics: frozenset[str] | None = None  # what the last JoinGroup carried
        self.assigned_counts: dict[str, int] | None = None  # the leader's partition counts

    @property
    def by_pattern(self) -> bool:
        return self.pattern is not None

    @property
    def changed_since_join(self) -> bool:
        return self.joined_topics is not None and self.joined_topics != self.topics

    def subscribe_topics(self, topics: Iterable[str]) -> None:
        self.pattern = None
        self.topics = frozenset(topics)
        self.subscribed = True

    def subscribe_pattern(self, pattern: str, cluster: ClusterMetadata) -> None:
        """Raises re.error, changing nothing, if `pattern` is not a regular expression."""
        compiled = re.compile(pattern)
        self.pattern = compiled
        self.topics = self._matching(compiled, cluster)
        self.subscribed = True

    def unsubscribe(self) -> None:
        self.subscribed = False
        self.topics = frozenset()
        self.pattern = None
        self.joined_topics = None

    def joined(self) -> None:
        """A JoinGroup goes out with the current topics."""
        self.joined_topics = self.topics

    def rematch(self, cluster: ClusterMetadata) -> bool:
        """New metadata: a pattern subscription takes the topics it now matches. True if they
        changed."""
        if self.pattern is None or not self.subscribed:
            return False
        matched = self._matching(self.pattern, cluster)
        if matched == self.topics:
            return False
        self.topics = matched
        return True

    def assigned(self, counts: Mapping[str, int] | None) -> None:
        """The partition counts this member assigned as the leader (None: it did not)."""
        self.assigned_counts = dict(counts) if counts is not None else None

    def resized_topic(self, cluster: ClusterMetadata) -> tuple[str, int] | None:
        """A topic this member assigned as the leader whose partition count is now another
        (the first one), with its new count; a topic the metadata no longer holds does not
        count."""
        for topic, count in (self.assigned_counts or {}).items():
            now_count = cluster.partition_count(topic)
            if now_count is not None and now_count != count:
                return topic, now_count
        return None

    def _matching(self, pattern: re.Pattern[str], cluster: ClusterMetadata) -> frozenset[str]:
        return frozenset(
            name
            for name, info in cluster.topics.items()
            if pattern.fullmatch(name) and not (self.exclude_internal and info.is_internal)
        )
