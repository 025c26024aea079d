"""FindCoordinator, and the group APIs passed to the group coordinator.

A group's coordinator is the leader of its `__consumer_offsets` partition, a transactional id's
(key type 1) the leader of its `__transaction_state` partition (Kafka's mapping, asked of the
coordinator: `partition_of`). FindCoordinator answers with that leader as this listener
advertises it; the first request for any group (transactional id) creates the topic (with
Kafka's settings: see `node/groups.py`, `node/transactions.py`) and is answered
COORDINATOR_NOT_AVAILABLE until the partition has a leader, which clients retry.

JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups,
ListGroups, DeleteGroups, OffsetDelete and TxnOffsetCommit go to the coordinator as they are; a
broker that runs none answers COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from epochlog.broker.collaborators import GroupCoordinatorGateway, TransactionCoordinatorGateway
from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.handlers.errors import error_response
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
GROUP_KEY = 0
TRANSACTION_KEY = 1


async def handle_group_request(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    coordinator = services.group_coordinator
    if coordinator is None:
        return error_response(
            request.api_key,
            request.api_version,
            request.body,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "this broker runs no group coordinator",
        )
    host = connection.peer.rsplit(":", 1)[0]
    return await coordinator.handle(
        request.api_key,
        request.api_version,
        request.body,
        request.header.client_id or "",
        "/" + host,
    )


def begin_offset_commit(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> asyncio.Future[Any]:
    """OffsetCommit, begun now: the commit is queued behind the connection's earlier ones
    before this returns, so the server can take the next request while it replicates (a
    client pipelining async commits, as librdkafka does, then shares replication rounds)."""
    coordinator = services.group_coordinator
    if coordinator is None:
        answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        answered.set_result(
            error_response(
                request.api_key,
                request.api_version,
                request.body,
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "this broker runs no group coordinator",
            )
        )
        return answered
    host = connection.peer.rsplit(":", 1)[0]
    return coordinator.start_offset_commit(
        request.api_version, request.body, request.header.client_id or "", "/" + host
    )


async def handle_find_coordinator(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    body, version = request.body, request.api_version
    key_type = body.key_type if version >= 1 else GROUP_KEY
    keys = list(body.coordinator_keys) if version >= 4 else [body.key]
    found = [await _find(services, key, key_type, connection.listener) for key in keys]
    R = m.FindCoordinatorResponse
    if version >= 4:
        return R(
            coordinators=[
                R.Coordinator(
                    key=key,
                    node_id=node,
                    host=host,
                    port=port,
                    error_code=error,
                    error_message=message,
                )
                for key, (error, message, node, host, port) in zip(keys, found, strict=True)
            ]
        )
    error, message, node, host, port = found[0]
    return R(error_code=error, error_message=message, node_id=node, host=host, port=port)


async def _find(
    services: BrokerServices, key: str, key_type: int, listener: str
) -> tuple[ErrorCode, str | None, int, str, int]:
    def fail(error: ErrorCode, message: str) -> tuple[ErrorCode, str | None, int, str, int]:
        return error, message, -1, "", -1

    coordinator: GroupCoordinatorGateway | TransactionCoordinatorGateway | None
    if key_type == TRANSACTION_KEY:
        if not key:
            return fail(ErrorCode.INVALID_REQUEST, "an empty transactional id has no coordinator")
        topic, what = TRANSACTION_STATE_TOPIC, "transaction"
        coordinator = services.transaction_coordinator
    elif key_type == GROUP_KEY:
        topic, what = OFFSETS_TOPIC, "group"
        coordinator = services.group_coordinator
    else:
        return fail(ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
    if coordinator is None:
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"this broker runs no {what} coordinator")
    partitions = services.metadata_cache.partitions(topic)
    if not partitions:
        try:
            if isinstance(coordinator, TransactionCoordinatorGateway):
                await coordinator.create_state_topic()
            else:
                await coordinator.create_offsets_topic()
        except Exception as exc:  # the next FindCoordinator tries again
            log.warning("cannot create %s: %s", topic, exc)
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic} is being created")
    info = partitions.get(coordinator.partition_of(key))
    leader = services.metadata_cache.broker(info.leader) if info is not None else None
    endpoint = leader.endpoint_for(listener) if leader is not None else None
    if endpoint is None:
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"the {what}'s partition has no leader")
    return ErrorCode.NONE, None, leader.broker_id, endpoint.host, endpoint.port
