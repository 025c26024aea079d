"""KIP-380 across a controller failover: a leader that bounces while the controller changes.

The controller, which also leads a partition, crashes; its log loses its tail in the crash (the
page cache never reached the disk), and it registers again before the next controller has read
the broker list. That controller has no earlier epoch of its own to compare with, so without the
ISR members' epochs recorded in the partition state it sees no bounce, keeps the restarted broker
leader at the same leader epoch, and the followers truncate to its shorter log: acknowledged
records are gone from every replica. With the recorded epochs
(`epochlog.test.failover.isr.epochs.enabled`, on by default) the new controller elects another
ISR member at a new leader epoch and the restarted broker catches up as a follower.

The race is forced: every broker's controller holds its first load from ZooKeeper
(`CONTROLLER_LOAD` fault) until the test has seen the restarted broker's new registration.
"""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest

from epochlog.cli.commands import read_status
from epochlog.client import Admin, NewTopic
from epochlog.testing.cluster import LocalCluster
from epochlog.testing.faults import FaultRules

SESSION_MS = 3000
TOPIC = "safe"
RECORDS = 4000


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def partition_state(cluster: LocalCluster) -> dict:
    partitions = read_status(cluster.zk_connect or "")["partitions"]
    return next(p for p in partitions if p["topic"] == TOPIC)


def produce_acknowledged(bootstrap: str) -> dict[int, bytes]:
    """RECORDS records in many small batches, acks=all; offset -> value of each acknowledged."""
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0}
    )
    acked: dict[int, bytes] = {}

    def on_delivery(err, msg) -> None:
        assert err is None, err
        acked[msg.offset()] = msg.value()

    for i in range(RECORDS):
        producer.produce(TOPIC, b"record-%05d-" % i + b"x" * 100, on_delivery=on_delivery)
        if i % 50 == 49:
            producer.flush(30)
    assert producer.flush(30) == 0
    return acked


def read_partition(bootstrap: str) -> dict[int, bytes]:
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    try:
        consumer.assign([ck.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 60
        while True:
            try:  # a new leader answers OFFSET_NOT_AVAILABLE until its HW has caught up
                _, high = consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, 0), timeout=5)
                break
            except ck.KafkaException:
                assert time.monotonic() < deadline, "no high watermark"
                time.sleep(0.2)
        read: dict[int, bytes] = {}
        while len(read) < high:
            assert time.monotonic() < deadline, f"read {len(read)} of {high} records"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read[msg.offset()] = msg.value()
        return read
    finally:
        consumer.close()


def tear_the_tail(cluster: LocalCluster, broker: int) -> int:
    """Cut the broker's segment to half its size, as a crash that lost the page cache would;
    recovery keeps the whole batches before the cut. Returns the bytes cut."""
    segment = cluster.brokers[broker].directory / "logs" / f"{TOPIC}-0" / f"{0:020d}.log"
    size = segment.stat().st_size
    with open(segment, "r+b") as file:
        file.truncate(size // 2)
    return size - size // 2


@pytest.mark.parametrize("check", [True, False], ids=["isr-epochs-on", "isr-epochs-off"])
def test_a_leader_bounced_across_a_controller_failover_keeps_every_acknowledged_record(
    tmp_path, check
) -> None:
    faults = tmp_path / "faults.json"
    FaultRules.write(faults, [])
    cluster = LocalCluster(
        tmp_path / "cluster",
        3,
        broker_config={
            "epochlog.test.failover.isr.epochs.enabled": str(check).lower(),
            "epochlog.test.faults.file": str(faults),
            "min.insync.replicas": 2,
        },
        zk_session_timeout_ms=SESSION_MS,
    )
    cluster.start()
    try:
        victim = cluster.controller_id()
        assert victim is not None
        others = [b for b in (1, 2, 3) if b != victim]
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topics([NewTopic(TOPIC, replica_assignment={0: [victim, *others]})])
        wait_until(lambda: len(partition_state(cluster)["isr"]) == 3, 30, "a full ISR")
        acked = produce_acknowledged(cluster.bootstrap_servers)
        assert len(acked) == RECORDS

        # Whoever becomes the next controller waits before reading ZooKeeper.
        FaultRules.write(faults, [{"event": "CONTROLLER_LOAD", "action": "hold"}])
        old_epoch = cluster.zk_state()["brokers"][victim]
        cluster.kill_broker(victim)
        assert tear_the_tail(cluster, victim) > 0
        cluster.start_broker(victim, wait=False)
        wait_until(
            lambda: cluster.zk_state()["brokers"].get(victim, old_epoch) > old_epoch,
            30,
            "the restarted broker's new registration",
        )
        wait_until(lambda: cluster.zk_state()["controller"] is not None, 30, "a new controller")
        FaultRules.write(faults, [])  # the new controller loads now, and sees the new epoch

        # The first high watermark comes from whoever the new controller made leader.
        read = read_partition(cluster.bootstrap_servers)
        lost = [offset for offset, value in acked.items() if read.get(offset) != value]
        if check:
            assert lost == [], f"{len(lost)} acknowledged records lost, first {lost[:5]}"
            wait_until(
                lambda: (
                    partition_state(cluster)["leader_epoch"] > 0
                    and len(partition_state(cluster)["isr"]) == 3
                ),
                60,
                "a new leader epoch and the restarted broker back in the ISR",
            )
        else:
            # The damage: the restarted broker leads on at leader epoch 0 with its shorter log,
            # and the followers truncated to it.
            state = partition_state(cluster)
            assert (state["leader"], state["leader_epoch"]) == (victim, 0)
            assert len(lost) > RECORDS // 4, f"only {len(lost)} lost"
    finally:
        cluster.close()
