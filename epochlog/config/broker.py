"""Broker configuration: `server.properties` with Kafka's key names, types and defaults.

`BrokerConfig.from_properties` reads Java-properties text; `BrokerConfig.from_dict` takes a dict of
the same keys. Every key is declared once in `DEFINITIONS` with its type and default. An unknown
key or a malformed value is an error that names the key, so a typo never silently falls back to a
default. Keys of Kafka's stock server.properties that have no meaning here (thread counts, socket
buffers, group and transaction topics) are accepted and ignored, so an operator's file works.
Keys under `epochlog.test.` switch mechanisms off for the scenario tests that show the damage
each seed prevents; they are for tests only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epochlog.protocol.compression import (
    GZIP_DEFAULT_LEVEL,
    LZ4_DEFAULT_LEVEL,
    ZSTD_DEFAULT_LEVEL,
    Compression,
    level_problem,
)
from epochlog.protocol.recompression import COMPRESSION_TYPES
from epochlog.storage.config import DEFAULT_DECOMPRESSED_MAX_MULTIPLE

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration key that is unknown, missing or malformed; the message names it."""


@dataclass(frozen=True)
class Definition:
    type: str  # int | long | bool | string | list | double | password
    default: Any
    doc: str = ""
    validator: Callable[[Any], str | None] | None = None


def _at_least(low: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"must be at least {low}"


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"


def _level_of(codec: Compression) -> Callable[[Any], str | None]:
    return lambda v: level_problem(codec, v)


_NO_DEFAULT = object()

# authorizer.class.name values that turn on the ACL authorizer (Kafka's ZooKeeper-mode classes).
AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
)


def _super_users_problem(value: Any) -> str | None:
    for part in str(value).split(";"):
        part = part.strip()
        if part and (":" not in part or part.startswith(":") or part.endswith(":")):
            return f"{part!r} is not a principal (Type:name, e.g. User:admin)"
    return None


# Kafka's SecurityProtocol ids, as a broker registration's endpoints carry them.
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

