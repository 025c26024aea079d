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

import logging
from collections.abc import Callable

from epochlog.broker.broker import Broker
from epochlog.broker.txn_verification import (
    VERIFY_REQUEST_VERSION,
    TopicPartition,
    verification_errors,
    verify_request_body,
)
from epochlog.coordinator.transaction.runtime import TRANSACTION_STATE_TOPIC
from epochlog.node.broker_connections import BrokerConnections
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)



class NetworkTransactionVerifier:
    """`TransactionVerifier` for a broker process; `partition_of` maps a transactional id to
    its `__transaction_state` partition."""

    def __init__(
        self, broker: Broker, partition_of: Callable[[str], int], request_timeout_ms: int
    ) -> None:
        self.metadata_cache = broker.metadata_cache
        self.partition_of = partition_of
        self.connections = BrokerConnections(broker, "txn-verification", request_timeout_ms)

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
            connection = await self.connections.get(coordinator)
            if connection is None:
                return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in partitions}
            response = await connection.send(
                body, api_key=ApiKey.ADD_PARTITIONS_TO_TXN, version=VERIFY_REQUEST_VERSION
            )
        except Exception as exc:  # lost connection, timeout: the producer retries
            log.info("verifying %r with broker %d failed: %s", transactional_id, coordinator, exc)
            await self.connections.drop(coordinator)
            return {tp: ErrorCode.NETWORK_EXCEPTION for tp in partitions}
        return verification_errors(response, transactional_id, partitions)


    async def close(self) -> None:
        await self.connections.close()
