"""KIP-903's motivating failure (KAFKA-14139) on a real cluster, with the fetch-epoch check off
(`epochlog.test.kip903.enabled=false`: the damage) and on (none).

Partition with replicas A and B, A leading, the ISR just A. B catches up and A asks the
controller to add B, but that AlterPartition is delayed. B's disk is replaced: it comes back
empty, registers again (a new broker epoch) and cannot fetch yet. The delayed AlterPartition
arrives; then A dies. Without the check the controller adds the empty B to the ISR and, when A
dies, elects it: acknowledged records are gone. With it the controller answers INELIGIBLE_REPLICA;
the partition waits for A, which comes back with every record.
"""

from __future__ import annotations

import shutil
import time

import confluent_kafka as ck
import pytest

from epochlog.cli.commands import read_status
from epochlog.client import Admin, NewTopic
from epochlog.testing.cluster import LocalCluster
from epochlog.testing.faults import FaultRules


def state(cluster: LocalCluster) -> dict:
    return next(p for p in read_status(cluster.zk_connect)["partitions"] if p["topic"] == "t")


def log_of(cluster: LocalCluster, broker_id: int) -> str:
    return cluster.brokers[broker_id].log_path.read_text(errors="replace")


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def produce(bootstrap: str, values: list[bytes]) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors: list[object] = []
    for value in values:
        producer.produce("t", value, partition=0, on_delivery=lambda e, _m: e and errors.append(e))
    assert producer.flush(30) == 0 and not errors


def read_all(bootstrap: str, timeout_s: float = 10) -> list[bytes]:
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([ck.TopicPartition("t", 0, ck.OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    consumer.close()
    return values


@pytest.mark.parametrize("kip903", [True, False], ids=["kip903-on", "kip903-off"])
def test_seed_kafka_14139_an_empty_replica_never_joins_the_isr(tmp_path, kip903) -> None:
    faults = tmp_path / "faults.json"
    FaultRules.write(faults, [])
    cluster = LocalCluster(
        tmp_path / "cluster",
        3,
        broker_config={
            "epochlog.test.kip903.enabled": str(kip903).lower(),
            "epochlog.test.faults.file": str(faults),
            "replica.lag.time.max.ms": 3000,
        },
        zk_session_timeout_ms=3000,
    )
    cluster.start()
    try:
        controller = cluster.controller_id()
        a, b = [x for x in (1, 2, 3) if x != controller]
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topics([NewTopic("t", replica_assignment={0: [a, b]})])
        wait_until(lambda: state(cluster)["isr"] == [a, b], 30, "the ISR [A, B]")
        cluster.stop_broker(b)  # B leaves: the ISR is just A
        wait_until(lambda: state(cluster)["isr"] == [a], 30, "the ISR [A]")
        values = [b"record-%d" % i for i in range(200)]
        produce(cluster.bootstrap_servers, values)

        # A's request to add B back is held on its way to the controller.
        FaultRules.write(faults, [{"api": "ALTER_PARTITION", "source": a, "action": "hold"}])
        cluster.start_broker(b)
        # B catches up; A proposes [A, B] with B's fetch epoch; the request waits.
        wait_until(lambda: "t-0: expanding the ISR" in log_of(cluster, a), 30, "A's proposal")
        assert state(cluster)["isr"] == [a]
        # B's disk is replaced: it comes back empty, as a new generation that cannot fetch yet.
        FaultRules.write(
            faults,
            [
                {"api": "ALTER_PARTITION", "source": a, "action": "hold"},
                {"api": "FETCH", "source": b, "action": "drop"},
            ],
        )
        cluster.kill_broker(b)
        shutil.rmtree(cluster.brokers[b].directory / "logs")
        cluster.start_broker(b)
        # The delayed AlterPartition arrives now, carrying B's previous epoch.
        FaultRules.write(faults, [{"api": "FETCH", "source": b, "action": "drop"}])
        if kip903:
            wait_until(lambda: "INELIGIBLE_REPLICA" in log_of(cluster, a), 30, "the refusal")
        else:
            wait_until(lambda: state(cluster)["isr"] == [a, b], 30, "B in the ISR")
        cluster.kill_broker(a)  # then A dies
        wait_until(lambda: state(cluster)["leader"] != a, 30, "A's leadership to end")
        after = state(cluster)
        if kip903:
            assert after["isr"] == [a] and after["leader"] == -1  # waits for A; B was refused
            cluster.start_broker(a)
            wait_until(lambda: state(cluster)["leader"] == a, 30, "A to lead again")
            assert read_all(cluster.bootstrap_servers) == values  # nothing lost
        else:
            assert after["leader"] == b  # the empty replica became leader
            FaultRules.write(faults, [])
            assert len(read_all(cluster.bootstrap_servers)) < len(values)  # acknowledged, lost
    finally:
        cluster.close()
