"""The controller's connections to brokers (Kafka's ControllerChannelManager).

One sender per live broker, each with its own queue and connection, so a slow or dead broker
never delays requests to the others. A sender delivers its requests in order; when the
connection fails it reconnects (with a short backoff) and sends the same request again, until
the broker is removed from the channel (it died, or bounced and got a new sender). Requests are
never retried after an answer: a STALE_BROKER_EPOCH answer means the request was meant for an
earlier generation of the broker, and KIP-380 says it must not be resent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from typing import Any

from epochlog.aio import wait_for
from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import ConnectionFailedError, RequestTimedOutError
from epochlog.client.sasl import SaslLogin
from epochlog.controller.context import BrokerInfo
from epochlog.controller.request_batch import ControlRequest
from epochlog.faults import NO_FAULTS, FaultInjector
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

RECONNECT_BACKOFF_S = 0.1


class BrokerSender:
    """Delivers control requests to one broker, in order."""

    def __init__(
        self,
        broker: BrokerInfo,
        client_id: str,
        request_timeout_ms: int,
        controller_id: int,
        faults: FaultInjector,
        sasl: SaslLogin | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.broker = broker
        self.sasl = sasl
        self.ssl_context = ssl_context
        self.controller_id = controller_id
        self.faults = faults
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.queue: asyncio.Queue[tuple[ControlRequest, asyncio.Future[Any]]] = asyncio.Queue()
        self.connection: BrokerConnection | None = None
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller->broker {broker.id}"
        )

    async def _connected(self) -> BrokerConnection:
        while True:
            if self.connection is not None and self.connection.connected:
                return self.connection
            connection = BrokerConnection(
                self.broker.host,
                self.broker.port,
                node_id=self.broker.id,
                client_id=self.client_id,
                request_timeout_ms=self.request_timeout_ms,
                sasl=self.sasl,
                ssl_context=self.ssl_context,
            )
            try:
                await wait_for(connection.connect(), self.request_timeout_ms / 1000)
                self.connection = connection
                return connection
            except (ConnectionFailedError, TimeoutError, OSError) as exc:
                log.debug("controller cannot reach broker %d: %s", self.broker.id, exc)
                await connection.close()
                await asyncio.sleep(RECONNECT_BACKOFF_S)

    async def _run(self) -> None:
        while True:
            request, future = await self.queue.get()
            if not await self.faults.before_send(
                request.api_key, self.controller_id, self.broker.id
            ):
                future.set_result(None)  # dropped by a test's fault rule
                continue
            while not future.done():
                connection = await self._connected()
                try:
                    response = await connection.send(request.body, api_key=request.api_key)
                except (ConnectionFailedError, RequestTimedOutError) as exc:
                    log.info(
                        "resending %s to broker %d: %s", request.api_key.name, self.broker.id, exc
                    )
                    await connection.close()
                    continue
                error = getattr(response, "error_code", 0)
                if error == ErrorCode.STALE_BROKER_EPOCH:
                    log.info(
                        "broker %d refused %s for epoch %d as stale (KIP-380); not resent",
                        self.broker.id,
                        request.api_key.name,
                        request.broker_epoch,
                    )
                elif error:
                    log.warning(
                        "broker %d answered %s with %s",
                        self.broker.id,
                        request.api_key.name,
                        ErrorCode.of(error).name,
                    )
                future.set_result(response)

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        while not self.queue.empty():
            _, future = self.queue.get_nowait()
            if not future.done():
                future.set_result(None)
        if self.connection is not None:
            await self.connection.close()


class ControllerChannel:
    def __init__(
        self,
        controller_id: int,
        request_timeout_ms: int = 30000,
        faults: FaultInjector = NO_FAULTS,
        sasl: SaslLogin | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.sasl = sasl  # the inter-broker listener's login (SASL listeners)
        self.ssl_context = ssl_context  # the inter-broker listener is TLS
        self.client_id = f"controller-{controller_id}"
        self.request_timeout_ms = request_timeout_ms
        self.faults = faults
        self.senders: dict[int, BrokerSender] = {}

    def add_broker(self, broker: BrokerInfo) -> None:
        if broker.id not in self.senders:
            self.senders[broker.id] = BrokerSender(
                broker,
                self.client_id,
                self.request_timeout_ms,
                self.controller_id,
                self.faults,
                self.sasl,
                self.ssl_context,
            )

    async def remove_broker(self, broker_id: int) -> None:
        sender = self.senders.pop(broker_id, None)
        if sender is not None:
            await sender.close()

    def send(self, request: ControlRequest) -> asyncio.Future[Any]:
        """Queue a request; the future gets the response (None if the broker went away)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        sender = self.senders.get(request.broker_id)
        if sender is None:
            future.set_result(None)
        else:
            sender.queue.put_nowait((request, future))
        return future

    async def close(self) -> None:
        for broker_id in list(self.senders):
            await self.remove_broker(broker_id)
