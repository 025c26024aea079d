"""The network lab's pure parts (names, addresses, the `ip` steps of each link fault, the shaper's
delay and loss decisions) and the clock-jump rule, without namespaces or brokers."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from epochlog.faults import WallClock, clock_offset_ms
from epochlog.testing.faults import FaultRules
from epochlog.testing.netlab.layout import (
    HEALTHY,
    Layout,
    LinkFault,
    NetLabError,
    Shape,
    transition,
)
from epochlog.testing.netlab.shaper import ShapePolicy

LAYOUT = Layout("e1fl0", 213, ("client", "zk", "b1", "b2"))


def test_layout_names_and_addresses_per_node() -> None:
    assert LAYOUT.address("client") == "10.213.0.2"
    assert LAYOUT.address("b2") == "10.213.3.2"
    assert LAYOUT.gateway("b2") == "10.213.3.1"
    assert LAYOUT.namespace("client") is None  # the host is the root namespace
    assert LAYOUT.namespace("zk") == "e1fl0-zk"
    assert LAYOUT.exec_prefix("b1") == ["ip", "netns", "exec", "e1fl0-b1"]
    assert LAYOUT.exec_prefix("client") == []
    assert LAYOUT.hub_veth("b1") == "e1fl0h2"
    assert LAYOUT.tun(2, 3) == "e1fl0t2_3"


def test_unknown_node_is_named_in_the_error() -> None:
    with pytest.raises(NetLabError, match="no node 'b9'"):
        LAYOUT.address("b9")


def test_layout_refuses_duplicate_names_and_too_long_prefixes() -> None:
    with pytest.raises(NetLabError, match="unique"):
        Layout("e1l0", 200, ("client", "b1", "b1"))
    with pytest.raises(NetLabError, match="too long"):
        Layout("e123456789l0", 200, ("client", "b1"))


def test_shape_refuses_negative_delay_and_loss_outside_percent() -> None:
    with pytest.raises(NetLabError, match="delay"):
        Shape(delay_ms=-1)
    with pytest.raises(NetLabError, match="loss"):
        Shape(loss_percent=101)


def test_cut_adds_a_blackhole_rule_for_one_direction_and_heal_removes_it() -> None:
    steps = transition(LAYOUT, "b1", "zk", HEALTHY, LinkFault(cut=True))
    assert [s.args for s in steps] == [
        ("rule", "add", "pref", str(1000 + 2 * 40 + 1), "from", "10.213.2.2/32",
         "to", "10.213.1.2/32", "blackhole"),
    ]  # fmt: skip
    back = transition(LAYOUT, "b1", "zk", LinkFault(cut=True), HEALTHY)
    assert [s.args[:2] for s in back] == [("rule", "del")]
    assert back[0].args[2:] == steps[0].args[2:]


def test_shaping_starts_the_shaper_before_routing_into_its_tun() -> None:
    shape = Shape(delay_ms=50, jitter_ms=5)
    steps = transition(LAYOUT, "client", "b2", HEALTHY, LinkFault(shape=shape))
    assert [s.kind for s in steps] == ["start_shaper", "ip", "ip", "ip"]
    assert steps[0].shape == shape
    assert steps[1].args == ("link", "set", "e1fl0t0_3", "up")
    assert steps[2].args == ("route", "add", "10.213.3.2/32", "dev", "e1fl0t0_3",
                             "table", str(1000 + 3))  # fmt: skip
    rule = steps[3].args
    assert (
        rule[:2] == ("rule", "add") and "iif" in rule and rule[rule.index("iif") + 1] == "e1fl0h0"
    )


def test_changing_a_shape_replaces_the_shaper_and_cutting_keeps_it() -> None:
    old = LinkFault(shape=Shape(delay_ms=50))
    changed = transition(
        LAYOUT, "b1", "b2", old, LinkFault(shape=Shape(delay_ms=50, loss_percent=10))
    )
    assert [s.kind for s in changed] == ["ip", "stop_shaper", "start_shaper", "ip", "ip", "ip"]
    assert changed[0].args[:2] == ("rule", "del")
    cut = transition(LAYOUT, "b1", "b2", old, LinkFault(cut=True, shape=old.shape))
    assert [(s.kind, s.args[:2]) for s in cut] == [("ip", ("rule", "add"))]
    assert cut[0].args[-1] == "blackhole"


def test_a_link_needs_two_different_nodes() -> None:
    with pytest.raises(NetLabError, match="two different nodes"):
        transition(LAYOUT, "b1", "b1", HEALTHY, LinkFault(cut=True))


def test_shaper_delays_each_packet_and_never_lets_one_overtake() -> None:
    policy = ShapePolicy(delay_ms=100, jitter_ms=50, rng=random.Random(7))
    releases = [policy.release_at(t / 1000) for t in range(0, 200, 2)]
    assert all(r is not None for r in releases)
    times = [r for r in releases if r is not None]
    assert times == sorted(times)
    assert all(r >= t / 1000 + 0.05 - 1e-9 for r, t in zip(times, range(0, 200, 2), strict=True))
    assert max(r - t / 1000 for r, t in zip(times, range(0, 200, 2), strict=True)) > 0.1


def test_shaper_loses_about_the_asked_share() -> None:
    policy = ShapePolicy(delay_ms=0, loss_percent=30, rng=random.Random(1))
    lost = sum(policy.release_at(float(i)) is None for i in range(10_000))
    assert 2700 < lost < 3300
    assert (policy.passed, policy.lost) == (10_000 - lost, lost)  # what the lab reports
    assert ShapePolicy(delay_ms=0, loss_percent=0).release_at(5.0) == 5.0


def test_clock_rule_applies_to_its_broker_or_to_all() -> None:
    rules = [{"api": "FETCH", "action": "drop"}, {"clock_offset_ms": -5000, "broker": 2}]
    assert clock_offset_ms(rules, {2}) == -5000
    assert clock_offset_ms(rules, {1}) == 0
    assert clock_offset_ms([{"clock_offset_ms": 7}], {3}) == 7


def test_writing_a_clock_rule_that_is_not_whole_ms_fails_and_changes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "faults.json"
    FaultRules.write(path, [{"clock_offset_ms": 1000, "broker": 1}])
    with pytest.raises(ValueError, match="clock_offset_ms"):
        FaultRules.write(path, [{"clock_offset_ms": "1h", "broker": 1}])
    assert '"clock_offset_ms": 1000' in path.read_text()


def test_wall_clock_follows_the_rules_file(tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    clock = WallClock()
    assert clock.offset_ms == 0
    clock.watch(path, broker_id=2)
    FaultRules.write(path, [{"clock_offset_ms": 3_600_000, "broker": 2}])
    _wait_for(lambda: clock.offset_ms == 3_600_000)
    assert clock.now_ms() - time.time_ns() // 1_000_000 >= 3_600_000 - 1000
    path.unlink()  # no file: no fault
    _wait_for(lambda: clock.offset_ms == 0)
    clock.close()


def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)
