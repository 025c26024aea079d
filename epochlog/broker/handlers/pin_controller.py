"""PinController (KIP-39): describe, pin or unpin the controller; any broker answers.

The request's shape is checked first (`invalid_pin_request`, pure): a request that mixes the
operations' fields, names no broker, or has an unknown operation gets INVALID_REQUEST with a
message saying what was wrong, and changes nothing. A valid one goes to the broker's
`ControllerPins` collaborator (ZooKeeper-backed: it writes or deletes `/admin/next_controller`;
the brokers' electors do the rest). Every answer describes the controller and the pin as they
stand after the request, refusals included. A DESCRIBE with IncludeRecentEvents answered by the
active controller also carries its recent events (`RecentEventsBrokerId` = this broker).
"""

from __future__ import annotations

import logging
from typing import Any

from epochlog.broker.collaborators import CollaboratorError
from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.messages.pin_controller import (
    ControllerEventRecord,
    PinOperation,
    PinStatus,
)

log = logging.getLogger(__name__)


def invalid_pin_request(body: Any) -> str | None:
    """What is wrong with a PinController request, or None when it is well formed."""
    try:
        operation = PinOperation(body.operation)
    except ValueError:
        return f"unknown Operation {body.operation} (0 describe, 1 pin, 2 unpin)"
    if operation is PinOperation.PIN:
        if body.auto:
            if body.broker_id != -1:
                return f"pin with Auto and BrokerId {body.broker_id}: give one or the other"
            if body.allow_absent:
                return "pin with Auto chooses a live broker: AllowAbsent does not apply"
        elif body.broker_id < 0:
            return f"pin needs a BrokerId >= 0 (or Auto), got {body.broker_id}"
        return None
    extra = [
        name
        for name, given in (
            ("BrokerId", body.broker_id != -1),
            ("Auto", body.auto),
            ("AllowAbsent", body.allow_absent),
        )
        if given
    ]
    if extra:
        return f"{operation.name.lower()} takes no {', '.join(extra)}"
    return None


def _response(status: PinStatus | None, error: ErrorCode, message: str | None) -> Any:
    response = m.PinControllerResponse(error_code=error, error_message=message)
    if status is not None:
        response.controller_id = -1 if status.controller is None else status.controller
        response.pinned_broker_id = -1 if status.pinned is None else status.pinned
        response.ready_broker_id = -1 if status.ready is None else status.ready
        response.pinned_broker_registered = status.pinned_registered
        response.pin_state = status.state
    return response


async def handle_pin_controller(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    body = request.body
    pins = services.controller_pins
    if pins is None:
        return _response(
            None, ErrorCode.UNKNOWN_SERVER_ERROR, "this broker runs without ZooKeeper: no pinning"
        )
    problem = invalid_pin_request(body)
    if problem is not None:
        log.info("PinController from %s refused: %s", connection.peer, problem)
        return _response(await pins.describe(), ErrorCode.INVALID_REQUEST, problem)
    operation = PinOperation(body.operation)
    try:
        if operation is PinOperation.PIN:
            status = await pins.pin(None if body.auto else body.broker_id, body.allow_absent)
        elif operation is PinOperation.UNPIN:
            status = await pins.unpin()
        else:
            status = await pins.describe()
            if body.include_recent_events:
                return _with_recent_events(
                    _response(status, ErrorCode.NONE, None),
                    services.broker_id,
                    services.controller.recent_events(),
                )
    except CollaboratorError as exc:
        log.info("PinController from %s refused: %s", connection.peer, exc)
        return _response(await pins.describe(), exc.error_code, str(exc))
    return _response(status, ErrorCode.NONE, None)


def _with_recent_events(
    response: Any, broker_id: int, records: list[ControllerEventRecord] | None
) -> Any:
    """The controller's events on a DESCRIBE answer; a broker that is not the controller says so
    with RecentEventsBrokerId -1 and no events."""
    if records is None:
        return response
    response.recent_events_broker_id = broker_id
    response.recent_events = [
        m.PinControllerResponse.ControllerEvent(
            name=r.name,
            detail=r.detail,
            started_ms=r.started_ms,
            duration_us=r.duration_us,
            error=r.error,
        )
        for r in records
    ]
    return response
