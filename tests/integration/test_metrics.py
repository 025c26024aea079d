"""The brokers' Prometheus endpoints (issue 22) on a live 3-broker cluster, scraped as Prometheus
does: a plain HTTP GET of /metrics, read with prometheus_client's text parser. Real clients
(confluent-kafka) drive the traffic; the counters must move with it, a killed broker must show
as under-replicated partitions on the survivors until it is back, and a group's lag must show.

One cluster for the module; the broker-kill tests run last (they bounce brokers)."""

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
    # a broker learns the controller from its first UpdateMetadata, a moment after it starts
    wait_for(
        "every broker knowing the controller",
        lambda: all(value(scrape(e), "epochlog_controller_id") >= 0 for e in endpoints.values()),
    )
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


def test_lag_is_reported_for_partitions_led_by_other_brokers_than_the_coordinator(
    cluster: LocalCluster,
) -> None:
    """One partition per broker (RF 1): whichever broker coordinates the group hosts one of
    them; the other two's ends come from their leaders (ListOffsets at scrape time)."""
    topic, group = "metrics-lag-spread", "metrics-lag-spread-group"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    assignment = [[1], [2], [3]]
    admin.create_topics([NewTopic(topic, 3, replica_assignment=assignment)])[topic].result(30)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    ends = {0: 12, 1: 25, 2: 40}
    for partition, count in ends.items():
        for i in range(count):
            producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0
    committed = {0: 2, 1: 5, 2: 10}
    c = consumer(cluster, group)
    c.subscribe([topic])
    try:
        assert consume(c, 1) == 1
        c.commit(
            offsets=[ck.TopicPartition(topic, p, o) for p, o in committed.items()],
            asynchronous=False,
        )
    finally:
        c.close()

    def lags() -> dict[str, float]:
        return {
            str(p): cluster_value(
                cluster,
                "kafka_consumergroup_lag",
                consumergroup=group,
                topic=topic,
                partition=str(p),
            )
            for p in ends
        }

    expected = {str(p): float(ends[p] - committed[p]) for p in ends}
    wait_for(f"lags {expected}", lambda: lags() == expected)
    # each partition's lag is reported once, by the group's coordinator alone
    reporting = [
        broker_id
        for broker_id, endpoint in cluster.metrics_endpoints().items()
        if value(scrape(endpoint), "kafka_consumergroup_current_offset", consumergroup=group)
    ]
    assert len(reporting) == 1


def test_followers_wait_for_data_again_after_a_topic_they_fetched_is_deleted(
    cluster: LocalCluster,
) -> None:
    """A follower forgets a deleted topic's partitions in its fetch session by the topic id the
    leader's session holds. Forgotten by name (the follower no longer knows the id), they stayed
    in the leader's session and every incremental Fetch came back at once with their
    UNKNOWN_TOPIC_ID: the followers of any other topic spun at a full core (seen as thousands of
    Fetches a second here), where they should wait replica.fetch.wait.max.ms (500 ms)."""
    kept, gone = "fetch-kept", "fetch-gone"
    create_topic(cluster, kept, 3)
    create_topic(cluster, gone, 3)
    produce(cluster, kept, 30)
    produce(cluster, gone, 30)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def isrs_full() -> bool:
        topics = admin.list_topics(timeout=10).topics
        return all(
            name in topics and all(len(p.isrs) == 3 for p in topics[name].partitions.values())
            for name in (kept, gone)
        )

    wait_for("full ISRs", isrs_full)
    time.sleep(1.5)  # the followers' sessions hold both topics, fetched incrementally
    admin.delete_topics([gone])[gone].result(30)
    wait_for(f"{gone} gone", lambda: gone not in admin.list_topics(timeout=10).topics)
    time.sleep(2.0)  # every broker has applied its StopReplica and forgotten the partitions

    requests = "kafka_network_requestmetrics_requests_total"
    before = cluster_value(cluster, requests, request="Fetch")
    time.sleep(3.0)
    fetches = cluster_value(cluster, requests, request="Fetch") - before
    # 3 brokers x 2 leaders each, at most ~2 waiting Fetches a second each: ~36 in 3 s
    assert fetches < 200, f"{fetches:.0f} Fetches in 3 s with nothing to replicate"


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


def partition_state(cluster: LocalCluster, topic: str) -> tuple[int, list[int]]:
    """(leader, ISR) of the topic's partition 0 as the cluster's metadata says."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    partition = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    return partition.leader, sorted(partition.isrs)


def test_an_unclean_election_is_counted_by_the_controller(cluster: LocalCluster) -> None:
    """UncleanLeaderElectionsPerSec: the last ISR member dies, a replica outside the ISR comes
    back, ElectLeaders UNCLEAN makes it leader; the active controller counts one."""
    topic = "metrics-unclean"
    controller = cluster.controller_id()
    assert controller is not None
    first, second = (b for b in (1, 2, 3) if b != controller)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[first, second]])])[topic].result(
        30
    )
    produce(cluster, topic, 10)
    unclean = "kafka_controller_controllerstats_uncleanleaderelections_total"
    controller_endpoint = cluster.metrics_endpoints()[controller]
    before = value(scrape(controller_endpoint), unclean)
    cluster.kill_broker(second)
    wait_for(
        "the dead follower out of the ISR", lambda: partition_state(cluster, topic)[1] == [first]
    )
    cluster.kill_broker(first)
    wait_for("no leader", lambda: partition_state(cluster, topic)[0] == -1)
    cluster.start_broker(second)
    try:
        # a clean election cannot elect `second`: nothing was counted yet
        assert value(scrape(controller_endpoint), unclean) == before
        elected = admin.elect_leaders(ck.ElectionType.UNCLEAN, [ck.TopicPartition(topic, 0)])
        assert elected.result(30)[ck.TopicPartition(topic, 0)] is None  # no error
        wait_for("the outside replica leads", lambda: partition_state(cluster, topic)[0] == second)
        assert value(scrape(controller_endpoint), unclean) == before + 1
    finally:
        cluster.start_broker(first)
