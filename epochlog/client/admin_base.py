"""What the admin client's operation mixins share with `AsyncAdmin`: its network client and
settings, `start()` and `_timeout_ms()` (defined by `AsyncAdmin`), and the way to the controller.
"""

from __future__ import annotations

import asyncio
from typing import Any

from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import ClientError, IncompatibleBrokerError, KafkaError
from epochlog.client.network import NetworkClient
from epochlog.protocol.errors import ErrorCode


class AdminBase:
    _net: NetworkClient
    config: Any
    _retry_backoff_ms: int

    async def start(self) -> None:  # defined by AsyncAdmin
        raise NotImplementedError

    def _timeout_ms(self, timeout: float | None) -> float:  # defined by AsyncAdmin
        raise NotImplementedError

    async def _controller_connection(self, remaining_ms: float, what: str) -> BrokerConnection:
        """A connection to the controller the metadata names (refreshed if it names none);
        NOT_CONTROLLER when no controller is known."""
        cluster = self._net.cluster
        if cluster.controller_id not in cluster.brokers:
            cluster = await self._net.update_metadata(remaining_ms)
        if cluster.controller_id not in cluster.brokers:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"{what}: no controller known")
        return await self._net.ready(cluster.controller_id)

    async def _to_controller(
        self,
        what: str,
        names: list[str],
        build: Any,
        parse: Any,
        api_key: int,
        timeout: float | None,
    ) -> dict[str, KafkaError | None]:
        """Send a per-topic request to the controller, retrying NOT_CONTROLLER and connection
        failures after a metadata refresh until the timeout."""
        await self.start()
        timeout_ms = self._timeout_ms(timeout)
        deadline = self._net.now_ms() + timeout_ms
        results: dict[str, KafkaError | None] = {}
        todo = list(names)
        last_error: Exception | None = None
        while todo:
            remaining = deadline - self._net.now_ms()
            if remaining <= 0:
                for n in todo:
                    results[n] = KafkaError(
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"{what} for {n!r}",
                        str(last_error) if last_error else None,
                    )
                break
            try:
                conn = await self._controller_connection(remaining, what)
                version = conn.version_for(api_key)
                request = build(todo, int(remaining), version)
                response = await conn.send(request, api_key=api_key, version=version)
            except ClientError as exc:
                if isinstance(exc, IncompatibleBrokerError):
                    raise
                last_error = exc
                self._net.request_update()
                await asyncio.sleep(min(self._retry_backoff_ms, max(remaining, 0)) / 1000)
                continue
            retry = []
            for name, (code, message) in parse(response).items():
                if name not in todo:
                    continue
                if code is ErrorCode.NOT_CONTROLLER:
                    retry.append(name)
                    last_error = KafkaError(code, f"{what} for {name!r}", message)
                else:
                    results[name] = (
                        None
                        if code is ErrorCode.NONE
                        else KafkaError(code, f"{what} for {name!r}", message)
                    )
            answered = set(results) | set(retry)
            missing = [n for n in todo if n not in answered]
            for n in missing:
                results[n] = KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"{what}: no result for {n!r}"
                )
            todo = retry
            if todo:
                self._net.request_update()
                await asyncio.sleep(self._retry_backoff_ms / 1000)
        if any(r is None for r in results.values()):
            self._net.request_update()  # new or deleted topics show up in metadata soon
        return {n: results[n] for n in names}
