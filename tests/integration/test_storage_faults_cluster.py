"""Issue 14 on a real 4-broker cluster (RF 3, min.insync.replicas 2, acks=all idempotent
confluent-kafka producer), one ZooKeeper for the module: a damaged batch header is repaired,
not fatal; a full or failing log dir goes offline and comes back without a restart.

Each test reproduces what the issue's user saw and checks that every acknowledged record is read
back from offset 0 (confluent-kafka consumer) and that no broker served a corrupt byte.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path

import confluent_kafka as ck
import pytest

from epochlog.cli.commands import read_status
from epochlog.client import Admin
from epochlog.testing.cluster import LocalCluster
from epochlog.testing.faults import FaultRules
from epochlog.testing.storage_faults import (
    can_mount_tmpfs,
    damage_batch_header,
    fill_disk,
    mount_tmpfs,
    sound_batches,
    umount,
)

TOPIC = "orders"
PARTITIONS = 6


def wait_until(predicate, timeout_s: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout_s, f"timed out after {timeout_s} s: {what}"
        time.sleep(0.2)
    return time.monotonic() - started


def partitions(cluster: LocalCluster) -> list[dict]:
    return [p for p in read_status(cluster.zk_connect)["partitions"] if p["topic"] == TOPIC]


def fully_replicated(cluster: LocalCluster) -> bool:
    found = partitions(cluster)
    return len(found) == PARTITIONS and all(not p["offline"] and len(p["isr"]) == 3 for p in found)


def start_cluster(tmp_path: Path, zk_hosts: str, **config) -> LocalCluster:
    cluster = LocalCluster(
        tmp_path / "cluster",
        4,
        zookeeper=zk_hosts,
        broker_config={
            "min.insync.replicas": 2,
            "replica.lag.time.max.ms": 4000,
            "log.index.interval.bytes": 1024,
            **config,
        },
        zk_session_timeout_ms=3000,
    )
    cluster.start()
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(TOPIC, PARTITIONS, 3)
    wait_until(lambda: fully_replicated(cluster), 30, "the ISRs to fill")
    return cluster


class Producer:
    """acks=all idempotent producer in a thread; remembers what was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.bootstrap = bootstrap
        self.last_ack = time.monotonic()
        self.longest_gap = 0.0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
            return
        self.acked[msg.partition()].append((msg.offset(), msg.value()))
        now = time.monotonic()
        self.longest_gap = max(self.longest_gap, now - self.last_ack)
        self.last_ack = now

    def _run(self) -> None:
        producer = ck.Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.num.messages": 20,
                "message.timeout.ms": 120000,
            }
        )
        i = 0
        while not self.stop.is_set():
            producer.produce(TOPIC, b"order-%06d-" % i + b"x" * 80, on_delivery=self._on_delivery)
            producer.poll(0)
            i += 1
            time.sleep(0.0005)
        assert producer.flush(120) == 0

    def produce_for(self, seconds: float) -> None:
        self.thread.start()
        time.sleep(seconds)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(150)
        assert not self.thread.is_alive()
        assert not self.failed, self.failed[:5]

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.acked.values())


