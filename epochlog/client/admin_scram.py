"""Admin operations on users' SCRAM credentials (KIP-554): describe, upsert, delete.

`upsert_scram_credential` salts the password here (a random salt, PBKDF2 with the iterations
asked for) and sends only the salted password, as Kafka's admin client does; any broker writes
it to ZooKeeper and every broker follows within a notification's time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from epochlog.client.admin_base import AdminBase
from epochlog.client.errors import ConfigError, KafkaError
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.scram import MECHANISMS, MECHANISMS_BY_TYPE, new_salt

DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    mechanism: str  # SCRAM-SHA-256
    iterations: int


def _mechanism(name: str) -> Any:
    mech = MECHANISMS.get(name.upper())
    if mech is None:
        raise ConfigError("mechanism", f"{name!r} is not one of {', '.join(MECHANISMS)}")
    return mech


class ScramAdminOperations(AdminBase):
    """`AsyncAdmin`'s SCRAM operations; expects `_net`, `start()` and `_timeout_ms()`."""

    async def _send_scram_request(self, request: Any, api_key: int) -> Any:
        await self.start()
        await self._net.update_metadata(self._timeout_ms(None))
        conn = await self._net.least_loaded_connection(self._timeout_ms(None))
        return await conn.send(request, api_key=api_key)

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        """Each user's mechanisms and iterations (None: every user that has any). A user
        without credentials raises RESOURCE_NOT_FOUND."""
        R = m.DescribeUserScramCredentialsRequest
        request = R(users=None if users is None else [R.UserName(name=u) for u in users])
        response = await self._send_scram_request(request, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(
                response.error_code, "DescribeUserScramCredentials", response.error_message
            )
        found: dict[str, list[ScramCredentialInfo]] = {}
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise KafkaError(result.error_code, f"user {result.user}", result.error_message)
            found[result.user] = [
                ScramCredentialInfo(MECHANISMS_BY_TYPE[i.mechanism].name, i.iterations)
                for i in result.credential_infos
                if i.mechanism in MECHANISMS_BY_TYPE
            ]
        return found

    async def upsert_scram_credential(
        self, user: str, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS
    ) -> None:
        mech = _mechanism(mechanism)
        salt = new_salt()
        R = m.AlterUserScramCredentialsRequest
        upsertion = R.ScramCredentialUpsertion(
            name=user,
            mechanism=mech.wire_type,
            iterations=iterations,
            salt=salt,
            salted_password=mech.salted_password(password, salt, max(iterations, 1)),
        )
        await self._alter_scram(R(deletions=[], upsertions=[upsertion]))

    async def delete_scram_credential(self, user: str, mechanism: str) -> None:
        R = m.AlterUserScramCredentialsRequest
        deletion = R.ScramCredentialDeletion(name=user, mechanism=_mechanism(mechanism).wire_type)
        await self._alter_scram(R(deletions=[deletion], upsertions=[]))

    async def _alter_scram(self, request: Any) -> None:
        response = await self._send_scram_request(request, ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise KafkaError(result.error_code, f"user {result.user}", result.error_message)
