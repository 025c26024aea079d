"""KIP-899 / KIP-1102 against real brokers: the client's known brokers all go away.

The cluster (ZooKeeper + 2 broker processes) is reached through `bootstrap.servers` = a TCP
forwarder this test controls, standing for a DNS name or load balancer that always reaches the
cluster. The brokers themselves then move to new ports (stopped, reconfigured, restarted; their
logs stay), so every broker in a client's metadata is at an address that is gone:
- refused: the client rebootstraps (no node available, or trigger.ms) and carries on, while a
  client with metadata.recovery.strategy=none keeps trying the old addresses and its records
  expire;
- hung (a listener that accepts and never answers): connection attempts would only end after
  the 30 s setup timeout, but the client rebootstraps after trigger.ms (3 s) and carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from epochlog.client import Admin, Consumer, DeliveryTimeoutError, Producer
from epochlog.client.recovery import RebootstrapReason
from epochlog.testing.cluster import LocalCluster
from epochlog.zk.launcher import free_port

TOPIC = "relocated"
PARTITIONS = 2


class Loopback:
    """An event loop in a thread serving a TCP forwarder (the 'DNS name' of the cluster) and
    silent listeners (hung brokers)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.target: tuple[str, int] = ("127.0.0.1", 1)
        self.servers: list[asyncio.base_events.Server] = []
        self.held: list[asyncio.StreamWriter] = []

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def forwarder(self) -> int:
        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                writer.close()
                return
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        async def start() -> int:
            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            self.servers.append(server)
            return server.sockets[0].getsockname()[1]

        return self.run(start())

    def silent(self, port: int) -> None:
        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.held.append(writer)

        async def start() -> None:
            self.servers.append(await asyncio.start_server(hold, "127.0.0.1", port))

        self.run(start())

    def close(self) -> None:
        async def stop() -> None:
            for server in self.servers:
                server.close()
            for writer in self.held:
                writer.close()

        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory) -> Iterator[LocalCluster]:
    from epochlog.zk.session import close_client, connect

    root = connect(zookeeper.connect_string, session_timeout_ms=4000)
    try:
        root.ensure_path("/relocating")
    finally:
        close_client(root)
    c = LocalCluster(
        tmp_path_factory.mktemp("relocating"),
        2,
        zookeeper=zookeeper.connect_string + "/relocating",
    )
    try:
        c.start()
        with Admin({"bootstrap.servers": c.bootstrap_servers}) as admin:
            admin.create_topic(TOPIC, PARTITIONS, 2)
        yield c
    finally:
        c.close()


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    lb = Loopback()
    yield lb
    lb.close()


def move_brokers(cluster: LocalCluster, loopback: Loopback, hang_old: bool) -> None:
    """Stop every broker, restart each at a new port (data kept), point the forwarder at the
    new addresses; with `hang_old`, silent listeners take over the old ports first."""
    old_ports = [b.port for b in cluster.brokers.values()]
    for broker_id in sorted(cluster.brokers):
        cluster.stop_broker(broker_id)
    if hang_old:
        for port in old_ports:
            loopback.silent(port)
    for broker_id in sorted(cluster.brokers):
        # the harness keeps a broker's port across restarts; writing its config with a new
        # one is how a broker moves (the same call the harness uses to configure it)
        cluster.brokers[broker_id] = cluster._configure(broker_id, free_port())
    for broker_id in sorted(cluster.brokers):
        cluster.start_broker(broker_id, wait=False)
    cluster.wait_ready()
    loopback.target = ("127.0.0.1", cluster.brokers[1].port)


def producer(bootstrap: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, **extra})


def read_back(cluster: LocalCluster, prefix: bytes) -> list[bytes]:
    config = {"bootstrap.servers": cluster.bootstrap_servers, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline
            got += [r.value for r in consumer.poll(0.2)]
    return [v for v in got if v.startswith(prefix)]


def send_all(p: Producer, prefix: bytes, n: int) -> list[Future[Any]]:
    return [p.send(TOPIC, b"%s-%d" % (prefix, i)) for i in range(n)]


def test_brokers_at_new_addresses_rebootstrap_while_strategy_none_is_stranded(
    cluster: LocalCluster, loopback: Loopback
) -> None:
    loopback.target = ("127.0.0.1", cluster.brokers[1].port)
    bootstrap = f"127.0.0.1:{loopback.forwarder()}"
    fast = {"metadata.recovery.rebootstrap.trigger.ms": 3000}
    with (
        producer(bootstrap, **fast) as ours,
        producer(
            bootstrap,
            **{
                "metadata.recovery.strategy": "none",
                "delivery.timeout.ms": 5000,
                "request.timeout.ms": 3000,
            },
        ) as stranded,
    ):
        assert all(f.result(30).offset >= 0 for f in send_all(ours, b"moved-before", 20))
        stranded.send(TOPIC, b"stranded-before").result(30)
        old = {b.port for b in cluster.brokers.values()}
        move_brokers(cluster, loopback, hang_old=False)
        assert not old & {b.port for b in cluster.brokers.values()}
        after = send_all(ours, b"moved-after", 20)
        lost = stranded.send(TOPIC, b"stranded-after")
        assert all(f.result(60).offset >= 0 for f in after)
        assert ours.rebootstraps >= 1
        with pytest.raises(DeliveryTimeoutError):
            lost.result(30)
        assert stranded.rebootstraps == 0
    assert sorted(read_back(cluster, b"moved-")) == sorted(
        [b"moved-before-%d" % i for i in range(20)] + [b"moved-after-%d" % i for i in range(20)]
    )


def test_hung_brokers_rebootstrap_after_trigger_ms(
    cluster: LocalCluster, loopback: Loopback, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="epochlog.client.network")
    loopback.target = ("127.0.0.1", cluster.brokers[1].port)
    bootstrap = f"127.0.0.1:{loopback.forwarder()}"
    config = {
        "metadata.recovery.rebootstrap.trigger.ms": 3000,
        "socket.connection.setup.timeout.ms": 30000,
        "socket.connection.setup.timeout.max.ms": 30000,
    }
    with producer(bootstrap, **config) as ours:
        assert all(f.result(30).offset >= 0 for f in send_all(ours, b"hung-before", 10))
        move_brokers(cluster, loopback, hang_old=True)
        moved_at = time.monotonic()
        after = send_all(ours, b"hung-after", 10)
        assert all(f.result(60).offset >= 0 for f in after)
        took = time.monotonic() - moved_at
        assert ours.rebootstraps >= 1
        assert loopback.held, "the client did try the hung brokers"
        assert took < 20, f"records waited {took:.1f} s: as long as the setup timeout"
        reasons = [r.getMessage() for r in caplog.records if "rebootstrapping" in r.getMessage()]
        assert any(RebootstrapReason.TRIGGER_ELAPSED.value in r for r in reasons), reasons
    assert sorted(read_back(cluster, b"hung-")) == sorted(
        [b"hung-before-%d" % i for i in range(10)] + [b"hung-after-%d" % i for i in range(10)]
    )
