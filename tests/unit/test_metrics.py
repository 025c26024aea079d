"""The metrics layer without a broker: timings and their quantiles, the request phases, the
collector's families from a hand-built view (rendered and read back with prometheus_client's
own text parser), the endpoint's answers, and the Grafana dashboard against the names the
collector exports."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from epochlog.metrics.collector import BrokerCollector
from epochlog.metrics.endpoint import MetricsEndpoint
from epochlog.metrics.process_stats import ProcessStats
from epochlog.metrics.request_stats import PHASES, RequestStats, kafka_request_name
from epochlog.metrics.timings import Timings
from epochlog.metrics.traffic import TopicTraffic
from epochlog.metrics.view import (
    BrokerView,
    ControllerView,
    GroupLag,
    GroupsView,
    PartitionView,
)
from epochlog.protocol.api import ApiKey

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "epochlog.json"


def partition(topic: str, index: int, *, leader: bool, replicas: int, isr: int) -> PartitionView:
    return PartitionView(topic, index, leader, replicas, isr, 2, 1000 + index, 1, 0, 40, 40)


def samples_of(collector: BrokerCollector) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def exported_names(collector: BrokerCollector) -> set[str]:
    """Every sample name the collector's families can carry (counters as name_total,
    summaries as name, name_count, name_sum)."""
    names: set[str] = set()
    for family in collector.collect():
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "summary":
            names.update({family.name, family.name + "_count", family.name + "_sum"})
        else:
            names.add(family.name)
    return names


def test_timings_quantiles_fall_in_the_recorded_range_and_fade_when_idle() -> None:
    timings = Timings(window_s=60)
    for ms in range(1, 101):
        timings.record(float(ms), now_s=1000.0)
    quantiles = dict(timings.quantiles(1000.0))
    assert 25 <= quantiles["0.50"] <= 100
    assert quantiles["0.50"] <= quantiles["0.99"] <= 100
    assert timings.count == 100 and timings.sum_ms == 5050
    # two windows without a record: nothing recent, the totals stay
    assert dict(timings.quantiles(1000.0 + 121))["0.99"] == 0
    assert timings.count == 100


def test_request_phases_add_up_to_the_total() -> None:
    stats = RequestStats()
    # queued 1 ms, handler 2 ms, waited for followers 3 ms, sent in 4 ms
    stats.record(ApiKey.PRODUCE, 9, 10.0, 10.001, 10.003, 10.006, 0.0, 10.010)
    api = stats.apis[ApiKey.PRODUCE]
    assert api.by_version == {9: 1}
    took = {phase: api.phases[i].sum_ms for i, phase in enumerate(PHASES)}
    assert took["requestqueuetimems"] == pytest.approx(1)
    assert took["localtimems"] == pytest.approx(2)
    assert took["remotetimems"] == pytest.approx(3)
    assert took["responsesendtimems"] == pytest.approx(4)
    assert took["totaltimems"] == pytest.approx(10)
    assert kafka_request_name(ApiKey.LEADER_AND_ISR) == "LeaderAndIsr"
    assert kafka_request_name(ApiKey.OFFSET_FOR_LEADER_EPOCH) == "OffsetForLeaderEpoch"


def test_the_collector_renders_a_view_under_kafkas_names() -> None:
    stats = ProcessStats()
    stats.count_isr_change(3, 2)
    stats.count_isr_change(2, 3)
    stats.count_isr_change(2, 3)
    stats.count_fenced("STALE_BROKER_EPOCH", "LeaderAndIsr")
    stats.count_fenced("INELIGIBLE_REPLICA", "AlterPartition", 2)
    requests = RequestStats()
    now = time.perf_counter()  # quantiles cover the recent past: record "now"
    requests.record(ApiKey.PRODUCE, 9, now, now, now + 0.001, now + 0.002, 0.0, now + 0.003)
    traffic = TopicTraffic()
    traffic.record_in("t", 10, 1500)
    traffic.record_out("t", 700, replication=False)
    traffic.record_out("t", 1500, replication=True)
    view = BrokerView(
        broker_id=2,
        broker_epoch=4242,
        partitions=(
            partition("t", 0, leader=True, replicas=3, isr=3),
            partition("t", 1, leader=True, replicas=3, isr=1),  # under-replicated, under min
            partition("t", 2, leader=True, replicas=3, isr=2),  # under-replicated, at min
            partition("t", 3, leader=False, replicas=3, isr=1),  # a follower reports nothing
        ),
        purgatories={"Produce": (2, 3), "Fetch": (0, 0)},
        controller=ControllerView(active=True, offline_partitions=1, event_queue_size=4),
        controller_id=2,
        pinned_controller=3,
        groups=GroupsView(
            states={"Stable": 2, "Empty": 1},
            offsets=7,
            lags=(GroupLag("g", "t", 0, 25, 40),),
        ),
    )
    samples = samples_of(BrokerCollector(lambda: view, stats, requests, traffic))

    def value(name: str, **labels: str) -> float:
        return samples[(name, frozenset(labels.items()))]

    assert value("kafka_server_brokertopicmetrics_messagesin_total", topic="t") == 10
    assert value("kafka_server_brokertopicmetrics_bytesin_total", topic="t") == 1500
    assert value("kafka_server_brokertopicmetrics_bytesout_total", topic="t") == 700
    assert value("kafka_server_brokertopicmetrics_replicationbytesout_total", topic="t") == 1500
    assert value("kafka_network_requestmetrics_requests_total", request="Produce", version="9") == 1
    assert value("kafka_network_requestmetrics_totaltimems_count", request="Produce") == 1
    assert value("kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99") > 0
    assert value("kafka_server_replicamanager_partitioncount") == 4
    assert value("kafka_server_replicamanager_leadercount") == 3
    assert value("kafka_server_replicamanager_underreplicatedpartitions") == 2
    assert value("kafka_server_replicamanager_underminisrpartitioncount") == 1
    assert value("kafka_server_replicamanager_atminisrpartitioncount") == 1
    assert value("kafka_server_replicamanager_isrshrinks_total") == 1
    assert value("kafka_server_replicamanager_isrexpands_total") == 2
    assert value("kafka_log_log_size", topic="t", partition="1") == 1001
    assert value("kafka_log_log_logendoffset", topic="t", partition="2") == 40
    assert (
        value("kafka_server_delayedoperationpurgatory_purgatorysize", delayedoperation="Produce")
        == 3
    )
    assert (
        value(
            "kafka_server_delayedoperationpurgatory_numdelayedoperations",
            delayedoperation="Produce",
        )
        == 2
    )
    assert value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value("kafka_controller_kafkacontroller_offlinepartitionscount") == 1
    assert value("kafka_controller_controllereventmanager_eventqueuesize") == 4
    assert value("kafka_coordinator_group_groupmetadatamanager_numgroups") == 3
    assert value("kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 2
    assert value("kafka_coordinator_group_groupmetadatamanager_numoffsets") == 7
    assert value("kafka_consumergroup_lag", consumergroup="g", topic="t", partition="0") == 15
    assert value("epochlog_broker_epoch") == 4242
    assert value("epochlog_controller_pinned_broker") == 3
    assert (
        value("epochlog_fenced_requests_total", reason="STALE_BROKER_EPOCH", request="LeaderAndIsr")
        == 1
    )
    assert (
        value(
            "epochlog_fenced_requests_total", reason="INELIGIBLE_REPLICA", request="AlterPartition"
        )
        == 2
    )


def test_every_family_is_exported_before_any_traffic() -> None:
    quiet = exported_names(BrokerCollector(lambda: BrokerView(1), ProcessStats()))
    busy_stats = ProcessStats()
    busy_stats.count_fenced("STALE_BROKER_EPOCH", "StopReplica")
    busy = exported_names(BrokerCollector(lambda: BrokerView(1), busy_stats))
    assert quiet == busy
    assert "kafka_controller_controllerstats_leaderelectionrateandtimems_count" in quiet


def test_the_endpoint_answers_get_of_metrics_only() -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(lambda: BrokerView(1), ProcessStats()))
    endpoint = MetricsEndpoint(registry)
    status, content_type, body = endpoint.answer("GET /metrics HTTP/1.1")
    assert status == "200 OK" and content_type.startswith("text/plain")
    assert b"kafka_server_replicamanager_underreplicatedpartitions 0.0" in body
    assert endpoint.answer("GET /other HTTP/1.1")[0] == "404 Not Found"
    assert endpoint.answer("POST /metrics HTTP/1.1")[0] == "405 Method Not Allowed"
    assert endpoint.answer("garbage")[0] == "400 Bad Request"


def dashboard_expressions() -> list[tuple[str, str]]:
    model = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], target["expr"])
        for panel in model["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]


def test_the_dashboard_is_a_grafana_model_with_a_prometheus_datasource_variable() -> None:
    model = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in model["panels"]:
        assert {"type", "title", "gridPos", "id"} <= set(panel)
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}"
            assert panel["targets"], panel["title"]
    ids = [panel["id"] for panel in model["panels"]]
    assert len(ids) == len(set(ids))


def test_every_dashboard_expression_names_metrics_the_brokers_export() -> None:
    exported = exported_names(BrokerCollector(lambda: BrokerView(1), ProcessStats()))
    named: set[str] = set()
    for title, expr in dashboard_expressions():
        metrics = set(re.findall(r"\b(?:kafka|epochlog)_[a-z0-9_]+\b", expr))
        assert metrics, f"panel {title!r}: {expr} names no metric"
        unknown = metrics - exported
        assert not unknown, f"panel {title!r} uses metrics no broker exports: {sorted(unknown)}"
        named |= metrics
    # the areas issue 22 asks the dashboard to cover
    for wanted in (
        "kafka_server_brokertopicmetrics_messagesin_total",
        "kafka_network_requestmetrics_totaltimems",
        "kafka_server_replicamanager_underreplicatedpartitions",
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "kafka_server_replicamanager_isrshrinks_total",
        "kafka_controller_kafkacontroller_activecontrollercount",
        "kafka_coordinator_group_groupmetadatamanager_numgroupsstable",
        "kafka_consumergroup_lag",
    ):
        assert wanted in named, wanted
