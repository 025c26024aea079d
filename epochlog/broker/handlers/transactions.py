"""The transaction APIs passed to the transaction coordinator: AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), DescribeTransactions (65), ListTransactions (66), and
InitProducerId (22) when it names a transactional id (`admin.handle_init_producer_id` keeps the
idempotent path for one without).

The coordinator translates every version (`coordinator/transaction/service.py`); a broker that
runs none answers COORDINATOR_NOT_AVAILABLE, which clients retry after looking it up again.
"""

from __future__ import annotations

from typing import Any

from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.handlers.errors import error_response
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode


async def handle_transaction_request(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    coordinator = services.transaction_coordinator
    if coordinator is None:
        return error_response(
            request.api_key,
            request.api_version,
            request.body,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "this broker runs no transaction coordinator",
        )
    return await coordinator.handle(request.api_key, request.api_version, request.body)
