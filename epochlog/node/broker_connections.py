"""Connections from this broker to the others, one per broker, for the coordinators' own
requests (WriteTxnMarkers to partition leaders, KIP-890's verify-only AddPartitionsToTxn to a
transaction coordinator): made on first use to the broker's endpoint on the inter-broker
listener (over TLS when that is SSL or SASL_SSL), as the metadata cache knows it, and dropped
after a failure so the next use connects afresh."""

from __future__ import annotations

import contextlib

from epochlog.aio import wait_for
from epochlog.broker.broker import Broker
from epochlog.client.connection import BrokerConnection
from epochlog.client.sasl import login_of
from epochlog.config.sasl import inter_broker_login

CONNECT_TIMEOUT_S = 10


class BrokerConnections:
    def __init__(self, broker: Broker, purpose: str, request_timeout_ms: int) -> None:
        self.metadata_cache = broker.metadata_cache
        config = broker.services.config
        self.listener = config.inter_broker_listener
        self.sasl = login_of(inter_broker_login(config))
        self.ssl_context = broker.inter_broker_ssl  # the inter-broker listener is TLS
        self.client_id = f"broker-{broker.broker_id}-{purpose}"
        self.request_timeout_ms = request_timeout_ms
        self._connections: dict[int, BrokerConnection] = {}

    async def get(self, broker_id: int) -> BrokerConnection | None:
        """A connected connection to the broker, or None when no endpoint is known for it."""
        connection = self._connections.get(broker_id)
        if connection is not None and connection.connected:
            return connection
        await self.drop(broker_id)
        live = self.metadata_cache.broker(broker_id)
        endpoint = live.endpoint_for(self.listener) if live is not None else None
        if endpoint is None:
            return None
        connection = BrokerConnection(
            endpoint.host,
            endpoint.port,
            node_id=broker_id,
            client_id=self.client_id,
            request_timeout_ms=self.request_timeout_ms,
            sasl=self.sasl,
            ssl_context=self.ssl_context,
        )
        await wait_for(connection.connect(), CONNECT_TIMEOUT_S)
        self._connections[broker_id] = connection
        return connection

    async def drop(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    async def close(self) -> None:
        for broker_id in list(self._connections):
            await self.drop(broker_id)
