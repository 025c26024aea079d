"""The consumer's way to its group coordinator (and the transactional producer's to its
transaction coordinator, `key_type` 1): found by FindCoordinator, reached over a connection of
its own.

FindCoordinator goes to the least loaded broker (one key, batched from v4 as the admin client
sends it). The connection to the coordinator is not the one fetches use (Java's separate
coordinator node id): a JoinGroup can wait for the whole rebalance timeout, and the broker answers
each connection's requests in order, so sharing would stall fetches. A failed lookup, a failed
connection, or `lost()` (NOT_COORDINATOR, a dead connection, an expired session) forgets the
coordinator; it is looked up again after retry.backoff.ms.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from epochlog.aio import wait_for
from epochlog.client.config import ClientConfig
from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.group_admin_protocol import GROUP_KEY_TYPE, find_coordinator_requests
from epochlog.client.network import NetworkClient
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class CoordinatorConnection:
    """One group's coordinator and the connection to it; see the module docstring.

    `on_found` runs when a coordinator is found (a fresh coordinator gets a fresh session),
    `on_lost` when it is forgotten (the group task looks for it again)."""

    def __init__(
        self,
        group_id: str,
        config: ClientConfig,
        net: NetworkClient,
        on_found: Callable[[], None],
        on_lost: Callable[[], None],
        key_type: int = GROUP_KEY_TYPE,
    ) -> None:
        self.group_id = group_id
        self.key_type = key_type
        self._net = net
        self._on_found = on_found
        self._on_lost = on_lost
        self._backoff_ms: int = config["retry.backoff.ms"]
        self._request_timeout_ms: int = config["request.timeout.ms"]
        self._setup_timeout_ms: int = config["socket.connection.setup.timeout.ms"]
        self.node_id: int | None = None
        self._address: tuple[str, int] | None = None
        self._conn: BrokerConnection | None = None
        self.find_backoff_until_ms = 0.0
        self.find_error: ErrorCode | None = None  # the last FindCoordinator's error, if any

    @property
    def known(self) -> bool:
        return self.node_id is not None

    @property
    def connected(self) -> bool:
        return self._conn is not None and self._conn.connected

    async def find(self) -> None:
        """FindCoordinator; on failure the coordinator stays unknown for retry.backoff.ms."""
        try:
            conn = await self._net.least_loaded_connection(self._request_timeout_ms)
            version = conn.version_for(ApiKey.FIND_COORDINATOR)
            (request,) = find_coordinator_requests([self.group_id], version, self.key_type)
            response = await conn.send(request, api_key=ApiKey.FIND_COORDINATOR, version=version)
        except ClientError as exc:
            log.debug("group %s: FindCoordinator failed: %s", self.group_id, exc)
            self.find_backoff_until_ms = self._net.now_ms() + self._backoff_ms
            return
        found = response.coordinators[0] if version >= 4 else response
        code = ErrorCode.of(found.error_code)
        self.find_error = None if code is ErrorCode.NONE else code
        if code is not ErrorCode.NONE:
            log.debug("group %s: FindCoordinator: %s", self.group_id, code.name)
            self.find_backoff_until_ms = self._net.now_ms() + self._backoff_ms
            return
        log.info(
            "group %s: coordinator is broker %s (%s:%s)",
            self.group_id,
            found.node_id,
            found.host,
            found.port,
        )
        self.node_id = found.node_id
        self._address = (found.host, found.port)
        self._on_found()

    async def connection(self) -> BrokerConnection:
        """The connection to the known coordinator, opened if needed."""
        if self._conn is not None and self._conn.connected:
            return self._conn
        if self._address is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {self.group_id}")
        host, port = self._address
        conn = BrokerConnection(
            host,
            port,
            node_id=self.node_id,
            client_id=self._net.client_id,
            request_timeout_ms=self._request_timeout_ms,
            sasl=self._net.sasl,
            ssl_context=self._net.ssl_context,
        )
        try:
            await wait_for(conn.connect(), self._setup_timeout_ms / 1000)
        except (ClientError, OSError, TimeoutError) as exc:
            await conn.close()
            self.lost(f"cannot connect: {exc}")
            raise KafkaError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {self.group_id}", str(exc)
            ) from exc
        self._conn = conn
        return conn

    async def ready(self) -> BrokerConnection:
        """The coordinator's connection, finding the coordinator first if needed."""
        if self.node_id is None:
            await self.find()
            if self.node_id is None:
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {self.group_id}")
        return await self.connection()

    def lost(self, reason: str) -> None:
        if self.node_id is not None:
            log.info("group %s: coordinator %s unknown: %s", self.group_id, self.node_id, reason)
        self.node_id = None
        self._address = None
        self.find_backoff_until_ms = self._net.now_ms() + self._backoff_ms
        conn, self._conn = self._conn, None
        if conn is not None:
            asyncio.get_running_loop().create_task(conn.close())
        self._on_lost()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
