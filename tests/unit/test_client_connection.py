"""One broker connection and the network client, against a small fake broker on loopback.

The fake broker is built from epochlog.protocol's server side (decode_request, encode_response),
so these tests exercise real framing, correlation ids, ApiVersions negotiation, pipelining,
timeouts and disconnects without any Kafka process.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

import pytest

from epochlog.client.config import Role, load_config
from epochlog.client.connection import BrokerConnection, _advertised_api_versions_max
from epochlog.client.connection_state import ConnState
from epochlog.client.errors import (
    ConnectionFailedError,
    IncompatibleBrokerError,
    NodeNotReadyError,
    RequestTimedOutError,
)
from epochlog.client.network import NetworkClient
from epochlog.protocol import messages as m
from epochlog.protocol.api import (
    APIS,
    ApiKey,
    decode_request,
    encode_response,
    unsupported_api_versions_response,
)
from epochlog.protocol.errors import ErrorCode

Handler = Callable[[Any, int], Any]


class FakeBroker:
    """Answers ApiVersions (up to `api_versions_max`) and whatever `handlers` say."""

    def __init__(self, api_versions_max: int = 4, node_id: int = 1) -> None:
        self.api_versions_max = api_versions_max
        self.node_id = node_id
        self.handlers: dict[int, Handler] = {ApiKey.METADATA: self.metadata}
        self.delays: dict[int, float] = {}
        self.gates: dict[int, asyncio.Event] = {}  # an answer held until the test sets it
        self.requests: list[tuple[int, int]] = []
        self.metadata_error = 0
        self.server: asyncio.base_events.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []
        self.port = 0
        self.reading = asyncio.Event()  # cleared: the broker stops reading its connections
        self.reading.set()

    async def start(self) -> FakeBroker:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        self.drop_connections()
        await self.server.wait_closed()

    def drop_connections(self) -> None:
        for w in self.writers:
            w.close()
        self.writers.clear()

    def metadata(self, req: Any, version: int) -> Any:
        R = m.MetadataResponse
        return R(
            brokers=[
                R.MetadataResponseBroker(node_id=self.node_id, host="127.0.0.1", port=self.port)
            ],
            controller_id=self.node_id,
            topics=[],
            error_code=self.metadata_error,
        )

    def unsupported_api_versions(self, corr: int) -> bytes:
        """Kafka's answer to a too-new ApiVersions: a v0 body naming our range for key 18."""
        if self.api_versions_max == APIS[ApiKey.API_VERSIONS].max_version:
            return unsupported_api_versions_response(corr)
        body = m.ApiVersionsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[
                m.ApiVersionsResponse.ApiVersion(api_key=18, max_version=self.api_versions_max)
            ],
        )
        return encode_response(ApiKey.API_VERSIONS, 0, corr, body)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                await self.reading.wait()
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                key, version, corr = struct.unpack_from(">hhi", frame)
                self.requests.append((key, version))
                if key == ApiKey.API_VERSIONS and version > self.api_versions_max:
                    writer.write(self.unsupported_api_versions(corr))
                    continue
                request = decode_request(frame)
                asyncio.get_running_loop().create_task(
                    self.answer(writer, key, version, corr, request.body)
                )
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def answer(self, writer: Any, key: int, version: int, corr: int, body: Any) -> None:
        if key in self.delays:
            await asyncio.sleep(self.delays[key])
        if key in self.gates:
            await self.gates[key].wait()
        if key == ApiKey.API_VERSIONS:
            response = m.ApiVersionsResponse(
                api_keys=[
                    m.ApiVersionsResponse.ApiVersion(
                        api_key=a.key,
                        min_version=a.min_version,
                        max_version=self.api_versions_max if a.key == 18 else a.max_version,
                    )
                    for a in APIS.values()
                ]
            )
        else:
            response = self.handlers[key](body, version)
        if response is not None and not writer.is_closing():
            writer.write(encode_response(key, version, corr, response))


@pytest.fixture
async def broker():
    b = await FakeBroker().start()
    yield b
    await b.stop()


def describe_cluster_handler(req: Any, version: int) -> Any:
    return m.DescribeClusterResponse(cluster_id=f"v{version}", controller_id=3)


async def test_api_versions_falls_back_to_the_brokers_advertised_max(broker) -> None:
    broker.api_versions_max = 2
    conn = BrokerConnection("127.0.0.1", broker.port)
    await conn.connect()
    assert broker.requests[:2] == [(18, 4), (18, 2)]
    assert conn.api_versions_version == 2
    assert conn.version_for(ApiKey.METADATA) == APIS[ApiKey.METADATA].max_version
    await conn.close()


