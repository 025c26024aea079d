"""Topic-level configs (`topics create --config`, CreateTopics' configs): which of Kafka's keys a
topic may set here, their validation, and what they change.

- The storage keys (`segment.bytes`, `retention.ms`, `retention.bytes`, `max.message.bytes`, ...)
  override the broker's defaults in the partition's `LogConfig`;
- `min.insync.replicas` overrides the broker's for acks=all produce and the HW rule;
- `unclean.leader.election.enable` is read by the controller when it elects;
- `cleanup.policy` (`delete`, `compact` or `compact,delete`) and the compaction keys
  (`min.cleanable.dirty.ratio`, `min.compaction.lag.ms`, `max.compaction.lag.ms`,
  `delete.retention.ms`) reach the `LogConfig` too: the log cleaner and the produce path (keyless
  records are refused on a compacted topic) read them there.

The controller validates a new topic's configs before writing anything (INVALID_CONFIG naming
the key); a broker applies them when it creates the partition's log, reading them from
ZooKeeper as Kafka's ZooKeeper-mode brokers do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from epochlog.storage.config import TOPIC_CONFIG_FIELDS, LogConfig

BOOLEANS = ("true", "false")
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
THROTTLED_REPLICAS_KEYS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
OTHER_KEYS = ("min.insync.replicas", "unclean.leader.election.enable", *THROTTLED_REPLICAS_KEYS)
# Kafka's AllReplicas: a throttle on every partition of the topic ("*").
ALL_PARTITIONS: frozenset[int] = frozenset({-1})
_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")
KNOWN_KEYS = tuple(sorted((*TOPIC_CONFIG_FIELDS, *OTHER_KEYS)))


class TopicConfigError(ValueError):
    """A topic config that cannot be applied; the message names the key."""


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Raise TopicConfigError for the first unknown key or bad value."""
    storage: dict[str, str] = {}
    for key, value in configs.items():
        if key not in KNOWN_KEYS:
            raise TopicConfigError(f"unknown topic config {key!r}; known: {', '.join(KNOWN_KEYS)}")
        if value is None:
            raise TopicConfigError(f"topic config {key} has no value")
        if key in TOPIC_CONFIG_FIELDS:
            storage[key] = value
        elif key == "min.insync.replicas":
            _positive_int(key, value)
        elif key == "unclean.leader.election.enable" and value.strip().lower() not in BOOLEANS:
            raise TopicConfigError(f"topic config {key}={value!r} is not true or false")
        elif key in THROTTLED_REPLICAS_KEYS and not _valid_throttled_replicas(value):
            raise TopicConfigError(
                f"topic config {key}={value!r}: {key} must be the literal '*' or a list of "
                "replicas in the following format: [partitionId]:[brokerId],"
                "[partitionId]:[brokerId],..."
            )
    try:
        LogConfig().with_topic_overrides(storage)
    except ValueError as exc:
        raise TopicConfigError(str(exc)) from None


def log_config_for(base: LogConfig, configs: Mapping[str, str]) -> LogConfig:
    """The broker's log defaults with the topic's storage overrides applied."""
    storage = {k: v for k, v in configs.items() if k in TOPIC_CONFIG_FIELDS}
    return base.with_topic_overrides(storage) if storage else base


def min_insync_replicas_of(configs: Mapping[str, str]) -> int | None:
    """The topic's min.insync.replicas override, if it has one."""
    value = configs.get("min.insync.replicas")
    return None if value is None else _positive_int("min.insync.replicas", value)


def _positive_int(key: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise TopicConfigError(f"topic config {key}={value!r} is not an integer") from None
    if number < 1:
        raise TopicConfigError(f"topic config {key}={value!r} must be at least 1")
    return number


def _valid_throttled_replicas(value: str) -> bool:
    """Kafka's ThrottledReplicaListValidator: `*`, or partition:broker pairs (empty allowed)."""
    items = [item.strip() for item in value.split(",")]
    return value.strip() == "*" or all(_THROTTLED_REPLICA.fullmatch(item) for item in items)


def throttled_partitions(configs: Mapping[str, str], key: str, broker_id: int) -> frozenset[int]:
    """The partitions of the topic whose replicas on `broker_id` the throttled-replicas key
    `key` names (Kafka's TopicConfigHandler.parseThrottledPartitions): ALL_PARTITIONS for `*`,
    empty when the key is unset or names none here."""
    value = configs.get(key, "").strip()
    if value == "*":
        return ALL_PARTITIONS
    found = set()
    for item in value.split(","):
        partition, _, broker = item.strip().partition(":")
        if broker and int(broker) == broker_id:
            found.add(int(partition))
    return frozenset(found)
