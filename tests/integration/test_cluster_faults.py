"""Producing with acks=all to replication factor 3, min.insync.replicas 2, through a leader
kill -9, a fast bounce and a controlled shutdown: every acknowledged record is read back exactly
once, in order per partition (confluent-kafka, idempotent)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import confluent_kafka as ck

from epochlog.cli.commands import read_status
from epochlog.client import Admin
from epochlog.testing.cluster import LocalCluster

PARTITIONS = 6


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def fully_replicated(cluster: LocalCluster) -> bool:
    partitions = read_status(cluster.zk_connect)["partitions"]
    return bool(partitions) and all(
        not p["offline"] and len(p["isr"]) == 3 for p in partitions if p["topic"] == "orders"
    )


def test_acks_all_survives_kill_bounce_and_controlled_shutdown(tmp_path) -> None:
    cluster = LocalCluster(
        tmp_path,
        3,
        broker_config={"replica.lag.time.max.ms": 4000, "min.insync.replicas": 2},
        zk_session_timeout_ms=3000,
    )
    cluster.start()
    try:
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topic("orders", PARTITIONS, 3)
        wait_until(lambda: fully_replicated(cluster), 30, "the ISR to fill")
        acked: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        failed: list[str] = []
        stop = threading.Event()

        def produce() -> None:
            producer = ck.Producer(
                {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": 60000,
                }
            )

            def on_delivery(err, msg) -> None:
                if err is not None:
                    failed.append(str(err))
                else:
                    acked[msg.partition()].append((msg.offset(), msg.value()))

            i = 0
            while not stop.is_set():
                producer.produce(
                    "orders", b"order-%d" % i, key=b"k%d" % (i % 50), on_delivery=on_delivery
                )
                producer.poll(0)
                i += 1
                time.sleep(0.0005)
            assert producer.flush(90) == 0

        thread = threading.Thread(target=produce)
        thread.start()
        time.sleep(2)
        leader = next(
            p["leader"]
            for p in read_status(cluster.zk_connect)["partitions"]
            if p["topic"] == "orders" and p["partition"] == 0
        )
        cluster.kill_broker(leader)  # a leader crashes
        time.sleep(3)
        cluster.start_broker(leader)
        wait_until(lambda: fully_replicated(cluster), 60, "the ISR to refill after the kill")
        other = next(b for b in (1, 2, 3) if b != leader)
        cluster.kill_broker(other)  # a fast bounce
        cluster.start_broker(other)
        wait_until(lambda: fully_replicated(cluster), 60, "the ISR to refill after the bounce")
        third = next(b for b in (1, 2, 3) if b not in (leader, other))
        cluster.stop_broker(third)  # a controlled shutdown
        cluster.start_broker(third)
        wait_until(lambda: fully_replicated(cluster), 60, "the ISR to refill after the stop")
        time.sleep(1)
        stop.set()
        thread.join(120)
        assert not failed, failed[:5]
        total = sum(len(v) for v in acked.values())
        assert total > 1000

        consumer = ck.Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "check",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([ck.TopicPartition("orders", p, 0) for p in range(PARTITIONS)])
        log: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        ends = {p: max(o for o, _ in acked[p]) for p in acked}
        deadline = time.monotonic() + 60
        while any(not log[p] or log[p][-1][0] < ends[p] for p in ends):
            assert time.monotonic() < deadline, "could not read back every acknowledged record"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                log[msg.partition()].append((msg.offset(), msg.value()))
        consumer.close()
        for p, records in acked.items():
            offsets = [o for o, _ in log[p]]
            assert offsets == sorted(set(offsets)), f"partition {p}: offsets not dense/in order"
            read = dict(log[p])
            for offset, value in records:
                assert read.get(offset) == value, f"partition {p} offset {offset} lost or changed"
            values = [v for _, v in log[p]]
            assert len(values) == len(set(values)), f"partition {p} has duplicates"
    finally:
        cluster.close()
