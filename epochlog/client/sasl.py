"""SASL on the client side: the login a connection authenticates with, and the exchange.

`SaslLogin` comes from librdkafka's keys (`sasl.mechanism`, `sasl.username`, `sasl.password`) or
Java's (`sasl.jaas.config` with a PlainLoginModule or ScramLoginModule entry). After ApiVersions
a connection sends SaslHandshake v1 and then SaslAuthenticate requests carrying the mechanism's
tokens (PLAIN: one; SCRAM: client-first, client-final, and the server's signature is checked).
The answer's session lifetime (KIP-368, SaslAuthenticate v1+) says when the connection must
authenticate again: `reauth_delay_s` picks a moment at 85-95% of it, as Kafka's clients do.

A broker refusing the login (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM) raises
`SaslAuthenticationError`, which is not retried by reconnecting: the password will not change.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from epochlog.client.errors import ConfigError, KafkaError
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.codec import Message
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.jaas import username_password
from epochlog.protocol.scram import MECHANISMS, ScramClient, ScramFormatError

log = logging.getLogger(__name__)

MECHANISM_NAMES = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslAuthenticationError(KafkaError):
    """The broker refused our login (or it did not prove itself, for SCRAM)."""


@dataclass(frozen=True)
class SaslLogin:
    mechanism: str
    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISM_NAMES:
            raise ConfigError(
                "sasl.mechanism",
                f"{self.mechanism!r} is not supported (one of {', '.join(MECHANISM_NAMES)})",
            )


def login_from_config(config: Any) -> SaslLogin | None:
    """The login of a client config (None unless security.protocol is SASL_PLAINTEXT or
    SASL_SSL)."""
    protocol = str(config["security.protocol"]).upper()
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return None  # (SASL_SSL's TLS part is client/tls.py's)
    mechanism = str(config["sasl.mechanism"]).upper()
    username, password = config["sasl.username"], config["sasl.password"]
    if config["sasl.jaas.config"]:
        try:
            username, password = username_password(config["sasl.jaas.config"])
        except ValueError as exc:
            raise ConfigError("sasl.jaas.config", str(exc)) from None
    if not username:
        raise ConfigError("sasl.username", f"required with security.protocol={protocol}")
    return SaslLogin(mechanism, username, password)


Send = Callable[..., Awaitable[Any]]


async def authenticate(send: Send, login: SaslLogin, authenticate_version: int) -> int:
    """Run the SASL exchange over `send` (BrokerConnection.send's signature); returns the
    session lifetime in ms the broker gave (0: none)."""
    handshake = await send(m.SaslHandshakeRequest(mechanism=login.mechanism), version=1)
    if handshake.error_code != ErrorCode.NONE:
        raise SaslAuthenticationError(
            handshake.error_code,
            f"SASL handshake for {login.mechanism}",
            f"the broker offers {', '.join(handshake.mechanisms) or 'none'}",
        )

    async def step(token: bytes) -> Any:
        request: Message = m.SaslAuthenticateRequest(auth_bytes=token)
        response = await send(
            request, api_key=ApiKey.SASL_AUTHENTICATE, version=authenticate_version
        )
        if response.error_code != ErrorCode.NONE:
            raise SaslAuthenticationError(
                response.error_code,
                f"SASL {login.mechanism} login as {login.username}",
                response.error_message,
            )
        return response

    if login.mechanism == "PLAIN":
        token = b"\x00" + login.username.encode() + b"\x00" + login.password.encode()
        response = await step(token)
    else:
        client = ScramClient(MECHANISMS[login.mechanism], login.username, login.password)
        server_first = await step(client.first())
        try:
            final = client.final(bytes(server_first.auth_bytes))
        except ScramFormatError as exc:
            raise SaslAuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED, f"SCRAM login as {login.username}", str(exc)
            ) from None
        response = await step(final)
        try:
            client.verify(bytes(response.auth_bytes))
        except ScramFormatError as exc:
            raise SaslAuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED, f"SCRAM login as {login.username}", str(exc)
            ) from None
    return int(getattr(response, "session_lifetime_ms", 0) or 0)


def reauth_delay_s(session_lifetime_ms: int, rng: random.Random | None = None) -> float | None:
    """When to authenticate again: at 85-95% of the session (Kafka's clients); None: never."""
    if session_lifetime_ms <= 0:
        return None
    fraction = 0.85 + 0.10 * (rng or random).random()
    return session_lifetime_ms * fraction / 1000


class SaslSessionKeeper:
    """Logs one connection in, and in again before its session ends (KIP-368). A failed
    re-authentication calls `on_failure` (the connection closes: the broker would close an
    expired session at its next request anyway)."""

    def __init__(
        self,
        login: SaslLogin,
        send: Send,
        authenticate_version: Callable[[], int],
        on_failure: Callable[[Exception], None],
        name: str,
    ) -> None:
        self.login_as = login
        self._send = send
        self._version = authenticate_version
        self._on_failure = on_failure
        self._name = name
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._cancelled = False
        self.logins = 0  # completed logins, the first included

    async def login(self) -> None:
        lifetime_ms = await authenticate(self._send, self.login_as, self._version())
        self.logins += 1
        delay = reauth_delay_s(lifetime_ms)
        if delay is not None and not self._cancelled:
            self._timer = asyncio.get_running_loop().call_later(delay, self._again)

    def _again(self) -> None:
        self._timer = None
        if self._cancelled:
            return
        self._task = asyncio.get_running_loop().create_task(
            self._reauthenticate(), name=f"SASL re-authentication {self._name}"
        )

    async def _reauthenticate(self) -> None:
        try:
            await self.login()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s: SASL re-authentication failed: %s", self._name, exc)
            self._on_failure(exc)

    def cancel(self) -> None:
        self._cancelled = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()


def login_of(settings: Any) -> SaslLogin | None:
    """Our login from anything with mechanism, username and password (a broker's resolved
    inter-broker login, `config.sasl.SaslLogin`), or None for None."""
    if settings is None:
        return None
    return SaslLogin(settings.mechanism, settings.username, settings.password)