def test_the_mocks_short_count_error_body_is_understood() -> None:
    # librdkafka's mock answers ApiVersions v4 with this body (seen on the wire)
    body = bytes.fromhex("00230100120000000200000000")
    assert _advertised_api_versions_max(body) == 2
    kafka_v0 = m.ApiVersionsResponse(
        error_code=35, api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=18, max_version=3)]
    ).encode(0)
    assert _advertised_api_versions_max(kafka_v0) == 3
    assert _advertised_api_versions_max(b"\x00\x23") is None


async def test_pipelined_requests_are_matched_by_correlation_id(broker) -> None:
    broker.handlers[ApiKey.DESCRIBE_CLUSTER] = describe_cluster_handler
    conn = BrokerConnection("127.0.0.1", broker.port, client_id="t")
    await conn.connect()
    # The first request is answered last: held until the second has its answer (a gate, not a
    # delay, so a loaded machine cannot answer them in order).
    broker.gates[ApiKey.METADATA] = gate = asyncio.Event()
    slow = asyncio.create_task(conn.send(m.MetadataRequest(topics=None)))
    await asyncio.sleep(0.01)
    fast = await conn.send(m.DescribeClusterRequest(), version=0)
    assert fast.cluster_id == "v0"
    assert conn.in_flight == 1
    gate.set()
    assert (await slow).brokers[0].port == broker.port
    await conn.close()


async def test_version_for_is_the_highest_common_version(broker) -> None:
    conn = BrokerConnection("127.0.0.1", broker.port)
    await conn.connect()
    conn.api_versions[ApiKey.FETCH] = (4, 12)
    assert conn.version_for(ApiKey.FETCH) == 12
    assert conn.version_for(ApiKey.FETCH, max_version=9) == 9
    conn.api_versions[ApiKey.FETCH] = (20, 30)
    with pytest.raises(IncompatibleBrokerError, match="API key 1"):
        conn.version_for(ApiKey.FETCH)
    del conn.api_versions[ApiKey.FETCH]
    assert not conn.supports(ApiKey.FETCH)
    await conn.close()


async def test_a_request_timeout_closes_the_connection_and_fails_the_others(broker) -> None:
    closed: list[BaseException | None] = []
    conn = BrokerConnection(
        "127.0.0.1", broker.port, request_timeout_ms=100, on_close=lambda c, e: closed.append(e)
    )
    await conn.connect()
    broker.delays[ApiKey.METADATA] = 10
    other = asyncio.create_task(conn.send(m.MetadataRequest(topics=None), timeout_ms=5000))
    with pytest.raises(RequestTimedOutError, match="no response to API 3"):
        await conn.send(m.MetadataRequest(topics=None))
    with pytest.raises(ConnectionFailedError, match="connection closed: .* no response"):
        await other
    assert conn.closed and len(closed) == 1
    with pytest.raises(ConnectionFailedError):
        await conn.send(m.MetadataRequest(topics=None))


def _big_produce(size: int) -> Any:
    """A Produce request of about `size` bytes (the broker in these tests never decodes it)."""
    P = m.ProduceRequest
    data = P.PartitionProduceData(index=0, records=b"x" * size)
    return P(
        acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t", partition_data=[data])]
    )


async def test_a_broker_that_stops_reading_times_requests_out_instead_of_hanging(broker) -> None:
    # Requests bigger than the socket buffers wait in the writer's drain() until the broker
    # reads; that wait is part of the request's timeout, and the connection is then aborted
    # (a close() would wait for the unsent bytes), so concurrent senders fail too.
    closed: list[BaseException | None] = []
    conn = BrokerConnection(
        "127.0.0.1", broker.port, request_timeout_ms=300, on_close=lambda c, e: closed.append(e)
    )
    await conn.connect()
    broker.reading.clear()
    # The second request's own timeout is far longer, so only the abort can fail it in time.
    sends = [
        conn.send(_big_produce(32 * 1024 * 1024)),
        conn.send(_big_produce(32 * 1024 * 1024), timeout_ms=60_000),
    ]
    async with asyncio.timeout(10):  # without the bound: stuck in drain() for good
        first, second = await asyncio.gather(*sends, return_exceptions=True)
    assert isinstance(first, RequestTimedOutError), first
    assert "not written within 300 ms" in str(first)
    assert isinstance(second, ConnectionFailedError), second  # failed by the abort
    assert conn.closed and len(closed) == 1
    broker.reading.set()