DEFINITIONS: dict[str, Definition] = {
    "broker.id": Definition("int", _NO_DEFAULT, "this broker's id", _at_least(0)),
    "listeners": Definition("list", ["PLAINTEXT://127.0.0.1:9092"], "where to listen"),
    "advertised.listeners": Definition("list", None, "what to tell clients (default listeners)"),
    "listener.security.protocol.map": Definition(
        "list",
        ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
        "listener name -> security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
    ),
    "inter.broker.listener.name": Definition(
        "string", None, "the listener brokers and the controller use to reach each other"
    ),
    "security.inter.broker.protocol": Definition(
        "string", None, "the inter-broker security protocol (when no listener name is given)"
    ),
    # SASL (issue 21). Each may also be given per listener as listener.name.<listener>.<key>;
    # sasl.jaas.config per listener and mechanism: listener.name.<l>.<mechanism>.sasl.jaas.config.
    "sasl.enabled.mechanisms": Definition(
        "list", ["GSSAPI"], "SASL mechanisms offered on SASL listeners (PLAIN, SCRAM-SHA-256/512)"
    ),
    "sasl.mechanism.inter.broker.protocol": Definition(
        "string", "GSSAPI", "the SASL mechanism brokers log in to each other with"
    ),
    "sasl.jaas.config": Definition(
        "password", None, "JAAS login module entry (PlainLoginModule: user_<name>=...)"
    ),
    "connections.max.reauth.ms": Definition(
        "long", 0, "SASL session lifetime (KIP-368); 0: sessions never expire", _at_least(0)
    ),
    # TLS (issue 21): Kafka's ssl.* keys, PEM stores only (KIP-651). Each may be set for one
    # listener as listener.name.<listener lowercased>.<key>, which overrides the plain key there.
    "ssl.keystore.type": Definition(
        "string", "PEM", "PEM (JKS and PKCS12 are refused: PEM is what epochlog reads)"
    ),
    "ssl.keystore.location": Definition(
        "string", None, "a PEM file: the private key, then the certificate chain"
    ),
    "ssl.keystore.key": Definition("password", None, "the private key as inline PEM text"),
    "ssl.keystore.certificate.chain": Definition(
        "string", None, "the certificate chain as inline PEM text (with ssl.keystore.key)"
    ),
    "ssl.keystore.password": Definition(
        "password", None, "refused with PEM, as in Kafka: the key's password is ssl.key.password"
    ),
    "ssl.key.password": Definition("password", None, "the password of an encrypted private key"),
    "ssl.truststore.type": Definition(
        "string", "PEM", "PEM (JKS and PKCS12 are refused: PEM is what epochlog reads)"
    ),
    "ssl.truststore.location": Definition("string", None, "a PEM file of trusted certificates"),
    "ssl.truststore.certificates": Definition(
        "string", None, "trusted certificates as inline PEM text"
    ),
    "ssl.truststore.password": Definition("password", None, "refused with PEM, as in Kafka"),
    "ssl.client.auth": Definition(
        "string", "none", "client certificates: none, requested or required",
        _one_of("none", "requested", "required"),
    ),
    "ssl.enabled.protocols": Definition("list", ["TLSv1.2", "TLSv1.3"], "TLS versions allowed"),
    "ssl.protocol": Definition("string", "TLSv1.3", "TLS, TLSv1.2 or TLSv1.3"),
    "ssl.cipher.suites": Definition(
        "list", [], "TLS 1.2 cipher suites (IANA or OpenSSL names); empty: OpenSSL's defaults"
    ),
    "ssl.endpoint.identification.algorithm": Definition(
        "string", "https", "https: inter-broker connections check the broker's host name; "
        "empty: they do not"
    ),
    "ssl.principal.mapping.rules": Definition(
        "string", "DEFAULT", "a TLS client's certificate subject -> its principal's name"
    ),
    "log.dirs": Definition("list", None, "log directories (default log.dir)"),
    "log.dir": Definition("string", "/tmp/kafka-logs"),
    "zookeeper.connect": Definition("string", _NO_DEFAULT, "host:port[,host:port][/chroot]"),
    "zookeeper.session.timeout.ms": Definition("int", 18000, "", _at_least(1)),
    "zookeeper.connection.timeout.ms": Definition("int", None),
    "zookeeper.set.acl": Definition(
        "bool", False, "znodes the broker creates get Kafka's secure ACLs (creator all, world read "
        "except sensitive paths); needs epochlog.zookeeper.login.config"
    ),
    "epochlog.zookeeper.login.config": Definition(
        "string", None, "JAAS file whose Client section (DigestLoginModule username, password) "
        "is the broker's ZooKeeper login (digest scheme)"
    ),
    "num.partitions": Definition("int", 1, "partitions of auto-created topics", _at_least(1)),
    "default.replication.factor": Definition("int", 1, "", _at_least(1)),
    "min.insync.replicas": Definition("int", 1, "", _at_least(1)),
    "replica.lag.time.max.ms": Definition("long", 30000, "", _at_least(1)),
    "replica.fetch.wait.max.ms": Definition("int", 500, "", _at_least(0)),
    "max.incremental.fetch.session.cache.slots": Definition(
        "int", 1000, "KIP-227 fetch sessions the broker keeps", _at_least(0)
    ),
    "replica.fetch.min.bytes": Definition("int", 1, "", _at_least(1)),
    "replica.fetch.max.bytes": Definition("int", 1048576, "", _at_least(0)),
    "replica.fetch.response.max.bytes": Definition("int", 10485760, "", _at_least(0)),
    "replica.fetch.backoff.ms": Definition("int", 1000, "", _at_least(0)),
    "replica.socket.timeout.ms": Definition("int", 30000, "replica fetch requests", _at_least(1)),
    "num.replica.fetchers": Definition(
        "int", 1, "replica fetchers per source broker (dynamic: resized at once)", _at_least(1)
    ),
    # replication throttles (KIP-73): bytes/s of throttled replicas' traffic, per broker
    "leader.replication.throttled.rate": Definition(
        "long", INT64_MAX, "leader side: throttled replicas' fetch answers", _at_least(0)
    ),
    "follower.replication.throttled.rate": Definition(
        "long", INT64_MAX, "follower side: throttled replicas' fetches", _at_least(0)
    ),
    "replica.high.watermark.checkpoint.interval.ms": Definition("long", 5000, "", _at_least(1)),
    "unclean.leader.election.enable": Definition("bool", False),
    "auto.create.topics.enable": Definition("bool", True),
    "auto.leader.rebalance.enable": Definition("bool", True),
    "leader.imbalance.check.interval.seconds": Definition("long", 300, "", _at_least(1)),
    "leader.imbalance.per.broker.percentage": Definition("int", 10, "", _at_least(0)),
    "controlled.shutdown.enable": Definition("bool", True),
    "controlled.shutdown.max.retries": Definition("int", 3, "", _at_least(0)),
    "controlled.shutdown.retry.backoff.ms": Definition("long", 5000, "", _at_least(0)),
    "delete.topic.enable": Definition("bool", True),
    "broker.rack": Definition("string", None),
    "log.segment.bytes": Definition("int", 1073741824, "", _at_least(14)),
    "log.roll.ms": Definition("long", None),
    "log.roll.hours": Definition("int", 168, "", _at_least(1)),
    "log.retention.ms": Definition("long", None),
    "log.retention.minutes": Definition("int", None),
    "log.retention.hours": Definition("int", 168),
    "log.retention.bytes": Definition("long", -1),
    "log.retention.check.interval.ms": Definition("long", 300000, "", _at_least(1)),
    "log.index.interval.bytes": Definition("int", 4096, "", _at_least(0)),
    "log.index.size.max.bytes": Definition("int", 10485760, "", _at_least(4)),
    "log.flush.interval.messages": Definition("long", INT64_MAX, "", _at_least(1)),
    "log.flush.interval.ms": Definition(
        "long", None, "default flush.ms (unset: log.flush.scheduler.interval.ms)", _at_least(0)
    ),
    "log.flush.scheduler.interval.ms": Definition(
        "long", INT64_MAX, "how often logs are checked against flush.ms", _at_least(1)
    ),
    "log.flush.offset.checkpoint.interval.ms": Definition(
        "int", 60000, "recovery-point checkpoint interval", _at_least(1)
    ),
    "log.flush.start.offset.checkpoint.interval.ms": Definition(
        "int", 60000, "log-start-offset checkpoint interval", _at_least(1)
    ),
    "log.message.timestamp.type": Definition(
        "string", "CreateTime", "", _one_of("CreateTime", "LogAppendTime")
    ),
    "log.cleanup.policy": Definition(
        "list",
        ["delete"],
        "the default cleanup.policy of topics: delete, compact or both",
        lambda v: (
            None
            if v and set(v) <= {"delete", "compact"}
            else "must be delete, compact or compact,delete"
        ),
    ),
    "log.cleaner.enable": Definition("bool", True, "run the log cleaner (compaction)"),
    "log.cleaner.threads": Definition("int", 1, "log cleaner threads", _at_least(1)),
    "log.cleaner.dedupe.buffer.size": Definition(
        "long",
        134217728,
        "memory for the cleaners' offset maps, all threads (Kafka sizes 24 bytes per key)",
        _at_least(1024),
    ),
    "log.cleaner.io.buffer.size": Definition(
        "int", 524288, "read and write buffer of a cleaner thread", _at_least(1024)
    ),
    "log.cleaner.io.max.bytes.per.second": Definition(
        "double",
        1.7976931348623157e308,
        "the log cleaner's read + write rate, all threads together",
        lambda v: None if v > 0 else "must be positive",
    ),
    "log.cleaner.backoff.ms": Definition(
        "long", 15000, "how long a cleaner sleeps when no log needs cleaning", _at_least(0)
    ),
    "log.cleaner.min.cleanable.ratio": Definition(
        "double",
        0.5,
        "default min.cleanable.dirty.ratio",
        lambda v: None if 0.0 <= v <= 1.0 else "must be between 0 and 1",
    ),
    "log.cleaner.min.compaction.lag.ms": Definition(
        "long", 0, "default min.compaction.lag.ms", _at_least(0)
    ),
    "log.cleaner.max.compaction.lag.ms": Definition(
        "long", INT64_MAX, "default max.compaction.lag.ms", _at_least(1)
    ),
    "log.cleaner.delete.retention.ms": Definition(
        "long", 86400000, "default delete.retention.ms (how long tombstones stay)", _at_least(0)
    ),
    "socket.request.max.bytes": Definition("int", 104857600, "", _at_least(1)),
    "message.max.bytes": Definition("int", 1048588, "", _at_least(0)),
    "compression.type": Definition(
        "string",
        "producer",
        "default compression.type of topics: producer keeps the producer's codec, a codec "
        "(uncompressed, gzip, snappy, lz4, zstd) makes the leader rebuild other batches with it",
        _one_of(*COMPRESSION_TYPES),
    ),
    "compression.gzip.level": Definition(
        "int", GZIP_DEFAULT_LEVEL, "default compression.gzip.level", _level_of(Compression.GZIP)
    ),
    "compression.lz4.level": Definition(
        "int", LZ4_DEFAULT_LEVEL, "default compression.lz4.level", _level_of(Compression.LZ4)
    ),
    "compression.zstd.level": Definition(
        "int", ZSTD_DEFAULT_LEVEL, "default compression.zstd.level", _level_of(Compression.ZSTD)
    ),
    "producer.id.expiration.ms": Definition("int", 86400000, "", _at_least(1)),
    "request.timeout.ms": Definition("int", 30000, "controller-to-broker requests", _at_least(0)),
    # client quotas (Kafka's QuotaConfig): the windows client rates are measured over
    "quota.window.num": Definition("int", 11, "samples kept for client quotas", _at_least(1)),
    "quota.window.size.seconds": Definition(
        "int", 1, "time span of each client quota sample", _at_least(1)
    ),
    # the group coordinator (Kafka's names and defaults)
    "offsets.topic.num.partitions": Definition(
        "int", 50, "partitions of __consumer_offsets (fixed once it exists)", _at_least(1)
    ),
    "offsets.topic.replication.factor": Definition(
        "int",
        3,
        "replication factor of __consumer_offsets; fewer when fewer brokers are registered",
        _at_least(1),
    ),
    "offsets.topic.segment.bytes": Definition(
        "int", 104857600, "segment size of __consumer_offsets", _at_least(1)
    ),
    "offsets.commit.timeout.ms": Definition(
        "int", 5000, "how long a commit waits for its replicas (acks=all)", _at_least(1)
    ),
    "offsets.retention.minutes": Definition(
        "int", 10080, "committed offsets of an empty group expire after this", _at_least(1)
    ),
    "offset.metadata.max.bytes": Definition(
        "int", 4096, "largest metadata string of a committed offset", _at_least(0)
    ),
    "group.initial.rebalance.delay.ms": Definition(
        "int", 3000, "how long a new group waits for more members to join", _at_least(0)
    ),
    "group.min.session.timeout.ms": Definition(
        "int", 6000, "shortest session timeout a member may ask for", _at_least(0)
    ),
    "group.max.session.timeout.ms": Definition(
        "int", 1800000, "longest session timeout a member may ask for", _at_least(0)
    ),
    "group.max.size": Definition("int", 2147483647, "most members of one group", _at_least(1)),
    # the transaction coordinator (Kafka's names and defaults)
    "transaction.state.log.num.partitions": Definition(
        "int", 50, "partitions of __transaction_state (fixed once it exists)", _at_least(1)
    ),
    "transaction.state.log.replication.factor": Definition(
        "int",
        3,
        "replication factor of __transaction_state; fewer when fewer brokers are registered",
        _at_least(1),
    ),
    "transaction.state.log.min.isr": Definition(
        "int", 2, "min.insync.replicas of __transaction_state (at most its replicas)", _at_least(1)
    ),
    "transaction.state.log.segment.bytes": Definition(
        "int", 104857600, "segment size of __transaction_state", _at_least(1)
    ),
    "transaction.partition.verification.enable": Definition(
        "bool",
        True,
        "a leader asks the coordinator before a transactional write opens a transaction (KIP-890)",
    ),
    "transaction.max.timeout.ms": Definition(
        "int", 900000, "longest transaction.timeout.ms a producer may ask for", _at_least(1)
    ),
    "transactional.id.expiration.ms": Definition(
        "int", 604800000, "a transactional id idle this long is forgotten", _at_least(1)
    ),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": Definition(
        "int", 10000, "how often transactions past their timeout are aborted", _at_least(1)
    ),
    "transaction.remove.expired.transaction.cleanup.interval.ms": Definition(
        "int", 3600000, "how often expired transactional ids are removed", _at_least(1)
    ),
    # Prometheus endpoint (issue 22; Kafka itself has none: JMX plus an exporter)
    "metrics.port": Definition(
        "int",
        -1,
        "port of the broker's Prometheus endpoint (GET /metrics); 0: a free port (logged); "
        "-1: no endpoint and no request timing",
        _at_least(-1),
    ),
    "metrics.host": Definition(
        "string", None, "address the Prometheus endpoint binds; default: the first listener's host"
    ),
    # epochlog's own
    "epochlog.cluster.dir": Definition("string", None, "local-cluster directory (pid files)"),
    "epochlog.log.dir.probe.interval.ms": Definition(
        "long",
        5000,
        "how often an offline log dir (an I/O error or a full disk took it offline, KIP-112) is "
        "probed; once a probe file can be written and fsynced and enough space is free it is "
        "reloaded and its replicas rejoin, without a restart",
        _at_least(1),
    ),
    "epochlog.log.dir.min.free.bytes": Definition(
        "long",
        -1,
        "free bytes an offline log dir needs to come back online; -1: log.segment.bytes",
        _at_least(-1),
    ),
    "epochlog.message.max.decompressed.multiple": Definition(
        "int",
        DEFAULT_DECOMPRESSED_MAX_MULTIPLE,
        "The most a record batch may take once decompressed, as a multiple of the topic's "
        "max.message.bytes (message.max.bytes by default). A produced batch is decompressed as a "
        "stream and checked record by record; as soon as its output passes this bound "
        "decompression stops and the batch is refused with INVALID_RECORD, nothing appended. "
        "Reads that look inside a stored batch (ListOffsets by timestamp) stop at the same bound "
        "and answer from the batch header instead. No request can make the broker decompress or "
        "hold more than this per batch.",
        _at_least(1),
    ),
    # ACLs (issue 21): Kafka's AclAuthorizer and its settings
    "authorizer.class.name": Definition(
        "string",
        "",
        "the authorizer: kafka.security.authorizer.AclAuthorizer (or the older "
        "kafka.security.auth.SimpleAclAuthorizer) turns ACLs on; empty: no authorization",
        lambda v: (
            None
            if v in ("", *AUTHORIZER_CLASS_NAMES)
            else f"must be empty (no authorizer) or one of {', '.join(AUTHORIZER_CLASS_NAMES)}"
        ),
    ),
    "super.users": Definition(
        "string",
        "",
        "principals allowed everything, separated by semicolons (User:admin;User:broker)",
        _super_users_problem,
    ),
    "allow.everyone.if.no.acl.found": Definition(
        "bool", False, "a resource without any ACL is open to everyone (default: to nobody)"
    ),
}

