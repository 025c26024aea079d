"""Our client through a leader failover and an oversized record, on a real 3-broker cluster.

- The leader of a replicated partition (RF 3, min.insync.replicas 2) is killed with SIGKILL while
  our idempotent producer (acks=all) writes and our consumer reads: every record the producer
  had acknowledged is read back exactly once, in order, and the consumer follows the new leader.
- The brokers refuse batches over message.max.bytes: a batch holding one oversized record among
  small ones is split, the oversized record fails alone with MessageTooLargeError, and the
  small ones are all written, in order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from epochlog.client import Admin, Consumer, MessageTooLargeError, Producer
from epochlog.testing.cluster import LocalCluster

MESSAGE_MAX_BYTES = 20000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path_factory.mktemp("failover"),
        3,
        broker_config={"message.max.bytes": MESSAGE_MAX_BYTES, "min.insync.replicas": 2},
        zk_session_timeout_ms=4000,
    )
    try:
        c.start()
        yield c
    finally:
        c.close()


def leader_of(cluster: LocalCluster, topic: str) -> int:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        return admin.describe_topics([topic])[topic].partitions[0].leader


def test_nothing_acknowledged_is_lost_across_a_leader_failover(cluster: LocalCluster) -> None:
    topic = "failover"
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(topic, 1, 3)
    old_leader = leader_of(cluster, topic)
    acked: list[tuple[int, bytes]] = []
    failed: list[Exception] = []
    stop = threading.Event()
    config = {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 2}

    def produce() -> None:
        with Producer(config) as producer:
            pending: list[tuple[bytes, Future[Any]]] = []
            i = 0
            while not stop.is_set():
                value = b"record-%06d" % i
                pending.append((value, producer.send(topic, value, partition=0)))
                i += 1
                if len(pending) >= 50:
                    settle(pending)
            settle(pending)

    def settle(pending: list[tuple[bytes, Future[Any]]]) -> None:
        for value, fut in pending:
            try:
                acked.append((fut.result(120).offset, value))
            except Exception as exc:  # noqa: BLE001 - counted, and the test says which
                failed.append(exc)
        pending.clear()

    read: list[tuple[int, bytes]] = []
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "auto.offset.reset": "earliest"}
    )
    consumer.assign([(topic, 0)])
    writer = threading.Thread(target=produce)
    writer.start()
    try:
        deadline = time.monotonic() + 30
        while len(acked) < 500:
            assert time.monotonic() < deadline and writer.is_alive()
            read += [(r.offset, r.value) for r in consumer.poll(0.1)]
        cluster.kill_broker(old_leader)
        deadline = time.monotonic() + 60
        while leader_of(cluster, topic) in (old_leader, -1):
            assert time.monotonic() < deadline, "no new leader was elected"
            read += [(r.offset, r.value) for r in consumer.poll(0.1)]
        count = len(acked)
        deadline = time.monotonic() + 60
        while len(acked) < count + 500:  # the producer carries on with the new leader
            assert time.monotonic() < deadline, f"stuck at {len(acked)} acknowledged"
            read += [(r.offset, r.value) for r in consumer.poll(0.1)]
        stop.set()
        writer.join(180)
        assert not writer.is_alive()
        deadline = time.monotonic() + 60
        top = max(offset for offset, _ in acked)
        while not read or read[-1][0] < top:
            assert time.monotonic() < deadline, "the consumer did not follow the new leader"
            read += [(r.offset, r.value) for r in consumer.poll(0.1)]
    finally:
        stop.set()
        writer.join(180)
        consumer.close()
        cluster.start_broker(old_leader)
    assert failed == []
    offsets = [offset for offset, _ in read]
    assert offsets == list(range(len(read)))  # dense, in order, each once
    by_offset = dict(read)
    assert all(by_offset.get(offset) == value for offset, value in acked)
    values = [value for _, value in read]
    assert len(set(values)) == len(values)  # the idempotent producer wrote nothing twice


def test_an_oversized_record_fails_alone_and_the_rest_of_its_batch_is_written(
    cluster: LocalCluster,
) -> None:
    topic = "oversized"
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(topic, 1, 3)
    config = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "linger.ms": 200,  # so all of them share one batch
        "batch.size": 200000,
    }
    with Producer(config) as producer:
        before = [producer.send(topic, b"small-%d" % i + b"." * 1000) for i in range(10)]
        big = producer.send(topic, b"x" * (MESSAGE_MAX_BYTES + 5000))
        after = [producer.send(topic, b"small-%d" % i + b"." * 1000) for i in range(10, 20)]
        with pytest.raises(MessageTooLargeError, match="MESSAGE_TOO_LARGE"):
            big.result(60)
        offsets = [f.result(60).offset for f in before + after]
    assert offsets == list(range(20))
    read_config = {"bootstrap.servers": cluster.bootstrap_servers, "auto.offset.reset": "earliest"}
    with Consumer(read_config) as consumer:
        consumer.assign([(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 20:
            assert time.monotonic() < deadline
            got += [r.value for r in consumer.poll(0.2)]
    assert [v.split(b".")[0] for v in got] == [b"small-%d" % i for i in range(20)]
