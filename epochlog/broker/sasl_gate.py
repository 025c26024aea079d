"""The SASL gate of one connection on a SASL_PLAINTEXT or SASL_SSL listener.

It turns Kafka requests into calls on `security.sasl.SaslSession` (the state machine) and its
results into responses. The server asks it only while it must (`intercepts`): before the
connection is authenticated, for SaslHandshake and SaslAuthenticate, and once the session has
an expiry, to close an expired connection at its next request (KIP-368). An authenticated
connection without expiry costs the server one attribute check per request.

After a v0 SaslHandshake the client sends the mechanism's tokens as bare size-prefixed frames
(no request header), and the server's tokens go back the same way (`raw_tokens`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from epochlog.config.sasl import ListenerSasl
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, Request
from epochlog.protocol.errors import ErrorCode
from epochlog.security.principal import KafkaPrincipal
from epochlog.security.sasl import (
    AuthenticationFailed,
    SaslSession,
    SaslStateError,
)
from epochlog.security.scram_credentials import ScramCredentialCache

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GateAnswer:
    body: Any | None  # the response to send (None: none)
    close: str | None = None  # close the connection after sending, for this reason
    principal: KafkaPrincipal | None = None  # the connection is now this user


def now_ms() -> float:
    return time.monotonic() * 1000


class SaslGate:
    """One connection's gate; see the module docstring."""

    __slots__ = ("session", "raw_tokens", "intercepting")

    def __init__(self, settings: ListenerSasl, credentials: ScramCredentialCache) -> None:
        self.session = SaslSession(
            settings.mechanisms, settings.plain_users, credentials.lookup, settings.reauth_ms
        )
        self.raw_tokens = False
        # True until authenticated, and afterwards if the session expires: the hot-path check.
        self.intercepting = True

    def _settle(self) -> None:
        session = self.session
        self.intercepting = not session.authenticated or session.expires_at_ms is not None

    def on_request(self, request: Request) -> GateAnswer | None:
        """The gate's answer to a request, or None: the server handles it as usual."""
        api_key = request.api_key
        session = self.session
        if session.authenticated and api_key not in (ApiKey.SASL_HANDSHAKE,):
            try:
                session.check(api_key, now_ms())
            except SaslStateError as refused:
                return GateAnswer(None, close=str(refused))
            return None
        try:
            session.check(api_key, now_ms())
        except SaslStateError as refused:
            return GateAnswer(None, close=str(refused))
        if api_key == ApiKey.API_VERSIONS:
            return None
        if api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(request)
        return self._authenticate(request.body.auth_bytes, request.api_version)

    def _handshake(self, request: Request) -> GateAnswer:
        mechanism = request.body.mechanism
        reauth = self.session.authenticated
        accepted = self.session.handshake(mechanism)
        enabled = list(self.session.enabled_mechanisms)
        self._settle()
        if not accepted:
            return GateAnswer(
                m.SaslHandshakeResponse(
                    error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
                ),
                close=f"unsupported SASL mechanism {mechanism!r}"
                + (" for re-authentication" if reauth else ""),
            )
        self.raw_tokens = request.api_version == 0
        return GateAnswer(m.SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled))

    def _authenticate(self, token: bytes, version: int) -> GateAnswer:
        R = m.SaslAuthenticateResponse
        try:
            result = self.session.authenticate(bytes(token), now_ms())
        except AuthenticationFailed as failed:
            self._settle()
            body = R(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                error_message=str(failed),
                auth_bytes=b"",
            )
            return GateAnswer(body, close=f"SASL authentication failed: {failed}")
        except SaslStateError as refused:
            return GateAnswer(None, close=str(refused))
        self._settle()
        body = R(
            error_code=ErrorCode.NONE,
            auth_bytes=result.token,
            session_lifetime_ms=result.session_lifetime_ms,
        )
        return GateAnswer(body, principal=result.principal)

    def on_raw_token(self, frame: bytes | memoryview) -> tuple[bytes | None, GateAnswer]:
        """A bare token after a v0 handshake: (the bare answer token or None, the outcome)."""
        answer = self._authenticate(bytes(frame), 0)
        body = answer.body
        if body is not None and body.error_code == ErrorCode.NONE:
            self.raw_tokens = not self.session.authenticated
            return bytes(body.auth_bytes), GateAnswer(None, principal=answer.principal)
        return None, GateAnswer(None, close=answer.close)
