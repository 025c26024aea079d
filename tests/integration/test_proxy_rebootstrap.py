"""KIP-1102 end to end: `epochlog proxy` in front of cluster A is switched to cluster B.

Two real clusters (2 brokers each, one ZooKeeper, a chroot each, so two cluster ids) and the
proxy as a separate process started through the CLI (`epochlog proxy`), switched through the CLI
(`epochlog proxy switch`). Clients see only the proxy. After the switch:
- with metadata.recovery.strategy=rebootstrap, our client and confluent-kafka (librdkafka 2.16)
  each get REBOOTSTRAP_REQUIRED on their next metadata refresh, rebootstrap, and what they
  produce from then on lands in cluster B and nowhere else;
- with strategy `none` neither rebootstraps: their metadata refreshes keep failing with
  REBOOTSTRAP_REQUIRED and they keep cluster A's metadata.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import confluent_kafka as ck
import pytest

from epochlog.client import Admin, Consumer, Producer
from epochlog.processes import spawn
from epochlog.testing.cluster import LocalCluster
from epochlog.zk.launcher import free_port

TOPIC = "moving"
PARTITIONS = 2
FAST_METADATA = 500  # ms: clients refresh metadata (and so meet the switch) this often


@pytest.fixture(scope="module")
def clusters(zookeeper, tmp_path_factory) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    from epochlog.zk.session import close_client, connect

    root = connect(zookeeper.connect_string, session_timeout_ms=4000)
    try:
        for chroot in ("/proxy-a", "/proxy-b"):
            root.ensure_path(chroot)
    finally:
        close_client(root)
    a = LocalCluster(
        tmp_path_factory.mktemp("a"), 2, zookeeper=zookeeper.connect_string + "/proxy-a"
    )
    b = LocalCluster(
        tmp_path_factory.mktemp("b"), 2, zookeeper=zookeeper.connect_string + "/proxy-b"
    )
    try:
        a.start()
        b.start()
        for c in (a, b):
            with Admin({"bootstrap.servers": c.bootstrap_servers}) as admin:
                admin.create_topic(TOPIC, PARTITIONS, 1)
        yield a, b
    finally:
        a.close()
        b.close()


def cluster_id(c: LocalCluster) -> str:
    with Admin({"bootstrap.servers": c.bootstrap_servers}) as admin:
        found = admin.describe_cluster().cluster_id
    assert found
    return found


class ProxyProcess:
    def __init__(self, upstream: str, tmp: Any) -> None:
        self.port = free_port()
        self.listen = f"127.0.0.1:{self.port}"
        self.control = str(tmp / f"proxy-{self.port}.sock")
        self.log = tmp / f"proxy-{self.port}.out"
        with open(self.log, "wb") as out:
            self.process = spawn(
                [
                    sys.executable,
                    "-m",
                    "epochlog",
                    "proxy",
                    "--listen",
                    self.listen,
                    "--upstream",
                    upstream,
                    "--control",
                    self.control,
                    "--metadata-interval-ms",
                    "500",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 20
        while not os.path.exists(self.control):
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "the proxy did not start"
            time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2):
            pass

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "epochlog",
                "proxy",
                *args,
                "--listen",
                self.listen,
                "--control",
                self.control,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def switch(self, upstream: str) -> None:
        result = self.cli("switch", "--upstream", upstream)
        assert result.returncode == 0, result.stdout + result.stderr

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


@pytest.fixture
def proxy(clusters, tmp_path) -> Iterator[ProxyProcess]:
    p = ProxyProcess(clusters[0].bootstrap_servers, tmp_path)
    yield p
    p.stop()


def values_in(c: LocalCluster, prefix: bytes) -> list[bytes]:
    """Every value starting with `prefix` in the topic of cluster `c` (read directly)."""
    config = {"bootstrap.servers": c.bootstrap_servers, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline
            got += [r.value for r in consumer.poll(0.2)]
    return [v for v in got if v.startswith(prefix)]


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def our_producer(proxy: ProxyProcess, strategy: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": proxy.listen,
            "metadata.max.age.ms": FAST_METADATA,
            "metadata.recovery.strategy": strategy,
            "linger.ms": 1,
        }
    )


def test_the_proxy_shows_only_itself_and_reports_its_state(clusters, proxy) -> None:
    a, _ = clusters
    with Admin({"bootstrap.servers": proxy.listen}) as admin:
        described = admin.describe_cluster()
        topic = admin.describe_topics([TOPIC])[TOPIC]
    assert described.cluster_id == cluster_id(a)
    assert {b.host for b in described.brokers} == {"127.0.0.1"}
    broker_ports = {b.port for b in described.brokers}
    assert not broker_ports & {bp.port for bp in a.brokers.values()}  # proxy ports, not A's
    assert len(broker_ports) == 2 and len(topic.partitions) == PARTITIONS
    status = proxy.cli("status")
    assert status.returncode == 0 and '"generation": 1' in status.stdout


def test_a_switch_to_an_unreachable_upstream_is_refused_and_changes_nothing(proxy) -> None:
    result = proxy.cli("switch", "--upstream", f"127.0.0.1:{free_port()}")
    assert result.returncode != 0 and "no upstream server answered" in result.stderr
    assert '"generation": 1' in proxy.cli("status").stdout


def test_our_client_rebootstraps_onto_the_new_cluster(clusters, proxy) -> None:
    a, b = clusters
    id_a, id_b = cluster_id(a), cluster_id(b)
    with our_producer(proxy, "rebootstrap") as producer:
        for i in range(10):
            producer.send(TOPIC, b"ours-before-%d" % i)
        producer.flush(30)
        assert producer.cluster_id == id_a and producer.rebootstraps == 0
        proxy.switch(b.bootstrap_servers)
        wait_for(lambda: producer.rebootstraps >= 1, 20, "our client did not rebootstrap")
        wait_for(lambda: producer.cluster_id == id_b, 20, "our client is not on cluster B")
        futures = [producer.send(TOPIC, b"ours-after-%d" % i) for i in range(10)]
        producer.flush(30)
        assert all(f.result(0).offset >= 0 for f in futures)
    assert sorted(values_in(a, b"ours-before")) == sorted(b"ours-before-%d" % i for i in range(10))
    assert sorted(values_in(b, b"ours-after")) == sorted(b"ours-after-%d" % i for i in range(10))
    assert values_in(a, b"ours-after") == []


class LogCapture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def saw(self, text: str) -> bool:
        return any(text in line for line in self.lines)


def confluent_producer(proxy: ProxyProcess, strategy: str) -> tuple[ck.Producer, LogCapture]:
    capture = LogCapture()
    logger = logging.getLogger(f"librdkafka-{strategy}-{proxy.port}")
    logger.addHandler(capture)
    logger.setLevel(logging.DEBUG)
    producer = ck.Producer(
        {
            "bootstrap.servers": proxy.listen,
            "topic.metadata.refresh.interval.ms": FAST_METADATA,
            "metadata.recovery.strategy": strategy,
            "linger.ms": 1,
            "debug": "metadata,broker",
            "logger": logger,
        }
    )
    return producer, capture


def confluent_cluster_id(producer: ck.Producer) -> str | None:
    # For one topic: librdkafka's all-topics Metadata v13 request carries 3 stray bytes that
    # Kafka ignores and epochlog's broker refuses (see the report of this test's author).
    try:
        return producer.list_topics(TOPIC, timeout=2).cluster_id
    except ck.KafkaException:
        return None


def test_confluent_kafka_rebootstraps_onto_the_new_cluster(clusters, proxy) -> None:
    a, b = clusters
    id_a, id_b = cluster_id(a), cluster_id(b)
    producer, log = confluent_producer(proxy, "rebootstrap")
    for i in range(10):
        producer.produce(TOPIC, b"ck-before-%d" % i)
    assert producer.flush(30) == 0
    assert confluent_cluster_id(producer) == id_a
    proxy.switch(b.bootstrap_servers)

    def moved() -> bool:
        producer.poll(0.1)
        return log.saw("re-bootstrap") and confluent_cluster_id(producer) == id_b

    wait_for(moved, 30, "confluent-kafka did not rebootstrap onto cluster B")
    errors: list[Any] = []
    for i in range(10):
        producer.produce(
            TOPIC, b"ck-after-%d" % i, on_delivery=lambda err, _m: err and errors.append(err)
        )
    assert producer.flush(30) == 0 and errors == []
    assert sorted(values_in(b, b"ck-after")) == sorted(b"ck-after-%d" % i for i in range(10))
    assert values_in(a, b"ck-after") == []


def test_with_strategy_none_neither_client_rebootstraps(clusters, proxy) -> None:
    a, b = clusters
    id_a = cluster_id(a)
    ours = our_producer(proxy, "none")
    theirs, log = confluent_producer(proxy, "none")
    try:
        ours.send(TOPIC, b"none-before").result(30)
        theirs.produce(TOPIC, b"none-before")
        assert theirs.flush(30) == 0
        proxy.switch(b.bootstrap_servers)
        end = time.monotonic() + 4 * FAST_METADATA / 1000 + 2
        while time.monotonic() < end:  # several refreshes, each answered REBOOTSTRAP_REQUIRED
            theirs.poll(0.1)
        assert ours.rebootstraps == 0 and ours.cluster_id == id_a
        assert not log.saw("re-bootstrap")
        with pytest.raises(ck.KafkaException, match="REBOOTSTRAP_REQUIRED"):
            theirs.list_topics(TOPIC, timeout=5)
    finally:
        ours.close(5)
        theirs.flush(5)
