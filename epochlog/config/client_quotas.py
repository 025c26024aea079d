"""Client quota entities and their stored configs, as Kafka's ZooKeeper mode keeps them
(ZkAdminManager.alterClientQuotas / describeClientQuotas, QuotaConfigs, Sanitizer).

An entity is a user, a client id, or a user with a client id; either name may be the default
(a null EntityName on the wire, `<default>` in ZooKeeper). Names are stored sanitized (Kafka's
`Sanitizer`: URL-encoded as Java's URLEncoder does, `*` as %2A and a space as %20):

    user alice               /config/users/alice
    client id app-1          /config/clients/app-1
    user alice, client app   /config/users/alice/clients/app
    default user             /config/users/<default>
    user alice, default id   /config/users/alice/clients/<default>

each `{"version":1,"config":{"producer_byte_rate":"1024",...}}`, announced with the entity path
`users/alice/clients/app` (the part after /config/). Every function here is pure: the handlers
read and write ZooKeeper around them.

Quota keys (QuotaConfigs): producer_byte_rate and consumer_byte_rate are LONG (a value with a
fraction is refused with Kafka's "must be a LONG value"), request_percentage and
controller_mutation_rate DOUBLE. epochlog also refuses a value that is not positive or not
finite: Kafka's ZooKeeper mode stores it, and a quota of 0 or less only divides by zero later.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote_plus

from epochlog.protocol.errors import ErrorCode

USER = "user"  # ClientQuotaEntity.USER
CLIENT_ID = "client-id"  # ClientQuotaEntity.CLIENT_ID
IP = "ip"
DEFAULT_ENTITY = "<default>"  # ZooKeeperInternals.DEFAULT_STRING
USERS = "users"  # ConfigType.User: /config/users
CLIENTS = "clients"  # ConfigType.Client: /config/clients

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# Kafka's ConfigDef types of the user and client-id quota keys.
QUOTA_KEY_TYPES: dict[str, str] = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}

# DescribeClientQuotas MatchType (ClientQuotaFilterComponent).
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_ANY = 2  # MATCH_TYPE_SPECIFIED: any name, the default included


class QuotaRequestError(Exception):
    """A client-quota request refused with a Kafka error code; the message names the cause."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