# Keys of Kafka's stock server.properties with no effect here: accepted so existing files work.
ACCEPTED_WITHOUT_EFFECT = frozenset(
    {
        "num.network.threads",
        "num.io.threads",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "num.recovery.threads.per.data.dir",
        "inter.broker.protocol.version",
        "log.cleaner.io.buffer.load.factor",
        "zookeeper.connection.timeout.ms",
        "broker.id.generation.enable",
    }
)

# Mechanism switches for the seed scenario tests (all default on). Tests only.
TEST_SWITCHES: dict[str, Definition] = {
    "epochlog.test.kip380.enabled": Definition("bool", True, "broker epoch fencing"),
    "epochlog.test.kip903.enabled": Definition("bool", True, "fetch epochs for ISR expansion"),
    "epochlog.test.failover.isr.epochs.enabled": Definition(
        "bool", True, "a new controller removes ISR members that re-registered since (KIP-380)"
    ),
    "epochlog.test.hw.checkpoint.guard.enabled": Definition(
        "bool", True, "no HW checkpoint before the first LeaderAndIsr (KAFKA-7235)"
    ),
    "epochlog.test.txn.fencing.enabled": Definition(
        "bool", True, "the transaction coordinator refuses an older producer epoch (zombies)"
    ),
    "epochlog.test.cleaner.step.delay.ms": Definition(
        "long", 0, "the log cleaner sleeps this long at each step of a pass (kill tests)"
    ),
    "epochlog.test.faults.file": Definition(
        "string", None, "fault rules for inter-broker requests (epochlog.faults)"
    ),
}

