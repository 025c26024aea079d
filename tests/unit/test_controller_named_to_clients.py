"""A Metadata response names a controller only together with where it listens.

Right after a cluster starts, every broker learns the controller from /controller before the
controller's first UpdateMetadata tells it the other brokers. A response naming controller 3
while listing only broker 1 left librdkafka waiting for a broker it could never find: its
CreateTopics got no answer for 30 s and the topic was never created."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kazoo.exceptions import NoNodeError

from epochlog.broker.handlers.metadata import controller_for_clients
from epochlog.broker.metadata_cache import NO_CONTROLLER, BrokerEndpoint, LiveBroker, MetadataCache
from epochlog.node.controller_gateway import ControllerLocator
from epochlog.zk.znodes import (
    BrokerRegistration,
    Endpoint,
    encode_broker_registration,
    encode_controller,
)

OWN_ID = 1
CONTROLLER_ID = 3
CONTROLLER = LiveBroker(CONTROLLER_ID, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9093),), None, 34)


def test_a_controller_learned_from_zookeeper_alone_is_not_named_to_clients() -> None:
    cache = MetadataCache()
    cache.learn_controller(CONTROLLER_ID)
    assert cache.controller_id == CONTROLLER_ID  # AlterPartition still follows it at once
    assert cache.controller_for_clients(OWN_ID) == NO_CONTROLLER


def test_a_controller_learned_with_its_registration_is_listed_and_named() -> None:
    cache = MetadataCache()
    cache.learn_controller(CONTROLLER_ID, CONTROLLER)
    assert cache.live_brokers() == [CONTROLLER]
    assert cache.controller_for_clients(OWN_ID) == CONTROLLER_ID


def test_this_broker_as_controller_is_named_without_a_registration() -> None:
    cache = MetadataCache()
    cache.learn_controller(OWN_ID)
    assert cache.controller_for_clients(OWN_ID) == OWN_ID


def test_no_controller_is_named_as_none() -> None:
    cache = MetadataCache()
    cache.learn_controller(None, CONTROLLER)
    assert cache.controller_for_clients(OWN_ID) == NO_CONTROLLER
    assert cache.live_brokers() == []


def test_a_registration_of_another_broker_is_not_taken_for_the_controller() -> None:
    cache = MetadataCache()
    cache.learn_controller(2, CONTROLLER)
    assert cache.live_brokers() == []
    assert cache.controller_for_clients(OWN_ID) == NO_CONTROLLER


class FakeZk:
    """/controller and /brokers/ids/<id> reads, with the controller and registrations given."""

    def __init__(self, registrations: dict[int, bytes], controller: int | None = None) -> None:
        self.registrations = registrations
        self.controller = controller
        self.reads: list[str] = []

    def get(self, path: str) -> tuple[bytes, Any]:
        self.reads.append(path)
        if path == "/controller":
            if self.controller is None:
                raise NoNodeError(path)
            return encode_controller(self.controller, 0), SimpleNamespace(czxid=50)
        broker_id = int(path.rsplit("/", 1)[1])
        if broker_id not in self.registrations:
            raise NoNodeError(path)
        return self.registrations[broker_id], SimpleNamespace(czxid=34)


def _registration(broker_id: int, port: int) -> bytes:
    return encode_broker_registration(
        BrokerRegistration(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", port),))
    )


def _follow(zk: FakeZk, cache: MetadataCache, controller_id: int | None) -> None:
    async def run() -> None:
        locator = ControllerLocator(zk, cache, OWN_ID)  # type: ignore[arg-type]
        locator.changed(controller_id)
        while locator._lookups:
            await asyncio.sleep(0.01)

    asyncio.run(run())


def test_the_locator_reads_an_unlisted_controllers_registration() -> None:
    zk = FakeZk({CONTROLLER_ID: _registration(CONTROLLER_ID, 9093)})
    cache = MetadataCache()
    _follow(zk, cache, CONTROLLER_ID)
    assert zk.reads == [f"/brokers/ids/{CONTROLLER_ID}"]
    assert cache.controller_for_clients(OWN_ID) == CONTROLLER_ID
    assert cache.broker(CONTROLLER_ID) == CONTROLLER


def test_the_locator_reads_nothing_for_itself_or_a_listed_controller() -> None:
    zk = FakeZk({})
    cache = MetadataCache()
    _follow(zk, cache, OWN_ID)
    cache.learn_controller(CONTROLLER_ID, CONTROLLER)
    _follow(zk, cache, CONTROLLER_ID)
    assert zk.reads == []
    assert cache.controller_for_clients(OWN_ID) == CONTROLLER_ID


def test_an_unregistered_controller_stays_unnamed() -> None:
    zk = FakeZk({})
    cache = MetadataCache()
    _follow(zk, cache, CONTROLLER_ID)
    assert zk.reads == [f"/brokers/ids/{CONTROLLER_ID}"]
    assert cache.controller_for_clients(OWN_ID) == NO_CONTROLLER


def _named_by_a_metadata_response(zk: FakeZk, cache: MetadataCache) -> int:
    """What `handle_metadata` names, with the locator wired as the broker process wires it."""

    async def run() -> int:
        locator = ControllerLocator(zk, cache, OWN_ID)  # type: ignore[arg-type]
        services = SimpleNamespace(
            broker_id=OWN_ID, metadata_cache=cache, locate_controller=locator.locate
        )
        return await controller_for_clients(services)  # type: ignore[arg-type]

    return asyncio.run(run())


def test_a_metadata_request_before_the_watch_fired_reads_the_controller_from_zookeeper() -> None:
    zk = FakeZk({CONTROLLER_ID: _registration(CONTROLLER_ID, 9093)}, controller=CONTROLLER_ID)
    cache = MetadataCache()
    assert _named_by_a_metadata_response(zk, cache) == CONTROLLER_ID
    assert cache.broker(CONTROLLER_ID) == CONTROLLER  # listed in the same response


def test_a_metadata_request_with_a_locatable_controller_reads_nothing() -> None:
    zk = FakeZk({}, controller=2)
    cache = MetadataCache()
    cache.learn_controller(CONTROLLER_ID, CONTROLLER)
    assert _named_by_a_metadata_response(zk, cache) == CONTROLLER_ID
    assert zk.reads == []


def test_no_controller_in_zookeeper_is_named_as_none() -> None:
    cache = MetadataCache()
    assert _named_by_a_metadata_response(FakeZk({}), cache) == NO_CONTROLLER
    assert cache.live_brokers() == []


def test_a_controller_the_watch_delivered_meanwhile_is_not_overwritten() -> None:
    # /controller read as 3 while the watch had already told the cache 2 (not located yet).
    zk = FakeZk({CONTROLLER_ID: _registration(CONTROLLER_ID, 9093)}, controller=CONTROLLER_ID)
    cache = MetadataCache()
    cache.learn_controller(2)
    assert _named_by_a_metadata_response(zk, cache) == NO_CONTROLLER
    assert cache.controller_id == 2
