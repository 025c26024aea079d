"""Client configuration: Kafka's dotted names and Kafka's defaults, validated once per client.

A client is configured with a dict of dotted keys, as with confluent-kafka:
`{"bootstrap.servers": "localhost:9092", "linger.ms": 10}`. `load_config(role, raw)` checks every
key against the table `SETTINGS` below (the one place that lists what a client understands) and
returns a read-only `ClientConfig` holding every key of that role, defaults filled in. Values may
be given as Python values or as the strings a properties file would hold (`"10"`, `"true"`).

What is an error, always naming the key: a key no client knows; a key of another role (a consumer
key given to a producer); a value of the wrong type, out of range, or not one of an enum's values;
and a combination Kafka refuses (`enable.idempotence=true` set explicitly, or a `transactional.id`,
together with `acks` other than `all`, `retries=0`, or more than 5 requests in flight; a
`transactional.id` with `enable.idempotence=false`). As in Kafka, idempotence that is only
on by default is turned off quietly by such settings, and `delivery.timeout.ms` left at its default
is raised to `linger.ms + request.timeout.ms` if needed.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.client.assignors import ASSIGNORS, JAVA_CLASS_NAMES
from epochlog.client.errors import ConfigError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class Role(enum.Enum):
    PRODUCER = "producer"
    CONSUMER = "consumer"
    ADMIN = "admin"


ALL = frozenset(Role)
P = frozenset({Role.PRODUCER})
C = frozenset({Role.CONSUMER})
CA = frozenset({Role.CONSUMER, Role.ADMIN})


@dataclass(frozen=True)
class Setting:
    """One config key: its type, Kafka's default, the allowed range or values, and who takes it.

    kind is one of: int, bool, str, list (comma-separated), enum (one of `choices`), acks,
    assignors (comma-separated assignor names, Kafka's or its Java class names).
    """

    name: str
    kind: str
    default: Any
    roles: frozenset[Role] = ALL
    low: int | None = 0
    high: int | None = INT64_MAX
    choices: tuple[str, ...] = ()


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        # ---- every client
        Setting("bootstrap.servers", "list", None),
        Setting("client.id", "str", ""),
        Setting("request.timeout.ms", "int", 30000, high=INT32_MAX),
        Setting("reconnect.backoff.ms", "int", 50),
        Setting("reconnect.backoff.max.ms", "int", 1000),
        Setting("socket.connection.setup.timeout.ms", "int", 10000),
        Setting("socket.connection.setup.timeout.max.ms", "int", 30000),
        Setting("metadata.max.age.ms", "int", 300000),
        Setting(
            "metadata.recovery.strategy", "enum", "rebootstrap", choices=("rebootstrap", "none")
        ),
        Setting("metadata.recovery.rebootstrap.trigger.ms", "int", 300000),
        Setting("retry.backoff.ms", "int", 100),
        Setting("retry.backoff.max.ms", "int", 1000),
        # ---- security: TLS (client/tls.py) and SASL (client/sasl.py); librdkafka's keys, and
        # Java's PEM stores and sasl.jaas.config
        Setting(
            "security.protocol",
            "enum",
            "plaintext",
            choices=("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"),
        ),
        Setting(
            "sasl.mechanism",
            "enum",
            "gssapi",
            choices=("gssapi", "plain", "scram-sha-256", "scram-sha-512"),
        ),
        Setting("sasl.username", "str", ""),
        Setting("sasl.password", "str", ""),
        Setting("sasl.jaas.config", "str", ""),
        Setting("ssl.ca.location", "str", ""),
        Setting("ssl.certificate.location", "str", ""),
        Setting("ssl.key.location", "str", ""),
        Setting("ssl.key.password", "str", ""),
        Setting(
            "ssl.endpoint.identification.algorithm", "enum", "https", choices=("https", "none", "")
        ),
        Setting("ssl.truststore.location", "str", ""),
        Setting("ssl.truststore.type", "str", "PEM"),
        Setting("ssl.keystore.location", "str", ""),
        Setting("ssl.keystore.type", "str", "PEM"),
        # ---- producer
        Setting("acks", "acks", -1, P),
        Setting("linger.ms", "int", 5, P, high=INT32_MAX),
        Setting("batch.size", "int", 16384, P, high=INT32_MAX),
        Setting(
            "compression.type",
            "enum",
            "none",
            P,
            choices=("none", "gzip", "snappy", "lz4", "zstd"),
        ),
        Setting("enable.idempotence", "bool", True, P),
        Setting("delivery.timeout.ms", "int", 120000, P, high=INT32_MAX),
        Setting("max.in.flight.requests.per.connection", "int", 5, P, low=1, high=INT32_MAX),
        Setting("retries", "int", INT32_MAX, P, high=INT32_MAX),
        Setting("max.request.size", "int", 1048576, P, low=1, high=INT32_MAX),
        Setting("buffer.memory", "int", 33554432, P),
        Setting("max.block.ms", "int", 60000, P),
        Setting("partitioner.ignore.keys", "bool", False, P),
        # "" means none (Java's null): a transactional producer when set
        Setting("transactional.id", "str", "", P),
        Setting("transaction.timeout.ms", "int", 60000, P, low=1, high=INT32_MAX),
        # ---- consumer
        Setting("fetch.min.bytes", "int", 1, C, high=INT32_MAX),
        Setting("fetch.max.wait.ms", "int", 500, C, high=INT32_MAX),
        Setting("fetch.max.bytes", "int", 52428800, C, high=INT32_MAX),
        Setting("max.partition.fetch.bytes", "int", 1048576, C, high=INT32_MAX),
        Setting("auto.offset.reset", "enum", "latest", C, choices=("earliest", "latest", "none")),
        Setting(
            "isolation.level",
            "enum",
            "read_uncommitted",
            C,
            choices=("read_uncommitted", "read_committed"),
        ),
        Setting("max.poll.records", "int", 500, C, low=1, high=INT32_MAX),
        Setting("check.crcs", "bool", True, C),
        Setting("client.rack", "str", "", C),
        Setting("allow.auto.create.topics", "bool", True, C),
        # ---- consumer groups (Java's defaults; group.id "" means none, Java's null)
        Setting("group.id", "str", "", C),
        Setting("group.instance.id", "str", "", C),
        Setting("session.timeout.ms", "int", 45000, C, low=1, high=INT32_MAX),
        Setting("heartbeat.interval.ms", "int", 3000, C, low=1, high=INT32_MAX),
        Setting("max.poll.interval.ms", "int", 300000, C, low=1, high=INT32_MAX),
        # Java's default: range first (eager, understood by every client, librdkafka's default
        # included), cooperative-sticky second, so a group can move to cooperative rebalancing
        # by a rolling restart that drops range.
        Setting("partition.assignment.strategy", "assignors", ("range", "cooperative-sticky"), C),
        Setting("enable.auto.commit", "bool", True, C),
        Setting("auto.commit.interval.ms", "int", 5000, C, high=INT32_MAX),
        Setting("exclude.internal.topics", "bool", True, C),
        # ---- consumer and admin
        Setting("default.api.timeout.ms", "int", 60000, CA, high=INT32_MAX),
    )
}


SECRET_KEYS = frozenset({"sasl.password", "sasl.jaas.config"})  # never printed


class ClientConfig(Mapping[str, Any]):
    """A validated, read-only config of one client: every key of its role, defaults filled in.

    `explicit` holds the keys the caller set (some checks depend on whether a value is a
    default). Look values up by Kafka's name: `config["linger.ms"]`.
    """

    def __init__(self, role: Role, values: dict[str, Any], explicit: frozenset[str]) -> None:
        self.role = role
        self._values = values
        self.explicit = explicit

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise ConfigError(key, f"not a {self.role.value} config") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = {k: "[hidden]" if k in SECRET_KEYS and v else v for k, v in self._values.items()}
        return f"ClientConfig({self.role.value}, {shown!r})"


def load_config(role: Role, raw: Mapping[str, Any] | None) -> ClientConfig:
    """Validate `raw` for a client of `role`; raises ConfigError naming the first bad key."""
    raw = dict(raw or {})
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            raise ConfigError(repr(key), "config keys are strings such as 'bootstrap.servers'")
        setting = SETTINGS.get(key)
        if setting is None:
            raise ConfigError(key, "unknown config key")
        if role not in setting.roles:
            takers = ", ".join(sorted(r.value for r in setting.roles))
            raise ConfigError(key, f"a {takers} config, not valid for a {role.value}")
        values[key] = _parse(setting, value)
    for setting in SETTINGS.values():
        if role in setting.roles and setting.name not in values:
            values[setting.name] = setting.default
    explicit = frozenset(raw)
    _check_combinations(role, values, explicit)
    return ClientConfig(role, values, explicit)


def _parse(s: Setting, value: Any) -> Any:
    if s.kind == "int":
        return _parse_int(s, value)
    if s.kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ConfigError(s.name, f"expected true or false, got {value!r}")
    if s.kind == "str":
        if not isinstance(value, str):
            raise ConfigError(s.name, f"expected a string, got {value!r}")
        return value
    if s.kind == "enum":
        if not isinstance(value, str) or value.strip().lower() not in s.choices:
            raise ConfigError(s.name, f"expected one of {', '.join(s.choices)}, got {value!r}")
        return value.strip().lower()
    if s.kind == "acks":
        text = str(value).strip().lower() if not isinstance(value, bool) else ""
        if text == "all":
            return -1
        if text in ("-1", "0", "1"):
            return int(text)
        raise ConfigError(s.name, f"expected all, -1, 0 or 1, got {value!r}")
    if s.kind == "list":
        return _parse_servers(s.name, value)
    if s.kind == "assignors":
        return _parse_assignors(s.name, value)
    raise AssertionError(s.kind)


def _parse_int(s: Setting, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(s.name, f"expected an integer, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        number = int(value.strip())
    else:
        raise ConfigError(s.name, f"expected an integer, got {value!r}")
    if s.low is not None and number < s.low:
        raise ConfigError(s.name, f"{number} is below the minimum {s.low}")
    if s.high is not None and number > s.high:
        raise ConfigError(s.name, f"{number} is above the maximum {s.high}")
    return number


def _parse_servers(key: str, value: Any) -> tuple[tuple[str, int], ...]:
    """`host:port,host:port` (or a list of such strings) into (host, port) pairs."""
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value if v.strip()]
    else:
        raise ConfigError(key, f"expected 'host:port,...', got {value!r}")
    if not items:
        raise ConfigError(key, "no servers given")
    servers = []
    for item in items:
        servers.append(parse_host_port(key, item))
    return tuple(servers)


def _parse_assignors(key: str, value: Any) -> tuple[str, ...]:
    """`range,cooperative-sticky` (or a list, or Kafka's class names) into assignor names."""
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value if v.strip()]
    else:
        raise ConfigError(key, f"expected assignor names such as 'range', got {value!r}")
    if not items:
        raise ConfigError(key, "no assignor given")
    names: list[str] = []
    for item in items:
        name = JAVA_CLASS_NAMES.get(item, item.lower())
        if name not in ASSIGNORS:
            known = ", ".join(ASSIGNORS)
            raise ConfigError(key, f"unknown assignor {item!r} (known: {known})")
        if name not in names:
            names.append(name)
    return tuple(names)


def parse_host_port(key: str, item: str) -> tuple[str, int]:
    """`host:port` or `[v6addr]:port` into (host, port); errors name `key`."""
    text = item.split("://", 1)[-1]  # tolerate PLAINTEXT://host:port, as Kafka's clients do
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ConfigError(key, f"{item!r} is not host:port")
    host = host.removeprefix("[").removesuffix("]")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ConfigError(key, f"{item!r} has port {port} outside 1-65535")
    return host, port


def _check_combinations(role: Role, values: dict[str, Any], explicit: frozenset[str]) -> None:
    if values.get("bootstrap.servers") is None:
        raise ConfigError("bootstrap.servers", "required: the brokers to bootstrap from")
    if role is Role.CONSUMER:
        _check_group_settings(values, explicit)
    if role is not Role.PRODUCER:
        return
    conflicts = []
    if values["acks"] != -1:
        conflicts.append(("acks", "must be all"))
    if values["retries"] == 0:
        conflicts.append(("retries", "must be above 0"))
    if values["max.in.flight.requests.per.connection"] > 5:
        conflicts.append(("max.in.flight.requests.per.connection", "must be at most 5"))
    if values["transactional.id"]:
        # Kafka: a transactional producer is idempotent; no setting may turn that off
        if not values["enable.idempotence"]:
            raise ConfigError(
                "enable.idempotence", "must be true for a transactional producer (transactional.id)"
            )
        if conflicts:
            key, need = conflicts[0]
            raise ConfigError(key, f"{need} for a transactional producer (transactional.id)")
    if conflicts and values["enable.idempotence"]:
        if "enable.idempotence" in explicit:
            key, need = conflicts[0]
            raise ConfigError(key, f"{need} for the idempotent producer (enable.idempotence=true)")
        values["enable.idempotence"] = False
    floor = values["linger.ms"] + values["request.timeout.ms"]
    if values["delivery.timeout.ms"] < floor:
        if "delivery.timeout.ms" in explicit:
            raise ConfigError(
                "delivery.timeout.ms",
                f"must be at least linger.ms + request.timeout.ms = {floor}",
            )
        values["delivery.timeout.ms"] = floor


def _check_group_settings(values: dict[str, Any], explicit: frozenset[str]) -> None:
    """Kafka's consumer checks: a heartbeat inside the session, group settings need a group."""
    if values["heartbeat.interval.ms"] >= values["session.timeout.ms"]:
        raise ConfigError(
            "heartbeat.interval.ms",
            f"{values['heartbeat.interval.ms']} must be below session.timeout.ms "
            f"({values['session.timeout.ms']})",
        )
    if values["group.id"]:
        return
    if values["group.instance.id"]:
        raise ConfigError("group.instance.id", "static membership needs a group.id")
    if values["enable.auto.commit"]:
        if "enable.auto.commit" in explicit:
            raise ConfigError("enable.auto.commit", "auto commit needs a group.id")
        values["enable.auto.commit"] = False  # on only by default: off without a group, as Java