# Keys a listener may set for itself as `listener.name.<listener lowercased>.<key>` (Kafka's
# per-listener configs); such a key overrides the plain one on that listener.
LISTENER_KEY_PREFIX = "listener.name."
LISTENER_OVERRIDABLE_PREFIXES: tuple[str, ...] = ("ssl.", "sasl.", "connections.max.reauth.ms")
# SASL's JAAS config also per listener and mechanism: listener.name.<l>.<mechanism>.sasl.jaas.config
SASL_MECHANISM_SCOPED = re.compile(r"(?:plain|scram-sha-256|scram-sha-512|gssapi|oauthbearer)\.")


def listener_scoped(key: str) -> tuple[str, str] | None:
    """`listener.name.<listener>.<rest>` -> (LISTENER upper-cased, rest); None for other keys.
    Which `rest` a listener may set is up to the caller (`listener_definition` for ssl.*)."""
    if not key.startswith(LISTENER_KEY_PREFIX):
        return None
    listener, sep, rest = key[len(LISTENER_KEY_PREFIX) :].partition(".")
    if not sep or not listener or not rest:
        return None
    return listener.upper(), rest


def listener_definition(key: str) -> Definition | None:
    """The definition a `listener.name.<listener>.<key>` key takes, if a listener may set it."""
    scoped = listener_scoped(key)
    if scoped is None:
        return None
    rest = scoped[1]
    mechanism = SASL_MECHANISM_SCOPED.match(rest)
    if mechanism is not None and rest[mechanism.end() :] == "sasl.jaas.config":
        return DEFINITIONS["sasl.jaas.config"]
    if not rest.startswith(LISTENER_OVERRIDABLE_PREFIXES):
        return None
    return DEFINITIONS.get(rest)


