"""Per-log settings, with Kafka's names and defaults.

`LogConfig` is what a partition log consults when it appends, rolls, indexes, flushes and applies
retention. Each field names the topic-level key and the broker-level default it mirrors (the broker
builds the default `LogConfig` from server.properties; a topic's `--config` overrides go through
`with_topic_overrides`, which takes Kafka's topic-level key names and rejects unknown or malformed
ones by name). -1 means unlimited for the retention limits, as in Kafka.

`cleanup.policy` is `delete` (retention by time and size), `compact` (the log cleaner keeps the
latest record of each key, see `compaction.py`) or both, `compact,delete`. The compaction keys
(`min.cleanable.dirty.ratio`, `min.compaction.lag.ms`, `max.compaction.lag.ms`,
`delete.retention.ms`) only matter to a compacted log.

`compression.type` (`producer` or a codec) and the codec levels (`compression.gzip.level`,
`compression.lz4.level`, `compression.zstd.level`, KIP-390) say how the leader stores produced
batches (`protocol/recompression.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from epochlog.protocol.compression import (
    GZIP_DEFAULT_LEVEL,
    LZ4_DEFAULT_LEVEL,
    ZSTD_DEFAULT_LEVEL,
    Compression,
    level_problem,
)
from epochlog.protocol.recompression import PRODUCER, compression_type_problem

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
CREATE_TIME = "CreateTime"
COMPACT = "compact"
DELETE = "delete"
CLEANUP_POLICIES = (COMPACT, DELETE)
LOG_APPEND_TIME = "LogAppendTime"

_DAY_MS = 24 * 60 * 60 * 1000
# Kafka has no such bound. Producers cap batches by their uncompressed size (librdkafka) or by
# an estimate of the compressed size (the Java client's batch.size, 16 KiB by default), so a
# real batch expands by its compression ratio at most: 64 leaves room for highly repetitive data
# while a zip bomb costs at most 64 MiB of decompression at the default message.max.bytes.
DEFAULT_DECOMPRESSED_MAX_MULTIPLE = 64


@dataclass(frozen=True, slots=True)
class LogConfig:
    # segment.bytes (broker: log.segment.bytes): roll when the active segment would exceed this.
    segment_bytes: int = 1024 * 1024 * 1024
    # segment.ms (broker: log.roll.ms / log.roll.hours=168): roll when the segment is this old.
    segment_ms: int = 7 * _DAY_MS
    # segment.index.bytes (broker: log.index.size.max.bytes): roll when an index is this big.
    segment_index_bytes: int = 10 * 1024 * 1024
    # index.interval.bytes (broker: log.index.interval.bytes): bytes of log between index entries.
    index_interval_bytes: int = 4096
    # retention.ms (broker: log.retention.ms / log.retention.hours=168); -1 keeps data forever.
    retention_ms: int = 7 * _DAY_MS
    # retention.bytes (broker: log.retention.bytes); -1 means no size limit.
    retention_bytes: int = -1
    # max.message.bytes (broker: message.max.bytes): the largest batch a producer may append.
    max_message_bytes: int = 1024 * 1024 + 12
    # flush.messages (broker: log.flush.interval.messages): fsync after this many unflushed
    # records. Kafka's default never forces a flush; replication is the durability.
    flush_interval_messages: int = INT64_MAX
    # flush.ms (broker: log.flush.interval.ms, else log.flush.scheduler.interval.ms): fsync a
    # log whose unflushed data is this old, checked every log.flush.scheduler.interval.ms.
    flush_ms: int = INT64_MAX
    # message.timestamp.type (broker: log.message.timestamp.type): CreateTime or LogAppendTime.
    message_timestamp_type: str = CREATE_TIME
    # No topic key (broker: epochlog.message.max.decompressed.multiple): a batch's records may
    # take at most this many times max.message.bytes once decompressed, on produce and on reads.
    decompressed_max_multiple: int = DEFAULT_DECOMPRESSED_MAX_MULTIPLE
    # cleanup.policy (broker: log.cleanup.policy): "delete", "compact" or "compact,delete".
    cleanup_policy: str = DELETE
    # min.cleanable.dirty.ratio (broker: log.cleaner.min.cleanable.ratio): clean a log once its
    # dirty bytes are this share of its cleanable bytes.
    min_cleanable_dirty_ratio: float = 0.5
    # min.compaction.lag.ms (broker: log.cleaner.min.compaction.lag.ms): records younger than
    # this stay uncompacted.
    min_compaction_lag_ms: int = 0
    # max.compaction.lag.ms (broker: log.cleaner.max.compaction.lag.ms): a dirty record older
    # than this gets its log cleaned whatever the dirty ratio.
    max_compaction_lag_ms: int = INT64_MAX
    # delete.retention.ms (broker: log.cleaner.delete.retention.ms): how long a tombstone stays
    # once the cleaner has first kept it (KIP-534's delete horizon).
    delete_retention_ms: int = _DAY_MS
    # compression.type (broker: compression.type): producer (as sent) or the codec to store with.
    compression_type: str = PRODUCER
    # compression.gzip.level, compression.lz4.level, compression.zstd.level (broker: the same
    # keys): the level the broker compresses with when it rebuilds a batch (Kafka 3.8+).
    compression_gzip_level: int = GZIP_DEFAULT_LEVEL
    compression_lz4_level: int = LZ4_DEFAULT_LEVEL
    compression_zstd_level: int = ZSTD_DEFAULT_LEVEL

    def __post_init__(self) -> None:
        # 61 bytes is the smallest batch; a smaller segment could never hold one.
        _require(self.segment_bytes >= 61 and self.segment_bytes <= INT32_MAX, "segment.bytes")
        _require(self.segment_ms >= 1, "segment.ms")
        # 12 bytes is one time index entry: every index must hold at least one.
        _require(12 <= self.segment_index_bytes <= INT32_MAX, "segment.index.bytes")
        _require(self.index_interval_bytes >= 0, "index.interval.bytes")
        _require(self.retention_ms >= -1, "retention.ms")
        _require(self.retention_bytes >= -1, "retention.bytes")
        _require(self.max_message_bytes >= 0, "max.message.bytes")
        _require(self.flush_interval_messages >= 1, "flush.messages")
        _require(self.flush_ms >= 0, "flush.ms")
        _require(self.decompressed_max_multiple >= 1, "epochlog.message.max.decompressed.multiple")
        _require(0.0 <= self.min_cleanable_dirty_ratio <= 1.0, "min.cleanable.dirty.ratio")
        _require(self.min_compaction_lag_ms >= 0, "min.compaction.lag.ms")
        _require(self.max_compaction_lag_ms >= 1, "max.compaction.lag.ms")
        _require(self.delete_retention_ms >= 0, "delete.retention.ms")
        policies = parse_cleanup_policy(self.cleanup_policy)
        if not policies:
            raise ValueError(
                f"cleanup.policy {self.cleanup_policy!r} must be delete, compact or compact,delete"
            )
        problem = compression_type_problem(self.compression_type)
        if problem is not None:
            raise ValueError(f"compression.type {problem}")
        for key, codec, level in (
            ("compression.gzip.level", Compression.GZIP, self.compression_gzip_level),
            ("compression.lz4.level", Compression.LZ4, self.compression_lz4_level),
            ("compression.zstd.level", Compression.ZSTD, self.compression_zstd_level),
        ):
            problem = level_problem(codec, level)
            if problem is not None:
                raise ValueError(f"{key}={level} {problem}")
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(
                f"message.timestamp.type must be CreateTime or LogAppendTime, "
                f"not {self.message_timestamp_type!r}"
            )

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def compact(self) -> bool:
        """The log cleaner compacts this log (cleanup.policy has `compact`)."""
        return COMPACT in parse_cleanup_policy(self.cleanup_policy)

    @property
    def delete(self) -> bool:
        """Retention by time and size applies (cleanup.policy has `delete`)."""
        return DELETE in parse_cleanup_policy(self.cleanup_policy)

    @property
    def max_decompressed_bytes(self) -> int:
        """The most a batch's records may take decompressed (produce validation and reads)."""
        return self.decompressed_max_multiple * self.max_message_bytes

    def compression_level(self, codec: Compression) -> int | None:
        """The level to compress with `codec` at (None: snappy and uncompressed have none)."""
        if codec is Compression.GZIP:
            return self.compression_gzip_level
        if codec is Compression.LZ4:
            return self.compression_lz4_level
        if codec is Compression.ZSTD:
            return self.compression_zstd_level
        return None

    def with_topic_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """A copy with topic-level settings applied, keyed by Kafka's topic config names."""
        changes: dict[str, object] = {}
        for key, raw in overrides.items():
            field_name = TOPIC_CONFIG_FIELDS.get(key)
            if field_name is None:
                known = ", ".join(sorted(TOPIC_CONFIG_FIELDS))
                raise ValueError(f"unknown topic config {key!r}; known: {known}")
            if field_name in ("message_timestamp_type", "compression_type"):
                changes[field_name] = raw.strip()
                continue
            if field_name == "cleanup_policy":
                policies = parse_cleanup_policy(raw)
                if not policies:
                    raise ValueError(
                        f"topic config cleanup.policy={raw!r} must be delete, compact or "
                        "compact,delete"
                    )
                changes[field_name] = ",".join(sorted(policies))
                continue
            if field_name == "min_cleanable_dirty_ratio":
                try:
                    changes[field_name] = float(raw.strip())
                except ValueError:
                    raise ValueError(f"topic config {key}={raw!r} is not a number") from None
                continue
            try:
                changes[field_name] = int(raw.strip())
            except ValueError:
                raise ValueError(f"topic config {key}={raw!r} is not an integer") from None
        return dataclasses.replace(self, **changes)


# Kafka's topic-level config names for the fields above.
TOPIC_CONFIG_FIELDS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_message_bytes",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_ms",
    "message.timestamp.type": "message_timestamp_type",
    "cleanup.policy": "cleanup_policy",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "delete.retention.ms": "delete_retention_ms",
    "compression.type": "compression_type",
    "compression.gzip.level": "compression_gzip_level",
    "compression.lz4.level": "compression_lz4_level",
    "compression.zstd.level": "compression_zstd_level",
}


def parse_cleanup_policy(text: str) -> frozenset[str]:
    """The policies of a cleanup.policy value (comma-separated, Kafka's list syntax); an empty set
    when a part is not `compact` or `delete` (or there is none)."""
    parts = [part.strip().lower() for part in text.split(",")]
    if not parts or any(part not in CLEANUP_POLICIES for part in parts):
        return frozenset()
    return frozenset(parts)


def _require(ok: bool, key: str) -> None:
    if not ok:
        raise ValueError(f"log config {key} is out of range")
