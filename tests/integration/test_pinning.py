"""KIP-39 on a real cluster: four broker processes and a real ZooKeeper.

Pinning moves the controller to the pinned broker; killing it brings another controller within
the session timeout plus one election; restarting it moves the controller back; unpinning frees
the election; the KIP's gotchas end with exactly one controller; a randomized run of pins,
unpins, kills, stops and restarts always finds a controller on a live broker within a bound.

"Never two acting at once" is checked from the brokers' own records: each broker logs when it is
elected (with the new controller epoch) and when it stops acting; a killed broker stops at its
kill. No two brokers' acting intervals may overlap, and every controller epoch is elected once.
The one overlap that is allowed is a controller deposed without knowing it (its session expired
under it) until it learns so: its writes are refused by the epoch fence (see
test_pinning_electors.py, which checks that write by write).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime

import pytest
from kazoo.client import KazooClient

from epochlog.cli.commands import read_status
from epochlog.client import Admin, KafkaError
from epochlog.client.connection import BrokerConnection
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.messages.pin_controller import PinOperation, PinState
from epochlog.testing.cluster import LocalCluster
from epochlog.zk import controller_zk as zkc
from epochlog.zk import pinning
from epochlog.zk.session import close_client, connect

SESSION_MS = 4000
BROKERS = (1, 2, 3, 4)
ABSENT = 9  # never registered


class Pinned:
    """The cluster, a ZooKeeper session to look at it, and what the test did to it."""

    def __init__(self, cluster: LocalCluster, zk: KazooClient, admin: Admin) -> None:
        self.cluster = cluster
        self.zk = zk
        self.admin = admin
        self.killed_at: dict[int, list[float]] = {b: [] for b in BROKERS}

    def controller(self) -> int | None:
        return zkc.read_controller(self.zk)

    def ready(self) -> int | None:
        return pinning.read_ready_to_serve(self.zk)

    def alive(self) -> list[int]:
        return [b for b, p in self.cluster.brokers.items() if p.is_running()]

    def wait(self, condition: Callable[[], bool], timeout_s: float, what: str) -> float:
        started = time.monotonic()
        while not condition():
            if time.monotonic() - started > timeout_s:
                raise AssertionError(
                    f"not within {timeout_s} s: {what} (controller {self.controller()}, "
                    f"pin {pinning.read_next_controller(self.zk)}, ready {self.ready()}, "
                    f"alive {self.alive()})"
                )
            time.sleep(0.02)
        return time.monotonic() - started

    def wait_controller(self, broker_id: int, timeout_s: float = 15) -> float:
        return self.wait(lambda: self.controller() == broker_id, timeout_s, f"{broker_id} leads")

    def wait_live_controller(self, timeout_s: float) -> int:
        """A controller on a live broker (as seen at that moment: it may be moving on)."""
        alive = set(self.alive())
        seen: list[int] = []

        def live() -> bool:
            controller = self.controller()
            if controller in alive:
                seen.append(controller)  # type: ignore[arg-type]
            return bool(seen)

        self.wait(live, timeout_s, "a controller on a live broker")
        return seen[0]

    def kill(self, broker_id: int) -> None:
        self.cluster.kill_broker(broker_id)
        self.killed_at[broker_id].append(time.time())

    def start(self, broker_id: int) -> None:
        self.cluster.start_broker(broker_id)


@pytest.fixture(scope="module")
def pinned(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pinned]:
    chroot = f"/pinning-{os.getpid()}"
    root = connect(zookeeper.connect_string, session_timeout_ms=SESSION_MS)
    root.ensure_path(chroot)
    close_client(root)
    hosts = zookeeper.connect_string + chroot
    cluster = LocalCluster(
        tmp_path_factory.mktemp("pinning"),
        len(BROKERS),
        zookeeper=hosts,
        zk_session_timeout_ms=SESSION_MS,
        broker_config={"auto.leader.rebalance.enable": "false"},
    )
    zk: KazooClient | None = None
    try:
        cluster.start()
        zk = connect(hosts, session_timeout_ms=SESSION_MS)
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topic("pinning", 8, 2)
            state = Pinned(cluster, zk, admin)
            yield state
        check_never_two_acting(cluster, state.killed_at)
    finally:
        if zk is not None:
            close_client(zk)
        cluster.close()


@pytest.fixture(autouse=True)
def restored(pinned: Pinned) -> Iterator[None]:
    """Each test starts with every broker running and no pin."""
    yield
    for broker_id in BROKERS:
        process = pinned.cluster.brokers[broker_id]
        with contextlib.suppress(ProcessLookupError, TypeError):
            os.kill(process.pid, signal.SIGCONT)  # type: ignore[arg-type]
        if not process.is_running():
            pinned.start(broker_id)
    pinned.admin.unpin_controller()
    pinned.wait(lambda: pinned.ready() is None, 10, "the ready node withdrawn")
    pinned.wait_live_controller(SESSION_MS / 1000 + 5)


# ----------------------------------------------------------------------------- never two acting

_LINE = re.compile(r"^(\S+ \S+) \w+ \[broker (\d+)\] \S+: (.*)$")
_ELECTED = re.compile(r"broker (\d+) elected controller with epoch (\d+)")
_STOPS = re.compile(r"broker (\d+) stops being the controller: (.*)")


def acting_intervals(
    cluster: LocalCluster, killed_at: dict[int, list[float]]
) -> tuple[list[tuple[float, float, int, int, str]], list[int]]:
    """(start, end, broker, epoch, how it ended) per controllership, and every elected epoch."""
    intervals = []
    epochs = []
    for broker_id, process in cluster.brokers.items():
        events: list[tuple[float, str, int, str]] = []
        if process.log_path.exists():
            for line in process.log_path.read_text(errors="replace").splitlines():
                match = _LINE.match(line)
                if not match:
                    continue
                stamp = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                if elected := _ELECTED.search(match[3]):
                    events.append((stamp, "elected", int(elected[2]), ""))
                    epochs.append(int(elected[2]))
                elif stops := _STOPS.search(match[3]):
                    events.append((stamp, "stops", 0, stops[2]))
        events += [(t, "killed", 0, "killed") for t in killed_at.get(broker_id, [])]
        events.sort()
        current: tuple[float, int] | None = None
        for stamp, kind, epoch, reason in events:
            if kind == "elected":
                current = (stamp, epoch)
            elif current is not None:
                intervals.append((current[0], stamp, broker_id, current[1], reason))
                current = None
        if current is not None:
            intervals.append((current[0], time.time(), broker_id, current[1], "still acting"))
    return sorted(intervals), epochs


def learned_it_was_deposed(reason: str) -> bool:
    """A controller whose node went without it (its session expired under a stalled process):
    it acted on until it heard, and its writes were refused meanwhile by the epoch fence."""
    return reason == "deposed" or reason.startswith("the controller node names")


def check_never_two_acting(cluster: LocalCluster, killed_at: dict[int, list[float]]) -> None:
    intervals, epochs = acting_intervals(cluster, killed_at)
    assert len(epochs) == len(set(epochs)), f"an epoch elected twice: {sorted(epochs)}"
    for earlier, later in zip(intervals, intervals[1:], strict=False):
        if later[0] < earlier[1] and not learned_it_was_deposed(earlier[4]):
            raise AssertionError(
                f"two controllers acting at once: {earlier} and {later}; all: {intervals}"
            )


# ----------------------------------------------------------------------------- the basics


def other_than(*ids: int | None) -> int:
    return next(b for b in BROKERS if b not in ids)


def test_pin_moves_the_controller_to_the_pinned_broker(pinned: Pinned) -> None:
    controller = pinned.wait_live_controller(5)
    x = other_than(controller)
    status = pinned.admin.pin_controller(x)
    assert status.pinned == x and status.pinned_registered
    moved_in = pinned.wait_controller(x, 10)
    assert moved_in < 5
    status = pinned.admin.describe_controller_pin()
    assert (status.controller, status.pinned, status.ready, status.state) == (
        x,
        x,
        x,
        PinState.IN_FORCE,
    )
    # the move was one clean resignation and one election: the old controller says why
    tail = pinned.cluster.output_tail(controller, 200)
    assert f"stops being the controller: broker {x} is ready to serve as controller" in tail


def test_killing_x_elects_another_within_the_session_timeout_and_x_takes_it_back(
    pinned: Pinned,
) -> None:
    x = other_than(pinned.wait_live_controller(5))
    pinned.admin.pin_controller(x)
    pinned.wait_controller(x)
    pinned.kill(x)
    killed = time.monotonic()
    pinned.wait(lambda: pinned.controller() not in (None, x), SESSION_MS / 1000 + 5, "failover")
    took = time.monotonic() - killed
    # the session timeout (plus the server's expiry tick), then one election
    assert took < SESSION_MS / 1000 + 2.5, took
    assert pinned.admin.describe_controller_pin().state is PinState.PENDING
    pinned.start(x)  # x reads the pin at startup, announces itself, the controller resigns
    assert pinned.wait_controller(x, 15) < 15
    assert pinned.ready() == x


def test_a_clean_stop_of_x_hands_over_at_once(pinned: Pinned) -> None:
    x = other_than(pinned.wait_live_controller(5))
    pinned.admin.pin_controller(x)
    pinned.wait_controller(x)
    gaps: list[float] = []
    absent_since: list[float] = []

    def sample() -> bool:
        controller = pinned.controller()
        if controller is None and not absent_since:
            absent_since.append(time.monotonic())
        if controller is not None and absent_since:
            gaps.append(time.monotonic() - absent_since.pop())
        return controller not in (None, x)

    pinned.cluster.brokers[x].process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    pinned.wait(sample, 30, "another controller after x's controlled shutdown")
    assert all(gap < 2.0 for gap in gaps), gaps  # x withdrew and resigned before closing
    pinned.wait(lambda: not pinned.cluster.brokers[x].is_running(), 30, "x exits")
    pinned.start(x)
    pinned.wait_controller(x)


def test_unpin_frees_the_election(pinned: Pinned) -> None:
    x = other_than(pinned.wait_live_controller(5))
    pinned.admin.pin_controller(x)
    pinned.wait_controller(x)
    status = pinned.admin.unpin_controller()
    assert status.pinned is None and status.state is PinState.NONE
    pinned.wait(lambda: pinned.ready() is None, 5, "x withdraws its ready node")
    assert pinned.controller() == x  # unpinning moves nothing
    pinned.cluster.stop_broker(x)
    successor = pinned.wait_live_controller(10)
    pinned.start(x)
    time.sleep(1.5)
    assert pinned.controller() == successor  # no pin: x does not take it back
    assert pinned.ready() is None


def test_pinning_an_absent_broker_needs_allow_absent_and_stays_pending(pinned: Pinned) -> None:
    controller = pinned.wait_live_controller(5)
    with pytest.raises(KafkaError) as refused:
        pinned.admin.pin_controller(ABSENT)
    assert refused.value.code is ErrorCode.BROKER_NOT_AVAILABLE
    assert "--allow-absent" in str(refused.value)
    assert pinning.read_next_controller(pinned.zk) is None  # refused: nothing written
    status = pinned.admin.pin_controller(ABSENT, allow_absent=True)
    assert (status.pinned, status.pinned_registered, status.state) == (
        ABSENT,
        False,
        PinState.PENDING,
    )
    assert "not registered" in status.summary()
    time.sleep(1)
    assert pinned.controller() == controller  # nobody is ready: the controller stays


def test_pin_auto_picks_the_live_broker_leading_the_fewest_partitions(pinned: Pinned) -> None:
    partitions = read_status(pinned.cluster.zk_connect or "")["partitions"]
    leaders = [p["leader"] for p in partitions]
    expected = pinning.choose_auto_pin(pinned.alive(), leaders, pinned.controller())
    status = pinned.admin.pin_controller(auto=True)
    assert status.pinned == expected
    pinned.wait_controller(expected)


def test_a_malformed_pin_request_gets_invalid_request_and_changes_nothing(pinned: Pinned) -> None:
    import asyncio

    port = pinned.cluster.brokers[1].port

    async def send(request: object) -> object:
        connection = BrokerConnection("127.0.0.1", port, node_id=1, client_id="raw")
        await connection.connect()
        try:
            return await connection.send(request, api_key=ApiKey.PIN_CONTROLLER)
        finally:
            await connection.close()

    for request in (
        m.PinControllerRequest(operation=PinOperation.UNPIN, broker_id=2),
        m.PinControllerRequest(operation=PinOperation.PIN, broker_id=-3),
        m.PinControllerRequest(operation=PinOperation.PIN, broker_id=2, auto=True),
        m.PinControllerRequest(operation=42),
    ):
        response = asyncio.run(send(request))
        assert response.error_code == ErrorCode.INVALID_REQUEST, request
        assert response.error_message
        assert pinning.read_next_controller(pinned.zk) is None


def test_clients_that_do_not_know_pin_controller_keep_working(pinned: Pinned) -> None:
    import confluent_kafka.admin as ck_admin
    from kafka import KafkaAdminClient

    bootstrap = pinned.cluster.bootstrap_servers
    kcat = subprocess.run(
        ["kcat", "-b", bootstrap, "-L", "-J"], capture_output=True, text=True, timeout=30
    )
    assert kcat.returncode == 0, kcat.stderr
    assert "pinning" in {t["topic"] for t in json.loads(kcat.stdout)["topics"]}
    librdkafka = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
    description = librdkafka.describe_cluster().result(10)
    assert len(description.nodes) == len(BROKERS)
    assert description.controller.id == pinned.controller()
    legacy = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert "pinning" in legacy.list_topics()
    finally:
        legacy.close()


# ----------------------------------------------------------------------------- the KIP's gotchas


def stage_x(pinned: Pinned) -> KazooClient:
    """Pin absent broker 9 and play it: a session that announces itself ready."""
    pinned.admin.pin_controller(ABSENT, allow_absent=True)
    session = connect(pinned.cluster.zk_connect or "", session_timeout_ms=SESSION_MS)
    assert pinning.announce_ready_to_serve(session, ABSENT)
    return session


def test_gotcha_a_the_controller_resigns_as_x_crashes(pinned: Pinned) -> None:
    pinned.wait_live_controller(5)
    close_client(stage_x(pinned))  # x announces itself and crashes at once
    pinned.wait_live_controller(5)
    time.sleep(0.5)
    assert pinned.controller() in pinned.alive()


def test_gotcha_ii_nobody_but_x_elects_while_x_is_ready(pinned: Pinned) -> None:
    pinned.wait_live_controller(5)
    x_session = stage_x(pinned)
    pinned.wait(lambda: pinned.controller() is None, 5, "the controller resigns for x")
    time.sleep(1.0)
    assert pinned.controller() is None  # four live brokers, all abstaining for x
    close_client(x_session)  # x dies: its ready node vanishes, everybody joins
    assert pinned.wait(lambda: pinned.controller() is not None, 5, "re-election") < 2.0
    pinned.wait_live_controller(1)


def test_gotcha_iii_brokers_that_missed_the_ready_node_end_with_one_controller(
    pinned: Pinned,
) -> None:
    controller = pinned.wait_live_controller(5)
    asleep = [b for b in BROKERS if b != controller][:2]
    for b in asleep:  # these hear nothing while x appears, the controller resigns, x dies
        os.kill(pinned.cluster.brokers[b].pid, signal.SIGSTOP)  # type: ignore[arg-type]
    try:
        x_session = stage_x(pinned)
        pinned.wait(lambda: pinned.controller() is None, 5, "the controller resigns for x")
        close_client(x_session)
        time.sleep(0.3)  # the awake brokers elect now; the sleepers wake into stale events
    finally:
        for b in asleep:
            os.kill(pinned.cluster.brokers[b].pid, signal.SIGCONT)  # type: ignore[arg-type]
    first = pinned.wait_live_controller(5)
    time.sleep(1.0)
    assert pinned.controller() == first  # exactly one, and it stays
    check_never_two_acting(pinned.cluster, pinned.killed_at)


# ----------------------------------------------------------------------------- randomized


def random_run(pinned: Pinned, seed: int, steps: int) -> dict[str, int]:
    rng = random.Random(seed)
    bound_s = SESSION_MS / 1000 + 6  # a session expiry, then an election, on a busy machine
    counts: dict[str, int] = {}
    pin: int | None = None
    for step in range(steps):
        alive = pinned.alive()
        down = [b for b in BROKERS if b not in alive]
        choices = ["pin", "pin", "unpin"]
        if len(alive) > 1:
            choices += ["kill", "kill", "stop"]
        if down:
            choices += ["start", "start"]
        op = rng.choice(choices)
        counts[op] = counts.get(op, 0) + 1
        if op == "pin":
            pin = rng.choice([*BROKERS, ABSENT])
            pinned.admin.pin_controller(pin, allow_absent=True)
        elif op == "unpin":
            pin = None
            pinned.admin.unpin_controller()
        elif op == "kill":
            pinned.kill(rng.choice(alive))
        elif op == "stop":
            pinned.cluster.stop_broker(rng.choice(alive))
        else:
            pinned.start(rng.choice(down))
        where = f"seed {seed} step {step} ({op})"
        controller = pinned.wait_live_controller(bound_s)
        assert pinned.cluster.brokers[controller].is_running(), where
        if pin in pinned.alive():
            pinned.wait(lambda p=pin: pinned.controller() == p, bound_s, f"pin in force, {where}")
    return counts


def test_random_pins_unpins_kills_and_restarts_always_find_one_controller(pinned: Pinned) -> None:
    counts = random_run(pinned, seed=39, steps=8)
    assert counts.get("kill", 0) + counts.get("stop", 0) >= 2
    check_never_two_acting(pinned.cluster, pinned.killed_at)


@pytest.mark.slow
def test_random_long(pinned: Pinned) -> None:
    random_run(pinned, seed=3939, steps=60)
    check_never_two_acting(pinned.cluster, pinned.killed_at)


# ----------------------------------------------------------------------------- command line


def epochlog(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "epochlog", *args], capture_output=True, text=True, timeout=120
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_the_controller_commands(pinned: Pinned) -> None:
    bootstrap = ["--bootstrap-server", pinned.cluster.bootstrap_servers]
    x = other_than(pinned.wait_live_controller(5))
    pin = epochlog("controller", "pin", str(x), *bootstrap)
    assert f"broker {x} is the controller" in pin.stdout
    show = json.loads(epochlog("controller", "show", "--json", *bootstrap).stdout)
    assert show == {
        "controller": x,
        "pinned": x,
        "ready": x,
        "pinned_registered": True,
        "state": "in force",
    }
    assert f"pinned to broker {x} (in force)" in epochlog("controller", "show", *bootstrap).stdout
    status = epochlog("status", "--zookeeper", pinned.cluster.zk_connect or "")
    assert f"pinned to broker {x} (in force)" in status.stdout
    refused = epochlog("controller", "pin", str(ABSENT), *bootstrap, check=False)
    assert refused.returncode == 2 and "--allow-absent" in refused.stderr
    absent = epochlog("controller", "pin", str(ABSENT), "--allow-absent", *bootstrap)
    assert "not registered" in absent.stdout
    for bad, message in (
        (["controller", "pin", *bootstrap], "broker ID or --auto"),
        (["controller", "pin", "2", "--auto", *bootstrap], "broker ID or --auto"),
        (["controller", "pin", "--auto", "--allow-absent", *bootstrap], "--allow-absent"),
        (["controller", "pin", "-4", *bootstrap], ">= 0"),
    ):
        result = epochlog(*bad, check=False)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "unpinned" in epochlog("controller", "unpin", *bootstrap).stdout
    status_json = epochlog("status", "--json", "--zookeeper", pinned.cluster.zk_connect or "")
    assert json.loads(status_json.stdout)["pinned_controller"] is None


def test_every_controllership_so_far_was_alone(pinned: Pinned) -> None:
    pinned.wait_live_controller(5)
    intervals, epochs = acting_intervals(pinned.cluster, pinned.killed_at)
    assert len(intervals) >= 10 and len(epochs) >= 10, intervals  # it moved many times
    ends = {end for *_, end in intervals}
    assert {"killed", "broker shutting down"} <= ends, intervals
    check_never_two_acting(pinned.cluster, pinned.killed_at)
