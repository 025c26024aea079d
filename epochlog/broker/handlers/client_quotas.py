"""DescribeClientQuotas and AlterClientQuotas, as a ZooKeeper-mode Kafka broker answers them
(ZkAdminManager): any broker reads and writes /config/users and /config/clients itself, and
the change notification it leaves makes every broker apply the new quotas.

The decisions (entity and filter checks, the stored form of a value, what a describe lists)
are `config.client_quotas`' pure functions. An alter answers each entity on its own; an entity
whose ops are refused writes nothing (INVALID_REQUEST naming the key or value), validate_only
writes nothing at all. A describe whose filter is refused answers the error at the top level
with no entries.
"""

from __future__ import annotations

import logging
from typing import Any

from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.config.client_quotas import (
    FilterComponent,
    QuotaOp,
    QuotaRequestError,
    alter_quota_config,
    describe_quotas,
    entity_from_znode,
    entity_znode,
    parse_entity,
    parse_filter,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NO_STORE = "this broker runs without ZooKeeper: no client quotas"


async def handle_describe_client_quotas(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.DescribeClientQuotasResponse
    body = request.body
    try:
        store = services.config_store
        if store is None:
            raise QuotaRequestError(ErrorCode.UNKNOWN_SERVER_ERROR, NO_STORE)
        quota_filter = parse_filter(
            [FilterComponent(c.entity_type, c.match_type, c.match) for c in body.components],
            body.strict,
        )
        stored = []
        for config_type, name, config in await store.read_quota_configs():
            entity = entity_from_znode(config_type, name)
            if entity is not None:
                stored.append((entity, config))
    except QuotaRequestError as exc:
        log.info("DescribeClientQuotas from %s refused: %s", connection.peer, exc)
        return R(error_code=int(exc.error), error_message=str(exc), entries=None)
    entries = [
        R.EntryData(
            entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity.entries()],
            values=[R.ValueData(key=k, value=v) for k, v in sorted(values.items())],
        )
        for entity, values in describe_quotas(quota_filter, stored)
    ]
    return R(entries=entries)


async def handle_alter_client_quotas(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.AlterClientQuotasResponse
    body = request.body
    answers = []
    for entry in body.entries:
        answer = R.EntryData(
            entity=[
                R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                for e in entry.entity
            ]
        )
        try:
            await _alter_one(services, entry, body.validate_only)
        except QuotaRequestError as exc:
            log.info("AlterClientQuotas from %s refused: %s", connection.peer, exc)
            answer.error_code, answer.error_message = int(exc.error), str(exc)
        answers.append(answer)
    return R(entries=answers)


async def _alter_one(services: BrokerServices, entry: Any, validate_only: bool) -> None:
    store = services.config_store
    if store is None:
        raise QuotaRequestError(ErrorCode.UNKNOWN_SERVER_ERROR, NO_STORE)
    entity = parse_entity((e.entity_type, e.entity_name) for e in entry.entity)
    config_type, name = entity_znode(entity)
    stored = await store.read_entity_config(config_type, name)
    config = alter_quota_config(stored, (QuotaOp(o.key, o.value, o.remove) for o in entry.ops))
    if validate_only:
        return
    log.info("updating client quotas of %s: %s", entity, config)
    await store.write_entity_config(config_type, name, config)