def _invalid(message: str) -> QuotaRequestError:
    return QuotaRequestError(ErrorCode.INVALID_REQUEST, message)


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: Java's URLEncoder (letters, digits, `.-*_` kept, a space as
    `+`), then `*` as %2A and `+` as %20."""
    return quote(name, safe="", encoding="utf-8").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize (Java's URLDecoder)."""
    return unquote_plus(name, encoding="utf-8")


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A quota entity. `has_user`/`has_client_id` say which parts it has; a part's name None
    is the default entity of that type."""

    has_user: bool = False
    user: str | None = None
    has_client_id: bool = False
    client_id: str | None = None

    def entries(self) -> list[tuple[str, str | None]]:
        """(entity type, name or None for the default), as the wire lists them."""
        parts: list[tuple[str, str | None]] = []
        if self.has_user:
            parts.append((USER, self.user))
        if self.has_client_id:
            parts.append((CLIENT_ID, self.client_id))
        return parts

    def __str__(self) -> str:
        return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in self.entries())


def user_entity(user: str | None) -> QuotaEntity:
    return QuotaEntity(has_user=True, user=user)


def client_entity(client_id: str | None) -> QuotaEntity:
    return QuotaEntity(has_client_id=True, client_id=client_id)


def user_client_entity(user: str | None, client_id: str | None) -> QuotaEntity:
    return QuotaEntity(has_user=True, user=user, has_client_id=True, client_id=client_id)


def parse_entity(entries: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """An alter's entity from the wire, refused as ZkAdminManager refuses it."""
    entries = list(entries)
    if not entries:
        raise _invalid("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for entity_type, name in entries:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise _invalid(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise _invalid(f"Empty {entity_type} not supported")
        if entity_type in seen:
            raise _invalid(f"Duplicate {entity_type} entity in client quota entity")
        seen[entity_type] = name
    if IP in seen:
        if len(seen) > 1:
            raise _invalid(
                "Invalid quota entity combination, IP entity should not be used with "
                "user/client ID entity."
            )
        raise _invalid("IP quotas (connection_creation_rate) are not supported by epochlog")
    return QuotaEntity(
        has_user=USER in seen,
        user=seen.get(USER),
        has_client_id=CLIENT_ID in seen,
        client_id=seen.get(CLIENT_ID),
    )


def _stored_name(name: str | None) -> str:
    return DEFAULT_ENTITY if name is None else sanitize(name)


def _name_from_store(stored: str) -> str | None:
    return None if stored == DEFAULT_ENTITY else desanitize(stored)


def entity_znode(entity: QuotaEntity) -> tuple[str, str]:
    """(config type, name under /config/<type>/) where the entity's quotas are stored; the
    notification's entity_path is `<type>/<name>`."""
    if entity.has_user and entity.has_client_id:
        return USERS, f"{_stored_name(entity.user)}/clients/{_stored_name(entity.client_id)}"
    if entity.has_user:
        return USERS, _stored_name(entity.user)
    if entity.has_client_id:
        return CLIENTS, _stored_name(entity.client_id)
    raise _invalid("Invalid client quota entity")


def entity_from_znode(config_type: str, name: str) -> QuotaEntity | None:
    """The entity stored at /config/<config_type>/<name>; None if that is no quota entity."""
    if config_type == CLIENTS and "/" not in name:
        return client_entity(_name_from_store(name))
    if config_type == USERS:
        parts = name.split("/")
        if len(parts) == 1:
            return user_entity(_name_from_store(parts[0]))
        if len(parts) == 3 and parts[1] == CLIENTS:
            return user_client_entity(_name_from_store(parts[0]), _name_from_store(parts[2]))
    return None


@dataclass(frozen=True, slots=True)
class QuotaOp:
    key: str
    value: float
    remove: bool


def alter_quota_config(stored: Mapping[str, str], ops: Iterable[QuotaOp]) -> dict[str, str]:
    """The entity's config after the ops (ZkAdminManager.alterEntityQuotas): a removal drops the
    key, a set validates key and value and stores Kafka's string form. Raises before anything
    is changed."""
    config = dict(stored)
    for op in ops:
        if op.remove:
            config.pop(op.key, None)
            continue
        key_type = QUOTA_KEY_TYPES.get(op.key)
        if key_type is None:
            raise _invalid(f"Invalid configuration key {op.key}")
        value = op.value
        if not math.isfinite(value) or value <= 0:
            raise _invalid(f"Invalid value {value} for configuration {op.key}: must be positive")
        if key_type == "LONG":
            epsilon = 1e-6
            whole = int(value + epsilon)
            if abs(whole - value) > epsilon:
                raise _invalid(f"Configuration {op.key} must be a LONG value")
            config[op.key] = str(whole)
        else:
            config[op.key] = repr(float(value))  # Java's Double.toString for usual values
    return config


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of a stored entity config, as numbers (other keys, such as SCRAM
    credentials under /config/users, are not quotas). A value that is not a number is
    skipped: Kafka would fail the whole describe on it."""
    values: dict[str, float] = {}
    for key, raw in config.items():
        if key in QUOTA_KEY_TYPES:
            try:
                values[key] = float(raw)
            except ValueError:
                continue
    return values


@dataclass(frozen=True, slots=True)
class FilterComponent:
    """One DescribeClientQuotas component: EXACT with a name, DEFAULT, or ANY."""

    entity_type: str
    match_type: int
    match: str | None = None


@dataclass(frozen=True, slots=True)
class QuotaFilter:
    user: FilterComponent | None
    client_id: FilterComponent | None
    ip: FilterComponent | None
    strict: bool


def parse_filter(components: Iterable[FilterComponent], strict: bool) -> QuotaFilter:
    """The filter, refused as Kafka refuses it (DescribeClientQuotasRequest.filter and
    ZkAdminManager.describeClientQuotas)."""
    by_type: dict[str, FilterComponent] = {}
    for c in components:
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise _invalid(f"Unexpected match type: {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise _invalid(f"Exact match on {c.entity_type} without a name")
        if c.entity_type == "":
            raise _invalid("Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaRequestError(
                ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{c.entity_type}' not supported"
            )
        if c.entity_type in by_type:
            which = {USER: "user", CLIENT_ID: "client", IP: "ip"}[c.entity_type]
            raise _invalid(f"Duplicate {which} filter component entity type")
        by_type[c.entity_type] = c
    if IP in by_type and (USER in by_type or CLIENT_ID in by_type):
        raise _invalid(
            "Invalid entity filter component combination, IP filter component should not be "
            "used with user or clientId filter component."
        )
    return QuotaFilter(by_type.get(USER), by_type.get(CLIENT_ID), by_type.get(IP), strict)


def _part_matches(
    component: FilterComponent | None, present: bool, name: str | None, strict: bool
) -> bool:
    if component is None:
        return not present or not strict
    if not present:
        return False
    if component.match_type == MATCH_ANY:
        return True
    if component.match_type == MATCH_DEFAULT:
        return name is None
    return name == component.match


def filter_matches(quota_filter: QuotaFilter, entity: QuotaEntity) -> bool:
    """Whether a stored user/client-id entity is described by the filter (ZkAdminManager's
    `matches`). A filter with an ip component matches none: epochlog stores no IP quotas."""
    if quota_filter.ip is not None:
        return False
    return _part_matches(
        quota_filter.user, entity.has_user, entity.user, quota_filter.strict
    ) and _part_matches(
        quota_filter.client_id, entity.has_client_id, entity.client_id, quota_filter.strict
    )


def describe_quotas(
    quota_filter: QuotaFilter, stored: Iterable[tuple[QuotaEntity, Mapping[str, str]]]
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities the filter matches that hold at least one quota, with their values."""
    result = []
    for entity, config in stored:
        values = quota_values(config)
        if values and filter_matches(quota_filter, entity):
            result.append((entity, values))
    return result
