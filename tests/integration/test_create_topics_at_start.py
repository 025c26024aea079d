"""CreateTopics sent right after a cluster starts is answered and creates the topic.

Every broker learns the controller from /controller before the controller's first
UpdateMetadata tells it the other brokers. Brokers used to name that controller in Metadata
while listing only themselves: librdkafka then waited for a broker it could never find, and its
CreateTopics got no answer for 30 s (2 of 5 fresh clusters, with nothing held). Here the
controller's first load from ZooKeeper is held (`CONTROLLER_LOAD`), so every client asks
inside that window, every time; the hold is released once the request is on its way.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.client import Admin
from epochlog.testing.cluster import LocalCluster
from epochlog.testing.faults import FaultRules
from tests.integration.interop import wait_until_brokers_name_the_controller

TOPIC = "created-at-start"
PARTITIONS = 3
ANSWER_WAIT_S = 25  # librdkafka's own wait for the unlocatable controller was 30 s and more


def confluent_create(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 2)])[TOPIC].result(ANSWER_WAIT_S)


def epochlog_create(bootstrap: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic(TOPIC, PARTITIONS, 2, timeout=ANSWER_WAIT_S)


def kafka_python_create(bootstrap: str) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=ANSWER_WAIT_S * 1000)
    try:
        admin.create_topics([KNewTopic(TOPIC, PARTITIONS, 2)])
    finally:
        admin.close()


CLIENTS: dict[str, Callable[[str], None]] = {
    "confluent": confluent_create,
    "epochlog": epochlog_create,
    "kafka-python": kafka_python_create,
}


def every_partition_led(bootstrap: str) -> bool:
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10).topics
    partitions = topics[TOPIC].partitions if TOPIC in topics else {}
    return len(partitions) == PARTITIONS and all(p.leader >= 0 for p in partitions.values())


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_create_topics_sent_before_the_controller_loaded_creates_the_topic(
    tmp_path: Path, client: str
) -> None:
    faults = tmp_path / "faults.json"
    FaultRules.write(faults, [{"event": "CONTROLLER_LOAD", "action": "hold"}])
    cluster = LocalCluster(
        tmp_path / "cluster", 3, broker_config={"epochlog.test.faults.file": str(faults)}
    )
    cluster.start()  # ready once /controller exists: the controller holds its load
    try:
        # The guard callers used: it holds already, without any UpdateMetadata sent.
        wait_until_brokers_name_the_controller([b.port for b in cluster.brokers.values()])
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            creating = pool.submit(CLIENTS[client], cluster.bootstrap_servers)
            # Let the client fetch metadata and send its request while the load is held;
            # sent later, the request would pass anyway, so this only makes the test sharper.
            time.sleep(1.0)
            FaultRules.write(faults, [])
            creating.result(ANSWER_WAIT_S + 5)  # raises what the client raised
        deadline = time.monotonic() + 30
        while not every_partition_led(cluster.bootstrap_servers):
            assert time.monotonic() < deadline, f"{TOPIC}: partitions never all led"
            time.sleep(0.2)
    finally:
        cluster.close()