_PROPERTY_LINE = re.compile(r"^\s*([^=:\s]+)\s*[=:]\s*(.*?)\s*$")


def _convert(key: str, definition: Definition, raw: Any) -> Any:
    if raw is None:
        return None
    kind = definition.type
    try:
        if kind in ("int", "long"):
            value = raw if isinstance(raw, int) and not isinstance(raw, bool) else int(str(raw))
            limit = INT32_MAX if kind == "int" else INT64_MAX
            if not -limit - 1 <= value <= limit:
                raise ValueError(f"out of range for {kind}")
        elif kind == "double":
            value = float(raw)
        elif kind == "bool":
            if isinstance(raw, bool):
                value = raw
            elif str(raw).strip().lower() in ("true", "false"):
                value = str(raw).strip().lower() == "true"
            else:
                raise ValueError("expected true or false")
        elif kind == "list":
            if isinstance(raw, list | tuple):
                value = [str(x).strip() for x in raw]
            else:
                value = [part.strip() for part in str(raw).split(",") if part.strip()]
        else:
            value = str(raw)
    except ValueError as exc:
        raise ConfigError(f"config {key}={raw!r} is malformed: {exc}") from None
    if definition.validator is not None:
        problem = definition.validator(value)
        if problem:
            raise ConfigError(f"config {key}={raw!r} is invalid: {problem}")
    return value


