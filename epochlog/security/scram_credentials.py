"""SCRAM credentials as Kafka stores them, and the user config znodes that hold them.

A credential is what the server keeps of a password (RFC 5802): the salt, StoredKey, ServerKey
and the iteration count, never the password. Kafka writes it as one string
(`ScramCredentialUtils.credentialToString`):

    salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>

and in ZooKeeper mode keeps it in the user's config znode `/config/users/<user>`, one property per
mechanism: `{"version":1,"config":{"SCRAM-SHA-512":"salt=...,iterations=4096"}}`, beside any
quota properties of the user. Iterations must be at least the mechanism's minimum (4096).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from epochlog.protocol.scram import MECHANISMS, MECHANISMS_BY_TYPE, ScramMechanism, new_salt


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mech: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """What AlterUserScramCredentials carries (the salted password) made into a credential."""
        stored_key = mech.stored_key(mech.client_key(salted_password))
        return cls(salt, stored_key, mech.server_key(salted_password), iterations)

    @classmethod
    def from_password(
        cls, mech: ScramMechanism, password: str, iterations: int, salt: bytes | None = None
    ) -> ScramCredential:
        check_iterations(mech, iterations)
        salt = new_salt() if salt is None else salt
        salted = mech.salted_password(password, salt, iterations)
        return cls.from_salted_password(mech, salt, salted, iterations)

    def to_string(self) -> str:
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def parse(cls, text: str) -> ScramCredential:
        """Kafka's credential string; ValueError naming what is missing or wrong."""
        values: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"invalid SCRAM credential: {part!r} is not key=value")
            values[key] = value
        missing = [k for k in ("salt", "stored_key", "server_key", "iterations") if k not in values]
        if missing:
            raise ValueError(f"invalid SCRAM credential: missing {', '.join(missing)}")
        try:
            iterations = int(values["iterations"])
        except ValueError:
            raise ValueError(
                f"invalid SCRAM credential: iterations {values['iterations']!r} is not a number"
            ) from None
        decoded = {}
        for key in ("salt", "stored_key", "server_key"):
            try:
                # Kafka's own encoder pads; ours too. Pad anyway for hand-written strings.
                decoded[key] = base64.b64decode(values[key] + "=" * (-len(values[key]) % 4))
            except binascii.Error:
                raise ValueError(f"invalid SCRAM credential: {key} is not base64") from None
        return cls(decoded["salt"], decoded["stored_key"], decoded["server_key"], iterations)


def check_iterations(mech: ScramMechanism, iterations: int) -> None:
    if iterations < mech.min_iterations:
        raise ValueError(
            f"{mech.name} iterations {iterations} is below the minimum {mech.min_iterations}"
        )
    if iterations > mech.max_iterations:
        raise ValueError(
            f"{mech.name} iterations {iterations} is above the maximum {mech.max_iterations}"
        )


def credentials_from_user_config(config: dict[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials among a user's config properties, by mechanism name. A property
    that does not parse is left out (a broker must not fail on one bad znode)."""
    found: dict[str, ScramCredential] = {}
    for name in MECHANISMS:
        text = config.get(name)
        if text is None:
            continue
        try:
            found[name] = ScramCredential.parse(text)
        except ValueError:
            continue
    return found


def parse_user_znode(data: bytes | None) -> dict[str, str]:
    """The config properties of `/config/users/<user>` (`{}` for an absent or empty znode);
    ValueError for JSON that is not Kafka's config layout."""
    if not data:
        return {}
    try:
        parsed = json.loads(data)
    except json.JSONDecodeError as exc:
        raise ValueError(f"user config znode is not JSON: {exc}") from None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("config", {}), dict):
        raise ValueError('user config znode is not {"version":1,"config":{...}}')
    return {str(k): str(v) for k, v in parsed.get("config", {}).items()}


def user_znode_json(config: dict[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()


class ScramCredentialCache:
    """Every user's SCRAM credentials as ZooKeeper holds them, kept current by the config
    change notifications, so a login reads no znode."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def update_user(self, user: str, config: dict[str, str]) -> None:
        """The user's stored config is now `config` (empty: the znode is gone)."""
        credentials = credentials_from_user_config(config)
        if credentials:
            self._users[user] = credentials
        else:
            self._users.pop(user, None)

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        return sorted(self._users)


@dataclass(frozen=True, slots=True)
class CredentialChange:
    """One deletion (salted_password None) or upsertion of AlterUserScramCredentials."""

    user: str
    mechanism_type: int
    iterations: int = 0
    salt: bytes = b""
    salted_password: bytes | None = None


def check_change(change: CredentialChange) -> tuple[int, str] | None:
    """(error code, message) if Kafka refuses the change, else None. Codes: 33
    UNSUPPORTED_SASL_MECHANISM, 93 UNACCEPTABLE_CREDENTIAL."""
    if not change.user:
        return 93, "Username must not be empty"
    mech = MECHANISMS_BY_TYPE.get(change.mechanism_type)
    if mech is None:
        return 33, "Unknown SCRAM mechanism"
    if change.salted_password is not None:
        if change.iterations < mech.min_iterations:
            return 93, "Too few iterations"
        if change.iterations > mech.max_iterations:
            return 93, "Too many iterations"
        if not change.salt or not change.salted_password:
            return 93, "Salt and salted password must not be empty"
    return None


def apply_changes(config: dict[str, str], changes: list[CredentialChange]) -> dict[str, str]:
    """The user's config after `changes` (already checked), quota keys untouched."""
    updated = dict(config)
    for change in changes:
        mech = MECHANISMS_BY_TYPE[change.mechanism_type]
        if change.salted_password is None:
            updated.pop(mech.name, None)
        else:
            credential = ScramCredential.from_salted_password(
                mech, change.salt, change.salted_password, change.iterations
            )
            updated[mech.name] = credential.to_string()
    return updated
