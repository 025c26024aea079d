"""KIP-380's motivating failures, each shown with broker epochs switched off and prevented with
them on (`epochlog.test.kip380.enabled`), on a real local cluster."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest

from epochlog.client import Admin, NewTopic
from epochlog.testing.cluster import LocalCluster
from epochlog.testing.faults import FaultRules

SESSION_MS = 3000


def start_cluster(tmp_path, brokers: int, kip380: bool) -> tuple[LocalCluster, object]:
    faults = tmp_path / "faults.json"
    FaultRules.write(faults, [])
    cluster = LocalCluster(
        tmp_path / "cluster",
        brokers,
        broker_config={
            "epochlog.test.kip380.enabled": str(kip380).lower(),
            "epochlog.test.faults.file": str(faults),
        },
        zk_session_timeout_ms=SESSION_MS,
    )
    cluster.start()
    return cluster, faults


def produce_one(bootstrap: str, topic: str, timeout_s: float) -> str | None:
    """Produce one record with acks=all; None on success, else the delivery error."""
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "message.timeout.ms": int(timeout_s * 1000)}
    )
    outcome: list[object] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _m: outcome.append(err))
    producer.flush(timeout_s + 5)
    return None if outcome and outcome[0] is None else str(outcome[0] if outcome else "no answer")


@pytest.mark.parametrize("kip380", [True, False], ids=["kip380-on", "kip380-off"])
def test_a_fast_bounce_the_controller_misses_leaves_the_broker_uninitialised(tmp_path, kip380):
    cluster, faults = start_cluster(tmp_path, 2, kip380)
    try:
        controller = cluster.controller_id()
        victim = 2 if controller == 1 else 1
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topics([NewTopic("t", replica_assignment={0: [victim]})])
        assert produce_one(cluster.bootstrap_servers, "t", 10) is None
        old_epoch = cluster.zk_state()["brokers"][victim]
        # The controller is busy when the broker's registration changes: it looks only after the
        # broker has already registered again (a bounce faster than the controller).
        FaultRules.write(
            faults, [{"event": "BROKER_CHANGE", "action": "delay", "seconds": 5, "count": 1}]
        )
        cluster.kill_broker(victim)
        cluster.start_broker(victim, wait=False)
        deadline = time.monotonic() + 30
        while cluster.zk_state()["brokers"].get(victim, old_epoch) <= old_epoch:
            assert time.monotonic() < deadline, "the broker did not register again"
            time.sleep(0.1)
        time.sleep(5)  # the controller's delayed look at /brokers/ids
        error = produce_one(cluster.bootstrap_servers, "t", 6)
        if kip380:
            assert error is None  # the bounce was detected and the broker initialised
        else:
            # the damage: the controller never told the new generation it leads the partition
            assert error is not None
    finally:
        cluster.close()
