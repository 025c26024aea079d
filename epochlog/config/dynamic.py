"""Dynamic configs, Kafka's way: what DescribeConfigs shows, what AlterConfigs and
IncrementalAlterConfigs may change, and the configs that result. Pure: no ZooKeeper, no clock.

Three layers make a broker's settings, highest first (Kafka's DynamicBrokerConfig): the
broker's own dynamic configs (`/config/brokers/<id>`), the cluster-wide dynamic defaults
(`/config/brokers/<default>`), then `server.properties`; `BrokerLayers.effective()` merges them
into one `BrokerConfig`. A topic's overrides (`/config/topics/<t>`) sit on top of the
effective broker settings, each topic key falling back to its broker synonyms
(`retention.ms` -> `log.retention.ms`, `log.retention.minutes`, `log.retention.hours`).

Describing (`describe_topic`, `describe_broker`) lists every key with its value, its source
(Kafka's ConfigSource numbers), whether it is read-only, its type and, on request, its
synonyms in precedence order and its documentation, as Kafka's ConfigHelper does.

Changing: `topic_alter` and `broker_alter` take the stored configs and the request (a whole
set for AlterConfigs, operations for IncrementalAlterConfigs) and return the set to store, or
raise `ConfigRequestError` with Kafka's error code and a message naming the key (and value).
Every key of a resource is checked before anything is returned, so nothing is half-applied.
Kafka's codes: a topic's unknown key or bad value is INVALID_CONFIG; a broker key that is not
dynamic, or a bad broker value, is INVALID_REQUEST (Kafka's ConfigAdminManager wraps broker
validation failures so, KAFKA-13609); a duplicate key or a null value is INVALID_REQUEST.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from epochlog.config.broker import DEFINITIONS, BrokerConfig, ConfigError, Definition
from epochlog.config.topic import (
    FOLLOWER_THROTTLED_REPLICAS,
    KNOWN_KEYS,
    LEADER_THROTTLED_REPLICAS,
    TopicConfigError,
    validate_topic_configs,
)
from epochlog.protocol.errors import ErrorCode


class ResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource ids."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigType(enum.IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigType ids (DescribeConfigs v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterOp(enum.IntEnum):
    """Kafka's AlterConfigOp.OpType ids (IncrementalAlterConfigs)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigRequestError(ValueError):
    """A resource of a config request that is refused: Kafka's error code and a message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


_TYPES = {
    "int": ConfigType.INT,
    "long": ConfigType.LONG,
    "bool": ConfigType.BOOLEAN,
    "string": ConfigType.STRING,
    "list": ConfigType.LIST,
    "double": ConfigType.DOUBLE,
    "password": ConfigType.PASSWORD,
}

_HOUR_MS = 3_600_000


@dataclass(frozen=True)
class TopicKey:
    """A topic config key: its type, its broker synonyms (name, multiplier to the topic's unit)
    in Kafka's precedence order, and its documentation."""

    type: ConfigType
    synonyms: tuple[tuple[str, int], ...]
    doc: str
    default: str | None = None  # for a key without broker synonyms


def _key(kind: ConfigType, doc: str, *synonyms: str | tuple[str, int]) -> TopicKey:
    return TopicKey(kind, tuple(s if isinstance(s, tuple) else (s, 1) for s in synonyms), doc)


_THROTTLED_REPLICAS_DOC = (
    "Replicas whose replication traffic is throttled on the {side} side, as "
    "[partitionId]:[brokerId],... or '*' for all; the broker's "
    "{side}.replication.throttled.rate bounds it."
)


# Kafka's ServerTopicConfigSynonyms, for the topic keys epochlog has.
TOPIC_KEYS: dict[str, TopicKey] = {
    "segment.bytes": _key(ConfigType.INT, "Segment file size of the log.", "log.segment.bytes"),
    "segment.ms": _key(
        ConfigType.LONG,
        "Roll a new segment after this time even if the active one is not full.",
        "log.roll.ms",
        ("log.roll.hours", _HOUR_MS),
    ),
    "segment.index.bytes": _key(
        ConfigType.INT, "Size of the offset and time indexes.", "log.index.size.max.bytes"
    ),
    "index.interval.bytes": _key(
        ConfigType.INT, "Bytes of log between index entries.", "log.index.interval.bytes"
    ),
    "retention.ms": _key(
        ConfigType.LONG,
        "How long a segment is kept before it is deleted (delete policy); -1 keeps it forever.",
        "log.retention.ms",
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", _HOUR_MS),
    ),
    "retention.bytes": _key(
        ConfigType.LONG,
        "The most a partition keeps before old segments are deleted; -1 means no limit.",
        "log.retention.bytes",
    ),
    "max.message.bytes": _key(
        ConfigType.INT, "The largest record batch the topic accepts.", "message.max.bytes"
    ),
    "flush.messages": _key(
        ConfigType.LONG, "Force an fsync after this many records.", "log.flush.interval.messages"
    ),
    "flush.ms": _key(
        ConfigType.LONG,
        "Force an fsync of a log whose unflushed data is this old.",
        "log.flush.interval.ms",
        "log.flush.scheduler.interval.ms",
    ),
    "message.timestamp.type": _key(
        ConfigType.STRING,
        "CreateTime or LogAppendTime: which timestamp records carry.",
        "log.message.timestamp.type",
    ),
    "cleanup.policy": _key(
        ConfigType.LIST,
        "delete (retention), compact (keep the last record of each key) or both.",
        "log.cleanup.policy",
    ),
    "min.cleanable.dirty.ratio": _key(
        ConfigType.DOUBLE,
        "Clean a compacted log once this share of it is dirty.",
        "log.cleaner.min.cleanable.ratio",
    ),
    "min.compaction.lag.ms": _key(
        ConfigType.LONG,
        "Records younger than this stay uncompacted.",
        "log.cleaner.min.compaction.lag.ms",
    ),
    "max.compaction.lag.ms": _key(
        ConfigType.LONG,
        "A dirty record older than this gets its log cleaned.",
        "log.cleaner.max.compaction.lag.ms",
    ),
    "delete.retention.ms": _key(
        ConfigType.LONG,
        "How long tombstones stay in a compacted log.",
        "log.cleaner.delete.retention.ms",
    ),
    "compression.type": _key(
        ConfigType.STRING,
        "The codec the leader stores batches with: producer keeps the producer's; uncompressed, "
        "gzip, snappy, lz4 or zstd rebuilds batches compressed otherwise.",
        "compression.type",
    ),
    "compression.gzip.level": _key(
        ConfigType.INT,
        "The gzip level used when the broker compresses: 1 to 9, or -1 for the default.",
        "compression.gzip.level",
    ),
    "compression.lz4.level": _key(
        ConfigType.INT,
        "The lz4 level used when the broker compresses: 1 to 17.",
        "compression.lz4.level",
    ),
    "compression.zstd.level": _key(
        ConfigType.INT,
        "The zstd level used when the broker compresses: -131072 to 22.",
        "compression.zstd.level",
    ),
    "min.insync.replicas": _key(
        ConfigType.INT,
        "In-sync replicas an acks=all produce needs, else NOT_ENOUGH_REPLICAS.",
        "min.insync.replicas",
    ),
    "unclean.leader.election.enable": _key(
        ConfigType.BOOLEAN,
        "Elect a replica outside the ISR when no ISR member is alive (may lose data).",
        "unclean.leader.election.enable",
    ),
    LEADER_THROTTLED_REPLICAS: TopicKey(
        ConfigType.LIST, (), _THROTTLED_REPLICAS_DOC.format(side="leader"), ""
    ),
    FOLLOWER_THROTTLED_REPLICAS: TopicKey(
        ConfigType.LIST, (), _THROTTLED_REPLICAS_DOC.format(side="follower"), ""
    ),
}
assert set(TOPIC_KEYS) == set(KNOWN_KEYS), "every topic key needs its synonyms"

# Broker keys epochlog has that Kafka can change at runtime (DynamicBrokerConfig's
# AllDynamicConfigs): the first broker synonym of each topic key, the log cleaner's, the
# replica fetchers' count and the replication throttles.
# All are cluster-wide in Kafka, so they may be set per broker or as the cluster default.
DYNAMIC_BROKER_KEYS = frozenset(
    {
        *(key.synonyms[0][0] for key in TOPIC_KEYS.values() if key.synonyms),
        "log.flush.interval.ms",
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.size",
        "log.cleaner.backoff.ms",
        "log.cleaner.io.max.bytes.per.second",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
        "num.replica.fetchers",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
    }
)
assert set(DEFINITIONS) >= DYNAMIC_BROKER_KEYS, DYNAMIC_BROKER_KEYS - set(DEFINITIONS)

# Kafka's broker synonym groups (a longer unit after a shorter one).
_BROKER_SYNONYM_GROUPS = (
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.roll.ms", "log.roll.hours"),
)


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One line of a DescribeConfigs answer."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    config_type: ConfigType
    synonyms: tuple[Synonym, ...] = ()
    documentation: str | None = None
    sensitive: bool = False


def config_text(value: Any) -> str | None:
    """A config value as Kafka writes it in DescribeConfigs and in ZooKeeper."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass
class BrokerLayers:
    """One broker's settings in Kafka's three layers (see the module docstring)."""

    static: BrokerConfig
    cluster_default: dict[str, str] = field(default_factory=dict)
    per_broker: dict[str, str] = field(default_factory=dict)

    def effective(self) -> BrokerConfig:
        """The merged settings. A stored dynamic value that does not convert (written by
        another tool) is left out, as Kafka ignores invalid dynamic configs at load."""
        merged: dict[str, Any] = dict(self.static.as_dict())
        for layer in (self.cluster_default, self.per_broker):
            for key, value in layer.items():
                if key in DYNAMIC_BROKER_KEYS and _broker_value_problem(key, value) is None:
                    merged[key] = value
        try:
            return BrokerConfig(merged)
        except ConfigError:  # a combination that fails: fall back to server.properties
            return self.static


def _broker_value_problem(key: str, value: str) -> str | None:
    try:
        BrokerConfig({**_REQUIRED_PLACEHOLDERS, key: value})
    except ConfigError as exc:
        return str(exc)
    return None


_REQUIRED_PLACEHOLDERS = {"broker.id": 0, "zookeeper.connect": "placeholder:2181"}


# ------------------------------------------------------------------------------- describe


def describe_topic(
    overrides: Mapping[str, str],
    layers: BrokerLayers,
    *,
    keys: Iterable[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[ConfigEntry]:
    """Every topic key (or those asked for) with its value for this topic."""
    effective = layers.effective()
    entries = []
    for name in _selected(TOPIC_KEYS, keys):
        key = TOPIC_KEYS[name]
        synonyms: list[Synonym] = []
        if name in overrides:
            synonyms.append(Synonym(name, overrides[name], ConfigSource.TOPIC_CONFIG))
        synonyms.extend(_broker_synonyms([s for s, _ in key.synonyms], layers))
        if name in overrides:
            value: str | None = overrides[name]
        else:
            value = _topic_default(key, effective)
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=False,
                config_type=key.type,
                synonyms=tuple(synonyms) if include_synonyms else (),
                documentation=key.doc if include_documentation else None,
            )
        )
    return entries


def _topic_default(key: TopicKey, effective: BrokerConfig) -> str | None:
    """The topic's value from the broker's settings: the first synonym that has a value."""
    for name, multiplier in key.synonyms:
        value = effective[name]
        if value is not None:
            return config_text(value * multiplier if multiplier != 1 else value)
    return key.default


def describe_broker(
    layers: BrokerLayers,
    *,
    per_broker: bool,
    keys: Iterable[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[ConfigEntry]:
    """The broker's settings (per_broker) or the cluster's dynamic defaults (resource "")."""
    effective = layers.effective()
    if per_broker:
        names = _selected(DEFINITIONS, keys)
    else:
        names = _selected(layers.cluster_default, keys)
    entries = []
    for name in names:
        definition = DEFINITIONS.get(name)
        synonyms = _broker_synonyms(_synonym_group(name), layers)
        if not per_broker:
            synonyms = [
                s for s in synonyms if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            ]
            value = layers.cluster_default.get(name)
        else:
            value = config_text(effective[name]) if definition is not None else None
        if definition is not None and definition.type == "password":
            value = None  # Kafka never shows a sensitive value (sasl.jaas.config holds passwords)
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=name not in DYNAMIC_BROKER_KEYS,
                config_type=_TYPES[definition.type] if definition else ConfigType.UNKNOWN,
                synonyms=tuple(synonyms) if include_synonyms else (),
                documentation=(definition.doc if definition else "")
                if include_documentation
                else None,
                sensitive=definition is not None and definition.type == "password",
            )
        )
    return entries


def _selected(known: Mapping[str, Any], keys: Iterable[str] | None) -> list[str]:
    """Kafka lists all keys for a null or empty key list, else the known ones asked for."""
    wanted = list(keys or ())
    if not wanted:
        return sorted(known)
    return [k for k in sorted(set(wanted)) if k in known]


def _synonym_group(name: str) -> list[str]:
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return list(group[group.index(name) :])
    return [name]


def _broker_synonyms(names: Sequence[str], layers: BrokerLayers) -> list[Synonym]:
    """Kafka's configSynonyms: per-broker dynamic, cluster default, static, then defaults,
    each over the names in order."""
    found: list[Synonym] = []
    sources: list[tuple[Mapping[str, Any], ConfigSource]] = [
        (layers.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (layers.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (layers.static.explicit, ConfigSource.STATIC_BROKER_CONFIG),
        (_DEFAULTS, ConfigSource.DEFAULT_CONFIG),
    ]
    for values, source in sources:
        for name in names:
            if name in values:
                found.append(Synonym(name, config_text(values[name]), source))
    return found


def _default_of(definition: Definition) -> Any:
    return definition.default if isinstance(definition.default, str | int | float | list) else None


_DEFAULTS: dict[str, Any] = {
    key: _default_of(d) for key, d in DEFINITIONS.items() if _default_of(d) is not None
}


# ---------------------------------------------------------------------------------- alter


@dataclass(frozen=True)
class ConfigChange:
    """One entry of an alter request: AlterConfigs' (name, value) has op SET."""

    name: str
    value: str | None
    op: int = AlterOp.SET


def check_entries(changes: Sequence[ConfigChange], *, incremental: bool) -> None:
    """Kafka's preprocessing: no key twice, no null value except for DELETE, known ops."""
    names = [c.name for c in changes]
    if len(set(names)) != len(names):
        raise ConfigRequestError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    for change in changes:
        if incremental and change.op not in AlterOp._value2member_map_:
            raise ConfigRequestError(
                ErrorCode.INVALID_REQUEST, f"Unknown operations type {change.op}"
            )
    nulls = [c.name for c in changes if c.value is None and c.op != AlterOp.DELETE]
    if nulls:
        raise ConfigRequestError(
            ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
        )


def apply_operations(
    current: Mapping[str, str],
    changes: Sequence[ConfigChange],
    *,
    list_keys: Mapping[str, str | None],
    error: ErrorCode,
) -> dict[str, str]:
    """Kafka's prepareIncrementalConfigs: SET, DELETE, and APPEND / SUBTRACT on list keys
    (`list_keys`: list key -> its default as text, the list APPEND starts from when unset)."""
    result = dict(current)
    for change in changes:
        name, op = change.name, AlterOp(change.op)
        if op is AlterOp.SET:
            assert change.value is not None
            result[name] = change.value
        elif op is AlterOp.DELETE:
            result.pop(name, None)
        else:
            if name not in list_keys:
                verb = "append" if op is AlterOp.APPEND else "subtract"
                raise ConfigRequestError(
                    error, f"Config value {verb} is not allowed for config key: {name}"
                )
            old_text = result.get(name, list_keys[name] or "")
            old = [v for v in old_text.split(",") if v]
            given = (change.value or "").split(",")
            if op is AlterOp.APPEND:
                new = old + [v for v in given if v not in old]
            else:
                new = [v for v in old if v not in given]
            result[name] = ",".join(new)
    return result


def topic_alter(
    topic: str,
    stored: Mapping[str, str],
    changes: Sequence[ConfigChange],
    *,
    incremental: bool,
) -> dict[str, str]:
    """The topic's overrides after the request (AlterConfigs replaces the whole set)."""
    check_entries(changes, incremental=incremental)
    if not topic:
        raise ConfigRequestError(
            ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."
        )
    if incremental:
        for change in changes:
            if change.name not in TOPIC_KEYS and change.op in (AlterOp.APPEND, AlterOp.SUBTRACT):
                raise ConfigRequestError(
                    ErrorCode.INVALID_CONFIG, f"Unknown config name: {change.name}"
                )
        list_keys: dict[str, str | None] = {
            "cleanup.policy": "delete",
            LEADER_THROTTLED_REPLICAS: "",
            FOLLOWER_THROTTLED_REPLICAS: "",
        }
        result = apply_operations(
            stored, changes, list_keys=list_keys, error=ErrorCode.INVALID_CONFIG
        )
    else:
        result = {c.name: c.value for c in changes if c.value is not None}
    validate_topic_overrides(topic, result)
    return result


def validate_topic_overrides(topic: str, configs: Mapping[str, str]) -> None:
    """INVALID_CONFIG naming the first unknown key, or the key and value that is wrong."""
    unknown = sorted(k for k in configs if k not in TOPIC_KEYS)
    if unknown:
        raise ConfigRequestError(
            ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {', '.join(unknown)}"
        )
    for key, value in configs.items():
        try:
            validate_topic_configs({key: value})
        except TopicConfigError as exc:
            raise ConfigRequestError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {value} for configuration {key} of topic {topic}: {exc}",
            ) from None
    try:
        validate_topic_configs(configs)
    except TopicConfigError as exc:
        raise ConfigRequestError(
            ErrorCode.INVALID_CONFIG, f"Invalid config value for topic {topic}: {exc}"
        ) from None


