"""A controller paused past its ZooKeeper session comes back deposed and must not wait on itself.

When the paused controller resumes it still leads partitions whose followers stopped fetching
from it, so it shrinks their ISRs: an AlterPartition to the controller it remembers, itself.
Its own controller is stopped as soon as the broker sees its session is gone; an AlterPartition
queued in it then must be answered NOT_CONTROLLER at once, and the broker must learn the new
controller from ZooKeeper, not wait for the request timeout (30 s) before trying again.
"""

from __future__ import annotations

import os
import signal
import time

import confluent_kafka as ck

from epochlog.cli.commands import read_status
from epochlog.client import Admin, NewTopic
from epochlog.testing.cluster import LocalCluster
from epochlog.testing.faults import FaultRules
from epochlog.zk.session import close_client, connect
from epochlog.zk.znodes import PREFERRED_REPLICA_ELECTION_PATH, encode_preferred_replica_election

SESSION_MS = 3000
REQUEST_TIMEOUT_MS = 60000
TOPIC = "paused"


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def states(cluster: LocalCluster) -> list[dict]:
    partitions = read_status(cluster.zk_connect or "")["partitions"]
    return [p for p in partitions if p["topic"] == TOPIC]


def fall_behind(cluster: LocalCluster) -> None:
    """One record to each partition (acks=1): a dead follower now lags behind the leader."""
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 1})
    for p in range(4):
        producer.produce(TOPIC, b"v", partition=p)
    assert producer.flush(10) == 0


def request_preferred_election(cluster: LocalCluster) -> None:
    client = connect(cluster.zk_connect or "", session_timeout_ms=6000)
    try:
        client.create(
            PREFERRED_REPLICA_ELECTION_PATH,
            encode_preferred_replica_election([(TOPIC, p) for p in range(4)]),
            makepath=True,
        )
    finally:
        close_client(client)


def test_a_deposed_controller_learns_the_new_one_and_never_waits_on_itself(tmp_path) -> None:
    faults = tmp_path / "faults.json"
    FaultRules.write(faults, [])
    cluster = LocalCluster(
        tmp_path / "cluster",
        4,
        broker_config={
            "epochlog.test.faults.file": str(faults),
            "replica.lag.time.max.ms": 1000,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "auto.leader.rebalance.enable": "false",
        },
        zk_session_timeout_ms=SESSION_MS,
    )
    cluster.start()
    try:
        paused = cluster.controller_id()
        assert paused is not None
        others = [b for b in (1, 2, 3, 4) if b != paused]
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topics(
                [NewTopic(TOPIC, replica_assignment={p: [paused, *others[:2]] for p in range(4)})]
            )
        wait_until(lambda: all(len(s["isr"]) == 3 for s in states(cluster)), 30, "full ISRs")
        # The controller is busy with a broker change when its own partitions' ISR shrinks (a
        # follower died): its AlterPartition to itself waits in the controller's queue...
        FaultRules.write(faults, [{"event": "BROKER_CHANGE", "action": "hold"}])
        cluster.kill_broker(others[0])
        time.sleep(SESSION_MS / 1000 + 1.5)  # its registration expires: a broker change
        fall_behind(cluster)
        time.sleep(2.5)  # past replica.lag.time.max.ms: the leader proposes a smaller ISR
        # ...when it is paused past its session and deposed.
        pid = cluster.brokers[paused].pid
        assert pid is not None
        old_epoch = cluster.zk_state()["brokers"][paused]
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_until(
                lambda: cluster.controller_id() not in (None, paused), 30, "a new controller"
            )
            wait_until(
                lambda: all(s["leader"] != paused for s in states(cluster)), 30, "new leaders"
            )
        finally:
            os.kill(pid, signal.SIGCONT)
        # Its session is gone: it registers again, and its controller stops with the
        # AlterPartition still queued behind the held event. Only then is the hold released.
        wait_until(
            lambda: cluster.zk_state()["brokers"].get(paused, old_epoch) > old_epoch,
            30,
            "the deposed broker's new registration",
        )
        time.sleep(1)
        FaultRules.write(faults, [])
        # Back in every ISR: the deposed broker re-registered, follows the new leaders, and is
        # proposed again by them once caught up.
        cluster.start_broker(others[0])
        wait_until(
            lambda: all(len(s["isr"]) == 3 for s in states(cluster)), 60, "the ISRs to refill"
        )
        # The deposed broker leads again (it is the preferred replica), and a follower dies:
        # the ISR shrinks through the deposed broker's own AlterPartitionManager, which must not
        # be stuck on the request its old controller never answered.
        request_preferred_election(cluster)
        wait_until(
            lambda: all(s["leader"] == paused for s in states(cluster)), 30, "preferred leaders"
        )
        cluster.kill_broker(others[1])
        fall_behind(cluster)
        wait_until(
            lambda: all(others[1] not in s["isr"] for s in states(cluster)),
            REQUEST_TIMEOUT_MS / 3000,
            "the deposed broker to shrink its ISRs",
        )
        output = cluster.brokers[paused].log_path.read_text(errors="replace")
        assert "AlterPartition to the controller failed (request timed out" not in output
    finally:
        cluster.close()