def assert_every_acked_record_reads_back(cluster: LocalCluster, acked) -> None:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "check",
            "enable.auto.commit": False,
            "check.crcs": True,
        }
    )
    consumer.assign([ck.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    log: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    ends = {p: max(o for o, _ in acked[p]) for p in acked if acked[p]}
    errors = []
    deadline = time.monotonic() + 90
    while any(not log[p] or log[p][-1][0] < ends[p] for p in ends):
        assert time.monotonic() < deadline, "could not read back every acknowledged record"
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            errors.append(str(msg.error()))
            continue
        log[msg.partition()].append((msg.offset(), msg.value()))
    consumer.close()
    assert not [e for e in errors if "CRC" in e or "orrupt" in e], errors[:5]
    for p, records in acked.items():
        offsets = [o for o, _ in log[p]]
        assert offsets == sorted(set(offsets)), f"partition {p}: offsets not dense/in order"
        read = dict(log[p])
        for offset, value in records:
            assert read.get(offset) == value, f"partition {p} offset {offset} lost or changed"


def broker_output(cluster: LocalCluster, broker_id: int) -> str:
    return cluster.brokers[broker_id].log_path.read_text(errors="replace")


def log_dir(cluster: LocalCluster, broker_id: int) -> Path:
    return cluster.brokers[broker_id].directory / "logs"


@pytest.mark.slow
def test_a_damaged_follower_segment_after_a_clean_restart_rejoins_every_isr(
    tmp_path, zk_hosts
) -> None:
    cluster = start_cluster(tmp_path, zk_hosts)
    try:
        producer = Producer(cluster.bootstrap_servers)
        producer.produce_for(6)
        producer.finish()
        assert producer.total > 3000
        controller = cluster.controller_id()
        victim = next(b for b in (1, 2, 3, 4) if b != controller)
        hosted = [p["partition"] for p in partitions(cluster) if victim in p["replicas"]]
        cluster.stop_broker(victim)  # clean: controlled shutdown, clean-shutdown marker
        damaged_partition = hosted[0]
        damage = damage_batch_header(log_dir(cluster, victim) / f"{TOPIC}-{damaged_partition}")
        cluster.start_broker(victim)
        took = wait_until(
            lambda: fully_replicated(cluster), 30, f"broker {victim} to rejoin every ISR"
        )
        print(f"broker {victim} back in all {len(hosted)} ISRs {took:.1f} s after its restart")
        output = broker_output(cluster, victim)
        assert "damaged log cut" in output and "CorruptRecordError" not in output
        assert "UNKNOWN_SERVER_ERROR" not in broker_output(cluster, controller)
        # The follower cut the damaged batch and everything after it, and fetched it all again:
        # its log is sound end to end and holds everything acknowledged.
        first, end = sound_batches(log_dir(cluster, victim) / f"{TOPIC}-{damaged_partition}")
        assert first == 0 and damage.base_offset < end
        assert end > max(o for o, _ in producer.acked[damaged_partition])
        assert_every_acked_record_reads_back(cluster, producer.acked)
    finally:
        cluster.close()


def leader_of(cluster: LocalCluster, partition: int) -> int:
    return next(p["leader"] for p in partitions(cluster) if p["partition"] == partition)


@pytest.mark.slow
def test_a_leader_whose_read_meets_damage_gives_up_leadership_and_no_acked_record_is_lost(
    tmp_path, zk_hosts
) -> None:
    cluster = start_cluster(tmp_path, zk_hosts)
    try:
        producer = Producer(cluster.bootstrap_servers)
        producer.produce_for(6)
        target = 0
        leader = leader_of(cluster, target)
        damage = damage_batch_header(log_dir(cluster, leader) / f"{TOPIC}-{target}")
        # A consumer reads from the damaged batch on: the leader's index walk meets the damage.
        consumer = ck.Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "reader",
                "enable.auto.commit": False,
                "check.crcs": True,
            }
        )
        consumer.assign([ck.TopicPartition(TOPIC, target, damage.base_offset)])
        started = time.monotonic()
        first = None
        errors = []
        while first is None:
            assert time.monotonic() - started < 30, f"nothing read: {errors[:5]}"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                errors.append(str(msg.error()))
            elif msg is not None:
                first = msg
        consumer.close()
        moved = wait_until(lambda: leader_of(cluster, target) != leader, 10, "a new leader")
        print(
            f"{TOPIC}-{target}: first record read {time.monotonic() - started:.1f} s after the"
            f" damaged read, leadership off broker {leader} (waited {moved:.1f} s more)"
        )
        assert first.offset() == damage.base_offset
        assert first.value() == dict(producer.acked[target]).get(damage.base_offset)
        assert not errors, errors[:5]
        time.sleep(3)  # the producer goes on writing to the new leader
        producer.finish()
        output = broker_output(cluster, leader)
        assert "damaged log found by a read" in output
        wait_until(lambda: fully_replicated(cluster), 60, f"broker {leader} to rejoin the ISR")
        first_offset, end = sound_batches(log_dir(cluster, leader) / f"{TOPIC}-{target}")
        assert first_offset == 0 and end > max(o for o, _ in producer.acked[target])
        assert_every_acked_record_reads_back(cluster, producer.acked)
    finally:
        cluster.close()


def replicas_on(cluster: LocalCluster, broker_id: int) -> tuple[int, int]:
    """(partitions led by the broker, ISRs it is in)."""
    found = partitions(cluster)
    return (
        sum(1 for p in found if p["leader"] == broker_id),
        sum(1 for p in found if broker_id in p["isr"]),
    )


