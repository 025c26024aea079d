"""Replication throttles (KIP-73), as Kafka's ReplicationQuotaManager applies them. Sans-I/O:
bytes and times go in, yes/no comes out; the fetch path and the replica fetcher ask.

A broker has two quotas: the leader's (`leader.replication.throttled.rate`, bytes/s of fetch
answers to followers) and the follower's (`follower.replication.throttled.rate`, bytes/s its
replica fetchers take in). Only *throttled* replicas are held to them: a topic's
`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas` list
partition:broker pairs (or `*`), and a broker throttles the partitions listed with its own id
(`config.topic.throttled_partitions`).

**The rate** is Kafka's SimpleRate over `replication.quota.window.num` (11) windows of 1 s (Kafka's
defaults, fixed here): the sum of the
live samples over the time since the oldest one started, at least one window (unlike a client
quota's Rate, which counts at least 10 windows, so a move starts throttled, not after 10 s of
free traffic). Every byte of a throttled partition is recorded, in-sync or not, so the total
stays under the rate; the quota is exceeded when the rate is above the bound.

**The decisions.** Leader (`should_leader_throttle`, ReplicaManager.shouldLeaderThrottle): a
throttled partition's data is left out of a follower's fetch answer while the quota is
exceeded, unless that follower is in the ISR; unthrottled partitions always flow. Follower
(`should_follower_throttle`, ReplicaFetcherThread.shouldFollowerThrottle): a throttled
partition is left out of the next Fetch while the quota is exceeded, unless the replica is in
sync (its last answer left it no lag behind the leader's high watermark).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from epochlog.broker.client_quotas import (
    DEFAULT_WINDOW_NUM,
    DEFAULT_WINDOW_SIZE_SECONDS,
    SampledRate,
)
from epochlog.config.broker import INT64_MAX
from epochlog.config.topic import ALL_PARTITIONS, throttled_partitions

UNLIMITED = INT64_MAX  # Kafka's QuotaBytesPerSecondDefault (Long.MAX_VALUE)


@dataclass
class SimpleRate(SampledRate):
    """Kafka's SimpleRate: measured over the time since the oldest sample started, at least one
    window (a Rate counts at least samples - 1 windows)."""

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        if not self._samples:
            return self.window_ms
        oldest = min(s.start_ms for s in self._samples)
        return max(now_ms - oldest, self.window_ms)


@dataclass
class ReplicationQuota:
    """One side's quota (leader or follower): its bound, its rate, its throttled partitions."""

    bound: int = UNLIMITED  # bytes/s
    window_num: int = DEFAULT_WINDOW_NUM
    window_size_seconds: int = DEFAULT_WINDOW_SIZE_SECONDS
    throttled: dict[str, frozenset[int]] = field(default_factory=dict)  # topic -> partitions
    rate: SimpleRate = field(init=False)

    def __post_init__(self) -> None:
        self.rate = SimpleRate(self.window_num, self.window_size_seconds * 1000)

    def update_bound(self, bound: int) -> None:
        self.bound = bound

    def mark_throttled(self, topic: str, partitions: frozenset[int]) -> None:
        """The topic's throttled partitions here are now `partitions` (none: no throttle)."""
        if partitions:
            self.throttled[topic] = partitions
        else:
            self.throttled.pop(topic, None)

    def is_throttled(self, topic: str, partition: int) -> bool:
        partitions = self.throttled.get(topic)
        return partitions is not None and (
            partitions is ALL_PARTITIONS or -1 in partitions or partition in partitions
        )

    def record(self, size: int, now_ms: int) -> None:
        self.rate.record(size, now_ms)

    def is_quota_exceeded(self, now_ms: int) -> bool:
        if self.bound >= UNLIMITED:
            return False
        return self.rate.measure(now_ms) > self.bound

    def rate_bytes_per_s(self, now_ms: int) -> float:
        return self.rate.measure(now_ms)


def should_leader_throttle(
    quota: ReplicationQuota,
    topic: str,
    partition: int,
    follower_in_isr: bool,
    now_ms: int,
) -> bool:
    """Leave this partition's data out of a follower's fetch answer?"""
    return (
        not follower_in_isr
        and quota.is_throttled(topic, partition)
        and quota.is_quota_exceeded(now_ms)
    )


def should_follower_throttle(
    quota: ReplicationQuota,
    topic: str,
    partition: int,
    replica_in_sync: bool,
    now_ms: int,
) -> bool:
    """Leave this partition out of the replica fetcher's next Fetch?"""
    return (
        not replica_in_sync
        and quota.is_throttled(topic, partition)
        and quota.is_quota_exceeded(now_ms)
    )


@dataclass
class ReplicationQuotas:
    """A broker's two replication quotas, fed with its broker settings and topic configs."""

    broker_id: int
    leader: ReplicationQuota = field(default_factory=ReplicationQuota)
    follower: ReplicationQuota = field(default_factory=ReplicationQuota)

    def apply_rates(self, leader_rate: int, follower_rate: int) -> None:
        """leader/follower.replication.throttled.rate (dynamic broker configs)."""
        self.leader.update_bound(leader_rate)
        self.follower.update_bound(follower_rate)

    def apply_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        """The topic's configs are now `configs` (TopicConfigHandler's updateThrottledList)."""
        self.leader.mark_throttled(
            topic,
            throttled_partitions(configs, "leader.replication.throttled.replicas", self.broker_id),
        )
        self.follower.mark_throttled(
            topic,
            throttled_partitions(
                configs, "follower.replication.throttled.replicas", self.broker_id
            ),
        )