def parse_properties(text: str, source: str = "server.properties") -> dict[str, str]:
    """Java-properties lines (`key=value`, `key: value`, `#`/`!` comments) into a dict."""
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        match = _PROPERTY_LINE.match(line)
        if match is None:
            raise ConfigError(f"{source}:{number}: cannot parse {line.strip()!r} as key=value")
        values[match.group(1)] = match.group(2)
    return values


class BrokerConfig:
    """Validated broker settings; read with `config["log.segment.bytes"]` or the properties."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values: dict[str, Any] = {}
        # The keys given (server.properties): what DescribeConfigs calls STATIC_BROKER_CONFIG.
        self.explicit: dict[str, Any] = {}
        for key, raw in values.items():
            definition = (
                DEFINITIONS.get(key) or TEST_SWITCHES.get(key) or listener_definition(key)
            )
            if definition is None:
                if key in ACCEPTED_WITHOUT_EFFECT:
                    continue
                raise ConfigError(f"unknown broker config key {key!r}")
            self._values[key] = _convert(key, definition, raw)
            self.explicit[key] = self._values[key]
        for key, definition in {**DEFINITIONS, **TEST_SWITCHES}.items():
            if key not in self._values:
                if definition.default is _NO_DEFAULT:
                    raise ConfigError(f"broker config {key!r} is required")
                self._values[key] = definition.default

    @classmethod
    def from_properties(cls, path: str | Path) -> BrokerConfig:
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
        try:
            return cls(parse_properties(text, str(path)))
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> BrokerConfig:
        return cls(values)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def for_listener(self, listener: str, prefix: str) -> dict[str, tuple[str, Any]]:
        """Every key starting with `prefix` as `listener` sees it: key -> (the key it was read
        from, value); a `listener.name.<listener>.<key>` given overrides the plain key (Kafka's
        rule, key by key)."""
        resolved = {k: (k, v) for k, v in self._values.items() if k.startswith(prefix)}
        for key, value in self._values.items():
            scoped = listener_scoped(key)
            if (
                scoped is not None
                and scoped[0] == listener.upper()
                and scoped[1].startswith(prefix)
            ):
                resolved[scoped[1]] = (key, value)
        return resolved

    # Derived settings, resolved the way Kafka resolves them.

    @property
    def broker_id(self) -> int:
        return self._values["broker.id"]

    @property
    def log_dirs(self) -> list[str]:
        return self._values["log.dirs"] or [self._values["log.dir"]]

    @property
    def listeners(self) -> list[Endpoint]:
        return [Endpoint.parse(value, "listeners") for value in self._values["listeners"]]

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        values = self._values["advertised.listeners"]
        if not values:
            return self.listeners
        return [Endpoint.parse(value, "advertised.listeners") for value in values]

    @property
    def security_protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map as a dict; each entry `NAME:PROTOCOL`."""
        mapping: dict[str, str] = {}
        for entry in self._values["listener.security.protocol.map"]:
            name, sep, protocol = entry.strip().partition(":")
            if not sep or protocol.upper() not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"config listener.security.protocol.map: {entry!r} is not LISTENER:PROTOCOL "
                    f"with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}"
                )
            mapping[name.strip().upper()] = protocol.upper()
        return mapping

    def security_protocol(self, listener: str) -> str:
        """The security protocol of `listener` (a name from `listeners`)."""
        protocol = self.security_protocol_map.get(listener.upper())
        if protocol is None:
            raise ConfigError(
                f"no security protocol defined for listener {listener} "
                "(listener.security.protocol.map)"
            )
        return protocol

    @property
    def inter_broker_listener(self) -> str:
        """The listener the brokers and the controller reach each other on, as Kafka picks it:
        inter.broker.listener.name; else the listener whose protocol is
        security.inter.broker.protocol; else the first listener."""
        named = self._values["inter.broker.listener.name"]
        by_protocol = self._values["security.inter.broker.protocol"]
        listeners = [e.listener for e in self.listeners]
        if named is not None and by_protocol is not None:
            raise ConfigError(
                "only one of inter.broker.listener.name and security.inter.broker.protocol "
                "may be set"
            )
        if named is not None:
            if named.upper() not in listeners:
                raise ConfigError(
                    f"inter.broker.listener.name {named!r} is not a listener in listeners"
                )
            return named.upper()
        if by_protocol is not None:
            found = [name for name in listeners if self.security_protocol(name) == by_protocol]
            if not found:
                raise ConfigError(
                    f"security.inter.broker.protocol {by_protocol!r}: no listener has it"
                )
            return found[0]
        return listeners[0] if listeners else "PLAINTEXT"

    def scoped_value(self, listener: str, key: str) -> tuple[str, Any] | None:
        """(the key as written, its value) of `listener.name.<listener>.<key>`, if given."""
        for written, value in self._values.items():
            if listener_scoped(written) == (listener.upper(), key):
                return written, value
        return None

    def listener_value(self, listener: str, key: str) -> Any:
        """`key` for `listener`: its listener.name.<listener>.<key> override, else the broker's."""
        scoped = self.scoped_value(listener, key)
        return scoped[1] if scoped is not None else self._values.get(key)

    @property
    def retention_ms(self) -> int:
        if self._values["log.retention.ms"] is not None:
            return self._values["log.retention.ms"]
        if self._values["log.retention.minutes"] is not None:
            return self._values["log.retention.minutes"] * 60_000
        return self._values["log.retention.hours"] * 3_600_000

    @property
    def roll_ms(self) -> int:
        if self._values["log.roll.ms"] is not None:
            return self._values["log.roll.ms"]
        return self._values["log.roll.hours"] * 3_600_000

    def enabled(self, switch: str) -> bool:
        """A mechanism switch (`epochlog.test.*`); on unless a test turned it off."""
        return bool(self._values[switch])


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str, key: str) -> Endpoint:
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)://\[?([^\]]*?)\]?:(\d+)", text.strip())
        if match is None:
            raise ConfigError(f"config {key}: {text!r} is not LISTENER://host:port")
        port = int(match.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"config {key}: port {port} in {text!r} is out of range")
        return cls(match.group(1).upper(), match.group(2), port)

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"
