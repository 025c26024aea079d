"""Controller election for one broker, and KIP-39's pin.

`ControllerElector` watches three znodes: `/controller`, `/admin/next_controller` (the pin) and
`/admin/ready_to_serve_as_controller` (the ready node). Every change only records what it saw
and asks for a reconciliation; one task at a time then runs `pinning.elector_steps` on the
current view and does the steps: the pinned broker announces itself ready (and withdraws when
the pin moves or goes); a controller resigns cleanly when another broker is ready (it finishes
its current event, stops, then deletes /controller with a fenced write); a broker joins an
election only when /controller is absent and the ready node is absent or its own, and the
election multi itself checks that (`pinning.try_elect_when_allowed`), so a broker whose view of
the ready node lags cannot win against the pin. Steps are level-triggered: a failed one (a
ZooKeeper disconnection) is retried after a short backoff from the then-current view.

A controller never outlives its ephemeral node: when /controller names another broker, or the
session that owned it is lost, this broker stops its controller; a deposed controller notices
through its first fenced write and stops the same way. On shutdown the broker withdraws its
ready node and resigns, so the next controller is elected at once rather than when the session
closes. (What the broker's handlers call is in `node/controller_gateway.py`.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState

from epochlog.config.broker import BrokerConfig
from epochlog.controller.controller import Controller
from epochlog.zk import controller_zk as zkc
from epochlog.zk import pinning
from epochlog.zk.pinning import ElectorStep, ElectorView
from epochlog.zk.session import WatchHandle, add_state_listener_on_loop, run_blocking
from epochlog.zk.watches import watch_controller, watch_next_controller, watch_ready_to_serve

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long a resigning controller lets its current event run before it stops anyway.
RESIGN_DRAIN_TIMEOUT_S = 5.0
# Backoff before retrying steps that failed (ZooKeeper unreachable for a moment).
RETRY_BACKOFF_S = 0.5


class ControllerElector:
    def __init__(self, broker_id: int, zk: KazooClient, config: BrokerConfig) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.config = config
        self.controller: Controller | None = None
        # what the watches last delivered (None: the znode is absent)
        self.controller_id: int | None = None
        self.pinned: int | None = None
        self.ready: int | None = None
        self.holding_ready = False  # the ready node is this session's
        self._watches: list[WatchHandle] = []
        self._lock = asyncio.Lock()
        self._stopped = False
        self._listener: Any = None
        self._dirty = False
        self._runner: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()  # strong references until done
        # Told every controller id /controller shows (None: none), so the broker's requests to
        # the controller (AlterPartition) follow a move at once, before any UpdateMetadata.
        self.on_controller_change: Callable[[int | None], None] | None = None

    @property
    def active_controller(self) -> Controller | None:
        c = self.controller
        return c if c is not None and c.is_active else None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._listener = add_state_listener_on_loop(self.zk, loop, self._on_session_state)
        # The pin's watches first: the first election already knows the ready node.
        for watch, callback in (
            (watch_next_controller, self._on_pinned),
            (watch_ready_to_serve, self._on_ready),
            (watch_controller, self._on_controller),
        ):
            self._watches.append(await run_blocking(watch, self.zk, loop, callback))

    def may_join(self) -> bool:
        """Whether this broker takes part in elections now (KIP-39: not while another broker
        is ready to serve as controller)."""
        return not self._stopped and pinning.may_join_election(self.ready, self.broker_id)

    def view(self) -> ElectorView:
        return ElectorView(
            broker_id=self.broker_id,
            controller=self.controller_id,
            acting=self.active_controller is not None,
            pinned=self.pinned,
            ready=self.ready,
            holding_ready=self.holding_ready,
        )

    # ------------------------------------------------------------------------- watches

    def _on_controller(self, controller_id: int | None) -> None:
        self.controller_id = controller_id
        if self.on_controller_change is not None:
            self.on_controller_change(controller_id)
        self._reconcile_soon()

    def _on_pinned(self, pinned: int | None) -> None:
        self.pinned = pinned
        self._reconcile_soon()

    def _on_ready(self, ready: int | None) -> None:
        self.ready = ready
        if ready != self.broker_id:
            self.holding_ready = False
        self._reconcile_soon()

    def _on_session_state(self, state: KazooState) -> None:
        if state == KazooState.LOST:
            # The ephemerals (/controller, the ready node) went with the session: stop at once.
            self.holding_ready = False
            self._in_background(self._resigned())
        elif state == KazooState.CONNECTED:
            self._reconcile_soon()

    # ------------------------------------------------------------------------- reconciling

    def _reconcile_soon(self) -> None:
        if self._stopped:
            return
        self._dirty = True
        if self._runner is None or self._runner.done():
            self._runner = asyncio.get_running_loop().create_task(
                self._reconcile_while_dirty(), name=f"elector {self.broker_id}"
            )

    async def _reconcile_while_dirty(self) -> None:
        while self._dirty and not self._stopped:
            self._dirty = False
            try:
                async with self._lock:
                    await self._reconcile()
            except Exception:
                log.exception("broker %d: election step failed; retrying", self.broker_id)
                self._dirty = True
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def _reconcile(self) -> None:
        for step in pinning.elector_steps(self.view()):
            if self._stopped:
                return
            if step is ElectorStep.ANNOUNCE_READY:
                self.holding_ready = await run_blocking(
                    pinning.announce_ready_to_serve, self.zk, self.broker_id
                )
                if self.holding_ready:
                    log.info("broker %d is ready to serve as the pinned controller", self.broker_id)
            elif step is ElectorStep.WITHDRAW_READY:
                await run_blocking(pinning.withdraw_ready_to_serve, self.zk)
                self.holding_ready = False
                log.info("broker %d withdrew its ready-to-serve node", self.broker_id)
            elif step is ElectorStep.STOP_CONTROLLER:
                await self._stop_controller(f"the controller node names {self.controller_id}")
            elif step is ElectorStep.RESIGN:
                await self._resign(f"broker {self.ready} is ready to serve as controller")
            elif step is ElectorStep.ELECT:
                await self._elect()

    async def _elect(self) -> None:
        result = await run_blocking(pinning.try_elect_when_allowed, self.zk, self.broker_id)
        if result is None:
            return
        ready = await run_blocking(pinning.read_ready_to_serve, self.zk)
        if pinning.should_resign(ready, self.broker_id) and self.pinned != self.broker_id:
            # a node of ours adopted while another broker is ready: hand it over unused
            log.info("broker %d resigns at once: broker %s is ready", self.broker_id, ready)
            await run_blocking(zkc.FencedWriter.for_election(self.zk, result).resign)
            return
        controller = Controller(
            self.broker_id, self.zk, result, self.config, on_resign=self._on_resign
        )
        self.controller = controller
        try:
            await controller.start()
        except Exception:
            log.exception("controller startup failed; resigning")
            await self._resign("startup failed")

    async def _resign(self, reason: str) -> None:
        """Step down cleanly: finish the current event, stop, then delete /controller (fenced,
        so a controller already deposed deletes nothing) for the next election to start."""
        controller, self.controller = self.controller, None
        if controller is None:
            return
        await controller.stop_after_current_event(RESIGN_DRAIN_TIMEOUT_S)
        log.info("broker %d stops being the controller: %s", self.broker_id, reason)
        with contextlib.suppress(zkc.ControllerMovedError):
            await run_blocking(controller.writer.resign)

    def _on_resign(self) -> None:
        self._in_background(self._resigned())

    def _in_background(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _resigned(self) -> None:
        async with self._lock:
            await self._stop_controller("deposed")

    async def _stop_controller(self, reason: str) -> None:
        controller, self.controller = self.controller, None
        if controller is not None:
            await controller.stop()
            log.info("broker %d stops being the controller: %s", self.broker_id, reason)

    async def stop(self) -> None:
        """Leave: withdraw the ready node, resign, stop watching."""
        self._stopped = True
        for handle in self._watches:
            handle.cancel()
        if self._listener is not None:
            self.zk.remove_listener(self._listener)
        async with self._lock:
            if self.holding_ready:
                try:
                    await run_blocking(pinning.withdraw_ready_to_serve, self.zk)
                except Exception as exc:  # the session closing takes it with it anyway
                    log.warning("could not withdraw the ready-to-serve node: %s", exc)
                self.holding_ready = False
            if self.active_controller is not None:
                try:
                    await self._resign("broker shutting down")
                except Exception as exc:  # the session closing deletes /controller anyway
                    log.warning("could not resign cleanly: %s", exc)
            await self._stop_controller("broker shutting down")
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
