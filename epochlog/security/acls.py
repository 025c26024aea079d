"""Kafka's ACL model and the authorizer's decision, sans-I/O (Kafka's AclAuthorizer, ZK mode).

An ACL binding is a resource pattern (type, name, LITERAL or PREFIXED) and an entry
(principal, host, operation, Allow or Deny). `Authorizer.authorize(principal, host, operation,
resource type, name)` decides as AclAuthorizer does:

1. a principal named in `super.users` may do anything;
2. the ACLs that apply to a resource are those on its exact name (LITERAL), on the literal
   wildcard `*`, and on every PREFIXED pattern the name starts with;
3. if none applies, the answer is `allow.everyone.if.no.acl.found` (default false);
4. a matching Deny wins: entry for the principal or `User:*`, host equal or `*`, operation
   equal or All (implied operations do not widen a Deny);
5. else an Allow must match, where Describe is also allowed by Read, Write, Delete or Alter,
   and DescribeConfigs by AlterConfigs (Kafka's implied operations), and All allows anything.

Filters (`AclBindingFilter`) are what Describe/DeleteAcls carry: ANY in any field, a null name,
principal or host matches everything, pattern type MATCH matches the patterns that would apply
to a named resource (exact, `*`, prefixes of it). The numeric codes are Kafka's wire codes.
`AclStore` holds the bindings by resource pattern, which is how ZooKeeper stores them too.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from epochlog.security.principal import KafkaPrincipal

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = KafkaPrincipal("User", "*")
CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name


class AclError(ValueError):
    """A binding or filter that Kafka would refuse (the message names the field)."""


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def title(self) -> str:
        """The name in ZooKeeper paths and tools: Topic, TransactionalId, ..."""
        return _camel(self.name)


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any stored pattern type
    MATCH = 2  # filters only: the patterns that apply to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14

    @property
    def title(self) -> str:
        """Kafka's JSON and tool name: Read, IdempotentWrite, DescribeConfigs, ..."""
        return _camel(self.name)


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3

    @property
    def title(self) -> str:
        return _camel(self.name)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _by_title(enum_type: type[enum.IntEnum], text: str, what: str) -> int:
    """Kafka's fromString: case-insensitive, underscores optional (`IdempotentWrite`,
    `IDEMPOTENT_WRITE`, `idempotent-write` all read)."""
    key = text.replace("_", "").replace("-", "").lower()
    for member in enum_type:
        if member.name.replace("_", "").lower() == key:
            return int(member)
    names = ", ".join(_camel(m.name) for m in enum_type if m.name not in ("UNKNOWN",))
    raise AclError(f"unknown {what} {text!r} (one of {names})")


def resource_type_named(text: str) -> ResourceType:
    return ResourceType(_by_title(ResourceType, text, "resource type"))


def operation_named(text: str) -> AclOperation:
    return AclOperation(_by_title(AclOperation, text, "operation"))


def permission_named(text: str) -> AclPermissionType:
    return AclPermissionType(_by_title(AclPermissionType, text, "permission type"))


def pattern_type_named(text: str) -> PatternType:
    return PatternType(_by_title(PatternType, text, "pattern type"))


# Operations valid on each resource type (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS: Mapping[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

# An Allow of any of these also allows the key (Kafka's implied operations).
IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )

    def applies_to(self, name: str) -> bool:
        """Whether this stored pattern covers the resource called `name`."""
        if self.pattern_type == PatternType.LITERAL:
            return self.name == name or self.name == WILDCARD_RESOURCE
        return name.startswith(self.name)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str  # "User:alice" or "User:*"
    host: str  # an IP address or "*"
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        e = self.entry
        return (
            f"(principal={e.principal}, host={e.host}, operation={e.operation.title}, "
            f"permissionType={e.permission.title}) on {self.pattern}"
        )


def validate_binding(binding: AclBinding) -> None:
    """Raise AclError naming what Kafka would refuse in a CreateAcls creation."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise AclError(f"resource type {pattern.resource_type.name} is only valid in a filter")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(
            f"pattern type {pattern.pattern_type.name} is only valid in a filter "
            "(LITERAL or PREFIXED)"
        )
    if not pattern.name:
        raise AclError("resource name must not be empty")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise AclError(f"the cluster resource is called {CLUSTER_NAME!r}, not {pattern.name!r}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise AclError(f"operation {entry.operation.name} is only valid in a filter")
    if entry.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise AclError(f"permission type {entry.permission.name} is only valid in a filter")
    if entry.operation != AclOperation.ALL and entry.operation not in SUPPORTED_OPERATIONS.get(
        pattern.resource_type, frozenset()
    ):
        raise AclError(
            f"operation {entry.operation.title} is not supported on resource type "
            f"{pattern.resource_type.title}"
        )
    try:
        KafkaPrincipal.parse(entry.principal)
    except ValueError as exc:
        raise AclError(str(exc)) from None
    if not entry.host:
        raise AclError("host must not be empty (use * for any host)")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What Describe/DeleteAcls match: None is "any" for name, principal and host."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def validate(self) -> None:
        for value, what in (
            (self.resource_type, "resource type"),
            (self.pattern_type, "pattern type"),
            (self.operation, "operation"),
            (self.permission, "permission type"),
        ):
            if value == 0:
                raise AclError(f"{what} UNKNOWN cannot be matched")

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            # The patterns that would apply to the named resource (any name: all of them).
            return self.name is None or pattern.applies_to(self.name)
        if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
            return False
        return self.name is None or self.name == pattern.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (AclPermissionType.ANY, entry.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


ANY_BINDING = AclBindingFilter()


def parse_super_users(text: str) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (Kafka's format), e.g.
    `User:admin;User:broker`. Each must be Type:name."""
    users: set[str] = set()
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        try:
            users.add(str(KafkaPrincipal.parse(part)))
        except ValueError as exc:
            raise AclError(f"super.users: {exc}") from None
    return frozenset(users)


