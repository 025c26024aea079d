"""The data source's options, parsed and checked on the driver: sans-I/O.

Spark hands a data source its options as a case-insensitive dict of strings with lower-cased
keys (`.option("maxOffsetsPerTrigger", 5)` arrives as `maxoffsetspertrigger='5'`). The names and
meanings are those of Spark's Kafka source and sink (see DESIGN.md); `parse_source_options` and
`parse_sink_options` turn them into frozen dataclasses, so a bad option fails on the driver with
an `OptionError` naming the option, before any task runs.

Client settings pass through to epochlog's client: `kafka.<name>` (Spark's convention) and bare
client names such as `fetch.max.bytes`; `bootstrap.servers` may be given either way. They are
checked by the client's own config loader, so a bad one names its key too. A `kafka.<name>` the
client does not know (Java-only keys such as `kafka.sasl.login.class`) is logged as a warning
naming it and ignored, as the Kafka client does with unknown configs. The settings Spark's Kafka
source refuses (auto.offset.reset, enable.auto.commit, (de)serializers, interceptors) are
refused here as well, with Spark's reason; `kafka.group.id` is accepted with Spark's warning and
names the consumer group the streaming source commits its progress to (see `group_id`).

Security settings are client keys like any other (`kafka.security.protocol`, Java's
`kafka.ssl.truststore.*` / `kafka.ssl.keystore.*` with PEM stores, librdkafka's
`kafka.ssl.ca.location` etc.). The files they name are loaded here on the driver, so an
unreadable one fails at load() naming the option, and again by each executor's client: they must
exist at the same path wherever executors run.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from epochlog.client.config import SETTINGS, Role
from epochlog.client.errors import ConfigError
from epochlog.spark.java_regex import JavaRegexError, compile_java, find_in

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1

DEFAULT_NETWORK_TIMEOUT_MS = 120_000  # spark.network.timeout's default
DEFAULT_GROUP_ID_PREFIX = "spark-kafka-source"

_REFUSED_CLIENT_KEYS = {
    "auto.offset.reset": "set the source option startingOffsets to earliest or latest instead",
    "enable.auto.commit": "the source commits offsets itself, only after Spark committed a batch",
    "key.deserializer": "keys are always read as binary",
    "value.deserializer": "values are always read as binary",
    "key.serializer": "keys are always written as binary",
    "value.serializer": "values are always written as binary",
    "interceptor.classes": "interceptors are not supported",
}


class OptionError(ValueError):
    """A bad data source option; the message starts with the option's name."""

    def __init__(self, option: str, reason: str) -> None:
        super().__init__(f"epochlog data source option {option}: {reason}")
        self.option = option


