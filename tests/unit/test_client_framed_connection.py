"""`FramedConnection` (a replica fetcher's connection to its leader), against a small fake broker on
ApiVersions negotiation (with the v0 fallback), responses large and small decoded whole and
kept intact while the frame memory is reused, timeouts and a broker closing the connection."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from epochlog.client.errors import ConnectionFailedError, RequestTimedOutError
from epochlog.client.framed_connection import FramedConnection
from epochlog.protocol import messages as m
from epochlog.protocol.api import (
    APIS,
    ApiKey,
    decode_request,
    encode_response,
    unsupported_api_versions_response,
)


class FakeLeader:
    """Answers ApiVersions (refusing versions above `api_versions_max`) and Fetch requests
    with `records` for every partition asked; `silent` requests get no answer."""

    def __init__(self, api_versions_max: int = APIS[ApiKey.API_VERSIONS].max_version) -> None:
        self.api_versions_max = api_versions_max
        self.records: list[bytes] = []
        self.silent = False
        self.requests: list[tuple[int, int]] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> FakeLeader:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        await self.server.wait_closed()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                key, version, corr = struct.unpack_from(">hhi", frame)
                self.requests.append((key, version))
                if key == ApiKey.API_VERSIONS and version > self.api_versions_max:
                    writer.write(unsupported_api_versions_response(corr))
                elif not self.silent:
                    body = decode_request(frame).body
                    writer.write(encode_response(key, version, corr, self.answer(key, body)))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    def answer(self, key: int, body: Any) -> Any:
        if key == ApiKey.API_VERSIONS:
            return m.ApiVersionsResponse(
                api_keys=[
                    m.ApiVersionsResponse.ApiVersion(
                        api_key=a.key, min_version=a.min_version, max_version=a.max_version
                    )
                    for a in APIS.values()
                ]
            )
        R = m.FetchResponse
        records = self.records.pop(0)
        return R(
            responses=[
                R.FetchableTopicResponse(
                    topic=t.topic,
                    partitions=[
                        R.PartitionData(partition_index=p.partition, records=records)
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
        )


def fetch_request(partitions: int) -> Any:
    R = m.FetchRequest
    return R(
        max_wait_ms=0,
        min_bytes=1,
        topics=[
            R.FetchTopic(
                topic="t", partitions=[R.FetchPartition(partition=i) for i in range(partitions)]
            )
        ],
    )


@pytest.fixture
async def leader():
    fake = await FakeLeader().start()
    yield fake
    await fake.stop()


async def connected(leader: FakeLeader, timeout_ms: int = 5000) -> FramedConnection:
    connection = FramedConnection("127.0.0.1", leader.port, request_timeout_ms=timeout_ms)
    await connection.connect()
    return connection


async def test_versions_are_negotiated_and_responses_decoded(leader: FakeLeader) -> None:
    connection = await connected(leader)
    assert connection.connected
    assert connection.version_for(ApiKey.FETCH, 12) == 12
    small, large = b"s" * 100, bytes(range(256)) * 1000  # a large frame goes to pooled memory
    leader.records = [small, large, large[::-1]]
    responses = [
        await connection.send(fetch_request(3), api_key=ApiKey.FETCH, version=12) for _ in range(3)
    ]
    got = [[p.records for t in r.responses for p in t.partitions] for r in responses]
    # Each body is intact after later responses were read into the same memory.
    assert got == [[small] * 3, [large] * 3, [large[::-1]] * 3]
    await connection.close()
    assert not connection.connected


async def test_a_broker_refusing_our_api_versions_version_is_asked_at_v0() -> None:
    leader = await FakeLeader(api_versions_max=2).start()
    try:
        connection = await connected(leader)
        assert leader.requests == [(ApiKey.API_VERSIONS, 4), (ApiKey.API_VERSIONS, 0)]
        assert connection.version_for(ApiKey.FETCH) == APIS[ApiKey.FETCH].max_version
        await connection.close()
    finally:
        await leader.stop()


async def test_an_unanswered_request_times_out_and_closes_the_connection(
    leader: FakeLeader,
) -> None:
    connection = await connected(leader, timeout_ms=200)
    leader.silent = True
    with pytest.raises(RequestTimedOutError, match="no response to API 1"):
        await connection.send(fetch_request(1), api_key=ApiKey.FETCH, version=12)
    assert not connection.connected
    with pytest.raises(ConnectionFailedError, match="connection closed"):
        await connection.send(fetch_request(1), api_key=ApiKey.FETCH, version=12)


async def test_a_broker_closing_fails_the_pending_request(leader: FakeLeader) -> None:
    connection = await connected(leader)
    leader.silent = True
    pending = asyncio.ensure_future(
        connection.send(fetch_request(1), api_key=ApiKey.FETCH, version=12)
    )
    await asyncio.sleep(0.05)
    for writer in leader.writers:
        writer.close()
    with pytest.raises(ConnectionFailedError, match="closed by the broker"):
        await pending
    assert not connection.connected


async def test_nobody_listening_is_a_connection_failure() -> None:
    leader = await FakeLeader().start()
    port = leader.port
    await leader.stop()
    connection = FramedConnection("127.0.0.1", port)
    with pytest.raises(ConnectionFailedError, match="cannot connect"):
        await connection.connect()
    assert not connection.connected
