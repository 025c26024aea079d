"""The admin client's config operations: describe_configs, alter_configs and
incremental_alter_configs (DescribeConfigs 32, AlterConfigs 33, IncrementalAlterConfigs 44).

Routing is Kafka's: a broker resource ("1") goes to that broker, everything else (topics and
the cluster-default broker resource "") to the least loaded broker. Each call returns a result
per resource: the configs, or None for an alter; an error is raised as `KafkaError` naming the
resource when any resource failed (the message of the first one).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from epochlog.client.admin_base import AdminBase
from epochlog.client.errors import KafkaError
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode


class ResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class AlterOp(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


SOURCE_NAMES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}


@dataclass(frozen=True)
class ConfigResource:
    type: ResourceType
    name: str


@dataclass(frozen=True)
class DescribedConfig:
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str | None, str]] = field(default_factory=list)
    documentation: str | None = None


@dataclass(frozen=True)
class ConfigOp:
    name: str
    value: str | None
    op: AlterOp = AlterOp.SET


class ConfigAdminOperations(AdminBase):
    """`AsyncAdmin`'s config operations; expects `_net`, `start()` and `_timeout_ms()`."""

    async def _send_for(self, resource: ConfigResource, request: Any, api_key: int) -> Any:
        await self.start()
        if resource.type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and resource.name:
            return await self._net.send(int(resource.name), request, api_key=api_key)
        conn = await self._net.least_loaded_connection(self._timeout_ms(None))
        return await conn.send(request, api_key=api_key)

    async def describe_configs(
        self,
        resources: Sequence[ConfigResource],
        *,
        keys: Sequence[str] | None = None,
        include_synonyms: bool = True,
        include_documentation: bool = False,
    ) -> dict[ConfigResource, list[DescribedConfig]]:
        """Every config of each resource (or only `keys`), sorted by name."""
        await self.start()
        await self._net.update_metadata(self._timeout_ms(None))
        results: dict[ConfigResource, list[DescribedConfig]] = {}
        R = m.DescribeConfigsRequest
        for resource in resources:
            request = R(
                resources=[
                    R.DescribeConfigsResource(
                        resource_type=resource.type,
                        resource_name=resource.name,
                        configuration_keys=list(keys) if keys else None,
                    )
                ],
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
            response = await self._send_for(resource, request, ApiKey.DESCRIBE_CONFIGS)
            result = response.results[0]
            _raise_for(result.error_code, result.error_message, "DescribeConfigs", resource)
            results[resource] = sorted(
                (
                    DescribedConfig(
                        c.name,
                        c.value,
                        SOURCE_NAMES.get(c.config_source, str(c.config_source)),
                        c.read_only,
                        c.is_sensitive,
                        [(s.name, s.value, SOURCE_NAMES.get(s.source, "")) for s in c.synonyms],
                        c.documentation,
                    )
                    for c in result.configs
                ),
                key=lambda c: c.name,
            )
        return results

    async def alter_configs(
        self,
        configs: Mapping[ConfigResource, Mapping[str, str]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Replace each resource's whole set of dynamic configs (AlterConfigs)."""
        await self.start()
        await self._net.update_metadata(self._timeout_ms(None))
        R = m.AlterConfigsRequest
        for resource, values in configs.items():
            request = R(
                resources=[
                    R.AlterConfigsResource(
                        resource_type=resource.type,
                        resource_name=resource.name,
                        configs=[R.AlterableConfig(name=k, value=v) for k, v in values.items()],
                    )
                ],
                validate_only=validate_only,
            )
            response = await self._send_for(resource, request, ApiKey.ALTER_CONFIGS)
            answer = response.responses[0]
            _raise_for(answer.error_code, answer.error_message, "AlterConfigs", resource)

    async def incremental_alter_configs(
        self,
        ops: Mapping[ConfigResource, Sequence[ConfigOp]],
        *,
        validate_only: bool = False,
    ) -> None:
        """SET, DELETE, APPEND or SUBTRACT single keys (IncrementalAlterConfigs)."""
        await self.start()
        await self._net.update_metadata(self._timeout_ms(None))
        R = m.IncrementalAlterConfigsRequest
        for resource, changes in ops.items():
            request = R(
                resources=[
                    R.AlterConfigsResource(
                        resource_type=resource.type,
                        resource_name=resource.name,
                        configs=[
                            R.AlterableConfig(name=c.name, config_operation=c.op, value=c.value)
                            for c in changes
                        ],
                    )
                ],
                validate_only=validate_only,
            )
            response = await self._send_for(resource, request, ApiKey.INCREMENTAL_ALTER_CONFIGS)
            answer = response.responses[0]
            _raise_for(answer.error_code, answer.error_message, "IncrementalAlterConfigs", resource)


def _raise_for(code: int, message: str | None, api: str, resource: ConfigResource) -> None:
    error = ErrorCode.of(code)
    if error is not ErrorCode.NONE:
        what = f"{resource.type.name.lower()} {resource.name or '<default>'}"
        raise KafkaError(error, api, f"{what}: {message or error.name}")
