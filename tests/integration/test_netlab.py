"""Network and clock faults on a real cluster whose nodes live in network namespaces.

One lab for the module: ZooKeeper in namespace `zk`, brokers 1-3 in `b1`-`b3`, the test and its
clients (confluent-kafka) in the root namespace, node `client`. Each test has its own topic
(replication factor 3, min.insync.replicas 2), heals every link it faulted and waits for all three
brokers to be registered again, so the next test starts from a whole cluster. The fixture closes
the cluster, ZooKeeper and the lab (namespaces, interfaces, shapers) whatever happens.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from epochlog.cli.commands import read_status
from epochlog.client import Admin
from epochlog.testing.cluster import LocalCluster
from epochlog.testing.faults import FaultRules
from epochlog.testing.netlab import LinkFault, NamespacedZooKeeper, NetLab, NetLabError

BROKER_NODES = {1: "b1", 2: "b2", 3: "b3"}
LAG_MS = 3000


@dataclass
class Lab:
    net: NetLab
    zk: NamespacedZooKeeper
    cluster: LocalCluster
    faults_file: Path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("netlab")
    faults_file = root / "faults.json"
    FaultRules.write(faults_file, [])
    net = NetLab(["zk", *BROKER_NODES.values()], seed=19)
    zk: NamespacedZooKeeper | None = None
    cluster: LocalCluster | None = None
    try:
        net.start()
        zk = net.zookeeper("zk", root / "zookeeper", fsync=False)
        zk.start()
        cluster = LocalCluster(
            root / "cluster",
            3,
            zookeeper=zk.connect_string,
            zk_session_timeout_ms=4000,
            placements=net.broker_placements(BROKER_NODES),
            broker_config={
                "min.insync.replicas": 2,
                "replica.lag.time.max.ms": LAG_MS,
                "replica.socket.timeout.ms": 3000,
                "epochlog.test.faults.file": str(faults_file),
            },
        )
        cluster.start()
        yield Lab(net, zk, cluster, faults_file)
    finally:
        if cluster is not None:
            cluster.close()
        if zk is not None:
            zk.stop()
        net.close()


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def partition(lab: Lab, topic: str, index: int = 0) -> dict[str, Any]:
    for p in read_status(lab.cluster.zk_connect or "")["partitions"]:
        if p["topic"] == topic and p["partition"] == index:
            return p
    raise AssertionError(f"no partition {topic}-{index} in ZooKeeper")


def create_topic(lab: Lab, topic: str, configs: dict[str, str] | None = None) -> dict[str, Any]:
    with Admin({"bootstrap.servers": lab.cluster.bootstrap_servers}) as admin:
        admin.create_topic(topic, 1, 3, configs)
    wait_until(lambda: len(partition(lab, topic)["isr"]) == 3, 30, f"{topic}'s ISR to fill")
    return partition(lab, topic)


def heal_and_wait_whole(lab: Lab) -> None:
    lab.net.heal_all()
    wait_until(
        lambda: set(lab.cluster.zk_state()["brokers"]) == set(BROKER_NODES),
        60,
        "every broker to be registered again",
    )


def producer(lab: Lab, **extra: Any) -> ck.Producer:
    return ck.Producer(
        {
            "bootstrap.servers": lab.cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 60000,
            **extra,
        }
    )


def produce_one(p: ck.Producer, topic: str, value: bytes) -> ck.Message:
    delivered: list[Any] = []
    p.produce(topic, value, on_delivery=lambda err, msg: delivered.append((err, msg)))
    assert p.flush(90) == 0, f"{value!r} still queued"
    err, msg = delivered[0]
    assert err is None, f"{value!r} not acknowledged: {err}"
    return msg


def test_leader_cut_from_zookeeper_loses_leadership_and_acks_all_goes_on(lab: Lab) -> None:
    before = create_topic(lab, "zk-cut")
    old_leader = before["leader"]
    assert produce_one(producer(lab), "zk-cut", b"before").offset() == 0
    lab.net.cut(BROKER_NODES[old_leader], "zk")
    try:
        # its session expires; the controller (a new one, if it was the controller) elects
        wait_until(
            lambda: partition(lab, "zk-cut")["leader"] not in (old_leader, -1),
            60,
            f"a leader other than {old_leader}",
        )
        after = partition(lab, "zk-cut")
        assert old_leader not in after["isr"]
        assert after["leader_epoch"] > before["leader_epoch"]
        # The cut broker never hears it was replaced (the expiry reaches it only once the link
        # heals) and keeps answering metadata with itself as the leader, so a client connected
        # only to it stays there; a client of the other brokers produces with acks=all to the
        # two replicas left in the ISR.
        survivors = ",".join(
            f"{lab.net.address(BROKER_NODES[b])}:9092" for b in BROKER_NODES if b != old_leader
        )
        p = producer(lab, **{"bootstrap.servers": survivors})
        assert produce_one(p, "zk-cut", b"during").offset() == 1
    finally:
        heal_and_wait_whole(lab)
    wait_until(lambda: len(partition(lab, "zk-cut")["isr"]) == 3, 60, "the old leader to rejoin")
    assert produce_one(p, "zk-cut", b"after").offset() == 2


def test_one_way_cut_between_brokers_shrinks_the_isr_and_heal_fills_it(lab: Lab) -> None:
    state = create_topic(lab, "one-way")
    leader = state["leader"]
    controller = lab.cluster.controller_id()
    # not the controller: the leader's AlterPartition must be answered across the cut link
    follower = next(b for b in state["isr"] if b not in (leader, controller))
    lab.net.cut_one_way(BROKER_NODES[follower], BROKER_NODES[leader])  # its fetches never arrive
    try:
        assert lab.net.faults().keys() == {(BROKER_NODES[follower], BROKER_NODES[leader])}
        # A follower level with the leader stays in sync however long it is silent (as in
        # Kafka); a record it cannot fetch leaves it behind, and acks=all waits for the shrink.
        assert produce_one(producer(lab), "one-way", b"left behind").offset() == 0
        shrunk = partition(lab, "one-way")
        assert shrunk["leader"] == leader
        assert follower not in shrunk["isr"] and len(shrunk["isr"]) == 2
    finally:
        heal_and_wait_whole(lab)
    assert lab.net.faults() == {}
    wait_until(lambda: len(partition(lab, "one-way")["isr"]) == 3, 60, "the ISR to fill again")
    assert follower in partition(lab, "one-way")["isr"]


def test_delay_on_the_client_link_shows_in_every_round_trip(lab: Lab) -> None:
    state = create_topic(lab, "slow")
    leader_node = BROKER_NODES[state["leader"]]
    p = producer(lab, **{"linger.ms": 0})
    produce_one(p, "slow", b"warm")  # connections and metadata in place
    delay_ms = 150
    lab.net.delay("client", leader_node, delay_ms, jitter_ms=10)
    try:
        durations = []
        for i in range(5):
            started = time.monotonic()
            produce_one(p, "slow", b"slow-%d" % i)
            durations.append(time.monotonic() - started)
        # a produce request and its response each cross the link once: one round trip at least,
        # a bound no scheduling noise can undercut
        assert min(durations) >= 2 * (delay_ms - 10) / 1000, durations
    finally:
        heal_and_wait_whole(lab)


def test_loss_on_the_client_link_drops_packets_and_tcp_delivers_anyway(lab: Lab) -> None:
    state = create_topic(lab, "lossy")
    leader_node = BROKER_NODES[state["leader"]]
    p = producer(lab, **{"linger.ms": 0})
    produce_one(p, "lossy", b"warm")
    lab.net.loss("client", leader_node, 20)
    try:
        offsets = [produce_one(p, "lossy", b"lossy-%d" % i).offset() for i in range(30)]
    finally:
        heal_and_wait_whole(lab)
    assert offsets == list(range(1, 31))  # every record acknowledged once, in order
    counts = lab.net.shaped_packets()
    passed, lost = counts[("client", leader_node)]
    back_passed, back_lost = counts[(leader_node, "client")]
    assert lost + back_lost > 0 and passed > 0 and back_passed > 0, counts


def test_clock_jump_moves_a_records_log_append_time(lab: Lab) -> None:
    state = create_topic(lab, "stamped", {"message.timestamp.type": "LogAppendTime"})
    leader = state["leader"]
    p = producer(lab)

    def append_time(value: bytes) -> int:
        kind, stamp = produce_one(p, "stamped", value).timestamp()
        assert kind == ck.TIMESTAMP_LOG_APPEND_TIME
        return stamp

    hour_ms = 3_600_000
    assert abs(append_time(b"now") - time.time() * 1000) < hour_ms / 2
    FaultRules.write(lab.faults_file, [{"clock_offset_ms": hour_ms, "broker": leader}])
    try:
        jumped: list[int] = []
        wait_until(
            lambda: (
                jumped.append(append_time(b"later"))
                or jumped[-1] > time.time() * 1000 + hour_ms / 2
            ),
            30,
            "the leader's clock to jump an hour",
        )
    finally:
        FaultRules.write(lab.faults_file, [])
    back: list[int] = []
    wait_until(
        lambda: back.append(append_time(b"back")) or back[-1] < time.time() * 1000 + hour_ms / 2,
        30,
        "the leader's clock to come back",
    )
    consumer = ck.Consumer(
        {"bootstrap.servers": lab.cluster.bootstrap_servers, "group.id": "stamps"}
    )
    try:
        consumer.assign([ck.TopicPartition("stamped", 0, 0)])
        stored: dict[bytes, int] = {}
        deadline = time.monotonic() + 30
        while b"back" not in stored:
            assert time.monotonic() < deadline, f"read back only {sorted(stored)}"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                stored[msg.value()] = msg.timestamp()[1]
        assert stored[b"later"] - stored[b"now"] > hour_ms / 2  # as stored, not only as acked
    finally:
        consumer.close()


def test_a_lab_removes_its_namespaces_even_when_the_test_fails() -> None:
    with pytest.raises(RuntimeError, match="boom"), NetLab(["x"]) as lab:
        namespace = lab.namespace("x")
        lab.cut("client", "x")
        with pytest.raises(NetLabError, match="no node 'nowhere'"):
            lab.cut("x", "nowhere")
        with pytest.raises(NetLabError, match="delay"):
            lab.delay("client", "x", -1)
        assert lab.faults() == {
            ("client", "x"): LinkFault(cut=True),
            ("x", "client"): LinkFault(cut=True),
        }
        raise RuntimeError("boom")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert namespace not in listed and lab.layout.hub not in listed


def test_sweep_removes_namespaces_of_labs_whose_process_is_gone() -> None:
    dead = 0x7FFFFF  # above pid_max: no process has it
    name = f"e{dead:x}l0-x"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert name in NetLab.sweep_stale()
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert name not in listed
