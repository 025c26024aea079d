"""KIP-39 election logic against a real ZooKeeper: several brokers' electors (each with its own
session and a real `Controller`) in one process, so that crashes, lagging views and the KIP's
gotchas can be staged exactly, and a randomized run can check thousands of moments.

"Acting" means an elector's controller is active. Two can be active at once only for the moment
a deposed one has not yet noticed (its session expired on the server first); the monitor then
checks that every one but the newest is fenced: a write through its `FencedWriter` is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient, KazooState

from epochlog.config.broker import BrokerConfig
from epochlog.controller.elector import ControllerElector
from epochlog.zk import controller_zk as zkc
from epochlog.zk import pinning
from epochlog.zk.cluster import ensure_top_level_paths
from epochlog.zk.session import close_client, connect, force_session_expiry
from epochlog.zk.znodes import READY_TO_SERVE_PATH

SESSION_MS = 2000


class Electors:
    """Brokers reduced to their electors; each start is a new session (a new generation)."""

    def __init__(self, hosts: str) -> None:
        self.hosts = hosts
        self.electors: dict[int, ControllerElector] = {}
        self.clients: dict[int, KazooClient] = {}
        self.admin = connect(hosts, session_timeout_ms=SESSION_MS)
        ensure_top_level_paths(self.admin)
        self.fence_checks = 0  # moments two controllers were active and the older was fenced
        self.violations: list[str] = []
        self._monitor: asyncio.Task[None] | None = None

    async def start(self, broker_id: int, *, blind: bool = False) -> ControllerElector:
        """`blind`: this broker never learns of the ready node (the KIP's gotcha III)."""
        client = await asyncio.to_thread(connect, self.hosts, session_timeout_ms=SESSION_MS)
        config = BrokerConfig.from_dict(
            {
                "broker.id": broker_id,
                "zookeeper.connect": self.hosts,
                "auto.leader.rebalance.enable": False,
            }
        )
        elector = ControllerElector(broker_id, client, config)
        if blind:
            elector._on_ready = lambda ready: None  # type: ignore[method-assign]
        self.electors[broker_id], self.clients[broker_id] = elector, client
        await elector.start()
        return elector

    async def crash(self, broker_id: int) -> None:
        """The session ends first (ephemerals go at once), then the process's remains stop."""
        elector, client = self.electors.pop(broker_id), self.clients.pop(broker_id)
        await asyncio.to_thread(close_client, client)
        await elector.stop()

    async def stop(self, broker_id: int) -> None:
        """A clean shutdown: withdraw, resign, then close the session."""
        elector, client = self.electors.pop(broker_id), self.clients.pop(broker_id)
        await elector.stop()
        await asyncio.to_thread(close_client, client)

    async def expire(self, broker_id: int) -> None:
        """The session expires under a live broker, which carries on with a new session."""
        await asyncio.to_thread(
            force_session_expiry, self.clients[broker_id], wait_new_session_s=30
        )

    async def pause(self, broker_id: int) -> None:
        """Like a process paused past its session timeout: it hears nothing (watches and
        session events), and its session expires, while it still believes what it did."""
        elector = self.electors[broker_id]
        for handle in elector._watches:
            handle.cancel()
        elector._watches = []
        elector.zk.remove_listener(elector._listener)
        await asyncio.to_thread(force_session_expiry, self.clients[broker_id])

    async def resume(self, broker_id: int) -> None:
        """The paused process runs again and hears, first of all, that its session was lost."""
        elector = self.electors[broker_id]
        elector._on_session_state(KazooState.LOST)
        await elector.start()

    def acting(self) -> list[ControllerElector]:
        return [e for e in self.electors.values() if e.active_controller is not None]

    def controller(self) -> int | None:
        return zkc.read_controller(self.admin)

    async def wait(self, condition: Callable[[], bool], timeout_s: float, what: str) -> float:
        started = time.monotonic()
        while not condition():
            if time.monotonic() - started > timeout_s:
                raise AssertionError(f"not within {timeout_s} s: {what}; {self.describe()}")
            await asyncio.sleep(0.02)
        return time.monotonic() - started

    def describe(self) -> str:
        views = {b: e.view() for b, e in self.electors.items()}
        return f"/controller={self.controller()} views={views}"

    async def settled(self, timeout_s: float = 10.0) -> int:
        """Until exactly one running broker acts and /controller names it; returns its id."""

        def one() -> bool:
            acting = self.acting()
            return len(acting) == 1 and self.controller() == acting[0].broker_id

        await self.wait(one, timeout_s, "exactly one controller")
        return self.acting()[0].broker_id

    # -- the monitor ----------------------------------------------------------------------

    def start_monitor(self) -> None:
        self._monitor = asyncio.get_running_loop().create_task(self._watch_acting())

    async def _watch_acting(self) -> None:
        while True:
            await self.check_fencing()
            await asyncio.sleep(0.01)

    async def check_fencing(self) -> None:
        """When several act, every one but the newest must be refused a write."""
        acting = self.acting()
        if len(acting) < 2:
            return
        newest = max(acting, key=lambda e: e.active_controller.epoch)  # type: ignore[union-attr]
        for elector in acting:
            controller = elector.active_controller
            if elector is newest or controller is None:
                continue
            try:
                await asyncio.to_thread(controller.writer.commit, [])
            except zkc.ControllerMovedError:
                self.fence_checks += 1
            else:
                if controller.is_active:
                    self.violations.append(
                        f"broker {elector.broker_id} (epoch {controller.epoch}) could "
                        f"still write while broker {newest.broker_id} acted"
                    )

    async def close(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
        for broker_id in list(self.electors):
            await self.stop(broker_id)
        close_client(self.admin)


@pytest.fixture
async def electors(zk_hosts: str):
    group = Electors(zk_hosts)
    yield group
    await group.close()


def ready_node(client: KazooClient) -> int | None:
    return pinning.read_ready_to_serve(client)


# ----------------------------------------------------------------------------- the guard


def test_the_election_multi_refuses_every_broker_but_the_ready_one(zk_client_factory) -> None:
    admin, x, y = zk_client_factory(), zk_client_factory(), zk_client_factory()
    ensure_top_level_paths(admin)
    assert pinning.announce_ready_to_serve(x, 7)
    stale_view = pinning.ElectionGuard(None)  # y believes there is no ready node
    assert zkc.try_elect(y, 2, guard=stale_view.add_to) is None
    assert pinning.try_elect_when_allowed(y, 2) is None
    assert zkc.read_controller(admin) is None  # nothing was created
    assert admin.exists(READY_TO_SERVE_PATH) is not None  # nor was the ready node touched
    # x's own guard holds the version it read: a stale one loses too
    assert zkc.try_elect(x, 7, guard=pinning.ElectionGuard(5).add_to) is None
    won = pinning.try_elect_when_allowed(x, 7)
    assert won is not None and zkc.read_controller(admin) == 7
    # without a ready node anybody may win, and the guard leaves no node behind
    zkc.FencedWriter.for_election(x, won).resign()
    pinning.withdraw_ready_to_serve(x)
    assert pinning.try_elect_when_allowed(y, 2) is not None
    assert zkc.read_controller(admin) == 2 and admin.exists(READY_TO_SERVE_PATH) is None


# ----------------------------------------------------------------------------- pin, move, unpin


async def test_pin_moves_unpin_frees_and_a_restart_of_x_takes_it_back(electors) -> None:
    for b in (1, 2, 3):
        await electors.start(b)
    first = await electors.settled()
    x = 3 if first != 3 else 2
    epoch_before = electors.acting()[0].active_controller.epoch
    await asyncio.to_thread(pinning.pin_controller, electors.admin, x)
    await electors.wait(lambda: electors.controller() == x, 5, f"controller moves to {x}")
    assert await electors.settled() == x
    assert ready_node(electors.admin) == x
    assert electors.acting()[0].active_controller.epoch == epoch_before + 1  # one election

    await electors.stop(x)  # a clean stop: withdraw, resign: another takes over at once
    other = await electors.settled(3)
    assert other != x
    await electors.start(x)  # the pin is in ZooKeeper: x announces itself and takes it back
    await electors.wait(lambda: electors.controller() == x, 5, "x takes the controller back")
    await electors.settled()

    await asyncio.to_thread(pinning.unpin_controller, electors.admin)
    await electors.wait(lambda: ready_node(electors.admin) is None, 5, "x withdraws")
    assert await electors.settled() == x  # unpinning moves nothing
    await electors.stop(x)
    successor = await electors.settled(3)
    await electors.start(x)
    await asyncio.sleep(1)
    assert electors.controller() == successor  # free election: no move back


async def test_a_pin_moved_to_another_broker_is_followed(electors) -> None:
    for b in (1, 2, 3):
        await electors.start(b)
    await electors.settled()
    for x in (2, 3, 1, 2):
        await asyncio.to_thread(pinning.pin_controller, electors.admin, x)
        await electors.wait(lambda x=x: electors.controller() == x, 5, f"moves to {x}")
        await electors.settled()
        await electors.wait(lambda x=x: ready_node(electors.admin) == x, 5, "ready node")


# ----------------------------------------------------------------------------- the KIP's gotchas


async def stage_x(electors: Electors, x: int) -> KazooClient:
    """Pin absent broker `x` and play its part: a session that announces itself ready."""
    await asyncio.to_thread(pinning.pin_controller, electors.admin, x)
    session = await asyncio.to_thread(connect, electors.hosts, session_timeout_ms=SESSION_MS)
    assert await asyncio.to_thread(pinning.announce_ready_to_serve, session, x)
    return session


@pytest.mark.parametrize("crash_delay_s", [0.0, 0.01, 0.05])
async def test_gotcha_a_the_controller_resigns_as_x_crashes(electors, crash_delay_s) -> None:
    for b in (1, 2, 3):
        await electors.start(b)
    await electors.settled()
    electors.start_monitor()
    x_session = await stage_x(electors, 9)
    await asyncio.sleep(crash_delay_s)
    await asyncio.to_thread(close_client, x_session)  # x crashes
    await electors.settled(5)
    assert electors.violations == []


async def test_gotcha_ii_nobody_elects_while_x_is_ready_and_all_do_when_it_dies(electors) -> None:
    for b in (1, 2, 3):
        await electors.start(b)
    await electors.settled()
    x_session = await stage_x(electors, 9)  # x is ready but never elects (say it is stuck)
    await electors.wait(lambda: electors.controller() is None, 5, "the controller resigns")
    await asyncio.sleep(1.0)
    assert electors.controller() is None and electors.acting() == []  # restricted to x
    await asyncio.to_thread(close_client, x_session)  # x dies: its ready node goes with it
    elapsed = await electors.wait(lambda: electors.controller() is not None, 3, "re-election")
    assert elapsed < 1.0
    await electors.settled()


async def test_gotcha_iii_brokers_that_do_not_know_the_ready_node_cannot_win(electors) -> None:
    await electors.start(1)
    await electors.start(2, blind=True)
    await electors.start(3, blind=True)
    electors.start_monitor()
    await electors.settled()
    x_session = await stage_x(electors, 9)
    # the controller resigns (if it is blind, the pin-aware broker's view did not matter: it
    # resigns only if it knows; a blind controller keeps the job, which is also one controller)
    await asyncio.sleep(1.0)
    holder = electors.controller()
    if holder is None:
        # blind brokers tried (their view says: no ready node) and the multi refused them
        assert electors.acting() == []
    else:
        assert holder in (2, 3) and [e.broker_id for e in electors.acting()] == [holder]
    await asyncio.to_thread(close_client, x_session)
    await electors.settled(3)
    assert electors.violations == []


async def test_gotcha_iii_blind_brokers_tried_and_were_refused(electors) -> None:
    """A pin-aware controller resigns for x; the blind ones jump into the election at once
    (for them the ready node does not exist) and the election multi refuses them."""
    await electors.start(1)
    await electors.settled()
    await electors.start(2, blind=True)
    await electors.start(3, blind=True)
    attempts: list[int] = []
    original = pinning.try_elect_when_allowed

    def counting(client: KazooClient, broker_id: int) -> zkc.ElectionResult | None:
        result = original(client, broker_id)
        if broker_id in (2, 3):
            attempts.append(broker_id)
        return result

    pinning.try_elect_when_allowed = counting  # type: ignore[assignment]
    try:
        x_session = await stage_x(electors, 9)
        await electors.wait(lambda: set(attempts) == {2, 3}, 5, "blind brokers try to elect")
        await asyncio.sleep(0.5)
        assert electors.controller() is None and electors.acting() == []
        await asyncio.to_thread(close_client, x_session)
        await electors.settled(3)
    finally:
        pinning.try_elect_when_allowed = original  # type: ignore[assignment]


async def test_x_expiring_under_a_live_broker_announces_again_and_returns(electors) -> None:
    for b in (1, 2, 3):
        await electors.start(b)
    await electors.settled()
    await asyncio.to_thread(pinning.pin_controller, electors.admin, 2)
    await electors.wait(lambda: electors.controller() == 2, 5, "moves to 2")
    electors.start_monitor()
    await electors.expire(2)  # /controller and the ready node vanish with the session
    await electors.wait(lambda: electors.controller() == 2, 10, "2 back after its new session")
    await electors.settled()
    assert ready_node(electors.admin) == 2
    assert electors.violations == []


async def test_a_deposed_controller_that_did_not_notice_can_write_nothing(electors) -> None:
    for b in (1, 2):
        await electors.start(b)
    old = await electors.settled()
    zombie = electors.electors[old].active_controller
    await electors.pause(old)
    await electors.wait(lambda: len(electors.acting()) == 2, 5, "a second acting controller")
    new = next(e for e in electors.acting() if e.broker_id != old).active_controller
    assert new.epoch > zombie.epoch and zombie.is_active  # it still believes
    with pytest.raises(zkc.ControllerMovedError):
        await asyncio.to_thread(zombie.writer.commit, [])
    with pytest.raises(zkc.ControllerMovedError):  # nor can it resign the new one's node
        await asyncio.to_thread(zombie.writer.resign)
    assert electors.controller() == new.broker_id
    await electors.resume(old)
    assert await electors.settled() == new.broker_id


# ----------------------------------------------------------------------------- randomized


async def run_random(electors: Electors, seed: int, steps: int) -> dict[str, int]:
    rng = random.Random(seed)
    ids = [1, 2, 3, 4]
    for b in ids:
        await electors.start(b)
    electors.start_monitor()
    counts: dict[str, int] = {}
    pinned: int | None = None
    for step in range(steps):
        running = sorted(electors.electors)
        down = [b for b in ids if b not in running]
        choices = ["pin", "unpin", "expire", "pause"]
        if len(running) > 1:
            choices += ["crash", "stop"]
        if down:
            choices += ["start", "start"]
        op = rng.choice(choices)
        counts[op] = counts.get(op, 0) + 1
        if op == "pin":
            pinned = rng.choice(ids + [9])  # 9 is never registered: a pending pin
            await asyncio.to_thread(pinning.pin_controller, electors.admin, pinned)
        elif op == "unpin":
            pinned = None
            await asyncio.to_thread(pinning.unpin_controller, electors.admin)
        elif op == "expire":
            await electors.expire(rng.choice(running))
        elif op == "pause":
            # the controller pauses past its session; another broker takes over meanwhile
            acting = electors.acting()
            if acting:
                paused = acting[0].broker_id
                await electors.pause(paused)
                if len(running) > 1:
                    with contextlib.suppress(AssertionError):
                        await electors.wait(
                            lambda p=paused: any(e.broker_id != p for e in electors.acting()),
                            3,
                            "a new controller beside the paused one",
                        )
                    await electors.check_fencing()
                await electors.resume(paused)
        elif op == "crash":
            await electors.crash(rng.choice(running))
        elif op == "stop":
            await electors.stop(rng.choice(running))
        else:
            await electors.start(rng.choice(down))
        if rng.random() < 0.5:
            await asyncio.sleep(rng.random() * 0.05)  # sometimes let the next op race this one
            continue
        where = f"seed {seed} step {step} after {op}"
        holder = await electors.settled(10)
        if pinned in electors.electors:
            await electors.wait(
                lambda target=pinned: electors.controller() == target, 10, f"pin, {where}"
            )
            holder = await electors.settled(10)
            assert holder == pinned, where
    await electors.settled(10)
    assert electors.violations == []
    counts["fenced"] = electors.fence_checks
    return counts


async def test_random_pins_unpins_crashes_and_restarts_keep_one_controller(electors) -> None:
    counts = await run_random(electors, seed=39, steps=50)
    assert counts["crash"] + counts["stop"] > 3 and counts["pin"] > 3 and counts["fenced"] > 3


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
async def test_random_long(electors, seed: int) -> None:
    await run_random(electors, seed=1000 + seed, steps=300)


async def test_a_controller_whose_start_failed_resigns_without_waiting_out_the_drain(
    electors, monkeypatch
) -> None:
    # A controller start that fails loading from ZooKeeper (ConnectionLoss under load) leaves no
    # event loop running; resigning must not wait for an event nobody will run. With that wait
    # (the drain timeout, made 60 s here) the next election came only after it.
    from kazoo.exceptions import ConnectionLoss

    from epochlog.controller import elector as elector_module
    from epochlog.controller.controller import Controller

    monkeypatch.setattr(elector_module, "RESIGN_DRAIN_TIMEOUT_S", 60.0)
    real_load = Controller._load
    failures = []

    async def load_failing_once(self: Controller) -> None:
        if not failures:
            failures.append(self.broker_id)
            raise ConnectionLoss()
        await real_load(self)

    monkeypatch.setattr(Controller, "_load", load_failing_once)
    await electors.start(1)
    assert await electors.settled(10) == 1
    assert failures == [1]