# ------------------------------------------------------------------------------ offset specs


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end reading.

    kind: "earliest", "latest", "offsets" (per partition; -2 earliest, -1 latest), "timestamp"
    (one timestamp for every partition) or "timestamps" (per partition)."""

    kind: str
    offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    timestamp: int | None = None


def parse_partition_json(option: str, text: str) -> dict[tuple[str, int], int]:
    """`{"topicA":{"0":23,"1":-1}}` into {(topic, partition): number}."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(option, f'not JSON like {{"topic":{{"0":23}}}}: {exc}') from None
    if not isinstance(data, dict):
        raise OptionError(option, 'expected a JSON object like {"topic":{"0":23}}')
    out: dict[tuple[str, int], int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(option, f"topic {topic!r} must map partitions to numbers")
        for p, value in parts.items():
            if not str(p).lstrip("-").isdigit() or int(p) < 0:
                raise OptionError(option, f"{p!r} of topic {topic!r} is not a partition number")
            if not isinstance(value, int) or isinstance(value, bool):
                raise OptionError(option, f"{topic}-{p}: {value!r} is not an integer")
            out[(topic, int(p))] = value
    return out


def _offset_spec(
    options: Mapping[str, str], prefix: str, default: str, streaming: bool
) -> OffsetSpec:
    """startingOffsets/startingTimestamp/... (prefix 'starting') or the ending ones."""
    ts_key, by_ts_key, off_key = (
        f"{prefix}timestamp",
        f"{prefix}offsetsbytimestamp",
        (f"{prefix}offsets"),
    )
    nice = {"starting": "starting", "ending": "ending"}[prefix]
    if options.get(ts_key) is not None:  # takes precedence, as in Spark's Kafka source
        return OffsetSpec("timestamp", timestamp=_non_negative(f"{nice}Timestamp", options[ts_key]))
    if options.get(by_ts_key) is not None:
        stamps = parse_partition_json(f"{nice}OffsetsByTimestamp", options[by_ts_key])
        for tp, ts in stamps.items():
            if ts < 0:
                raise OptionError(f"{nice}OffsetsByTimestamp", f"{tp[0]}-{tp[1]}: negative {ts}")
        return OffsetSpec("timestamps", offsets=stamps)
    text = options.get(off_key, default).strip()
    name = f"{nice}Offsets"
    if text.lower() in ("earliest", "latest"):
        kind = text.lower()
        if prefix == "ending" and kind == "earliest":
            raise OptionError(name, "earliest is not a valid ending offset")
        if prefix == "starting" and kind == "latest" and not streaming:
            raise OptionError(name, "latest is not valid for batch queries (use earliest or JSON)")
        return OffsetSpec(kind)
    offsets = parse_partition_json(name, text)
    for tp, off in offsets.items():
        if off < EARLIEST:
            raise OptionError(name, f"{tp[0]}-{tp[1]}: {off} (use -2 earliest, -1 latest)")
        if prefix == "ending" and off == EARLIEST:
            raise OptionError(name, f"{tp[0]}-{tp[1]}: -2 (earliest) is not a valid end")
        if prefix == "starting" and off == LATEST and not streaming:
            raise OptionError(name, f"{tp[0]}-{tp[1]}: -1 (latest) is not valid for batch queries")
    return OffsetSpec("offsets", offsets=offsets)


# ------------------------------------------------------------------------------ source


@dataclass(frozen=True)
class SourceOptions:
    client: Mapping[str, Any]  # epochlog client settings (dotted names), bootstrap included
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy: error | latest
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = DEFAULT_NETWORK_TIMEOUT_MS
    group_id: str | None = None  # kafka.group.id: the group progress is committed to
    group_id_prefix: str | None = None  # groupIdPrefix: a fresh group <prefix>-<uuid> per run
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000

    def commit_group(self) -> str | None:
        """The consumer group a streaming query commits its progress to: kafka.group.id, else
        `<groupIdPrefix>-<uuid>` (as Spark names its groups), else none."""
        if self.group_id is not None:
            return self.group_id
        if self.group_id_prefix is not None:
            return f"{self.group_id_prefix}-{uuid.uuid4()}"
        return None

    @property
    def topic_option(self) -> str:
        if self.subscribe:
            return "subscribe"
        if self.subscribe_pattern is not None:
            return "subscribePattern"
        return "assign"

    def matches(self, topic: str) -> bool:
        """Whether `topic` is one this source reads (for subscribe / subscribePattern)."""
        if self.subscribe:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            # Spark's findFirstIn: the Java pattern found anywhere in the name
            return find_in(compile_java(self.subscribe_pattern), topic)
        return any(t == topic for t, _ in self.assign)


def parse_source_options(
    options: Mapping[str, str],
    *,
    streaming: bool,
    network_timeout_ms: int = DEFAULT_NETWORK_TIMEOUT_MS,
) -> SourceOptions:
    """`network_timeout_ms` is spark.network.timeout, kafkaConsumer.pollTimeoutMs's default."""
    opts = {k.lower(): v for k, v in options.items()}
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(chosen) != 1:
        given = ", ".join(chosen) if chosen else "none"
        raise OptionError(
            "subscribe/subscribePattern/assign",
            f"give exactly one of subscribe, subscribePattern or assign (given: {given})",
        )
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[tuple[str, int], ...] = ()
    if chosen[0] == "subscribe":
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("subscribe", "no topic named")
    elif chosen[0] == "subscribepattern":
        pattern = opts["subscribepattern"]
        try:
            compile_java(pattern)
        except JavaRegexError as exc:
            raise OptionError("subscribePattern", f"{pattern!r}: {exc}") from None
    else:
        assign = _parse_assign(opts["assign"])
    starting = _offset_spec(opts, "starting", "latest" if streaming else "earliest", streaming)
    if streaming and any(
        opts.get(k) is not None
        for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
    ):
        raise OptionError("endingOffsets", "ending offsets are for batch queries only")
    ending = (
        _offset_spec(opts, "ending", "latest", streaming) if not streaming else OffsetSpec("latest")
    )
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy", f"{strategy!r}: error or latest")
    max_per_trigger = _positive(opts, "maxOffsetsPerTrigger")
    min_per_trigger = _positive(opts, "minOffsetsPerTrigger")
    if (
        min_per_trigger is not None
        and max_per_trigger is not None
        and (min_per_trigger > max_per_trigger)
    ):
        raise OptionError(
            "minOffsetsPerTrigger",
            f"the value of minOffsetsPerTrigger ({min_per_trigger}) is higher than "
            f"maxOffsetsPerTrigger ({max_per_trigger})",
        )
    group_id = opts.get("kafka.group.id")
    if group_id is not None:
        if not group_id.strip():
            raise OptionError("kafka.group.id", "empty group id")
        log.warning(
            "kafka.group.id=%s is set on this query: the source commits its progress to that "
            "group; two queries sharing it would interfere (Spark's warning: use it with care)",
            group_id,
        )
    prefix = opts.get("groupidprefix")
    if prefix is not None and not prefix.strip():
        raise OptionError("groupIdPrefix", "empty prefix")
    return SourceOptions(
        client=client_settings(opts, Role.CONSUMER),
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=parse_duration_ms(
            "maxTriggerDelay", opts.get("maxtriggerdelay", "15m")
        ),
        min_partitions=_positive(opts, "minPartitions"),
        max_records_per_partition=_positive(opts, "maxRecordsPerPartition"),
        fail_on_data_loss=parse_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        include_headers=parse_bool("includeHeaders", opts.get("includeheaders", "false")),
        poll_timeout_ms=_positive(opts, "kafkaConsumer.pollTimeoutMs") or network_timeout_ms,
        group_id=group_id.strip() if group_id is not None else None,
        group_id_prefix=prefix.strip() if prefix is not None else None,
        fetch_offset_num_retries=_non_negative(
            "fetchOffset.numRetries", opts.get("fetchoffset.numretries", "3")
        ),
        fetch_offset_retry_interval_ms=_non_negative(
            "fetchOffset.retryIntervalMs", opts.get("fetchoffset.retryintervalms", "1000")
        ),
    )


def _parse_assign(text: str) -> tuple[tuple[str, int], ...]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError("assign", f'not JSON like {{"topicA":[0,1]}}: {exc}') from None
    if not isinstance(data, dict) or not data:
        raise OptionError("assign", 'expected a JSON object like {"topicA":[0,1]}')
    out = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise OptionError("assign", f"topic {topic!r} must map to a list of partitions")
        out.extend((topic, p) for p in parts)
    return tuple(sorted(set(out)))


# ------------------------------------------------------------------------------ sink

AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"


DEFAULT_TRANSACTION_TIMEOUT_MS = 300_000  # a batch's tasks and its commit must fit in it


@dataclass(frozen=True)
class SinkOptions:
    client: Mapping[str, Any]
    topic: str | None = None
    delivery_guarantee: str = AT_LEAST_ONCE
    # exactly-once: what names the sink (the checkpoint location, or stagingLocation if given),
    # an explicit transactional id prefix, and the transactions' timeout
    sink_location: str | None = None
    transactional_id_prefix: str | None = None
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS


def parse_sink_options(
    options: Mapping[str, str], columns: Mapping[str, str], *, streaming: bool
) -> SinkOptions:
    """`columns` maps the input DataFrame's column names to Spark type names (simpleString)."""
    opts = {k.lower(): v for k, v in options.items()}
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("topic", "empty topic name")
    check_sink_columns(columns, has_topic_option=topic is not None)
    guarantee = opts.get("deliveryguarantee", AT_LEAST_ONCE).strip().lower()
    if guarantee not in (AT_LEAST_ONCE, EXACTLY_ONCE):
        raise OptionError("deliveryGuarantee", f"{guarantee!r}: {AT_LEAST_ONCE} or {EXACTLY_ONCE}")
    location = opts.get("staginglocation") or opts.get("checkpointlocation")
    prefix = opts.get("transactionalidprefix")
    if prefix is not None and not prefix.strip():
        raise OptionError("transactionalIdPrefix", "empty prefix")
    timeout = _positive(opts, "transactionTimeoutMs") or DEFAULT_TRANSACTION_TIMEOUT_MS
    if guarantee == EXACTLY_ONCE:
        if not streaming:
            raise OptionError("deliveryGuarantee", "exactly-once is for streaming writes")
        if location is None and prefix is None:
            raise OptionError(
                "transactionalIdPrefix",
                "exactly-once needs a checkpointLocation (or a transactionalIdPrefix) to name "
                "its transactions",
            )
    return SinkOptions(
        client=client_settings(opts, Role.PRODUCER),
        topic=topic.strip() if topic is not None else None,
        delivery_guarantee=guarantee,
        sink_location=location,
        transactional_id_prefix=prefix.strip() if prefix is not None else None,
        transaction_timeout_ms=timeout,
    )


_BYTES_TYPES = ("binary", "string")


def check_sink_columns(columns: Mapping[str, str], *, has_topic_option: bool) -> None:
    """The input columns of Spark's Kafka sink: value (required), key, headers, topic,
    partition, timestamp (the record's). Raises OptionError naming the column."""
    lowered = {name.lower(): kind for name, kind in columns.items()}
    if "value" not in lowered:
        raise OptionError("value", f"column 'value' is required (columns: {sorted(columns)})")
    for name in ("value", "key"):
        if name in lowered and lowered[name] not in _BYTES_TYPES:
            raise OptionError(
                name, f"column {name!r} must be string or binary, not {lowered[name]}"
            )
    if "topic" in lowered:
        if lowered["topic"] != "string":
            raise OptionError("topic", f"column 'topic' must be string, not {lowered['topic']}")
    elif not has_topic_option:
        raise OptionError("topic", "no 'topic' column and no topic option")
    if "timestamp" in lowered and lowered["timestamp"] not in ("timestamp", "timestamp_ntz"):
        raise OptionError(
            "timestamp", f"column 'timestamp' must be timestamp, not {lowered['timestamp']}"
        )
    if "partition" in lowered and lowered["partition"] not in ("int", "integer"):
        raise OptionError(
            "partition", f"column 'partition' must be int, not {lowered['partition']}"
        )
    if "headers" in lowered:
        kind = lowered["headers"].replace(" ", "")
        if kind not in (
            "array<struct<key:string,value:binary>>",
            "array<struct<key:string,value:string>>",
        ):
            raise OptionError(
                "headers",
                f"column 'headers' must be array<struct<key:string,value:binary>>, not {kind}",
            )


# ------------------------------------------------------------------------------ shared


def client_settings(opts: Mapping[str, str], role: Role) -> dict[str, Any]:
    """The client settings among the options: `kafka.<key>` and bare client keys for `role`."""
    out: dict[str, Any] = {}
    unknown = []
    for key, value in opts.items():
        name = key.removeprefix("kafka.")
        if name in _REFUSED_CLIENT_KEYS and (key.startswith("kafka.") or name == key):
            raise OptionError(
                key, f"Kafka option {name!r} is not supported: {_REFUSED_CLIENT_KEYS[name]}"
            )
        if name == "group.id":
            continue  # the group the source commits to (SourceOptions.group_id), not the client's
        setting = SETTINGS.get(name)
        if setting is None:
            if key.startswith("kafka."):
                unknown.append(key)
            continue
        if role in setting.roles:
            out[name] = value
    if unknown:
        # As the Kafka client: an unknown config is logged and ignored, not an error.
        log.warning(
            "ignoring options epochlog's client does not know: %s", ", ".join(sorted(unknown))
        )
    if "bootstrap.servers" not in out:
        raise OptionError("bootstrap.servers", "required (or kafka.bootstrap.servers)")
    from epochlog.client.config import load_config
    from epochlog.client.tls import client_ssl_context

    try:
        # TLS files load here too: a bad kafka.ssl.* fails at load(), not in every task
        client_ssl_context(load_config(role, out))
    except ConfigError as exc:
        prefixed = f"kafka.{exc.key}"
        raise OptionError(prefixed if prefixed in opts else exc.key, exc.reason) from None
    return out


def role_settings(settings: Mapping[str, Any], role: Role) -> dict[str, Any]:
    """The subset of `settings` a client of `role` takes."""
    return {k: v for k, v in settings.items() if k in SETTINGS and role in SETTINGS[k].roles}


def parse_bool(option: str, text: str) -> bool:
    value = str(text).strip().lower()
    if value not in ("true", "false"):
        raise OptionError(option, f"{text!r}: true or false")
    return value == "true"


def _non_negative(option: str, text: str) -> int:
    value = str(text).strip()
    if not value.isdigit():
        raise OptionError(option, f"{text!r} is not a non-negative integer")
    return int(value)


def _positive(opts: Mapping[str, str], option: str) -> int | None:
    text = opts.get(option.lower())
    if text is None:
        return None
    value = str(text).strip()
    if not value.isdigit() or int(value) <= 0:
        raise OptionError(option, f"{text!r} is not a positive integer")
    return int(value)


_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(option: str, text: str) -> int:
    """Spark time strings: `15m`, `30s`, `100ms`, `2h`; a bare number is milliseconds."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", str(text).lower())
    if match is None or (match.group(2) and match.group(2) not in _UNITS_MS):
        raise OptionError(option, f"{text!r} is not a duration such as 30s, 15m or 500ms")
    return int(match.group(1)) * _UNITS_MS.get(match.group(2) or "ms", 1)
