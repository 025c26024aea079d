"""num.replica.fetchers and replication throttles (KIP-73) on a real 3-broker cluster.

- num.replica.fetchers changed at runtime (cluster default, then one broker) resizes every
  broker's fetchers while acks=all traffic runs: the ISRs stay full and every acknowledged
  record is read back.
- `epochlog reassign --execute --throttle` moving a 2 MB partition: the throttled-replicas
  configs and the rates are visible through DescribeConfigs during the move, the new replica's
  catch-up takes at least half of size / rate, and `--verify` removes them all once it is done.

replica.fetch.max.bytes is 64 KiB here so one fetch cannot carry most of the partition before
the first measurement (the first fetch of a move is never held back)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from epochlog.cli.main import main as epochlog_main
from epochlog.client import Admin, NewTopic
from epochlog.client.admin_configs import AlterOp, ConfigOp, ConfigResource, ResourceType
from epochlog.testing.cluster import LocalCluster

FETCH_MAX_BYTES = 65536
INT64_MAX = str(2**63 - 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("throttles"),
        3,
        broker_config={
            "replica.fetch.max.bytes": FETCH_MAX_BYTES,
            "replica.fetch.backoff.ms": 200,
            "auto.leader.rebalance.enable": "false",
        },
    )
    local.start()
    yield local
    local.close()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as client:
        yield client


def wait_until(predicate: Callable[[], bool], timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what or "condition not reached"
        time.sleep(0.2)


def config_value(admin: Admin, resource: ConfigResource, key: str) -> str | None:
    entries = admin.describe_configs([resource], keys=[key])[resource]
    return next((e.value for e in entries if e.name == key), None)


def produce(cluster: LocalCluster, topic: str, values: list[bytes], partitions: int) -> list[bytes]:
    acked: list[bytes] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.value())

    producer = ck.Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}
    )
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def read_all(cluster: LocalCluster, topic: str, partitions: int, expected: int) -> list[bytes]:
    consumer = ck.Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"{topic}-reader"}
    )
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    read: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(read) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read.append(msg.value())
    finally:
        consumer.close()
    return read


def isr_full(admin: Admin, topic: str) -> bool:
    described = admin.describe_topics([topic])[topic]
    return all(sorted(p.isr) == sorted(p.replicas) for p in described.partitions)


def test_num_replica_fetchers_changes_at_runtime_and_replication_goes_on(
    cluster: LocalCluster, admin: Admin
) -> None:
    topic, partitions = "many", 12
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)])
    wait_until(lambda: isr_full(admin, topic), what="the ISRs full at first")
    acked = produce(cluster, topic, [f"a{i}".encode() for i in range(600)], partitions)

    default = ConfigResource(ResourceType.BROKER, "")
    admin.incremental_alter_configs({default: [ConfigOp("num.replica.fetchers", "2")]})
    for broker in cluster.brokers.values():
        wait_until(
            lambda b=broker: "num.replica.fetchers 1 -> 2" in b.log_path.read_text(),
            what=f"broker {broker.broker_id} resizing to 2 fetchers per source",
        )
    acked += produce(cluster, topic, [f"b{i}".encode() for i in range(600)], partitions)

    one = ConfigResource(ResourceType.BROKER, "2")
    admin.incremental_alter_configs({one: [ConfigOp("num.replica.fetchers", "4")]})
    assert config_value(admin, one, "num.replica.fetchers") == "4"
    wait_until(
        lambda: "num.replica.fetchers 2 -> 4" in cluster.brokers[2].log_path.read_text(),
        what="broker 2 resizing to 4",
    )
    acked += produce(cluster, topic, [f"c{i}".encode() for i in range(600)], partitions)
    # a change beyond double the current count is refused, as Kafka's DynamicThreadPool does
    with pytest.raises(Exception, match="not be greater than double the current value 4"):
        admin.incremental_alter_configs({one: [ConfigOp("num.replica.fetchers", "9")]})

    wait_until(lambda: isr_full(admin, topic), what="the ISRs full after the resizes")
    assert len(acked) == 1800
    read = read_all(cluster, topic, partitions, len(acked))
    assert set(acked) <= set(read), f"{len(set(acked) - set(read))} acknowledged records lost"
    admin.incremental_alter_configs({one: [ConfigOp("num.replica.fetchers", None, AlterOp.DELETE)]})
    admin.incremental_alter_configs(
        {default: [ConfigOp("num.replica.fetchers", None, AlterOp.DELETE)]}
    )


def test_a_throttled_reassignment_is_bounded_by_the_rate_and_verify_clears_it(
    cluster: LocalCluster, admin: Admin, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, rate, size = "heavy", 200_000, 2_000_000
    admin.create_topics([NewTopic(topic, replica_assignment={0: [1]})])
    wait_until(lambda: isr_full(admin, topic), what="the topic created")
    values = [f"{i:08d}".encode() + b"x" * 992 for i in range(size // 1000)]
    assert len(produce(cluster, topic, values, 1)) == len(values)

    server = ["--bootstrap-server", cluster.bootstrap_servers]
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2]}]}
        )
    )
    started = time.monotonic()
    assert (
        epochlog_main(
            [
                "reassign",
                "--execute",
                "--reassignment-json-file",
                str(plan),
                "--throttle",
                str(rate),
                *server,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Warning: You must run --verify periodically" in out
    assert f"The inter-broker throttle limit was set to {rate} B/s" in out

    topic_resource = ConfigResource(ResourceType.TOPIC, topic)
    assert config_value(admin, topic_resource, "leader.replication.throttled.replicas") == "0:1"
    assert config_value(admin, topic_resource, "follower.replication.throttled.replicas") == "0:2"
    for broker in ("1", "2"):
        resource = ConfigResource(ResourceType.BROKER, broker)
        assert config_value(admin, resource, "leader.replication.throttled.rate") == str(rate)
        assert config_value(admin, resource, "follower.replication.throttled.rate") == str(rate)

    def verified() -> str:
        assert (
            epochlog_main(["reassign", "--verify", "--reassignment-json-file", str(plan), *server])
            == 0
        )
        return capsys.readouterr().out

    first = verified()
    assert "is still in progress" in first  # the move is throttled: not done at once
    assert "Clearing" not in first
    wait_until(lambda: not admin.list_partition_reassignments(), timeout=120, what="the move done")
    elapsed = time.monotonic() - started
    assert elapsed >= 0.5 * size / rate, f"a {size} B move took {elapsed:.1f} s at {rate} B/s"

    last = verified()
    assert f"Reassignment of partition {topic}-0 is completed." in last
    assert "Clearing broker-level throttles on brokers 1,2,3" in last
    assert f"Clearing topic-level throttles on topic {topic}" in last
    assert config_value(admin, topic_resource, "leader.replication.throttled.replicas") == ""
    assert config_value(admin, topic_resource, "follower.replication.throttled.replicas") == ""
    for broker in ("1", "2", "3"):
        resource = ConfigResource(ResourceType.BROKER, broker)
        assert config_value(admin, resource, "leader.replication.throttled.rate") == INT64_MAX
        assert config_value(admin, resource, "follower.replication.throttled.rate") == INT64_MAX
    read = read_all(cluster, topic, 1, len(values))
    assert len(read) == len(values) and read[0] == values[0] and read[-1] == values[-1]
