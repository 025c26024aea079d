"""SASL on the server side, sans-I/O: the mechanisms and the per-connection session machine.

How it works. A mechanism (`PlainServer`, `ScramServer`) is fed the client's tokens one at a
time (`evaluate`) and answers the server's token; it ends `complete` with a `principal`, or
raises `AuthenticationFailed` carrying the message the client may see (never which part was
wrong: Kafka's wording). A spent mechanism refuses further tokens (a replayed message fails).

`SaslSession` is Kafka's SaslServerAuthenticator as a table: the APIs a connection may send in
each state, and where each leads. Bytes of Kafka requests are the gate's (broker/sasl_gate.py);
this machine sees API keys, mechanism names, tokens and the clock.

    state              ApiVersions   SaslHandshake         SaslAuthenticate      other
    HANDSHAKE          served        -> AUTHENTICATE       close                 close
    AUTHENTICATE       close         close                 token: AUTHENTICATE   close
                                                            | AUTHENTICATED | close
    AUTHENTICATED      served        -> AUTHENTICATE       close                 served
                                      (re-authentication)
    expired session    close         -> AUTHENTICATE       close                 close

A re-authentication (KIP-368) must use the same mechanism and end with the same principal.
"""

from __future__ import annotations

import enum
import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from epochlog.protocol import scram
from epochlog.security.principal import KafkaPrincipal
from epochlog.security.scram_credentials import ScramCredential

log = logging.getLogger(__name__)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36

PLAIN_FAILURE = "Authentication failed: Invalid username or password"


class AuthenticationFailed(Exception):
    """The exchange failed; str() is what the client is told."""


class SaslStateError(Exception):
    """A request the session's state does not allow (the connection is closed)."""


def generic_failure(mechanism: str, reauthenticating: bool = False) -> str:
    """Kafka's answer when a mechanism fails for a reason the client must not learn."""
    during = "re-authentication" if reauthenticating else "authentication"
    return (
        f"Authentication failed during {during} due to invalid credentials with SASL "
        f"mechanism {mechanism}"
    )


class ServerMechanism(Protocol):
    name: str
    complete: bool
    principal: KafkaPrincipal | None

    def evaluate(self, token: bytes) -> bytes: ...


class PlainServer:
    """RFC 4616: one token `authzid NUL username NUL password`, answered empty."""

    name = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.complete = False
        self.principal: KafkaPrincipal | None = None
        self._used = False

    def evaluate(self, token: bytes) -> bytes:
        if self._used:
            raise AuthenticationFailed("Authentication failed: unexpected PLAIN token")
        self._used = True
        parts = bytes(token).split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            )
        try:
            authzid, username, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed(PLAIN_FAILURE) from None
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(username)
        # compare even for an unknown user, so the time taken does not tell which was wrong
        matches = hmac.compare_digest((expected or "\x00").encode(), password.encode())
        if expected is None or not matches:
            raise AuthenticationFailed(PLAIN_FAILURE)
        if authzid and authzid != username:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.complete = True
        self.principal = KafkaPrincipal.user(username)
        return b""


CredentialLookup = Callable[[str, str], ScramCredential | None]  # (user, mechanism) -> credential


class ScramState(enum.Enum):
    RECEIVE_CLIENT_FIRST = "receive client-first"
    RECEIVE_CLIENT_FINAL = "receive client-final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramServer:
    """RFC 5802 server: client-first -> server-first, client-final -> server-final."""

    def __init__(
        self, mech: scram.ScramMechanism, credentials: CredentialLookup, nonce: str | None = None
    ) -> None:
        self.mechanism = mech
        self.name = mech.name
        self.credentials = credentials
        self.state = ScramState.RECEIVE_CLIENT_FIRST
        self.complete = False
        self.principal: KafkaPrincipal | None = None
        self._server_nonce = nonce or scram.new_nonce()
        self._client_first: scram.ClientFirstMessage | None = None
        self._server_first: scram.ServerFirstMessage | None = None
        self._credential: ScramCredential | None = None

    def _fail(self, reason: str) -> AuthenticationFailed:
        """Fail the exchange; the reason is logged, the client gets Kafka's generic answer."""
        self.state = ScramState.FAILED
        log.info("%s exchange failed: %s", self.name, reason)
        return AuthenticationFailed(generic_failure(self.name))

    def evaluate(self, token: bytes) -> bytes:
        if self.state is ScramState.RECEIVE_CLIENT_FIRST:
            return self._first(token)
        if self.state is ScramState.RECEIVE_CLIENT_FINAL:
            return self._final(token)
        raise self._fail(f"a token in state {self.state.value}")  # a replay, or confusion

    def _first(self, token: bytes) -> bytes:
        try:
            client_first = scram.ClientFirstMessage.parse(token)
        except scram.ScramFormatError as exc:
            raise self._fail(str(exc)) from None
        if client_first.extensions.get("tokenauth", "false").lower() == "true":
            raise self._fail("delegation tokens are not served")
        credential = self.credentials(client_first.username, self.name)
        if credential is None or credential.iterations < self.mechanism.min_iterations:
            raise self._fail(f"no usable credential for user {client_first.username!r}")
        self._client_first, self._credential = client_first, credential
        self._server_first = scram.ServerFirstMessage(
            client_first.nonce + self._server_nonce, credential.salt, credential.iterations
        )
        self.state = ScramState.RECEIVE_CLIENT_FINAL
        return self._server_first.encode()

    def _final(self, token: bytes) -> bytes:
        assert self._client_first and self._server_first and self._credential
        try:
            final = scram.ClientFinalMessage.parse(token)
        except scram.ScramFormatError as exc:
            raise self._fail(str(exc)) from None
        # endswith, as Kafka since 3.8.1: librdkafka before 2.6 puts its own nonce once more
        # in front of the server's (which already starts with it); kcat's 2.0.2 does.
        if not final.nonce.endswith(self._server_first.nonce) or final.channel_binding != (
            scram.channel_binding()
        ):
            raise self._fail(
                f"client-final nonce {final.nonce!r} / binding {final.channel_binding!r}, "
                f"expected {self._server_first.nonce!r}"
            )
        message = scram.auth_message(self._client_first, self._server_first, final.without_proof)
        stored_key = self._credential.stored_key
        if not self.mechanism.verify_client_proof(stored_key, message, final.proof):
            raise self._fail(f"wrong proof from user {self._client_first.username!r}")
        signature = self.mechanism.server_signature(self._credential.server_key, message)
        self.state = ScramState.COMPLETE
        self.complete = True
        self.principal = KafkaPrincipal.user(self._client_first.username)
        return scram.ServerFinalMessage(signature).encode()


