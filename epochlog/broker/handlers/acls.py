"""CreateAcls, DescribeAcls and DeleteAcls, as a ZooKeeper-mode Kafka broker answers them
(AclApis over AclAuthorizer): any broker writes the ACL znodes itself and leaves a change
notification that every broker's authorizer follows.

Without an authorizer (`authorizer.class.name` empty) each answers SECURITY_DISABLED, as Kafka
does. A creation Kafka would refuse (a filter-only value such as ANY, an operation the resource
type does not have, a cluster not called kafka-cluster) is INVALID_REQUEST naming the field,
and nothing of that request is written. Who may call them (Describe / Alter on the Cluster) is
the authorizer's dispatch check, `security.api_authorization`.
"""

from __future__ import annotations

import logging
from typing import Any

from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode
from epochlog.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)

log = logging.getLogger(__name__)

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _enum(enum_type: Any, code: int, what: str) -> Any:
    try:
        return enum_type(code)
    except ValueError:
        raise AclError(f"unknown {what} code {code}") from None


def binding_from_wire(item: Any) -> AclBinding:
    """A CreateAcls creation as a binding; AclError names a field Kafka would refuse."""
    binding = AclBinding(
        ResourcePattern(
            _enum(ResourceType, item.resource_type, "resource type"),
            item.resource_name,
            _enum(PatternType, item.resource_pattern_type, "pattern type"),
        ),
        AccessControlEntry(
            item.principal,
            item.host,
            _enum(AclOperation, item.operation, "operation"),
            _enum(AclPermissionType, item.permission_type, "permission type"),
        ),
    )
    validate_binding(binding)
    return binding


def filter_from_wire(item: Any) -> AclBindingFilter:
    binding_filter = AclBindingFilter(
        _enum(ResourceType, item.resource_type_filter, "resource type"),
        item.resource_name_filter,
        _enum(PatternType, item.pattern_type_filter, "pattern type"),
        item.principal_filter,
        item.host_filter,
        _enum(AclOperation, item.operation, "operation"),
        _enum(AclPermissionType, item.permission_type, "permission type"),
    )
    binding_filter.validate()
    return binding_filter


async def handle_describe_acls(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.DescribeAclsResponse
    if services.acl_admin is None:
        return R(error_code=int(ErrorCode.SECURITY_DISABLED), error_message=NO_AUTHORIZER)
    try:
        binding_filter = filter_from_wire(request.body)
    except AclError as exc:
        return R(error_code=int(ErrorCode.INVALID_REQUEST), error_message=str(exc))
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in services.acl_admin.describe(binding_filter):
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    resources = [
        R.DescribeAclsResource(
            resource_type=int(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=int(pattern.pattern_type),
            acls=[
                R.AclDescription(
                    principal=e.principal,
                    host=e.host,
                    operation=int(e.operation),
                    permission_type=int(e.permission),
                )
                for e in sorted(entries, key=_entry_order)
            ],
        )
        for pattern, entries in sorted(by_pattern.items(), key=lambda kv: _pattern_order(kv[0]))
    ]
    return R(resources=resources)


def _entry_order(e: AccessControlEntry) -> tuple[str, str, int, int]:
    return (e.principal, e.host, int(e.operation), int(e.permission))


def _pattern_order(p: ResourcePattern) -> tuple[int, str, int]:
    return (int(p.resource_type), p.name, int(p.pattern_type))


async def handle_create_acls(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.CreateAclsResponse
    creations = request.body.creations
    if services.acl_admin is None:
        code = int(ErrorCode.SECURITY_DISABLED)
        return R(
            results=[
                R.AclCreationResult(error_code=code, error_message=NO_AUTHORIZER) for _ in creations
            ]
        )
    results: list[Any] = [R.AclCreationResult() for _ in creations]
    valid: list[AclBinding] = []
    for item, result in zip(creations, results, strict=True):
        try:
            valid.append(binding_from_wire(item))
        except AclError as exc:
            log.info("CreateAcls from %s refused: %s", connection.peer, exc)
            result.error_code = int(ErrorCode.INVALID_REQUEST)
            result.error_message = str(exc)
    if valid:
        try:
            await services.acl_admin.create(valid)
        except Exception as exc:
            log.exception("CreateAcls from %s failed", connection.peer)
            for result in results:
                if result.error_code == 0:
                    result.error_code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
                    result.error_message = f"storing the ACLs failed: {exc}"
        else:
            for binding in valid:
                log.info("%s added ACL %s", connection.principal, binding)
    return R(results=results)


async def handle_delete_acls(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.DeleteAclsResponse
    filters = request.body.filters
    if services.acl_admin is None:
        code = int(ErrorCode.SECURITY_DISABLED)
        return R(
            filter_results=[
                R.DeleteAclsFilterResult(error_code=code, error_message=NO_AUTHORIZER)
                for _ in filters
            ]
        )
    results: list[Any] = [R.DeleteAclsFilterResult() for _ in filters]
    valid: list[tuple[int, AclBindingFilter]] = []
    for index, item in enumerate(filters):
        try:
            valid.append((index, filter_from_wire(item)))
        except AclError as exc:
            results[index].error_code = int(ErrorCode.INVALID_REQUEST)
            results[index].error_message = str(exc)
    if valid:
        try:
            removed = await services.acl_admin.delete([f for _, f in valid])
        except Exception as exc:
            log.exception("DeleteAcls from %s failed", connection.peer)
            for index, _ in valid:
                results[index].error_code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
                results[index].error_message = f"removing the ACLs failed: {exc}"
        else:
            for (index, _), bindings in zip(valid, removed, strict=True):
                results[index].matching_acls = [
                    R.DeleteAclsMatchingAcl(
                        resource_type=int(b.pattern.resource_type),
                        resource_name=b.pattern.name,
                        pattern_type=int(b.pattern.pattern_type),
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=int(b.entry.operation),
                        permission_type=int(b.entry.permission),
                    )
                    for b in bindings
                ]
                for b in bindings:
                    log.info("%s removed ACL %s", connection.principal, b)
    return R(filter_results=results)
