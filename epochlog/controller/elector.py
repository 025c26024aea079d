"""Controller election for one broker, and the gateway the broker's handlers call.

`ControllerElector` watches `/controller`. When the node is absent it runs `try_elect`; when it
wins it starts a `Controller`; when the node names another broker, or the session that owned it
is lost, it stops its controller (a controller must never outlive its ephemeral node). A deposed
controller notices through its first fenced write and resigns the same way. Decisions about
*whether* to join an election live in one place, `may_join`, which KIP-39 pinning extends.

`ControllerGateway` is what `Broker` calls for CreateTopics, DeleteTopics, ControlledShutdown
and AlterPartition: it answers them with this process's controller while it is active.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kazoo.client import KazooClient, KazooState

from epochlog.broker.config import BrokerConfig
from epochlog.controller.controller import Controller
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode
from epochlog.zk import controller_zk as zkc
from epochlog.zk.session import WatchHandle, add_state_listener_on_loop
from epochlog.zk.watches import watch_controller

log = logging.getLogger(__name__)


class ControllerElector:
    def __init__(self, broker_id: int, zk: KazooClient, config: BrokerConfig) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.config = config
        self.controller: Controller | None = None
        self._watch: WatchHandle | None = None
        self._lock = asyncio.Lock()
        self._stopped = False
        self._listener: Any = None

    @property
    def active_controller(self) -> Controller | None:
        c = self.controller
        return c if c is not None and c.is_active else None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._listener = add_state_listener_on_loop(self.zk, loop, self._on_session_state)
        self._watch = watch_controller(
            self.zk, loop, lambda cid: loop.create_task(self._on_controller(cid))
        )

    def may_join(self) -> bool:
        """Whether this broker takes part in elections (KIP-39 narrows this)."""
        return not self._stopped

    async def _on_controller(self, controller_id: int | None) -> None:
        async with self._lock:
            if self._stopped:
                return
            if controller_id is not None and controller_id != self.broker_id:
                await self._stop_controller("another broker is the controller")
                return
            if controller_id == self.broker_id and self.active_controller is not None:
                return
            if controller_id is None:
                await self._stop_controller("the controller node is gone")
                if not self.may_join():
                    return
            result = await asyncio.to_thread(zkc.try_elect, self.zk, self.broker_id)
            if result is None:
                return
            controller = Controller(
                self.broker_id, self.zk, result, self.config, on_resign=self._on_resign
            )
            self.controller = controller
            try:
                await controller.start()
            except Exception:
                log.exception("controller startup failed; resigning")
                await self._stop_controller("startup failed")

    def _on_resign(self) -> None:
        asyncio.get_running_loop().create_task(self._resigned())

    async def _resigned(self) -> None:
        async with self._lock:
            await self._stop_controller("deposed")

    def _on_session_state(self, state: KazooState) -> None:
        if state == KazooState.LOST:
            # The ephemeral /controller went with the session: stop acting at once.
            asyncio.get_running_loop().create_task(self._resigned())

    async def _stop_controller(self, reason: str) -> None:
        controller, self.controller = self.controller, None
        if controller is not None:
            log.info("broker %d stops being the controller: %s", self.broker_id, reason)
            await controller.stop()

    async def stop(self) -> None:
        self._stopped = True
        if self._watch is not None:
            self._watch.cancel()
        if self._listener is not None:
            self.zk.remove_listener(self._listener)
        async with self._lock:
            await self._stop_controller("broker shutting down")


class ControllerGateway:
    """The broker's handlers reach the controller through this (see broker/collaborators.py)."""

    def __init__(self, elector: ControllerElector) -> None:
        self.elector = elector

    @property
    def is_active(self) -> bool:
        return self.elector.active_controller is not None

    def _controller(self) -> Controller:
        controller = self.elector.active_controller
        if controller is None:
            raise RuntimeError("not the controller")
        return controller

    async def create_topics(self, request: Any, version: int) -> Any:
        return await self._controller().create_topics(request, version)

    async def delete_topics(self, request: Any, version: int) -> Any:
        names = [t.name for t in request.topics] if version >= 6 else list(request.topic_names)
        errors = await self._controller().delete_topics([n for n in names if n is not None])
        return m.DeleteTopicsResponse(
            responses=[
                m.DeleteTopicsResponse.DeletableTopicResult(
                    name=name, error_code=errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                for name in names
            ]
        )

    async def controlled_shutdown(self, request: Any, version: int) -> Any:
        error, remaining = await self._controller().controlled_shutdown(
            request.broker_id, request.broker_epoch if version >= 2 else -1
        )
        return m.ControlledShutdownResponse(
            error_code=error,
            remaining_partitions=[
                m.ControlledShutdownResponse.RemainingPartition(topic_name=t, partition_index=p)
                for t, p in remaining
            ],
        )

    async def alter_partition(self, request: Any, version: int) -> Any:
        return await self._controller().alter_partition(request, version)
