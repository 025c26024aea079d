"""The network client carrying out the rebootstrap decision, against fake brokers on loopback.

The bootstrap server is a fake broker whose Metadata names brokers elsewhere: a port nobody
listens on (connections refused: KIP-899's "no node available"), or a listener that accepts and
never answers (KIP-1102's stuck connection: only the trigger can help). Also: REBOOTSTRAP_REQUIRED
closes every connection, and strategy `none` never rebootstraps.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest
from test_client_connection import FakeBroker

from epochlog.client.config import Role, load_config
from epochlog.client.network import NetworkClient
from epochlog.client.recovery import RebootstrapReason
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode


class PointingBroker(FakeBroker):
    """A bootstrap server whose metadata lists one broker, `node_id` at `advertised_port`."""

    def __init__(self, advertised_port: int, node_id: int = 5) -> None:
        super().__init__(node_id=node_id)
        self.advertised_port = advertised_port

    def metadata(self, req: Any, version: int) -> Any:
        R = m.MetadataResponse
        return R(
            brokers=[
                R.MetadataResponseBroker(
                    node_id=self.node_id, host="127.0.0.1", port=self.advertised_port
                )
            ],
            controller_id=self.node_id,
            cluster_id="fake",
            topics=[],
            error_code=self.metadata_error,
        )


async def silent_listener() -> tuple[asyncio.base_events.Server, int, list[Any]]:
    """Accepts connections and never answers (a hung broker)."""
    held: list[Any] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], held


async def closed_port() -> int:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port


def network(port: int, **extra: Any) -> NetworkClient:
    config = load_config(
        Role.ADMIN,
        {"bootstrap.servers": f"127.0.0.1:{port}", "retry.backoff.ms": 20, **extra},
    )
    return NetworkClient(config)


async def wait_until(predicate: Any, timeout: float) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)
    return time.monotonic() - start


async def test_hung_brokers_rebootstrap_after_trigger_ms_not_after_the_setup_timeout() -> None:
    server, hung_port, held = await silent_listener()
    bootstrap = await PointingBroker(hung_port).start()
    net = network(
        bootstrap.port,
        **{
            "metadata.recovery.rebootstrap.trigger.ms": 600,
            "socket.connection.setup.timeout.ms": 30000,
            "socket.connection.setup.timeout.max.ms": 30000,
            "metadata.max.age.ms": 100,
        },
    )
    try:
        await net.update_metadata(2000)
        assert net.nodes() == [5]
        took = await wait_until(lambda: net.rebootstraps >= 1, 10)
        assert took < 5  # far below the 30 s setup timeout that would end the stuck attempt
        assert held, "the client did try the hung broker"
        assert net.last_rebootstrap_reason == RebootstrapReason.TRIGGER_ELAPSED.value
        # back on bootstrap.servers, which answers again
        await wait_until(lambda: bootstrap.requests.count((3, 13)) >= 2, 5)
    finally:
        await net.close()
        await bootstrap.stop()
        server.close()


async def test_all_known_brokers_refusing_rebootstraps_without_waiting_for_the_trigger() -> None:
    bootstrap = await PointingBroker(await closed_port()).start()
    net = network(
        bootstrap.port,
        **{"reconnect.backoff.ms": 5000, "reconnect.backoff.max.ms": 5000},
    )  # trigger.ms stays at its default, 300000
    try:
        await net.update_metadata(2000)
        assert net.nodes() == [5]
        net.request_update()
        await wait_until(lambda: net.rebootstraps >= 1, 5)
        assert net.last_rebootstrap_reason == RebootstrapReason.NO_NODE_AVAILABLE.value
    finally:
        await net.close()
        await bootstrap.stop()


async def test_rebootstrap_required_closes_every_connection() -> None:
    broker = await FakeBroker(node_id=1).start()
    net = network(broker.port)
    try:
        await net.update_metadata(2000)
        node_conn = await net.ready(1)
        bootstrap_conn = await net.ready(-1)  # a bootstrap connection kept open on purpose
        broker.metadata_error = ErrorCode.REBOOTSTRAP_REQUIRED
        net.request_update()
        await wait_until(lambda: net.rebootstraps >= 1, 5)
        assert node_conn.closed and bootstrap_conn.closed
        assert net.nodes() == [-1]
        broker.metadata_error = 0
        cluster = await net.update_metadata(2000)
        assert list(cluster.brokers) == [1]
        assert (await net.ready(1)) is not node_conn  # a new connection
    finally:
        await net.close()
        await broker.stop()


async def test_strategy_none_keeps_its_connections_and_its_brokers() -> None:
    broker = await FakeBroker(node_id=1).start()
    net = network(broker.port, **{"metadata.recovery.strategy": "none"})
    try:
        await net.update_metadata(2000)
        conn = await net.ready(1)
        broker.metadata_error = ErrorCode.REBOOTSTRAP_REQUIRED
        before = broker.requests.count((3, 13))
        net.request_update()
        await wait_until(lambda: broker.requests.count((3, 13)) >= before + 2, 5)
        assert net.rebootstraps == 0 and not conn.closed
        assert net.nodes() == [1]
    finally:
        await net.close()
        await broker.stop()


@pytest.mark.parametrize("strategy", ["rebootstrap", "none"])
async def test_cluster_id_listeners_hear_a_change_of_cluster(strategy: str) -> None:
    broker = await FakeBroker(node_id=1).start()
    seen: list[tuple[str | None, str | None]] = []
    ids = iter(["one", "two"])
    original = broker.metadata

    def metadata(req: Any, version: int) -> Any:
        response = original(req, version)
        response.cluster_id = current[0]
        return response

    current = [next(ids)]
    broker.handlers[3] = metadata
    net = network(broker.port, **{"metadata.recovery.strategy": strategy})
    net.add_cluster_id_listener(lambda old, new: seen.append((old, new)))
    try:
        await net.update_metadata(2000)
        current[0] = next(ids)
        await net.update_metadata(2000)
        assert seen == [("one", "two")]
    finally:
        await net.close()
        await broker.stop()
