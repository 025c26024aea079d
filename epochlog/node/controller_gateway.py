"""What the broker's handlers reach the controller through, in this process (the collaborators
of `broker/collaborators.py` that the controller side implements).

`ControllerGateway` is what `Broker` calls for CreateTopics, DeleteTopics, ControlledShutdown,
AlterPartition, CreatePartitions and ElectLeaders: it answers them with this process's controller
while it is active; a controller deposed or stopped while a request waited answers
NOT_CONTROLLER.
`ZkControllerPins` answers PinController (describe, pin, unpin) through ZooKeeper; any broker can.
`ControllerLocator` tells the metadata cache the controller /controller names, with where it
listens (read from its /brokers/ids entry when the cache does not list it yet).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, ZookeeperError

from epochlog.broker.collaborators import CollaboratorError
from epochlog.broker.metadata_cache import (
    NO_CONTROLLER,
    BrokerEndpoint,
    LiveBroker,
    MetadataCache,
)
from epochlog.controller.controller import Controller, ControllerMovedError
from epochlog.controller.elector import ControllerElector
from epochlog.controller.partition_admin import ElectionType
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.messages.pin_controller import ControllerEventRecord, PinStatus
from epochlog.zk import controller_zk as zkc
from epochlog.zk import pinning
from epochlog.zk.session import run_blocking
from epochlog.zk.znodes import BROKER_IDS_PATH, decode_broker_registration

log = logging.getLogger(__name__)

T = TypeVar("T")


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
            raise CollaboratorError(ErrorCode.NOT_CONTROLLER, "not the controller")
        return controller

    async def _ask(self, call: Callable[[Controller], Awaitable[T]]) -> T:
        """Run `call` on the active controller; a controller deposed or stopped while the
        request waited raises CollaboratorError(NOT_CONTROLLER), which the handler answers."""
        try:
            return await call(self._controller())
        except (ControllerMovedError, zkc.ControllerMovedError) as exc:
            raise CollaboratorError(ErrorCode.NOT_CONTROLLER, str(exc)) from exc

    async def create_topics(self, request: Any, version: int) -> Any:
        return await self._ask(lambda c: c.create_topics(request, version))

    async def delete_topics(self, request: Any, version: int) -> Any:
        names = [t.name for t in request.topics] if version >= 6 else list(request.topic_names)
        errors = await self._ask(lambda c: c.delete_topics([n for n in names if n is not None]))
        return m.DeleteTopicsResponse(
            responses=[
                m.DeleteTopicsResponse.DeletableTopicResult(
                    name=name, error_code=errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                for name in names
            ]
        )

    async def controlled_shutdown(self, request: Any, version: int) -> Any:
        error, remaining = await self._ask(
            lambda c: c.controlled_shutdown(
                request.broker_id, request.broker_epoch if version >= 2 else -1
            )
        )
        return m.ControlledShutdownResponse(
            error_code=error,
            remaining_partitions=[
                m.ControlledShutdownResponse.RemainingPartition(topic_name=t, partition_index=p)
                for t, p in remaining
            ],
        )

    async def alter_partition(self, request: Any, version: int) -> Any:
        return await self._ask(lambda c: c.alter_partition(request, version))

    async def create_partitions(self, request: Any, version: int) -> Any:
        return await self._ask(lambda c: c.create_partitions(request))

    async def elect_leaders(
        self, partitions: list[tuple[str, int]] | None, election_type: int, timeout_ms: int
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        outcomes = await self._ask(
            lambda c: c.elect_leaders(partitions, ElectionType(election_type), timeout_ms)
        )
        return {tp: (o.error, o.message) for tp, o in outcomes.items()}

    async def alter_partition_reassignments(self, request: Any, version: int) -> Any:
        return await self._ask(lambda c: c.alter_partition_reassignments(request, version))

    async def list_partition_reassignments(self, request: Any, version: int) -> Any:
        return await self._ask(lambda c: c.list_partition_reassignments(request, version))

    def recent_events(self) -> list[ControllerEventRecord] | None:
        controller = self.elector.active_controller
        return None if controller is None else controller.recent_events.records()


class ZkControllerPins:
    """PinController (KIP-39) through this broker's ZooKeeper session: any broker answers it.

    Each call returns the state after it. Refusals raise `CollaboratorError` with the Kafka error
    to answer (BROKER_NOT_AVAILABLE for a broker that is not registered, unless allowed)."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    async def describe(self) -> PinStatus:
        return await run_blocking(pinning.read_pin_status, self.zk)

    async def pin(self, broker_id: int | None, allow_absent: bool) -> PinStatus:
        """Pin `broker_id`, or with None the live broker leading the fewest partitions."""

        def pin() -> PinStatus:
            target = broker_id
            if target is None:
                target = pinning.auto_pin_target(self.zk)
                if target is None:
                    raise CollaboratorError(
                        ErrorCode.BROKER_NOT_AVAILABLE, "no broker is registered to pin"
                    )
            elif not allow_absent and self.zk.exists(f"{BROKER_IDS_PATH}/{target}") is None:
                raise CollaboratorError(
                    ErrorCode.BROKER_NOT_AVAILABLE,
                    f"broker {target} is not registered; to pin it anyway until it starts, "
                    "allow an absent broker (--allow-absent)",
                )
            pinning.pin_controller(self.zk, target)
            log.info("controller pinned to broker %d", target)
            return pinning.read_pin_status(self.zk)

        return await run_blocking(pin)

    async def unpin(self) -> PinStatus:
        def unpin() -> PinStatus:
            if pinning.unpin_controller(self.zk):
                log.info("controller unpinned")
            return pinning.read_pin_status(self.zk)

        return await run_blocking(unpin)


