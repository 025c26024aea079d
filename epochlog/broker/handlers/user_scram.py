"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554), as a ZooKeeper-mode
Kafka broker answers them (ZkAdminManager): any broker reads and writes `/config/users/<user>`
itself (the name sanitized), keeping the user's quota keys, and the change notification it
leaves makes every broker's credential cache follow.

The checks are `security.scram_credentials`' pure functions; each user is answered on its own:
a user with one refused change writes nothing. Also SaslHandshake and SaslAuthenticate reaching
a handler: that happens only on a listener without SASL (or after authentication for
SaslAuthenticate), and Kafka answers ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.config.client_quotas import desanitize, sanitize
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.scram import MECHANISMS
from epochlog.security.scram_credentials import (
    CredentialChange,
    apply_changes,
    check_change,
    credentials_from_user_config,
)

log = logging.getLogger(__name__)

USERS = "users"
NO_STORE = "this broker runs without ZooKeeper: no SCRAM credentials"


async def handle_sasl_handshake(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    return m.SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


async def handle_sasl_authenticate(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    return m.SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
    )


async def handle_describe_user_scram_credentials(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.DescribeUserScramCredentialsResponse
    store = services.config_store
    if store is None:
        return R(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=NO_STORE, results=[])
    stored: dict[str, dict[str, str]] = {}
    for config_type, name, config in await store.read_quota_configs():
        if config_type == USERS and "/" not in name:
            stored[desanitize(name)] = config
    requested = body_users = request.body.users
    results = []
    if body_users is None or not body_users:
        requested = [u for u in sorted(stored) if credentials_from_user_config(stored[u])]
        names = requested
    else:
        names = [u.name for u in body_users]
    counts = Counter(names)
    for user in dict.fromkeys(names):
        if counts[user] > 1:
            results.append(
                R.DescribeUserScramCredentialsResult(
                    user=user,
                    error_code=ErrorCode.DUPLICATE_RESOURCE,
                    error_message="Cannot describe SCRAM credentials for the same user twice "
                    "in a single request",
                    credential_infos=[],
                )
            )
            continue
        credentials = credentials_from_user_config(stored.get(user, {}))
        if not credentials:
            results.append(
                R.DescribeUserScramCredentialsResult(
                    user=user,
                    error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message="Attempt to describe a user credential that does not exist",
                    credential_infos=[],
                )
            )
            continue
        infos = [
            R.CredentialInfo(mechanism=MECHANISMS[name].wire_type, iterations=credential.iterations)
            for name, credential in sorted(credentials.items())
        ]
        results.append(
            R.DescribeUserScramCredentialsResult(
                user=user, error_code=ErrorCode.NONE, credential_infos=infos
            )
        )
    return R(error_code=ErrorCode.NONE, results=results)


async def handle_alter_user_scram_credentials(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.AlterUserScramCredentialsResponse
    body = request.body
    changes = [CredentialChange(d.name, d.mechanism) for d in body.deletions] + [
        CredentialChange(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in body.upsertions
    ]
    by_user: dict[str, list[CredentialChange]] = {}
    for change in changes:
        by_user.setdefault(change.user, []).append(change)
    store = services.config_store
    results = []
    for user, user_changes in by_user.items():
        error = _refusal(user_changes)
        if error is None and store is None:
            error = (ErrorCode.UNKNOWN_SERVER_ERROR, NO_STORE)
        if error is None:
            assert store is not None
            stored = await store.read_entity_config(USERS, sanitize(user))
            existing = credentials_from_user_config(stored)
            for change in user_changes:
                mech_name = next(
                    n for n, mech in MECHANISMS.items() if mech.wire_type == change.mechanism_type
                )
                if change.salted_password is None and mech_name not in existing:
                    error = (
                        ErrorCode.RESOURCE_NOT_FOUND,
                        "Attempt to delete a user credential that does not exist",
                    )
                    break
            if error is None:
                await store.write_entity_config(
                    USERS, sanitize(user), apply_changes(stored, user_changes)
                )
                log.info("SCRAM credentials of user %s altered by %s", user, connection.peer)
        code, message = error if error is not None else (ErrorCode.NONE, None)
        results.append(
            R.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)
        )
    return R(results=results)


def _refusal(changes: list[CredentialChange]) -> tuple[int, str] | None:
    mechanisms = Counter(c.mechanism_type for c in changes)
    if any(n > 1 for n in mechanisms.values()):
        return (
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        )
    for change in changes:
        refused = check_change(change)
        if refused is not None:
            return refused
    return None
