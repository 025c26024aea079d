"""The network, clock and ZooKeeper-node fault kinds, against a recording stand-in for the lab."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from epochlog.testing.chaos import netfaults, runner
from epochlog.testing.chaos.faults import FAULTS, ChaosContext, FaultError, fault_kinds
from epochlog.testing.chaos.history import History
from epochlog.testing.chaos.runner import network_unavailable


class RecordingLab:
    host = "client"

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, *args))


class FakeProcess:
    def __init__(self, running: bool = True) -> None:
        self.running = running

    def is_running(self) -> bool:
        return self.running


class FakeCluster:
    def __init__(self, brokers: int = 3) -> None:
        self.brokers = {b: FakeProcess() for b in range(1, brokers + 1)}


class FakeZooKeeper:
    def __init__(self, name: str) -> None:
        self.connect_string = name
        self.running = True
        self.starts = 0

    def is_running(self) -> bool:
        return self.running

    def mode(self) -> str:
        return "follower"

    def kill(self) -> None:
        self.running = False

    def start(self) -> None:
        self.running = True
        self.starts += 1


def context(seed: int = 1, **kwargs: Any) -> ChaosContext:
    cluster: Any = FakeCluster()
    return ChaosContext(cluster, random.Random(seed), History(), **kwargs)


def lab_context(seed: int = 1) -> ChaosContext:
    return context(
        seed,
        net=RecordingLab(),
        broker_nodes={1: "b1", 2: "b2", 3: "b3"},
        zk_nodes=["zk1"],
    )


def test_network_clock_and_zk_node_kinds_are_in_the_default_set() -> None:
    kinds = fault_kinds(None)
    for kind in (*netfaults.NETWORK_KINDS, "clock-jump", "zk-node-lost"):
        assert kind in kinds


def test_links_of_every_class_are_drawn_and_join_the_right_nodes() -> None:
    ctx = lab_context()
    seen = set()
    for _ in range(60):
        link_class, a, b = netfaults.choose_link(ctx)
        seen.add(link_class)
        assert a != b
        if link_class == "client-broker":
            assert a == "client" and b in {"b1", "b2", "b3"}
        elif link_class == "broker-broker":
            assert {a, b} <= {"b1", "b2", "b3"}
        else:
            assert a in {"b1", "b2", "b3"} and b == "zk1"
    assert seen == set(netfaults.LINK_CLASSES)


@pytest.mark.parametrize(
    ("kind", "call", "said"),
    [
        ("net-cut", "cut", "cut both ways"),
        ("net-one-way", "cut_one_way", "cut one way"),
        ("net-delay", "delay", "delayed"),
        ("net-loss", "loss", "packet loss"),
    ],
)
def test_a_link_fault_names_its_link_and_heal_clears_that_link(
    kind: str, call: str, said: str
) -> None:
    ctx = lab_context(seed=7)
    fault = FAULTS[kind]()
    assert fault.usable(ctx)
    line = fault.inject(ctx)
    link_class, a, b = fault.link  # type: ignore[attr-defined]
    assert line.startswith(f"{link_class} link {a} - {b}: ") and said in line
    name, x, y, *_ = ctx.net.calls[0]
    assert name == call and {x, y} == {a, b}
    assert "whole again" in fault.heal(ctx)
    assert ctx.net.calls[-1] == ("heal", a, b)


def test_network_kinds_are_unusable_without_a_lab() -> None:
    for kind in netfaults.NETWORK_KINDS:
        assert not FAULTS[kind]().usable(context())


def test_a_clock_jump_writes_the_rule_for_one_broker_and_heal_clears_it(tmp_path: Path) -> None:
    faults_file = tmp_path / "faults.json"
    ctx = context(seed=3, faults_file=faults_file)
    fault = netfaults.ClockJump()
    line = fault.inject(ctx)
    (rule,) = json.loads(faults_file.read_text())
    assert rule["broker"] in {1, 2, 3} and rule["clock_offset_ms"] in netfaults.CLOCK_JUMPS_MS
    assert f"broker {rule['broker']}'s clock jumped {rule['clock_offset_ms']:+d} ms" == line
    fault.heal(ctx)
    assert json.loads(faults_file.read_text()) == []
    assert not netfaults.ClockJump().usable(context())


def test_zk_node_lost_needs_an_ensemble_and_restarts_the_node_it_killed() -> None:
    assert not netfaults.ZooKeeperNodeLost().usable(context(zk_servers=[FakeZooKeeper("a")]))
    servers = [FakeZooKeeper(f"zk{i}") for i in (1, 2, 3)]
    ctx = context(seed=2, zk_servers=servers)
    fault = netfaults.ZooKeeperNodeLost()
    assert fault.usable(ctx)
    line = fault.inject(ctx)
    down = [s for s in servers if not s.running]
    assert len(down) == 1 and down[0].connect_string in line
    with pytest.raises(FaultError, match="already down"):
        netfaults.ZooKeeperNodeLost().inject(ctx)
    fault.heal(ctx)
    assert all(s.running for s in servers) and down[0].starts == 1


def test_without_root_network_faults_are_unavailable_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner.os, "geteuid", lambda: 1000)
    assert network_unavailable() == "network namespaces need root (run as root, as CI does)"


def test_a_bad_ensemble_size_is_refused_before_anything_starts(tmp_path: Path) -> None:
    config = runner.ChaosConfig(seed=1, zk_ensemble=2, out=tmp_path)
    with pytest.raises(ValueError, match="--zk-ensemble 2"):
        runner.run(config)
    assert not any(tmp_path.iterdir())


def test_a_call_past_its_stall_limit_is_abandoned_and_one_within_returns_or_raises() -> None:
    import threading

    from epochlog.testing.chaos.workloads import ClientStall, call_with_stall_limit

    release = threading.Event()
    with pytest.raises(ClientStall, match="send_offsets still blocked after 0 s"):
        call_with_stall_limit(lambda: release.wait() and None, 0.05, "send_offsets")
    release.set()
    call_with_stall_limit(lambda: None, 5, "quick")

    def fails() -> None:
        raise KeyError("from the client")

    with pytest.raises(KeyError, match="from the client"):
        call_with_stall_limit(fails, 5, "failing")