async def test_a_broker_closing_the_connection_fails_pending_requests(broker) -> None:
    closed: list[BaseException | None] = []
    conn = BrokerConnection("127.0.0.1", broker.port, on_close=lambda c, e: closed.append(e))
    await conn.connect()
    broker.delays[ApiKey.METADATA] = 10
    pending = asyncio.create_task(conn.send(m.MetadataRequest(topics=None)))
    await asyncio.sleep(0.02)
    broker.drop_connections()
    with pytest.raises(ConnectionFailedError, match="closed by the broker"):
        await pending
    assert conn.closed
    assert isinstance(closed[0], ConnectionFailedError)


async def test_produce_with_acks_0_expects_no_response(broker) -> None:
    broker.handlers[ApiKey.PRODUCE] = lambda req, v: None
    conn = BrokerConnection("127.0.0.1", broker.port)
    await conn.connect()
    request = m.ProduceRequest(acks=0, timeout_ms=1000, topic_data=[])
    assert await conn.send(request, expect_response=False) is None
    assert conn.in_flight == 0
    await conn.close()


async def test_connection_refused_is_a_connection_error() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(ConnectionFailedError, match="cannot connect"):
        await BrokerConnection("127.0.0.1", port).connect()


# ------------------------------------------------------------------------- network client


class RecordingRecovery:
    def __init__(self, rebootstrap_on: ErrorCode | None = None) -> None:
        self.events: list[tuple] = []
        self.rebootstrap_on = rebootstrap_on
        self.last_error = ErrorCode.NONE

    def on_metadata_request(self, now_ms: float) -> None:
        self.events.append(("request",))

    def on_metadata_response(self, now_ms: float, brokers: int, error: ErrorCode) -> None:
        self.events.append(("response", brokers, error))
        self.last_error = error

    def should_rebootstrap(
        self, now_ms: float, any_node_available: bool, using_bootstrap: bool = False
    ) -> bool:
        self.events.append(("ask", any_node_available))
        return self.rebootstrap_on is not None and self.last_error is self.rebootstrap_on

    def on_rebootstrap(self, now_ms: float) -> None:
        self.events.append(("rebootstrapped",))
        self.rebootstrap_on = None

    def time_to_trigger_ms(self, now_ms: float) -> float:
        return float("inf")


def network(port: int, recovery: Any = None, **extra: Any) -> NetworkClient:
    config = load_config(
        Role.ADMIN,
        {"bootstrap.servers": f"127.0.0.1:{port}", "retry.backoff.ms": 10, **extra},
    )
    return NetworkClient(config, recovery=recovery)


async def test_bootstrap_then_brokers_from_metadata(broker) -> None:
    broker.node_id = 7
    net = network(broker.port)
    assert net.nodes() == [-1]
    cluster = await net.update_metadata(2000)
    assert list(cluster.brokers) == [7] and cluster.controller_id == 7
    assert net.nodes() == [7]
    assert net.connection(-1) is None  # the bootstrap connection is closed
    conn = await net.ready(7)
    assert conn.node_id == 7 and net.states.is_ready(7, net.now_ms())
    await net.close()


async def test_a_failed_connect_backs_off_and_leaves_no_node_available() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    net = network(port, **{"reconnect.backoff.ms": 5000, "reconnect.backoff.max.ms": 5000})
    with pytest.raises(NodeNotReadyError, match="backing off"):
        await net.ready(-1)
    assert net.states.state(-1, net.now_ms()) is ConnState.BACKOFF
    assert net.least_loaded_node() is None
    with pytest.raises(NodeNotReadyError, match="is backing off"):
        await net.ready(-1)
    await net.close()


async def test_a_lost_connection_refreshes_metadata(broker) -> None:
    net = network(broker.port)
    await net.update_metadata(2000)
    await net.ready(1)
    before = broker.requests.count((3, 13))
    broker.drop_connections()
    for _ in range(100):
        await asyncio.sleep(0.02)
        if broker.requests.count((3, 13)) > before:
            break
    assert broker.requests.count((3, 13)) > before
    await net.close()


async def test_the_recovery_object_hears_every_metadata_outcome_and_decides(broker) -> None:
    recovery = RecordingRecovery(rebootstrap_on=ErrorCode.REBOOTSTRAP_REQUIRED)
    broker.metadata_error = ErrorCode.REBOOTSTRAP_REQUIRED
    net = network(broker.port, recovery=recovery)
    await net.start()
    for _ in range(100):
        await asyncio.sleep(0.02)
        if ("rebootstrapped",) in recovery.events:
            break
    assert ("request",) in recovery.events
    assert ("response", 1, ErrorCode.REBOOTSTRAP_REQUIRED) in recovery.events
    assert ("rebootstrapped",) in recovery.events
    assert net.nodes() == [-1]  # back to bootstrap.servers
    broker.metadata_error = 0
    cluster = await net.update_metadata(2000)
    assert list(cluster.brokers) == [1]
    await net.close()
