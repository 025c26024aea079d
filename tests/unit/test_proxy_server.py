"""The proxy's I/O shell in process, in front of a fake broker: metadata is rewritten to the
proxy's node port, a new upstream cluster id starts a new generation by itself, and our client
on a connection of the old generation is told to rebootstrap (and then carries on)."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from test_client_connection import FakeBroker

from epochlog.client.config import Role, load_config
from epochlog.client.network import NetworkClient
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, decode_response, encode_request
from epochlog.proxy import ProxyServer


class NamedClusterBroker(FakeBroker):
    def __init__(self) -> None:
        super().__init__(node_id=4)
        self.cluster_id = "one"

    def metadata(self, req: Any, version: int) -> Any:
        response = super().metadata(req, version)
        response.cluster_id = self.cluster_id
        return response


async def wait_until(predicate: Any, timeout: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_a_new_upstream_cluster_id_makes_old_connections_rebootstrap() -> None:
    broker = await NamedClusterBroker().start()
    proxy = await ProxyServer(
        ("127.0.0.1", 0), [("127.0.0.1", broker.port)], metadata_interval_ms=50
    ).start()
    config = load_config(
        Role.ADMIN,
        {"bootstrap.servers": f"127.0.0.1:{proxy.listen_port}", "retry.backoff.ms": 20},
    )
    net = NetworkClient(config)
    try:
        cluster = await net.update_metadata(5000)
        assert cluster.cluster_id == "one"
        node = cluster.brokers[4]
        assert (node.host, node.port) == ("127.0.0.1", proxy.node_ports[4])
        assert node.port != broker.port
        await net.ready(4)  # a connection of generation 1, through the proxy
        assert proxy.status()["connections"] >= 1
        broker.cluster_id = "two"
        await wait_until(lambda: proxy.generation == 2)
        assert proxy.status()["stale_connections"] >= 1
        net.request_update()
        await wait_until(lambda: net.rebootstraps == 1)
        cluster = await net.update_metadata(5000)
        assert cluster.cluster_id == "two" and list(cluster.brokers) == [4]
    finally:
        await net.close()
        await proxy.close()
        await broker.stop()


async def test_old_metadata_versions_are_disconnected_at_a_switch() -> None:
    broker = await NamedClusterBroker().start()
    proxy = await ProxyServer(("127.0.0.1", 0), [("127.0.0.1", broker.port)]).start()
    config = load_config(Role.ADMIN, {"bootstrap.servers": f"127.0.0.1:{proxy.listen_port}"})
    net = NetworkClient(config)
    try:
        await net.update_metadata(5000)
        conn = await net.ready(4)
        await conn.send(m.MetadataRequest(topics=[]), version=4)  # an old client's Metadata
        await proxy.switch(f"127.0.0.1:{broker.port}")
        await wait_until(lambda: conn.closed)
    finally:
        await net.close()
        await proxy.close()
        await broker.stop()


async def test_a_metadata_version_the_proxy_cannot_rewrite_closes_the_connection() -> None:
    broker = await NamedClusterBroker().start()
    proxy = await ProxyServer(("127.0.0.1", 0), [("127.0.0.1", broker.port)]).start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.listen_port)
        served = encode_request(ApiKey.METADATA, 4, 1, "raw", m.MetadataRequest(topics=[]))
        writer.write(served)
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        correlation, _ = decode_response(ApiKey.METADATA, 4, await reader.readexactly(size))
        assert correlation == 1
        unserved = bytearray(served)
        struct.pack_into(">hhi", unserved, 4, ApiKey.METADATA, 14, 2)
        writer.write(bytes(unserved))
        assert await reader.read() == b""  # EOF, no answer
        writer.close()
    finally:
        await proxy.close()
        await broker.stop()
