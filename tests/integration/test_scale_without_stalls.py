"""Creating thousands of partitions keeps every ISR full, and a controlled shutdown right after
leaves no partition offline (issue 20, item 3).

A 3-broker local cluster (real ZooKeeper and broker processes, replica.lag.time.max.ms 10 s as
`epochlog up` sets it: stricter than Kafka's 30 s default) creates a topic of thousands of
partitions with replication factor 2. Before the fix each broker's loop was blocked for the
whole LeaderAndIsr apply (12 s for 10,000 partitions on an idle machine) and every leader then
shrank the ISR of every partition it led to itself; a controlled shutdown in that window left a
sixth of the partitions offline. Asserted on ZooKeeper's partition states: no ISR ever changed
(each state znode is at version 0, the partition epoch of its creation) and after the stop every
partition has a leader. The loop's largest stall (the brokers' loop-stall probe) is reported,
not asserted.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from typing import Any

import pytest

from epochlog.client.sync import Admin
from epochlog.testing.cluster import LocalCluster
from epochlog.zk.session import close_client, connect

TOPIC = "many"


def partition_states(zk: Any, partitions: int) -> list[tuple[dict[str, Any], int]]:
    """(state JSON, znode version) of every partition of TOPIC."""
    pending = [
        zk.get_async(f"/brokers/topics/{TOPIC}/partitions/{p}/state") for p in range(partitions)
    ]
    return [(json.loads(data), stat.version) for data, stat in (f.get(timeout=30) for f in pending)]


def wait_for_states(zk: Any, partitions: int, timeout_s: float = 300) -> list[Any]:
    """Until every partition's state znode exists with a leader and a full ISR."""
    deadline = time.monotonic() + timeout_s
    while True:
        if zk.exists(f"/brokers/topics/{TOPIC}/partitions/{partitions - 1}/state"):
            try:
                states = partition_states(zk, partitions)
            except Exception:  # a state znode not written yet
                states = []
            if states and all(s["leader"] >= 0 and len(s["isr"]) == 2 for s, _ in states):
                return states
        if time.monotonic() > deadline:
            raise AssertionError(f"the {partitions} partitions never all had a full ISR")
        time.sleep(1)


def loop_stall_max_ms(cluster: LocalCluster) -> dict[int, int]:
    found: dict[int, int] = {}
    for broker_id, broker in cluster.brokers.items():
        text = broker.log_path.read_text(errors="replace")
        stalls = [int(s) for s in re.findall(r"event loop blocked for (\d+) ms", text)]
        found[broker_id] = max(stalls, default=0)
    return found


def shrinks_logged(cluster: LocalCluster) -> int:
    return sum(
        b.log_path.read_text(errors="replace").count("shrinking the ISR")
        for b in cluster.brokers.values()
    )


def create_then_stop_a_broker(tmp_path: Any, partitions: int) -> None:
    with LocalCluster(tmp_path / "cluster", 3) as cluster:
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topic(TOPIC, partitions, 2, timeout=240)
        zk = connect(cluster.zk_connect or "", session_timeout_ms=30000)
        try:
            states = wait_for_states(zk, partitions)
            # Kafka's shrink check runs every replica.lag.time.max.ms / 2: give it two turns.
            time.sleep(12)
            states = partition_states(zk, partitions)
            changed = [p for p, (_, version) in enumerate(states) if version != 0]
            print(
                f"{partitions} partitions: loop stall max {loop_stall_max_ms(cluster)} ms, "
                f"ISR shrinks logged {shrinks_logged(cluster)}"
            )
            assert changed == [], f"ISR changed for {len(changed)} partitions: {changed[:10]}"
            assert all(len(s["isr"]) == 2 for s, _ in states)
            assert shrinks_logged(cluster) == 0
            led_by_1 = [p for p, (s, _) in enumerate(states) if s["leader"] == 1]
            left = cluster.stop_broker(1)
            assert left is None, f"the controlled shutdown left {left}"
            after = partition_states(zk, partitions)
            offline = [p for p, (s, _) in enumerate(after) if s["leader"] == -1]
            assert offline == []
            assert all(after[p][0]["leader"] in (2, 3) for p in led_by_1)
        finally:
            close_client(zk)


def test_creating_1500_partitions_keeps_every_isr_and_a_controlled_shutdown_loses_none(tmp_path):
    create_then_stop_a_broker(tmp_path, 1500)


@pytest.mark.slow
def test_creating_10000_partitions_keeps_every_isr_and_a_controlled_shutdown_loses_none(
    tmp_path,
):
    create_then_stop_a_broker(tmp_path, 10_000)


def test_broker_stop_names_the_partitions_a_controlled_shutdown_leaves_offline(tmp_path):
    """Broker 2 crashes, so the controller drops it from the ISRs; then the partitions broker 1
    leads with broker 2 as their only other replica cannot move: `epochlog broker stop 1`
    lists them and fails instead of reporting success."""
    with LocalCluster(tmp_path / "cluster", 3) as cluster:
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topic(TOPIC, 6, 2, timeout=60)
        zk = connect(cluster.zk_connect or "", session_timeout_ms=30000)
        try:
            wait_for_states(zk, 6, timeout_s=60)
            cluster.kill_broker(2)
            deadline = time.monotonic() + 60
            while any(2 in s["isr"] for s, _ in partition_states(zk, 6)):
                assert time.monotonic() < deadline, "broker 2 never left the ISRs"
                time.sleep(0.5)
            stuck = sorted(
                f"{TOPIC}-{p}"
                for p, (s, _) in enumerate(partition_states(zk, 6))
                if s["leader"] == 1 and s["isr"] == [1]
            )
            assert stuck, "no partition led by 1 with 2 as its only other replica"
            stop = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "epochlog",
                    "broker",
                    "stop",
                    "1",
                    "--dir",
                    str(cluster.directory),
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
        finally:
            close_client(zk)
    assert stop.returncode == 1, stop.stdout + stop.stderr
    assert "its controlled shutdown left" in stop.stdout
    listed = {name.strip(",") for name in stop.stdout.split()}
    assert set(stuck) <= listed
