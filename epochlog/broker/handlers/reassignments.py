"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455): controller work.

As CreateTopics in `admin`: this broker passes them to its controller when that is active,
and otherwise answers NOT_CONTROLLER at the top (Kafka's ZooKeeper-mode answer), so the client
refreshes its metadata and sends them to the controller it names.
"""

from __future__ import annotations

from typing import Any

from epochlog.broker.handlers.admin import NOT_CONTROLLER_MESSAGE, _to_controller
from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.handlers.errors import error_response
from epochlog.protocol.api import ApiKey, Request
from epochlog.protocol.errors import ErrorCode


async def handle_alter_partition_reassignments(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    return await _to_controller(
        services,
        lambda: services.controller.alter_partition_reassignments(
            request.body, request.api_version
        ),
        lambda: error_response(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            request.api_version,
            request.body,
            ErrorCode.NOT_CONTROLLER,
            NOT_CONTROLLER_MESSAGE,
        ),
    )


async def handle_list_partition_reassignments(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    return await _to_controller(
        services,
        lambda: services.controller.list_partition_reassignments(request.body, request.api_version),
        lambda: error_response(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            request.api_version,
            request.body,
            ErrorCode.NOT_CONTROLLER,
            NOT_CONTROLLER_MESSAGE,
        ),
    )
