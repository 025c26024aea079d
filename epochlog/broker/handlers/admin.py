"""Requests for the controller, and InitProducerId.

CreateTopics, DeleteTopics, ControlledShutdown and AlterPartition are controller work. In
ZooKeeper mode only the active controller handles them: this broker passes them to its
`ControllerGateway` when that is active, and otherwise answers as Kafka's ZK brokers do:
NOT_CONTROLLER for every topic of CreateTopics / DeleteTopics and at the top of AlterPartition
(the client or the leader retries after refreshing metadata), STALE_CONTROLLER_EPOCH for
ControlledShutdown (Kafka's ControllerMovedException).

InitProducerId without a transactional id allocates a new producer id from the
`ProducerIdSource` with epoch 0, whatever id and epoch the request carries (Kafka does the same
for non-transactional producers, v3+ epoch bumps included). One with a transactional id goes to
the transaction coordinator (COORDINATOR_NOT_AVAILABLE on a broker that runs none).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from epochlog.broker.collaborators import CollaboratorError
from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.handlers.errors import error_response
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, Request
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NOT_CONTROLLER_MESSAGE = "this broker is not the active controller"


async def _to_controller(
    services: BrokerServices,
    call: Callable[[], Awaitable[Any]],
    not_controller: Callable[[], Any],
) -> Any:
    """Pass the request to this broker's controller, or answer `not_controller()`: when it is
    not active, and when it stopped being the controller while the request waited for it."""
    if services.controller.is_active:
        try:
            return await call()
        except CollaboratorError as exc:
            if exc.error_code is not ErrorCode.NOT_CONTROLLER:
                raise
            log.info("controller request answered as not the controller: %s", exc)
    return not_controller()


async def handle_create_topics(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    return await _to_controller(
        services,
        lambda: services.controller.create_topics(request.body, request.api_version),
        lambda: error_response(
            ApiKey.CREATE_TOPICS,
            request.api_version,
            request.body,
            ErrorCode.NOT_CONTROLLER,
            NOT_CONTROLLER_MESSAGE,
        ),
    )


async def handle_delete_topics(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    return await _to_controller(
        services,
        lambda: services.controller.delete_topics(request.body, request.api_version),
        lambda: error_response(
            ApiKey.DELETE_TOPICS,
            request.api_version,
            request.body,
            ErrorCode.NOT_CONTROLLER,
            NOT_CONTROLLER_MESSAGE,
        ),
    )


async def handle_controlled_shutdown(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    return await _to_controller(
        services,
        lambda: services.controller.controlled_shutdown(request.body, request.api_version),
        lambda: m.ControlledShutdownResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH),
    )


async def handle_alter_partition(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    return await _to_controller(
        services,
        lambda: services.controller.alter_partition(request.body, request.api_version),
        lambda: m.AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER),
    )


async def handle_init_producer_id(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.InitProducerIdResponse
    body = request.body
    if body.transactional_id is not None:
        # A transactional producer: its transaction coordinator bumps the epoch (fencing).
        coordinator = services.transaction_coordinator
        if coordinator is None:
            return R(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1
            )
        return await coordinator.handle(request.api_key, request.api_version, body)
    try:
        producer_id = await services.producer_ids.next_producer_id()
    except Exception as exc:
        code = getattr(exc, "error_code", None)
        log.warning("cannot allocate a producer id: %s", exc)
        error = ErrorCode.of(code) if isinstance(code, int) else ErrorCode.COORDINATOR_NOT_AVAILABLE
        return R(error_code=error, producer_id=-1, producer_epoch=-1)
    return R(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
