"""The brokers' Prometheus endpoints (issue 22) on a live 3-broker cluster, scraped as Prometheus
does: a plain HTTP GET of /metrics, read with prometheus_client's text parser. Real clients
(confluent-kafka) drive the traffic; the counters must move with it, a killed broker must show
as under-replicated partitions on the survivors until it is back, and a group's lag must show.

One cluster for the module; the broker-kill test runs last (it bounces a broker)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from epochlog.testing.cluster import LocalCluster

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("metrics"),
        3,
        zk_session_timeout_ms=4000,
        broker_config={
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 3,
            "replica.lag.time.max.ms": 3000,
        },
    )
    local.start()
    yield local
    local.close()


def scrape(endpoint: str) -> Samples:
    with urllib.request.urlopen(endpoint, timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def cluster_value(cluster: LocalCluster, name: str, **labels: str) -> float:
    return sum(value(scrape(e), name, **labels) for e in cluster.metrics_endpoints().values())


def wait_for(what: str, condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not seen within {timeout_s:.0f} s: {what}")
        time.sleep(0.3)


def create_topic(cluster: LocalCluster, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)


def produce(cluster: LocalCluster, topic: str, count: int, size: int = 100) -> None:
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"x" * size, key=str(i).encode())
    assert producer.flush(30) == 0


def consumer(cluster: LocalCluster, group: str) -> ck.Consumer:
    return ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def consume(c: ck.Consumer, count: int) -> int:
    got = 0
    deadline = time.monotonic() + 60
    while got < count and time.monotonic() < deadline:
        message = c.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    return got


def test_every_broker_serves_metrics_and_exactly_one_is_the_active_controller(
    cluster: LocalCluster,
) -> None:
    endpoints = cluster.metrics_endpoints()
    assert sorted(endpoints) == [1, 2, 3]
    scrapes = {broker_id: scrape(e) for broker_id, e in endpoints.items()}
    counts = [
        value(s, "kafka_controller_kafkacontroller_activecontrollercount") for s in scrapes.values()
    ]
    assert sum(counts) == 1
    controller = cluster.controller_id()
    assert value(scrapes[controller], "kafka_controller_kafkacontroller_activecontrollercount") == 1
    epochs = cluster.zk_state()["brokers"]
    for broker_id, samples in scrapes.items():
        assert value(samples, "epochlog_broker_epoch") == epochs[broker_id]
        assert value(samples, "epochlog_controller_id") == controller
        assert value(samples, "kafka_server_sessionexpirelistener_sessionstate", state="CONNECTED")
        assert value(samples, "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count")


def test_an_unknown_path_is_404(cluster: LocalCluster) -> None:
    endpoint = cluster.metrics_endpoints()[1].replace("/metrics", "/nothing")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(endpoint, timeout=10)
    assert refused.value.code == 404


def test_produce_and_consume_move_messages_bytes_and_request_counters(
    cluster: LocalCluster,
) -> None:
    topic = "metrics-traffic"
    create_topic(cluster, topic, 3)
    requests = "kafka_network_requestmetrics_requests_total"
    before = {api: cluster_value(cluster, requests, request=api) for api in ("Produce", "Fetch")}
    timed_before = cluster_value(
        cluster, "kafka_network_requestmetrics_totaltimems_count", request="Produce"
    )
    assert (
        cluster_value(cluster, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 0
    )
    produce(cluster, topic, 200)
    c = consumer(cluster, "metrics-traffic-group")
    c.subscribe([topic])
    try:
        assert consume(c, 200) == 200
    finally:
        c.close()
    assert (
        cluster_value(cluster, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic)
        == 200
    )
    assert (
        cluster_value(cluster, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
        > 200 * 100
    )
    assert (
        cluster_value(cluster, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic)
        > 200 * 100
    )
    # the followers replicated every byte: replication bytes out too
    assert (
        cluster_value(
            cluster, "kafka_server_brokertopicmetrics_replicationbytesout_total", topic=topic
        )
        > 2 * 200 * 100
    )
    for api in ("Produce", "Fetch"):
        assert cluster_value(cluster, requests, request=api) > before[api]
    timed = cluster_value(
        cluster, "kafka_network_requestmetrics_totaltimems_count", request="Produce"
    )
    assert timed > timed_before
    # an acks=all produce waits for the followers: remote time is measured for it
    assert (
        cluster_value(cluster, "kafka_network_requestmetrics_remotetimems_sum", request="Produce")
        > 0
    )
    # the consumer group was coordinated, rebalanced and committed nothing (auto-commit off)
    assert (
        cluster_value(
            cluster, "kafka_server_group_coordinator_metrics_group_completed_rebalance_total"
        )
        >= 1
    )


def test_a_consumer_group_behind_the_log_end_shows_its_lag(cluster: LocalCluster) -> None:
    topic, group = "metrics-lag", "metrics-lag-group"
    create_topic(cluster, topic, 1)
    produce(cluster, topic, 50)
    c = consumer(cluster, group)
    c.subscribe([topic])
    try:
        assert consume(c, 1) == 1
        c.commit(offsets=[ck.TopicPartition(topic, 0, 20)], asynchronous=False)
    finally:
        c.close()

    def lag() -> float:
        return cluster_value(
            cluster, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition="0"
        )

    wait_for("a lag of 30 for the group", lambda: lag() == 30)
    assert (
        cluster_value(
            cluster, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic
        )
        == 20
    )
    assert cluster_value(cluster, "kafka_server_group_coordinator_metrics_offset_commit_total") >= 1
    assert (
        cluster_value(cluster, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") >= 1
    )


def test_a_killed_broker_shows_as_under_replicated_partitions_until_it_is_back(
    cluster: LocalCluster,
) -> None:
    topic = "metrics-urp"
    create_topic(cluster, topic, 3)
    produce(cluster, topic, 30)
    controller = cluster.controller_id()
    victim = max(b for b in (1, 2, 3) if b != controller)
    survivors = {b: e for b, e in cluster.metrics_endpoints().items() if b != victim}

    def under_replicated() -> float:
        return sum(
            value(scrape(e), "kafka_server_replicamanager_underreplicatedpartitions")
            for e in survivors.values()
        )

    assert under_replicated() == 0
    expands_before = cluster_value(cluster, "kafka_server_replicamanager_isrexpands_total")
    cluster.kill_broker(victim)
    wait_for("under-replicated partitions on the survivors", lambda: under_replicated() > 0)
    cluster.start_broker(victim)
    wait_for("no under-replicated partition once it is back", lambda: under_replicated() == 0)
    # the restarted follower caught up and its leaders took it back into their ISRs
    assert cluster_value(cluster, "kafka_server_replicamanager_isrexpands_total") > expands_before
    assert (
        sum(
            value(scrape(e), "kafka_controller_controllerstats_leaderelectionrateandtimems_count")
            for e in cluster.metrics_endpoints().values()
        )
        >= 1
    )
