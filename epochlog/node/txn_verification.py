"""The partition leader's question to a transaction coordinator (KIP-890 part 1), over the
network: Kafka's `AddPartitionsToTxnManager` I/O.

The coordinator of a transactional id is the leader of its `__transaction_state` partition
(`abs(javaStringHashCode(id)) % transaction.state.log.num.partitions`), looked up in this
broker's metadata cache as Kafka does (no FindCoordinator round trip); none known is
COORDINATOR_NOT_AVAILABLE. One AddPartitionsToTxn v4 with VerifyOnly per Produce request
carries every partition of it that needs verifying; a lost connection or a timeout is
NETWORK_EXCEPTION (the client retries the produce). What the answer means is decided in
`broker/txn_verification.py`. This broker's own coordinator is asked over the network too:
one path.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from epochlog.aio import wait_for
from epochlog.broker.broker import Broker
from epochlog.broker.txn_verification import (
    VERIFY_REQUEST_VERSION,
    TopicPartition,
    verification_errors,
    verify_request_body,
)
from epochlog.client.connection import BrokerConnection
from epochlog.coordinator.transaction.runtime import TRANSACTION_STATE_TOPIC
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10


class NetworkTransactionVerifier:
    """`TransactionVerifier` for a broker process; `partition_of` maps a transactional id to
    its `__transaction_state` partition."""

    def __init__(
        self, broker: Broker, partition_of: Callable[[str], int], request_timeout_ms: int
    ) -> None:
        self.broker_id = broker.broker_id
        self.metadata_cache = broker.metadata_cache
        config = broker.services.config
        self.listener = config.listeners[0].listener if config.listeners else "PLAINTEXT"
        self.partition_of = partition_of
        self.request_timeout_ms = request_timeout_ms
        self._connections: dict[int, BrokerConnection] = {}

    def coordinator_of(self, transactional_id: str) -> int | None:
        info = self.metadata_cache.partitions(TRANSACTION_STATE_TOPIC).get(
            self.partition_of(transactional_id)
        )
        if info is None or info.leader < 0:
            return None
        return info.leader

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: tuple[TopicPartition, ...],
    ) -> dict[TopicPartition, ErrorCode]:
        coordinator = self.coordinator_of(transactional_id)
        if coordinator is None:
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        body = verify_request_body(
            m.AddPartitionsToTxnRequest, transactional_id, producer_id, producer_epoch, partitions
        )
        try:
            connection = await self._connection(coordinator)
            if connection is None:
                return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in partitions}
            response = await connection.send(
                body, api_key=ApiKey.ADD_PARTITIONS_TO_TXN, version=VERIFY_REQUEST_VERSION
            )
        except Exception as exc:  # lost connection, timeout: the producer retries
            log.info("verifying %r with broker %d failed: %s", transactional_id, coordinator, exc)
            await self._drop(coordinator)
            return {tp: ErrorCode.NETWORK_EXCEPTION for tp in partitions}
        return verification_errors(response, transactional_id, partitions)

    async def _connection(self, broker_id: int) -> BrokerConnection | None:
        connection = self._connections.get(broker_id)
        if connection is not None and connection.connected:
            return connection
        await self._drop(broker_id)
        live = self.metadata_cache.broker(broker_id)
        endpoint = live.endpoint_for(self.listener) if live is not None else None
        if endpoint is None:
            return None
        connection = BrokerConnection(
            endpoint.host,
            endpoint.port,
            node_id=broker_id,
            client_id=f"broker-{self.broker_id}-txn-verification",
            request_timeout_ms=self.request_timeout_ms,
        )
        await wait_for(connection.connect(), CONNECT_TIMEOUT_S)
        self._connections[broker_id] = connection
        return connection

    async def _drop(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    async def close(self) -> None:
        for broker_id in list(self._connections):
            await self._drop(broker_id)
