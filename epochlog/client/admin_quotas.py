"""The admin client's client-quota operations: describe_client_quotas and alter_client_quotas
(DescribeClientQuotas 48, AlterClientQuotas 49), sent to the least loaded broker.

An entity is a dict of entity type ("user", "client-id") to name, None meaning the default
entity, as Kafka's ClientQuotaEntity. A filter component is `QuotaFilter.exact("user", "alice")`,
`.default("user")` or `.any("client-id")`. describe_client_quotas returns {entity: {key: value}};
alter_client_quotas takes {entity: {key: value or None}} (None removes the key). A refusal raises
`KafkaError` naming the entity and the broker's message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from epochlog.client.admin_base import AdminBase
from epochlog.client.errors import KafkaError
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

USER = "user"
CLIENT_ID = "client-id"

# An entity as a hashable value: ((entity type, name or None for the default), ...).
QuotaEntityKey = tuple[tuple[str, str | None], ...]


def entity_key(entity: Mapping[str, str | None]) -> QuotaEntityKey:
    return tuple(sorted(entity.items(), key=lambda kv: (kv[0] != USER, kv[0])))


@dataclass(frozen=True)
class QuotaFilter:
    entity_type: str
    match_type: int  # 0 exact, 1 default, 2 any
    match: str | None = None

    @classmethod
    def exact(cls, entity_type: str, name: str) -> QuotaFilter:
        return cls(entity_type, 0, name)

    @classmethod
    def default(cls, entity_type: str) -> QuotaFilter:
        return cls(entity_type, 1)

    @classmethod
    def any(cls, entity_type: str) -> QuotaFilter:
        return cls(entity_type, 2)


def describe_entity(entity: Mapping[str, str | None] | QuotaEntityKey) -> str:
    items = entity.items() if isinstance(entity, Mapping) else entity
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in items)


class QuotaAdminOperations(AdminBase):
    """`AsyncAdmin`'s client-quota operations; expects `_net`, `start()` and `_timeout_ms()`."""

    async def _send_quota_request(self, request: Any, api_key: int) -> Any:
        await self.start()
        # Learn the brokers first: the bootstrap connection is closed once they are known.
        await self._net.update_metadata(self._timeout_ms(None))
        conn = await self._net.least_loaded_connection(self._timeout_ms(None))
        return await conn.send(request, api_key=api_key)

    async def describe_client_quotas(
        self, components: Sequence[QuotaFilter] = (), *, strict: bool = False
    ) -> dict[QuotaEntityKey, dict[str, float]]:
        """The quotas of every entity the filter matches (no components: all of them)."""
        R = m.DescribeClientQuotasRequest
        request = R(
            components=[
                R.ComponentData(entity_type=c.entity_type, match_type=c.match_type, match=c.match)
                for c in components
            ],
            strict=strict,
        )
        response = await self._send_quota_request(request, ApiKey.DESCRIBE_CLIENT_QUOTAS)
        error = ErrorCode.of(response.error_code)
        if error is not ErrorCode.NONE:
            raise KafkaError(error, "DescribeClientQuotas", response.error_message or error.name)
        return {
            entity_key({e.entity_type: e.entity_name for e in entry.entity}): {
                v.key: v.value for v in entry.values
            }
            for entry in response.entries or []
        }

    async def alter_client_quotas(
        self,
        alterations: Mapping[QuotaEntityKey, Mapping[str, float | None]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Set (a number) or remove (None) quota keys of each entity; one request for all."""
        R = m.AlterClientQuotasRequest
        request = R(
            entries=[
                R.EntryData(
                    entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[
                        R.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
                        for k, v in ops.items()
                    ],
                )
                for entity, ops in alterations.items()
            ],
            validate_only=validate_only,
        )
        response = await self._send_quota_request(request, ApiKey.ALTER_CLIENT_QUOTAS)
        for entry in response.entries:
            error = ErrorCode.of(entry.error_code)
            if error is not ErrorCode.NONE:
                what = describe_entity(tuple((e.entity_type, e.entity_name) for e in entry.entity))
                raise KafkaError(
                    error, "AlterClientQuotas", f"{what}: {entry.error_message or error.name}"
                )