def new_mechanism(
    name: str, plain_users: dict[str, str], credentials: CredentialLookup
) -> ServerMechanism:
    if name == "PLAIN":
        return PlainServer(plain_users)
    return ScramServer(scram.mechanism(name), credentials)


class SessionState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


# The APIs each state serves itself (the rest of the table is in `SaslSession.check`).
ALLOWED: dict[SessionState, frozenset[int]] = {
    SessionState.HANDSHAKE: frozenset({API_VERSIONS, SASL_HANDSHAKE}),
    SessionState.AUTHENTICATE: frozenset({SASL_AUTHENTICATE}),
    SessionState.AUTHENTICATED: frozenset(),  # everything but SaslAuthenticate, see check()
    SessionState.FAILED: frozenset(),
}


@dataclass(frozen=True, slots=True)
class AuthenticateResult:
    token: bytes
    principal: KafkaPrincipal | None  # set when this token completed the exchange
    session_lifetime_ms: int  # 0: no expiry


class SaslSession:
    """One connection's SASL state; see the module docstring. Times are monotonic ms."""

    def __init__(
        self,
        enabled_mechanisms: tuple[str, ...],
        plain_users: dict[str, str],
        credentials: CredentialLookup,
        reauth_ms: int = 0,
    ) -> None:
        self.enabled_mechanisms = enabled_mechanisms
        self.plain_users = plain_users
        self.credentials = credentials
        self.reauth_ms = reauth_ms
        self.state = SessionState.HANDSHAKE
        self.principal: KafkaPrincipal | None = None
        self.mechanism_name: str | None = None
        self.expires_at_ms: float | None = None
        self.reauthenticating = False
        self._mechanism: ServerMechanism | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is SessionState.AUTHENTICATED

    def expired(self, now_ms: float) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms

    def check(self, api_key: int, now_ms: float) -> None:
        """Raise SaslStateError if `api_key` may not be sent now (the connection closes)."""
        state = self.state
        if state is SessionState.AUTHENTICATED:
            if api_key == SASL_AUTHENTICATE:
                raise SaslStateError("SaslAuthenticate without a SaslHandshake")
            if api_key != SASL_HANDSHAKE and self.expired(now_ms):
                raise SaslStateError("the SASL session expired (connections.max.reauth.ms)")
            return
        if api_key not in ALLOWED[state]:
            raise SaslStateError(f"unexpected API key {api_key} during SASL {state.value}")

    def handshake(self, mechanism: str) -> bool:
        """SaslHandshake: True if `mechanism` is enabled (then tokens may follow). False fails
        the session: the answer is UNSUPPORTED_SASL_MECHANISM and the connection closes."""
        reauth = self.state is SessionState.AUTHENTICATED
        if mechanism not in self.enabled_mechanisms or (
            reauth and mechanism != self.mechanism_name
        ):
            self.state = SessionState.FAILED
            return False
        self.reauthenticating = reauth
        self.mechanism_name = mechanism
        self._mechanism = new_mechanism(mechanism, self.plain_users, self.credentials)
        self.state = SessionState.AUTHENTICATE
        return True

    def authenticate(self, token: bytes, now_ms: float) -> AuthenticateResult:
        """One SaslAuthenticate token; AuthenticationFailed ends the session (answer, close)."""
        mech = self._mechanism
        if self.state is not SessionState.AUTHENTICATE or mech is None:
            raise SaslStateError(f"SaslAuthenticate during SASL {self.state.value}")
        try:
            answer = mech.evaluate(token)
            if not mech.complete:
                return AuthenticateResult(answer, None, 0)
            principal = mech.principal
            assert principal is not None
            if self.reauthenticating and principal != self.principal:
                previous = self.principal
                raise AuthenticationFailed(
                    "Cannot change principals during re-authentication from "
                    f"{previous}: {principal}"
                )
        except AuthenticationFailed as failed:
            self.state = SessionState.FAILED
            message = str(failed)
            if self.reauthenticating and message.startswith("Authentication failed during "):
                message = generic_failure(mech.name, reauthenticating=True)
            raise AuthenticationFailed(message) from None
        self.principal = principal
        self.state = SessionState.AUTHENTICATED
        self.reauthenticating = False
        self._mechanism = None
        self.expires_at_ms = now_ms + self.reauth_ms if self.reauth_ms > 0 else None
        return AuthenticateResult(answer, principal, self.reauth_ms)