@pytest.mark.slow
def test_a_full_log_dir_goes_offline_moves_leadership_and_comes_back_without_a_restart(
    tmp_path, zk_hosts
) -> None:
    if not can_mount_tmpfs(tmp_path / "probe-mount"):
        pytest.fail("cannot mount a tmpfs here (the test needs root)")
    victim = 4
    logs = tmp_path / "cluster" / f"broker-{victim}" / "logs"
    mount_tmpfs(logs, 24 << 20)
    cluster = None
    try:
        cluster = start_cluster(
            tmp_path,
            zk_hosts,
            **{
                "log.segment.bytes": 1 << 20,
                "epochlog.log.dir.min.free.bytes": 4 << 20,
                "epochlog.log.dir.probe.interval.ms": 500,
                "replica.high.watermark.checkpoint.interval.ms": 500,
                "log.flush.offset.checkpoint.interval.ms": 500,
                "log.flush.start.offset.checkpoint.interval.ms": 500,
            },
        )
        assert replicas_on(cluster, victim) != (0, 0)
        producer = Producer(cluster.bootstrap_servers)
        producer.produce_for(3)
        filler = fill_disk(logs)
        filled = time.monotonic()
        moved = wait_until(
            lambda: replicas_on(cluster, victim) == (0, 0),
            20,
            f"broker {victim} to lead nothing and leave every ISR once its disk is full",
        )
        time.sleep(3)  # acks go on from the other brokers
        output = broker_output(cluster, victim)
        assert "is offline" in output and "Traceback" not in output, output[-3000:]
        filler.unlink()
        freed = time.monotonic()
        back = wait_until(
            lambda: fully_replicated(cluster), 60, f"broker {victim} to rejoin every ISR"
        )
        time.sleep(1)
        producer.finish()
        print(
            f"disk full -> broker {victim} out of every ISR and leadership in {moved:.1f} s; "
            f"space freed -> all ISRs at 3 in {back:.1f} s (no restart); longest gap between "
            f"acks {producer.longest_gap:.1f} s; {producer.total} records acknowledged; "
            f"{time.monotonic() - filled:.0f} s in all, {time.monotonic() - freed:.0f} s after"
        )
        assert "online again" in broker_output(cluster, victim)
        assert producer.longest_gap < 10
        assert_every_acked_record_reads_back(cluster, producer.acked)
    finally:
        if cluster is not None:
            cluster.close()
        umount(logs)


@pytest.mark.slow
def test_an_io_error_takes_the_log_dir_offline_and_it_returns_once_the_disk_works(
    tmp_path, zk_hosts
) -> None:
    faults = tmp_path / "faults.json"
    FaultRules.write(faults, [])
    cluster = start_cluster(
        tmp_path,
        zk_hosts,
        **{"epochlog.test.faults.file": str(faults), "epochlog.log.dir.probe.interval.ms": 500},
    )
    try:
        victim = max(range(1, 5), key=lambda b: replicas_on(cluster, b)[0])
        assert replicas_on(cluster, victim)[0] > 0  # it leads partitions the producer writes
        producer = Producer(cluster.bootstrap_servers)
        producer.produce_for(3)
        # The victim's disk starts failing every write with EIO (a failing device, not a full
        # one): the produce appends it leads fail and take its log dir offline.
        FaultRules.write(faults, [{"storage": "EIO", "broker": victim}])
        moved = wait_until(
            lambda: replicas_on(cluster, victim) == (0, 0),
            20,
            f"broker {victim} to lead nothing and leave every ISR once its disk fails",
        )
        time.sleep(3)  # acks go on from the other brokers
        output = broker_output(cluster, victim)
        assert "is offline" in output and "Input/output error" in output, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        FaultRules.write(faults, [])  # the disk works again
        back = wait_until(
            lambda: fully_replicated(cluster), 60, f"broker {victim} to rejoin every ISR"
        )
        producer.finish()
        print(
            f"EIO -> broker {victim} out of every ISR and leadership in {moved:.1f} s; "
            f"disk working -> all ISRs at 3 in {back:.1f} s (no restart); longest gap between "
            f"acks {producer.longest_gap:.1f} s; {producer.total} records acknowledged"
        )
        assert "online again" in broker_output(cluster, victim)
        assert producer.longest_gap < 10
        assert_every_acked_record_reads_back(cluster, producer.acked)
    finally:
        cluster.close()
