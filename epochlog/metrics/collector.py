"""The broker's metric families, built when Prometheus scrapes.

`BrokerCollector.collect()` reads the hot path's counters (`RequestStats`, `TopicTraffic`), the
process's event counts (`ProcessStats`) and a fresh `BrokerView`, and yields Prometheus metric
families named after Kafka's JMX metrics as the JMX exporter's common Kafka rules render them
(`lowercaseOutputName`; `...PerSec` meters become `_total` counters; Yammer histograms become
summaries with Kafka's percentiles as `quantile` labels and `_count`). Every family is yielded
even when it has no sample yet, so the set of names does not depend on traffic (the dashboard's
test reads it). docs/metrics.md lists them with what each measures here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from epochlog.metrics.process_stats import ProcessStats
from epochlog.metrics.request_stats import PHASES, RequestStats, kafka_request_name
from epochlog.metrics.timings import Timings
from epochlog.metrics.traffic import (
    BYTES_IN,
    BYTES_OUT,
    MESSAGES_IN,
    REPLICATION_BYTES_OUT,
    TopicTraffic,
)
from epochlog.metrics.view import BrokerView

# Kafka's ControllerState metrics (kafka.controller:type=ControllerStats,name=...): every one is
# exported, recorded or not, so dashboards find the names.
CONTROLLER_STATE_METRICS: tuple[str, ...] = (
    "ControllerChangeRateAndTimeMs",
    "LeaderElectionRateAndTimeMs",  # Kafka's BrokerChange state carries this name
    "TopicChangeRateAndTimeMs",
    "TopicDeletionRateAndTimeMs",
    "PartitionReassignmentRateAndTimeMs",
    "AutoLeaderBalanceRateAndTimeMs",
    "ManualLeaderBalanceRateAndTimeMs",
    "ControlledShutdownRateAndTimeMs",
    "IsrChangeRateAndTimeMs",
    "LeaderAndIsrResponseReceivedRateAndTimeMs",
    "LogDirChangeRateAndTimeMs",
    "TopicUncleanLeaderElectionEnableRateAndTimeMs",
    "UncleanLeaderElectionEnableRateAndTimeMs",
    "ListPartitionReassignmentRateAndTimeMs",
)
# Kafka's group states, with the GroupMetadataManager gauge that counts each.
GROUP_STATE_METRICS: tuple[tuple[str, str], ...] = (
    ("PreparingRebalance", "numgroupspreparingrebalance"),
    ("CompletingRebalance", "numgroupscompletingrebalance"),
    ("Stable", "numgroupsstable"),
    ("Dead", "numgroupsdead"),
    ("Empty", "numgroupsempty"),
)
ZK_STATES: tuple[str, ...] = ("CONNECTED", "SUSPENDED", "LOST", "NOT_STARTED")


def summary(
    name: str,
    documentation: str,
    label_names: list[str],
    entries: Iterable[tuple[list[str], Timings]],
    now_s: float,
) -> SummaryMetricFamily:
    """A summary as the JMX exporter renders a Kafka histogram: quantile samples, _count, _sum."""
    family = SummaryMetricFamily(name, documentation, labels=label_names)
    for values, timings in entries:
        family.add_metric(values, count_value=timings.count, sum_value=timings.sum_ms)
        labels = dict(zip(label_names, values, strict=True))
        for quantile, ms in timings.quantiles(now_s):
            family.add_sample(name, {**labels, "quantile": quantile}, ms)
    return family


def gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


class BrokerCollector(Collector):
    """Every metric family of one broker process."""

    def __init__(
        self,
        view: Callable[[], BrokerView],
        stats: ProcessStats,
        requests: RequestStats | None = None,
        traffic: TopicTraffic | None = None,
    ) -> None:
        self.view = view
        self.stats = stats
        self.requests = requests or RequestStats()
        self.traffic = traffic or TopicTraffic()

    def collect(self) -> Iterator[Metric]:
        now = time.perf_counter()
        view = self.view()
        yield from self._topic_traffic()
        yield from self._requests(now)
        yield from self._replica_manager(view)
        yield from self._logs(view)
        yield from self._purgatories(view)
        yield from self._controller(view, now)
        yield from self._zookeeper(now)
        yield from self._groups(view)
        yield from self._epochlog(view)

    # ------------------------------------------------------------------ hot path counts

    def _topic_traffic(self) -> Iterator[Metric]:
        prefix = "kafka_server_brokertopicmetrics_"
        families = (
            (MESSAGES_IN, "messagesin", "Messages appended here as leader (MessagesInPerSec)"),
            (BYTES_IN, "bytesin", "Produced record bytes appended as leader (BytesInPerSec)"),
            (BYTES_OUT, "bytesout", "Record bytes returned to consumers (BytesOutPerSec)"),
            (
                REPLICATION_BYTES_OUT,
                "replicationbytesout",
                "Record bytes returned to followers' fetches (ReplicationBytesOutPerSec)",
            ),
        )  # fmt: skip
        topics = sorted(self.traffic.topics.items())
        for index, suffix, doc in families:
            family = CounterMetricFamily(prefix + suffix, doc, labels=["topic"])
            for topic, counts in topics:
                family.add_metric([topic], counts[index])
            yield family

    def _requests(self, now: float) -> Iterator[Metric]:
        prefix = "kafka_network_requestmetrics_"
        apis = sorted((kafka_request_name(k), api) for k, api in self.requests.apis.items())
        requests = CounterMetricFamily(
            prefix + "requests",
            "Requests answered, by API and version (RequestsPerSec)",
            labels=["request", "version"],
        )
        for name, api in apis:
            for version, count in sorted(api.by_version.items()):
                requests.add_metric([name, str(version)], count)
        yield requests
        for index, phase in enumerate(PHASES):
            yield summary(
                prefix + phase,
                f"Request time in ms, phase {phase} (RequestMetrics; see docs/metrics.md)",
                ["request"],
                (([name], api.phases[index]) for name, api in apis),
                now,
            )

    # ------------------------------------------------------------------ scrape-time gauges

    def _replica_manager(self, view: BrokerView) -> Iterator[Metric]:
        prefix = "kafka_server_replicamanager_"
        led = [p for p in view.partitions if p.leader]
        yield gauge(prefix + "partitioncount", "Replicas hosted here", len(view.partitions))
        yield gauge(prefix + "leadercount", "Partitions led here", len(led))
        yield gauge(
            prefix + "underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replica set",
            sum(1 for p in led if p.isr < p.replicas),
        )
        yield gauge(
            prefix + "underminisrpartitioncount",
            "Partitions led here whose ISR is below min.insync.replicas",
            sum(1 for p in led if p.isr < p.min_insync_replicas),
        )
        yield gauge(
            prefix + "atminisrpartitioncount",
            "Partitions led here whose ISR is exactly min.insync.replicas",
            sum(1 for p in led if p.isr == p.min_insync_replicas),
        )
        yield CounterMetricFamily(
            prefix + "isrshrinks", "ISR shrinks committed here", value=self.stats.isr_shrinks
        )
        yield CounterMetricFamily(
            prefix + "isrexpands", "ISR expansions committed here", value=self.stats.isr_expands
        )

    def _logs(self, view: BrokerView) -> Iterator[Metric]:
        prefix = "kafka_log_log_"
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(prefix + "size", "Bytes of the replica's log", labels=labels)
        end = GaugeMetricFamily(prefix + "logendoffset", "The log end offset", labels=labels)
        start = GaugeMetricFamily(prefix + "logstartoffset", "The log start offset", labels=labels)
        segments = GaugeMetricFamily(prefix + "numlogsegments", "Segments", labels=labels)
        for p in view.partitions:
            values = [p.topic, str(p.partition)]
            size.add_metric(values, p.size_bytes)
            end.add_metric(values, p.log_end_offset)
            start.add_metric(values, p.log_start_offset)
            segments.add_metric(values, p.segments)
        yield from (size, end, start, segments)
        yield summary(
            "kafka_log_logflushstats_logflushrateandtimems",
            "Log flushes (fsync of a log's unflushed segments), ms",
            [],
            [([], self.stats.log_flush)],
            time.perf_counter(),
        )

    def _purgatories(self, view: BrokerView) -> Iterator[Metric]:
        prefix = "kafka_server_delayedoperationpurgatory_"
        label = ["delayedoperation"]
        size = GaugeMetricFamily(
            prefix + "purgatorysize", "Watch entries in the purgatory", labels=label
        )
        delayed = GaugeMetricFamily(
            prefix + "numdelayedoperations", "Operations waiting in the purgatory", labels=label
        )
        for name, (operations, watched) in sorted(view.purgatories.items()):
            size.add_metric([name], watched)
            delayed.add_metric([name], operations)
        yield size
        yield delayed

    def _controller(self, view: BrokerView, now: float) -> Iterator[Metric]:
        prefix = "kafka_controller_kafkacontroller_"
        c = view.controller
        yield gauge(prefix + "activecontrollercount", "1 on the active controller", int(c.active))
        yield gauge(
            prefix + "offlinepartitionscount",
            "Partitions without a live leader (active controller only)",
            c.offline_partitions,
        )
        yield gauge(prefix + "globaltopiccount", "Topics (active controller only)", c.topics)
        yield gauge(
            prefix + "globalpartitioncount", "Partitions (active controller only)", c.partitions
        )
        events = "kafka_controller_controllereventmanager_"
        yield gauge(events + "eventqueuesize", "Controller events waiting", c.event_queue_size)
        yield summary(
            events + "eventqueuetimems",
            "Time controller events waited in the queue, ms",
            [],
            [([], self.stats.controller_event_queue_time)],
            now,
        )
        states = self.stats.controller_states
        for state in CONTROLLER_STATE_METRICS:
            yield summary(
                "kafka_controller_controllerstats_" + state.lower(),
                f"Controller events of Kafka's state {state}: rate and handling time, ms",
                [],
                [([], states.get(state) or Timings())],
                now,
            )
        yield CounterMetricFamily(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Unclean leader elections",
            value=self.stats.unclean_leader_elections,
        )

    def _zookeeper(self, now: float) -> Iterator[Metric]:
        stats = self.stats
        yield summary(
            "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms",
            "ZooKeeper request latency, ms",
            [],
            [([], stats.zk_request_latency)],
            now,
        )
        prefix = "kafka_server_sessionexpirelistener_"
        state = GaugeMetricFamily(
            prefix + "sessionstate", "1 for the ZooKeeper session's current state", labels=["state"]
        )
        for name in ZK_STATES:
            state.add_metric([name], int(stats.zk_state == name))
        yield state
        yield CounterMetricFamily(
            prefix + "zookeeperexpires", "ZooKeeper sessions expired", value=stats.zk_expires
        )
        yield CounterMetricFamily(
            prefix + "zookeeperdisconnects",
            "ZooKeeper connections lost (session suspended)",
            value=stats.zk_disconnects,
        )

    def _groups(self, view: BrokerView) -> Iterator[Metric]:
        groups = view.groups
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield gauge(prefix + "numgroups", "Groups coordinated here", sum(groups.states.values()))
        for state, suffix in GROUP_STATE_METRICS:
            yield gauge(prefix + suffix, f"Groups in state {state}", groups.states.get(state, 0))
        yield gauge(prefix + "numoffsets", "Committed offsets held here", groups.offsets)
        coordinator = "kafka_server_group_coordinator_metrics_"
        yield CounterMetricFamily(
            coordinator + "group_completed_rebalance",
            "Rebalances completed by groups coordinated here (since their partition loaded)",
            value=groups.completed_rebalances,
        )
        yield CounterMetricFamily(
            coordinator + "offset_commit",
            "Offsets committed to groups coordinated here (since their partition loaded)",
            value=groups.offset_commits,
        )
        labels = ["consumergroup", "topic", "partition"]
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag", "End offset minus the committed offset", labels=labels
        )
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset", "The group's committed offset", labels=labels
        )
        for entry in groups.lags:
            values = [entry.group, entry.topic, str(entry.partition)]
            lag.add_metric(values, max(0, entry.end_offset - entry.committed_offset))
            current.add_metric(values, entry.committed_offset)
        yield lag
        yield current

    def _epochlog(self, view: BrokerView) -> Iterator[Metric]:
        yield gauge(
            "epochlog_broker_epoch",
            "This broker's epoch (KIP-380: the czxid of its registration)",
            view.broker_epoch,
        )
        yield gauge(
            "epochlog_controller_id", "The active controller as known here", view.controller_id
        )
        yield gauge(
            "epochlog_controller_pinned_broker",
            "The broker the controller is pinned to (KIP-39), -1 when none",
            view.pinned_controller,
        )
        fenced = CounterMetricFamily(
            "epochlog_fenced_requests",
            "Requests (or AlterPartition partitions) refused as fenced, by reason and API",
            labels=["reason", "request"],
        )
        for (reason, request), count in sorted(self.stats.fenced.items()):
            fenced.add_metric([reason, request], count)
        yield fenced