def read_live_broker(zk: KazooClient, broker_id: int) -> LiveBroker | None:
    """The broker's /brokers/ids entry as the metadata cache lists it (None: not registered)."""
    path = f"{BROKER_IDS_PATH}/{broker_id}"
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return None
    registration = decode_broker_registration(broker_id, data, path)
    return LiveBroker(
        broker_id,
        tuple(BrokerEndpoint(e.listener, e.host, e.port) for e in registration.endpoints),
        registration.rack,
        stat.czxid,
    )


class ControllerLocator:
    """Follows /controller for the metadata cache (the elector's watch calls `changed`).

    The id is learned at once (AlterPartition follows a move before any UpdateMetadata). A
    controller the cache does not list yet (every broker of a starting cluster, until the new
    controller's first UpdateMetadata) is looked up in /brokers/ids, so that Metadata names it
    together with its endpoint: a client told of a controller it cannot locate (librdkafka)
    holds its CreateTopics until the request times out."""

    def __init__(self, zk: KazooClient, cache: MetadataCache, own_broker_id: int) -> None:
        self.zk = zk
        self.cache = cache
        self.own_broker_id = own_broker_id
        self._lookups: set[asyncio.Task[None]] = set()  # strong references until done
        self._locating: asyncio.Task[None] | None = None

    def changed(self, controller_id: int | None) -> None:
        self.cache.learn_controller(controller_id)
        if (
            controller_id is None
            or controller_id == self.own_broker_id
            or self.cache.is_alive(controller_id)
        ):
            return
        task = asyncio.get_running_loop().create_task(self._locate(controller_id))
        self._lookups.add(task)
        task.add_done_callback(self._lookups.discard)

    async def locate(self) -> None:
        """Asked by a Metadata request while the cache names no controller a client could find
        (this broker's /controller watch has not fired yet, or the registration read is still
        on its way): read /controller and its registration now. librdkafka skips a refresh
        while another is in flight, so one answer of -1 could leave its CreateTopics waiting
        for its request timeout. Concurrent callers share one read."""
        if self._locating is None or self._locating.done():
            self._locating = asyncio.get_running_loop().create_task(self._read_controller())
        await asyncio.shield(self._locating)

    async def _read_controller(self) -> None:
        def read() -> tuple[int, LiveBroker | None] | None:
            controller_id = zkc.read_controller(self.zk)
            if controller_id is None:
                return None
            own = controller_id == self.own_broker_id
            return controller_id, None if own else read_live_broker(self.zk, controller_id)

        try:
            found = await run_blocking(read)
        except (ZookeeperError, ValueError) as exc:
            log.info("cannot read the controller from ZooKeeper: %s", exc)
            return
        if found is None:
            return
        controller_id, registration = found
        # The watch is the authority: a controller it delivered meanwhile is not overwritten.
        if self.cache.controller_id in (NO_CONTROLLER, controller_id):
            self.cache.learn_controller(controller_id, registration)

    async def _locate(self, controller_id: int) -> None:
        try:
            registered = await run_blocking(read_live_broker, self.zk, controller_id)
        except (ZookeeperError, ValueError) as exc:  # UpdateMetadata will tell it anyway
            log.info("cannot read controller %d's registration: %s", controller_id, exc)
            return
        if registered is not None and self.cache.controller_id == controller_id:
            self.cache.learn_controller(controller_id, registered)
