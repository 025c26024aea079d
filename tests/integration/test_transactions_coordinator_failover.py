"""The transaction coordinator's timers and failover on a real 3-broker cluster, with
confluent-kafka producers and a read_committed confluent-kafka consumer.

- `transaction.timeout.ms`: a transaction left open past its timeout is aborted by the
  coordinator itself (with an epoch bump): DescribeTransactions shows CompleteAbort at the next
  epoch, and its records are never read.
- A coordinator killed -9 between PrepareCommit and the markers: a fault rule holds every
  WriteTxnMarkers the coordinator sends, so the commit is answered (PrepareCommit is written)
  but no marker is; the coordinator is killed; the broker that takes over its
  `__transaction_state` partition finds the PrepareCommit, writes the markers, and the records
  become visible exactly once.
- A partition leader killed while the markers to it are lost (a drop rule): the marker channel
  retries with fresh metadata and writes them to the new leader.

Its own cluster: brokers are killed (and started again)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from epochlog.broker.harness import RawClient
from epochlog.coordinator.transaction.runtime import partition_for_transactional_id
from epochlog.faults import FaultRules
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import wait_until_brokers_name_the_controller
from tests.integration.test_transactions_coordinator import (
    PARTITIONS,
    create_topic,
    read_committed,
    transactional_producer,
)

STATE_PARTITIONS = 5
DEADLINE_S = 60  # a failure bound only


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("txn-faults") / "faults.json"
    FaultRules.write(path, [])
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, faults: Path) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("txn-failover"),
        3,
        broker_config={
            "transaction.state.log.num.partitions": STATE_PARTITIONS,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
            "epochlog.test.faults.file": str(faults),
        },
    )
    local.start()
    wait_until_brokers_name_the_controller([b.port for b in local.brokers.values()])
    yield local
    local.close()


def describe(cluster: LocalCluster, transactional_id: str) -> object:
    """The id's DescribeTransactions entry, from whichever live broker coordinates it."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        for broker in cluster.brokers.values():
            if not broker.is_running():
                continue
            with RawClient("127.0.0.1", broker.port) as client:
                response = client.request(
                    ApiKey.DESCRIBE_TRANSACTIONS,
                    0,
                    m.DescribeTransactionsRequest(transactional_ids=[transactional_id]),
                )
            (state,) = response.transaction_states
            if state.error_code == ErrorCode.NONE:
                return state
        time.sleep(0.1)
    raise AssertionError(f"no broker describes {transactional_id!r}")


def coordinator_of(cluster: LocalCluster, transactional_id: str) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    partition = partition_for_transactional_id(transactional_id, STATE_PARTITIONS)
    topic = admin.list_topics("__transaction_state", timeout=10).topics["__transaction_state"]
    return topic.partitions[partition].leader


def wait_for_state(cluster: LocalCluster, transactional_id: str, state: str) -> object:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        described = describe(cluster, transactional_id)
        if described.transaction_state == state:
            return described
        time.sleep(0.1)
    raise AssertionError(f"{transactional_id!r} never reached {state}")


def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator(
    cluster: LocalCluster,
) -> None:
    topic = "txn-timeout"
    create_topic(cluster, topic)
    producer = transactional_producer(
        cluster, "timeout-id", **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, f"abandoned-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    opened = describe(cluster, "timeout-id")
    assert opened.transaction_state == "Ongoing"

    aborted = wait_for_state(cluster, "timeout-id", "CompleteAbort")
    assert aborted.producer_epoch == opened.producer_epoch + 1  # the abandoned producer is fenced

    after = transactional_producer(cluster, "after-timeout-id")
    after.init_transactions(30)
    after.begin_transaction()
    after.produce(topic, b"after", partition=0)
    after.commit_transaction(30)
    assert read_committed(cluster, topic, 1) == ["after"]


def test_a_coordinator_killed_after_prepare_commit_is_succeeded_by_one_that_finishes_it(
    cluster: LocalCluster, faults: Path
) -> None:
    topic = "txn-coordinator-kill"
    transactional_id = "kill-coordinator-id"
    create_topic(cluster, topic)
    producer = transactional_producer(cluster, transactional_id)
    producer.init_transactions(30)
    coordinator = coordinator_of(cluster, transactional_id)
    FaultRules.write(
        faults, [{"api": "WRITE_TXN_MARKERS", "source": coordinator, "action": "hold"}]
    )
    try:
        producer.begin_transaction()
        for i in range(6):
            producer.produce(topic, f"committed-{i}".encode(), partition=i % PARTITIONS)
        producer.commit_transaction(30)  # answered once PrepareCommit is written
        assert describe(cluster, transactional_id).transaction_state == "PrepareCommit"
        # no marker yet: the transaction is still unstable, nothing is read
        assert read_committed(cluster, topic, 0) == []
        assert describe(cluster, transactional_id).transaction_state == "PrepareCommit"

        cluster.kill_broker(coordinator)
        done = wait_for_state(cluster, transactional_id, "CompleteCommit")
        assert coordinator_of(cluster, transactional_id) != coordinator
        assert done.producer_id >= 0
        values = read_committed(cluster, topic, 6)
        assert sorted(values) == [f"committed-{i}" for i in range(6)]  # each exactly once
    finally:
        FaultRules.write(faults, [])
        if not cluster.brokers[coordinator].is_running():
            cluster.start_broker(coordinator)


def test_markers_follow_a_partition_whose_leader_dies_before_they_reach_it(
    cluster: LocalCluster, faults: Path
) -> None:
    """The marker channel retries with fresh metadata: markers to the topic's leader are lost
    (a drop rule), the leader is killed, and the coordinator writes them to the new leader."""
    topic = "txn-leader-kill"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    create_topic(cluster, topic)
    probe = transactional_producer(cluster, "leader-kill-probe")
    probe.init_transactions(30)  # __transaction_state exists from here on
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    leader = partitions[0].leader
    transactional_id = next(
        f"leader-kill-{i}"
        for i in range(100)
        if coordinator_of(cluster, f"leader-kill-{i}") != leader
    )
    producer = transactional_producer(cluster, transactional_id)
    producer.init_transactions(30)
    FaultRules.write(
        faults, [{"api": "WRITE_TXN_MARKERS", "destination": leader, "action": "drop"}]
    )
    try:
        producer.begin_transaction()
        for i in range(4):
            producer.produce(topic, f"moved-{i}".encode(), partition=0)
        producer.commit_transaction(30)
        assert describe(cluster, transactional_id).transaction_state == "PrepareCommit"
        cluster.kill_broker(leader)
        wait_for_state(cluster, transactional_id, "CompleteCommit")
        new_leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        assert new_leader not in (leader, -1)
        assert sorted(read_committed(cluster, topic, 4)) == [f"moved-{i}" for i in range(4)]
    finally:
        FaultRules.write(faults, [])
        if not cluster.brokers[leader].is_running():
            cluster.start_broker(leader)