class AclStore:
    """All ACL bindings, keyed by resource pattern (one ZooKeeper znode per pattern), with the
    prefixed patterns also indexed per resource type, so a decision costs a few dict lookups
    however many ACLs there are."""

    def __init__(self) -> None:
        self.by_pattern: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # resource type -> prefix -> entries
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}

    def replace(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """The entries of one pattern as ZooKeeper now holds them (none: the pattern is gone)."""
        entries = frozenset(entries)
        prefixed = self._prefixed.setdefault(pattern.resource_type, {})
        if entries:
            self.by_pattern[pattern] = entries
            if pattern.pattern_type == PatternType.PREFIXED:
                prefixed[pattern.name] = entries
        else:
            self.by_pattern.pop(pattern, None)
            if pattern.pattern_type == PatternType.PREFIXED:
                prefixed.pop(pattern.name, None)

    def bindings(self, filter_: AclBindingFilter = ANY_BINDING) -> list[AclBinding]:
        out = []
        for pattern, entries in self.by_pattern.items():
            if not filter_.matches_pattern(pattern):
                continue
            for entry in entries:
                if filter_.matches_entry(entry):
                    out.append(AclBinding(pattern, entry))
        return out

    def entries_for(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """Every entry that applies to the named resource (literal, `*`, prefixes)."""
        out: list[AccessControlEntry] = []
        by_pattern = self.by_pattern
        for literal in {name, WILDCARD_RESOURCE}:
            found = by_pattern.get(ResourcePattern(resource_type, literal))
            if found:
                out.extend(found)
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            if len(prefixed) < len(name):
                for prefix, entries in prefixed.items():
                    if name.startswith(prefix):
                        out.extend(entries)
            else:
                for end in range(1, len(name) + 1):
                    found = prefixed.get(name[:end])
                    if found:
                        out.extend(found)
        return out


def _entry_matches(
    entry: AccessControlEntry, principal: str, host: str, operations: frozenset[AclOperation]
) -> bool:
    return (
        (entry.principal == principal or entry.principal == "User:*")
        and (entry.host == host or entry.host == WILDCARD_HOST)
        and (entry.operation in operations or entry.operation == AclOperation.ALL)
    )


class Authorizer:
    """Kafka's AclAuthorizer decision over an `AclStore` (see the module docstring)."""

    def __init__(
        self,
        store: AclStore | None = None,
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.store = store if store is not None else AclStore()
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found

    def authorize(
        self,
        principal: KafkaPrincipal | str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        who = str(principal)
        if who in self.super_users:
            return True
        entries = self.store.entries_for(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        exact = frozenset({operation})
        allow_ops = IMPLIED_BY.get(operation, exact)
        allowed = False
        for entry in entries:
            if entry.permission == AclPermissionType.DENY:
                if _entry_matches(entry, who, host, exact):
                    return False
            elif not allowed and _entry_matches(entry, who, host, allow_ops):
                allowed = True
        return allowed

    def authorize_any_of_type(
        self,
        principal: KafkaPrincipal | str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Kafka's authorizeByResourceType: whether some resource of the type may be operated
        on (InitProducerId for an idempotent producer asks Write on any topic). Allowed when an
        Allow exists whose pattern no Deny covers whole (a Deny on `*`, or on a prefix of it)."""
        who = str(principal)
        if who in self.super_users:
            return True
        ops = frozenset({operation})
        denied_literals: set[str] = set()
        denied_prefixes: list[str] = []
        allows: list[ResourcePattern] = []
        any_acl = False
        for pattern, entries in self.store.by_pattern.items():
            if pattern.resource_type != resource_type:
                continue
            any_acl = True
            for entry in entries:
                if not _entry_matches(entry, who, host, ops):
                    continue
                if entry.permission == AclPermissionType.ALLOW:
                    allows.append(pattern)
                elif pattern.pattern_type == PatternType.PREFIXED:
                    denied_prefixes.append(pattern.name)
                else:
                    denied_literals.add(pattern.name)
        if not any_acl:
            return self.allow_everyone_if_no_acl_found
        if WILDCARD_RESOURCE in denied_literals:
            return False
        for pattern in allows:
            if any(pattern.name.startswith(prefix) for prefix in denied_prefixes):
                continue
            if pattern.pattern_type == PatternType.LITERAL and pattern.name in denied_literals:
                continue
            return True
        return False
