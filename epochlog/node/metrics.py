"""A broker process's metrics, assembled: the registry, the endpoint, and the `BrokerView` a
scrape reads (`epochlog.metrics`).

`metrics.port` -1 (the default of a hand-written server.properties) serves nothing and times
nothing: the hot path's `request_stats` and `traffic` stay None. 0 binds a free port. Either
way the bound endpoint is logged ("metrics endpoint http://host:port/metrics"); the local
cluster gives every broker a port of its own, kept across restarts, and records it.

The view is built on the event loop, between two of its steps: the replicas this broker
hosts (sizes, offsets, ISR against replicas and min.insync.replicas), the purgatories, the
controller (when active here), the pin, and the groups this broker coordinates. A group's lag
on a partition is measured against that partition's high watermark as this broker knows it,
so it is reported for partitions hosted here (leader or follower; a follower's HW trails the
leader's by at most a fetch); a committed offset on a partition not hosted here has no lag
reported.
"""

from __future__ import annotations

import logging
from collections import Counter

from prometheus_client.registry import CollectorRegistry

from epochlog.broker.broker import Broker
from epochlog.config.broker import BrokerConfig
from epochlog.controller.elector import ControllerElector
from epochlog.coordinator.group.runtime import GroupCoordinatorRuntime
from epochlog.metrics.collector import BrokerCollector
from epochlog.metrics.endpoint import MetricsEndpoint
from epochlog.metrics.process_stats import STATS
from epochlog.metrics.request_stats import RequestStats
from epochlog.metrics.traffic import TopicTraffic
from epochlog.metrics.view import (
    BrokerView,
    ControllerView,
    GroupLag,
    GroupsView,
    PartitionView,
)

log = logging.getLogger(__name__)


def broker_view(
    broker: Broker, elector: ControllerElector | None, groups: GroupCoordinatorRuntime | None
) -> BrokerView:
    rm = broker.replica_manager
    partitions = tuple(
        PartitionView(
            topic=p.topic,
            partition=p.index,
            leader=p.is_leader,
            replicas=len(p.replicas),
            isr=len(p.isr),
            min_insync_replicas=p.settings.min_insync_replicas,
            size_bytes=p.log.size_in_bytes,
            segments=len(p.log.segments),
            log_start_offset=p.log_start_offset,
            log_end_offset=p.log_end_offset,
            high_watermark=p.high_watermark,
        )
        for p in rm.partitions.values()
    )
    purgatories = {
        name: (len(purgatory), purgatory.watch_entries())
        for name, purgatory in (
            ("Produce", rm.produce_purgatory),
            ("Fetch", rm.fetch_purgatory),
            ("DeleteRecords", rm.delete_records_purgatory),
        )
    }
    controller = ControllerView()
    controller_id = pinned = -1
    if elector is not None:
        controller_id = elector.controller_id if elector.controller_id is not None else -1
        pinned = elector.pinned if elector.pinned is not None else -1
        active = elector.active_controller
        if active is not None and active.is_active:
            ctx = active.ctx
            controller = ControllerView(
                active=True,
                offline_partitions=sum(1 for _ in ctx.offline_partitions()),
                event_queue_size=active.queued_events,
                topics=len(ctx.topics()),
                partitions=len(ctx.all_partitions()),
            )
    high_watermarks = {(p.topic, p.partition): p.high_watermark for p in partitions}
    return BrokerView(
        broker_id=broker.broker_id,
        broker_epoch=broker.epoch_holder.epoch,
        partitions=partitions,
        purgatories=purgatories,
        controller=controller,
        controller_id=controller_id,
        pinned_controller=pinned,
        groups=groups_view(groups, high_watermarks),
    )


def groups_view(
    runtime: GroupCoordinatorRuntime | None, high_watermarks: dict[tuple[str, int], int]
) -> GroupsView:
    if runtime is None:
        return GroupsView()
    states: Counter[str] = Counter()
    offsets = rebalances = commits = 0
    lags: list[GroupLag] = []
    for shard in runtime.shards():
        rebalances += shard.completed_rebalances
        commits += shard.offset_commits
        for group_id, group in shard.groups.items():
            states[group.state.value] += 1
            offsets += len(group.offsets)
            for (topic, partition), committed in group.offsets.items():
                end = high_watermarks.get((topic, partition))
                if end is not None:
                    lags.append(GroupLag(group_id, topic, partition, committed.offset, end))
    return GroupsView(
        states=dict(states),
        offsets=offsets,
        completed_rebalances=rebalances,
        offset_commits=commits,
        lags=tuple(sorted(lags, key=lambda lag: (lag.group, lag.topic, lag.partition))),
    )


class BrokerMetrics:
    """The registry and endpoint of one broker process (None of either when metrics are off)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.port: int = config["metrics.port"]
        self.registry = CollectorRegistry(auto_describe=False)
        self.endpoint: MetricsEndpoint | None = None
        self.bound_port: int | None = None

    @property
    def enabled(self) -> bool:
        return self.port >= 0

    def attach(
        self,
        broker: Broker,
        elector: ControllerElector | None,
        groups: GroupCoordinatorRuntime | None,
    ) -> None:
        """Count on the hot path and register the collector (nothing when metrics are off)."""
        if not self.enabled:
            return
        requests = RequestStats()
        traffic = TopicTraffic()
        broker.server.request_stats = requests
        broker.replica_manager.traffic = traffic
        self.registry.register(
            BrokerCollector(lambda: broker_view(broker, elector, groups), STATS, requests, traffic)
        )

    async def start(self) -> None:
        if not self.enabled:
            return
        host = self.config["metrics.host"]
        if host is None:
            listeners = self.config.listeners
            host = listeners[0].host if listeners else ""
        self.endpoint = MetricsEndpoint(self.registry)
        self.bound_port = await self.endpoint.start(host, self.port)
        log.info("metrics endpoint http://%s:%d/metrics", host or "0.0.0.0", self.bound_port)

    async def stop(self) -> None:
        if self.endpoint is not None:
            await self.endpoint.stop()
