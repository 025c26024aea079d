"""The admin client's ACL operations: create_acls, describe_acls and delete_acls (CreateAcls 30,
DescribeAcls 29, DeleteAcls 31), sent to the least loaded broker.

A binding is `AclSpec(resource_type, resource_name, pattern_type, principal, host, operation,
permission)` with Kafka's names for the enumerations ("Topic", "Group", "Cluster",
"TransactionalId"; "LITERAL", "PREFIXED"; "Read", "IdempotentWrite", ...; "Allow", "Deny"),
matched case-insensitively. A filter is an `AclSpec` too, where None means any name, principal
or host and "Any" any type, pattern ("Match": the patterns that apply to the named resource),
operation or permission. The client knows only the wire codes (it depends on protocol/ alone);
the broker's authorizer is `security.acls`. A refusal raises `KafkaError` naming the binding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from epochlog.client.admin_base import AdminBase
from epochlog.client.errors import ClientError, KafkaError
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

# Kafka's wire codes (ResourceType, PatternType, AclOperation, AclPermissionType).
RESOURCE_TYPES = {
    "Any": 1,
    "Topic": 2,
    "Group": 3,
    "Cluster": 4,
    "TransactionalId": 5,
    "DelegationToken": 6,
    "User": 7,
}
PATTERN_TYPES = {"Any": 1, "Match": 2, "Literal": 3, "Prefixed": 4}
OPERATIONS = {
    "Any": 1,
    "All": 2,
    "Read": 3,
    "Write": 4,
    "Create": 5,
    "Delete": 6,
    "Alter": 7,
    "Describe": 8,
    "ClusterAction": 9,
    "DescribeConfigs": 10,
    "AlterConfigs": 11,
    "IdempotentWrite": 12,
    "CreateTokens": 13,
    "DescribeTokens": 14,
}
PERMISSIONS = {"Any": 1, "Deny": 2, "Allow": 3}
CLUSTER_RESOURCE = "kafka-cluster"


def code_of(table: dict[str, int], name: str, what: str) -> int:
    key = name.replace("_", "").replace("-", "").lower()
    for title, code in table.items():
        if title.lower() == key:
            return code
    raise ClientError(f"unknown {what} {name!r} (one of {', '.join(table)})")


def name_of(table: dict[str, int], code: int) -> str:
    for title, value in table.items():
        if value == code:
            return title
    return f"Unknown({code})"


@dataclass(frozen=True)
class AclSpec:
    resource_type: str = "Any"
    resource_name: str | None = None
    pattern_type: str = "Literal"
    principal: str | None = None
    host: str | None = "*"
    operation: str = "Any"
    permission: str = "Any"

    def __str__(self) -> str:
        return (
            f"{self.permission} {self.principal} {self.operation} from {self.host} on "
            f"{self.resource_type}:{self.pattern_type.upper()}:{self.resource_name}"
        )

    def codes(self) -> tuple[int, int, int, int]:
        """(resource type, pattern type, operation, permission) as wire codes."""
        return (
            code_of(RESOURCE_TYPES, self.resource_type, "resource type"),
            code_of(PATTERN_TYPES, self.pattern_type, "pattern type"),
            code_of(OPERATIONS, self.operation, "operation"),
            code_of(PERMISSIONS, self.permission, "permission"),
        )


ANY_ACL = AclSpec(pattern_type="Any", host=None)  # the filter matching every binding


def _spec(
    rtype: int, name: str, ptype: int, principal: str, host: str, op: int, perm: int
) -> AclSpec:
    return AclSpec(
        name_of(RESOURCE_TYPES, rtype),
        name,
        name_of(PATTERN_TYPES, ptype),
        principal,
        host,
        name_of(OPERATIONS, op),
        name_of(PERMISSIONS, perm),
    )


class AclAdminOperations(AdminBase):
    """`AsyncAdmin`'s ACL operations; expects `_net`, `start()` and `_timeout_ms()`."""

    async def _send_acl_request(self, request: Any, api_key: int) -> Any:
        await self.start()
        await self._net.update_metadata(self._timeout_ms(None))
        conn = await self._net.least_loaded_connection(self._timeout_ms(None))
        return await conn.send(request, api_key=api_key)

    async def create_acls(self, bindings: Sequence[AclSpec]) -> None:
        R = m.CreateAclsRequest
        creations = []
        for b in bindings:
            if b.resource_name is None or b.principal is None or b.host is None:
                raise ClientError(f"{b}: a binding needs a resource name, principal and host")
            rtype, ptype, op, perm = b.codes()
            creations.append(
                R.AclCreation(
                    resource_type=rtype,
                    resource_name=b.resource_name,
                    resource_pattern_type=ptype,
                    principal=b.principal,
                    host=b.host,
                    operation=op,
                    permission_type=perm,
                )
            )
        response = await self._send_acl_request(R(creations=creations), ApiKey.CREATE_ACLS)
        for binding, result in zip(bindings, response.results, strict=True):
            error = ErrorCode.of(result.error_code)
            if error is not ErrorCode.NONE:
                raise KafkaError(
                    error, "CreateAcls", f"{binding}: {result.error_message or error.name}"
                )

    async def describe_acls(self, binding_filter: AclSpec | None = None) -> list[AclSpec]:
        """The bindings the filter matches (None: every ACL)."""
        binding_filter = binding_filter or ANY_ACL
        rtype, ptype, op, perm = binding_filter.codes()
        request = m.DescribeAclsRequest(
            resource_type_filter=rtype,
            resource_name_filter=binding_filter.resource_name,
            pattern_type_filter=ptype,
            principal_filter=binding_filter.principal,
            host_filter=binding_filter.host,
            operation=op,
            permission_type=perm,
        )
        response = await self._send_acl_request(request, ApiKey.DESCRIBE_ACLS)
        error = ErrorCode.of(response.error_code)
        if error is not ErrorCode.NONE:
            raise KafkaError(error, "DescribeAcls", response.error_message or error.name)
        return [
            _spec(
                r.resource_type,
                r.resource_name,
                r.pattern_type,
                a.principal,
                a.host,
                a.operation,
                a.permission_type,
            )
            for r in response.resources
            for a in r.acls
        ]

    async def delete_acls(self, filters: Sequence[AclSpec]) -> list[AclSpec]:
        """Remove every binding a filter matches; returns what was removed."""
        R = m.DeleteAclsRequest
        wire = []
        for f in filters:
            rtype, ptype, op, perm = f.codes()
            wire.append(
                R.DeleteAclsFilter(
                    resource_type_filter=rtype,
                    resource_name_filter=f.resource_name,
                    pattern_type_filter=ptype,
                    principal_filter=f.principal,
                    host_filter=f.host,
                    operation=op,
                    permission_type=perm,
                )
            )
        response = await self._send_acl_request(R(filters=wire), ApiKey.DELETE_ACLS)
        removed: list[AclSpec] = []
        for f, result in zip(filters, response.filter_results, strict=True):
            error = ErrorCode.of(result.error_code)
            if error is not ErrorCode.NONE:
                raise KafkaError(error, "DeleteAcls", f"{f}: {result.error_message or error.name}")
            removed.extend(
                _spec(
                    a.resource_type,
                    a.resource_name,
                    a.pattern_type,
                    a.principal,
                    a.host,
                    a.operation,
                    a.permission_type,
                )
                for a in result.matching_acls
            )
        return removed