def broker_resource(name: str, broker_id: int) -> bool:
    """True for this broker's own resource, False for the cluster default (""); raises
    INVALID_REQUEST for another broker's id or a name that is no id (Kafka routes broker
    resources to the broker they name)."""
    if not name:
        return False
    try:
        named = int(name)
    except ValueError:
        raise ConfigRequestError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if named != broker_id:
        raise ConfigRequestError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker_id} or empty string, but received {name}",
        )
    return True


def broker_alter(
    stored: Mapping[str, str],
    changes: Sequence[ConfigChange],
    *,
    incremental: bool,
    layers: BrokerLayers,
    per_broker: bool,
) -> dict[str, str]:
    """The dynamic configs to store for the broker (or the cluster default) after the
    request; INVALID_REQUEST for a key that cannot change at runtime or a bad value."""
    check_entries(changes, incremental=incremental)
    if incremental:
        unknown = sorted(
            c.name
            for c in changes
            if c.name not in DEFINITIONS and c.op in (AlterOp.APPEND, AlterOp.SUBTRACT)
        )
        if unknown:
            raise ConfigRequestError(
                ErrorCode.INVALID_CONFIG, f"Unknown config name: {', '.join(unknown)}"
            )
        list_keys = {
            k: config_text(_DEFAULTS.get(k)) for k, d in DEFINITIONS.items() if d.type == "list"
        }
        result = apply_operations(
            stored, changes, list_keys=list_keys, error=ErrorCode.INVALID_CONFIG
        )
    else:
        result = {c.name: c.value for c in changes if c.value is not None}
    fixed = sorted(k for k in result if k not in DYNAMIC_BROKER_KEYS)
    if fixed:
        raise ConfigRequestError(
            ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {fixed}"
        )
    for key, value in result.items():
        problem = _broker_value_problem(key, value)
        if problem is not None:
            raise ConfigRequestError(ErrorCode.INVALID_REQUEST, problem)
    trial = BrokerLayers(
        layers.static,
        layers.cluster_default if per_broker else result,
        result if per_broker else layers.per_broker,
    )
    merged = {**trial.static.as_dict(), **trial.cluster_default, **trial.per_broker}
    try:
        proposed = BrokerConfig(merged)
    except ConfigError as exc:
        raise ConfigRequestError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    _check_thread_count(layers.effective(), proposed, "num.replica.fetchers")
    return result


def _check_thread_count(current: BrokerConfig, proposed: BrokerConfig, key: str) -> None:
    """Kafka's DynamicThreadPool rule: a thread count changes by at most half or double."""
    old, new = current[key], proposed[key]
    if new == old:
        return
    problem = f"Dynamic thread count update validation failed for {key}={new}"
    if new < old // 2:
        problem += f", value should be at least half the current value {old}"
    elif new > old * 2:
        problem += f", value should not be greater than double the current value {old}"
    else:
        return
    raise ConfigRequestError(ErrorCode.INVALID_REQUEST, problem)
