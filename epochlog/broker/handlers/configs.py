"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: topic and broker configs at
runtime, as a ZooKeeper-mode Kafka broker answers them.

Each resource is answered on its own. The decisions (what a describe lists, what an alter
stores, which error) are `config.dynamic`'s pure functions; this module reads the stored
configs through the broker's `DynamicConfigStore`, calls them, and writes the result: the
receiving broker writes ZooKeeper itself (Kafka's AdminZkClient), and the change notification
it leaves makes every broker apply it. Broker resources name this broker's id or "" (the
cluster default); another id is INVALID_REQUEST, as in Kafka (clients send a broker's resource
to that broker). BROKER_LOGGER resources (this broker's loggers, `config.loggers`) are described
and changed by IncrementalAlterConfigs in this process only; other resource types are
INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from typing import Any

from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.config.dynamic import (
    ConfigChange,
    ConfigEntry,
    ConfigRequestError,
    ConfigSource,
    ResourceType,
    broker_alter,
    broker_resource,
    describe_broker,
    describe_topic,
    topic_alter,
)
from epochlog.config.loggers import (
    apply_logger_plan,
    check_logger_resource,
    current_levels,
    describe_loggers,
    plan_logger_changes,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NO_STORE = "this broker runs without ZooKeeper: no dynamic configs"


async def handle_describe_configs(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    body, version = request.body, request.api_version
    R = m.DescribeConfigsResponse
    results = []
    for resource in body.resources:
        result = R.DescribeConfigsResult(
            resource_type=resource.resource_type, resource_name=resource.resource_name
        )
        try:
            entries = await _describe(services, resource, body, version)
        except ConfigRequestError as exc:
            log.info("DescribeConfigs from %s: %s", connection.peer, exc)
            result.error_code, result.error_message = int(exc.error), str(exc)
        else:
            result.configs = [_entry(R, e, version) for e in entries]
        results.append(result)
    return R(results=results)


async def _describe(
    services: BrokerServices, resource: Any, body: Any, version: int
) -> list[ConfigEntry]:
    if resource.resource_type == ResourceType.BROKER_LOGGER:
        check_logger_resource(resource.resource_name, services.broker_id)
        return describe_loggers(current_levels(), resource.configuration_keys)
    store = services.config_store
    if store is None:
        raise ConfigRequestError(ErrorCode.UNKNOWN_SERVER_ERROR, NO_STORE)
    options = {
        "keys": resource.configuration_keys,
        "include_synonyms": version >= 1 and body.include_synonyms,
        "include_documentation": version >= 3 and body.include_documentation,
    }
    name = resource.resource_name
    if resource.resource_type == ResourceType.TOPIC:
        if not name:
            raise ConfigRequestError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty"
            )
        if not services.metadata_cache.has_topic(name):
            raise ConfigRequestError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        overrides = await store.read_topic_config(name)
        return describe_topic(overrides, store.broker_layers(), **options)
    if resource.resource_type == ResourceType.BROKER:
        per_broker = broker_resource(name, services.broker_id)
        return describe_broker(store.broker_layers(), per_broker=per_broker, **options)
    raise ConfigRequestError(
        ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource.resource_type}"
    )


def _entry(R: Any, entry: ConfigEntry, version: int) -> Any:
    """The entry at `version`: fields a version lacks stay at their defaults (the codec
    refuses anything else)."""
    result = R.DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        is_sensitive=entry.sensitive,
    )
    if version == 0:  # v0 has no source: IsDefault says the key is set nowhere
        result.is_default = entry.source == ConfigSource.DEFAULT_CONFIG
    else:
        result.config_source = int(entry.source)
        result.synonyms = [
            R.DescribeConfigsSynonym(name=s.name, value=s.value, source=int(s.source))
            for s in entry.synonyms
        ]
    if version >= 3:
        result.config_type = int(entry.config_type)
        result.documentation = entry.documentation
    return result


async def handle_alter_configs(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    return await _alter(services, request, connection, m.AlterConfigsResponse, incremental=False)


async def handle_incremental_alter_configs(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    return await _alter(
        services, request, connection, m.IncrementalAlterConfigsResponse, incremental=True
    )


async def _alter(
    services: BrokerServices,
    request: Request,
    connection: ConnectionInfo,
    response: Any,
    *,
    incremental: bool,
) -> Any:
    body = request.body
    seen: dict[tuple[int, str], int] = {}
    for resource in body.resources:
        key = (resource.resource_type, resource.resource_name)
        seen[key] = seen.get(key, 0) + 1
    answers = []
    for resource in body.resources:
        answer = response.AlterConfigsResourceResponse(
            resource_type=resource.resource_type, resource_name=resource.resource_name
        )
        try:
            if seen[(resource.resource_type, resource.resource_name)] > 1:
                raise ConfigRequestError(
                    ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."
                )
            changes = [
                ConfigChange(c.name, c.value, c.config_operation if incremental else 0)
                for c in resource.configs
            ]
            await _alter_one(services, resource, changes, incremental, body.validate_only)
        except ConfigRequestError as exc:
            log.info("%s from %s refused: %s", request_name(incremental), connection.peer, exc)
            answer.error_code, answer.error_message = int(exc.error), str(exc)
        answers.append(answer)
    return response(responses=answers)


def request_name(incremental: bool) -> str:
    return "IncrementalAlterConfigs" if incremental else "AlterConfigs"


async def _alter_one(
    services: BrokerServices,
    resource: Any,
    changes: list[ConfigChange],
    incremental: bool,
    validate_only: bool,
) -> None:
    if resource.resource_type == ResourceType.BROKER_LOGGER:
        if not incremental:
            raise ConfigRequestError(
                ErrorCode.INVALID_REQUEST,
                "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER",
            )
        check_logger_resource(resource.resource_name, services.broker_id)
        plan = plan_logger_changes(changes, current_levels())
        if not validate_only:
            log.info("changing log levels: %s", plan)
            apply_logger_plan(plan)
        return
    store = services.config_store
    if store is None:
        raise ConfigRequestError(ErrorCode.UNKNOWN_SERVER_ERROR, NO_STORE)
    name = resource.resource_name
    if resource.resource_type == ResourceType.TOPIC:
        if name and not services.metadata_cache.has_topic(name):
            raise ConfigRequestError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        stored = await store.read_topic_config(name) if name else {}
        config = topic_alter(name, stored, changes, incremental=incremental)
        if not validate_only:
            log.info("updating topic %s with new configuration %s", name, config)
            await store.write_topic_config(name, config)
        return
    if resource.resource_type == ResourceType.BROKER:
        per_broker = broker_resource(name, services.broker_id)
        broker_id = services.broker_id if per_broker else None
        stored = await store.read_broker_config(broker_id)
        config = broker_alter(
            stored,
            changes,
            incremental=incremental,
            layers=store.broker_layers(),
            per_broker=per_broker,
        )
        if not validate_only:
            who = f"broker {broker_id}" if per_broker else "the cluster default"
            log.info("updating %s with new configuration %s", who, config)
            await store.write_broker_config(broker_id, config)
        return
    raise ConfigRequestError(
        ErrorCode.INVALID_REQUEST,
        f"{request_name(incremental)} is only supported for topics and brokers, "
        f"but resource type is {resource.resource_type}",
    )
