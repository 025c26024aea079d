"""SCRAM (RFC 5802, RFC 7677): the math and the four messages, shared by client and server.

SCRAM-SHA-256 and SCRAM-SHA-512 as Kafka uses them: no channel binding (gs2 header `n,,`), no
authorization id other than the user, the username escaped as a saslname (`=` as `=3D`, `,` as
`=2C`). Extensions in the client's first message (Kafka's `tokenauth=true`) are parsed and kept.

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce + server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<base64 proof>
    server-final   v=<base64 server signature>      (or e=<error>)

    SaltedPassword = PBKDF2-HMAC(password, salt, iterations)
    ClientKey = HMAC(SaltedPassword, "Client Key")   StoredKey = H(ClientKey)
    ServerKey = HMAC(SaltedPassword, "Server Key")
    AuthMessage = client-first-bare + "," + server-first + "," + client-final-without-proof
    ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

Only the standard library: this module sits in protocol/, below the client and the broker.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

GS2_HEADER = "n,,"


class ScramFormatError(ValueError):
    """A SCRAM message that does not parse (the text says which and why)."""


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str  # SCRAM-SHA-256
    hash_name: str  # hashlib's name
    wire_type: int  # ScramMechanism's byte in Describe/AlterUserScramCredentials
    min_iterations: int = 4096
    max_iterations: int = 16384  # Kafka's bound for credentials it accepts from clients

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def stored_key(self, client_key: bytes) -> bytes:
        return self.hash(client_key)

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")

    def client_proof(self, salted_password: bytes, auth_message: bytes) -> bytes:
        client_key = self.client_key(salted_password)
        signature = self.hmac(self.stored_key(client_key), auth_message)
        return xor(client_key, signature)

    def server_signature(self, server_key: bytes, auth_message: bytes) -> bytes:
        return self.hmac(server_key, auth_message)

    def verify_client_proof(self, stored_key: bytes, auth_message: bytes, proof: bytes) -> bool:
        """RFC 5802 §3: the proof XOR the client signature is the ClientKey, whose hash is the
        StoredKey the server keeps (the server never learns the password)."""
        signature = self.hmac(stored_key, auth_message)
        if len(proof) != len(signature):
            return False
        return hmac.compare_digest(self.hash(xor(proof, signature)), stored_key)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_TYPE: dict[int, ScramMechanism] = {m.wire_type: m for m in MECHANISMS.values()}


def mechanism(name: str) -> ScramMechanism:
    found = MECHANISMS.get(name)
    if found is None:
        raise ValueError(f"unknown SCRAM mechanism {name!r} (known: {', '.join(MECHANISMS)})")
    return found


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def new_nonce() -> str:
    """A printable nonce (RFC 5802: any printable ASCII but ','); base64 of 24 random bytes
    holds none."""
    return base64.b64encode(secrets.token_bytes(24)).decode()


def new_salt() -> bytes:
    return secrets.token_bytes(32)


def escape_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(saslname: str) -> str:
    if "=" in saslname.replace("=3D", "").replace("=2C", ""):
        raise ScramFormatError(f"invalid escape in username {saslname!r}")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    pairs = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramFormatError(f"invalid {what} {message!r}: {part!r} is not a=value")
        pairs.append((key, value))
    return pairs


def _b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise ScramFormatError(f"{what} is not base64: {value!r}") from exc


@dataclass(frozen=True, slots=True)
class ClientFirstMessage:
    username: str
    nonce: str
    extensions: dict[str, str] = field(default_factory=dict)

    @property
    def bare(self) -> str:
        text = f"n={escape_username(self.username)},r={self.nonce}"
        for key, value in self.extensions.items():
            text += f",{key}={value}"
        return text

    def encode(self) -> bytes:
        return (GS2_HEADER + self.bare).encode()

    @classmethod
    def parse(cls, data: bytes) -> ClientFirstMessage:
        text = _text(data, "client-first message")
        # gs2-header: cbind flag (n, y or p=...), then an optional a=authzid
        cbind, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2:
            raise ScramFormatError(f"invalid client-first message {text!r}: no gs2 header")
        if cbind not in ("n", "y"):
            raise ScramFormatError(f"channel binding {cbind!r} is not supported")
        pairs = _attributes(bare, "client-first message")
        if len(pairs) < 2 or pairs[0][0] != "n" or pairs[1][0] != "r" or not pairs[1][1]:
            raise ScramFormatError(f"invalid client-first message {text!r}: expected n=...,r=...")
        username = unescape_username(pairs[0][1])
        if authzid and authzid != f"a={escape_username(username)}":
            raise ScramFormatError("authorization id differs from the username")
        return cls(username, pairs[1][1], dict(pairs[2:]))


@dataclass(frozen=True, slots=True)
class ServerFirstMessage:
    nonce: str  # the client's nonce followed by the server's
    salt: bytes
    iterations: int

    def encode(self) -> bytes:
        salt = base64.b64encode(self.salt).decode()
        return f"r={self.nonce},s={salt},i={self.iterations}".encode()

    @classmethod
    def parse(cls, data: bytes) -> ServerFirstMessage:
        text = _text(data, "server-first message")
        values = dict(_attributes(text, "server-first message"))
        if "e" in values:
            raise ScramFormatError(f"server error: {values['e']}")
        try:
            return cls(values["r"], _b64(values["s"], "salt"), int(values["i"]))
        except (KeyError, ValueError) as exc:
            raise ScramFormatError(f"invalid server-first message {text!r}") from exc


@dataclass(frozen=True, slots=True)
class ClientFinalMessage:
    channel_binding: str  # base64 of the gs2 header: "biws"
    nonce: str
    proof: bytes

    @property
    def without_proof(self) -> str:
        return f"c={self.channel_binding},r={self.nonce}"

    def encode(self) -> bytes:
        return f"{self.without_proof},p={base64.b64encode(self.proof).decode()}".encode()

    @classmethod
    def parse(cls, data: bytes) -> ClientFinalMessage:
        text = _text(data, "client-final message")
        pairs = _attributes(text, "client-final message")
        if len(pairs) < 3 or pairs[0][0] != "c" or pairs[1][0] != "r" or pairs[-1][0] != "p":
            raise ScramFormatError("invalid client-final message: expected c=...,r=...,p=...")
        return cls(pairs[0][1], pairs[1][1], _b64(pairs[-1][1], "proof"))


@dataclass(frozen=True, slots=True)
class ServerFinalMessage:
    signature: bytes = b""
    error: str | None = None

    def encode(self) -> bytes:
        if self.error is not None:
            return f"e={self.error}".encode()
        return f"v={base64.b64encode(self.signature).decode()}".encode()

    @classmethod
    def parse(cls, data: bytes) -> ServerFinalMessage:
        text = _text(data, "server-final message")
        values = dict(_attributes(text, "server-final message"))
        if "e" in values:
            return cls(error=values["e"])
        if "v" not in values:
            raise ScramFormatError(f"invalid server-final message {text!r}")
        return cls(_b64(values["v"], "server signature"))


def auth_message(
    client_first: ClientFirstMessage, server_first: ServerFirstMessage, final_without_proof: str
) -> bytes:
    return f"{client_first.bare},{server_first.encode().decode()},{final_without_proof}".encode()


def channel_binding() -> str:
    return base64.b64encode(GS2_HEADER.encode()).decode()  # "biws"


def _text(data: bytes, what: str) -> str:
    try:
        return bytes(data).decode()
    except UnicodeDecodeError as exc:
        raise ScramFormatError(f"{what} is not UTF-8") from exc


class ScramClient:
    """The client side of one exchange: `first()`, then `final(server_first)`, then
    `verify(server_final)`. Raises ScramFormatError on a message that is wrong."""

    def __init__(
        self, mech: ScramMechanism, username: str, password: str, nonce: str | None = None
    ) -> None:
        self.mechanism = mech
        self.password = password
        self.client_first = ClientFirstMessage(username, nonce or new_nonce())
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        return self.client_first.encode()

    def final(self, server_first_data: bytes) -> bytes:
        server_first = ServerFirstMessage.parse(server_first_data)
        if not server_first.nonce.startswith(self.client_first.nonce) or len(
            server_first.nonce
        ) == len(self.client_first.nonce):
            raise ScramFormatError("the server's nonce does not extend ours")
        if server_first.iterations < self.mechanism.min_iterations:
            raise ScramFormatError(
                f"{server_first.iterations} iterations is below {self.mechanism.min_iterations}"
            )
        self._salted = self.mechanism.salted_password(
            self.password, server_first.salt, server_first.iterations
        )
        without_proof = ClientFinalMessage(channel_binding(), server_first.nonce, b"")
        self._auth_message = auth_message(
            self.client_first, server_first, without_proof.without_proof
        )
        proof = self.mechanism.client_proof(self._salted, self._auth_message)
        return ClientFinalMessage(channel_binding(), server_first.nonce, proof).encode()

    def verify(self, server_final_data: bytes) -> None:
        server_final = ServerFinalMessage.parse(server_final_data)
        if server_final.error is not None:
            raise ScramFormatError(f"server error: {server_final.error}")
        expected = self.mechanism.server_signature(
            self.mechanism.server_key(self._salted), self._auth_message
        )
        if not hmac.compare_digest(expected, server_final.signature):
            raise ScramFormatError("the server's signature is wrong")
