"""A stand-in broker that records the control requests it gets and answers them with success.

It speaks the real protocol (our codec) on a real socket, so the controller under test talks to
it exactly as to a broker; tests then assert on what each broker was told, and with which epoch.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field
from typing import Any

from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, decode_request, encode_response


@dataclass
class FakeBroker:
    broker_id: int
    received: list[tuple[int, Any]] = field(default_factory=list)
    server: asyncio.AbstractServer | None = None
    port: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> FakeBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def of(self, api_key: int) -> list[Any]:
        return [body for key, body in self.received if key == api_key]

    async def wait_for(self, api_key: int, count: int = 1, timeout: float = 10.0) -> list[Any]:
        async def enough() -> None:
            while len(self.of(api_key)) < count:
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(enough(), timeout)
        return self.of(api_key)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                request = decode_request(await reader.readexactly(size))
                self.received.append((request.api_key, request.body))
                self.arrived.set()
                writer.write(
                    encode_response(
                        request.api_key,
                        request.api_version,
                        request.correlation_id,
                        self._answer(request.api_key),
                    )
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    @staticmethod
    def _answer(api_key: int) -> Any:
        if api_key == ApiKey.API_VERSIONS:
            return m.ApiVersionsResponse(
                api_keys=[
                    m.ApiVersionsResponse.ApiVersion(
                        api_key=a.key, min_version=a.min_version, max_version=a.max_version
                    )
                    for a in APIS.values()
                ]
            )
        return APIS[api_key].response()
