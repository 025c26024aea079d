"""Kafka's names for things on disk, so an operator recognises a log dir.

A log dir holds one directory per partition, `<topic>-<partition>`, plus the per-dir checkpoints
and `meta.properties`. A partition dir holds segments named by their base offset padded to 20
digits (`00000000000000001234.log`, `.index`, `.timeindex`, `.txnindex`), producer state
snapshots (`<offset>.snapshot`), `leader-epoch-checkpoint` and `partition.metadata`. Everything
here is pure naming: building and parsing names, no I/O.
"""

from __future__ import annotations

import re

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
# Aborted transactions whose markers the segment holds; only a segment with aborts has one.
TXN_INDEX_SUFFIX = ".txnindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# Leftovers of an interrupted operation; removed when a partition dir is loaded.
DELETED_SUFFIX = ".deleted"
TMP_SUFFIX = ".tmp"
# The log cleaner writes a cleaned segment as `<base>.log.cleaned` (and its indexes), renames it
# to `.swap` once complete (the commit point), then swaps it in for the segments it replaces.
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
# A partition dir being deleted is renamed `<topic>-<p>.<uuid hex>-delete` first.
DELETE_DIR_SUFFIX = "-delete"
# A replica being moved to another log dir (AlterReplicaLogDirs) is copied into
# `<topic>-<p>.<uuid hex>-future` there, renamed `<topic>-<p>` when it replaces the current one.
FUTURE_DIR_SUFFIX = "-future"

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_SEGMENT_NAME = re.compile(r"(\d{20})(\.log|\.index|\.timeindex|\.txnindex)")


def segment_file_name(base_offset: int, suffix: str) -> str:
    """`<baseOffset:020d><suffix>`, e.g. `00000000000000000042.log`."""
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str) -> tuple[int, str] | None:
    """(base offset, suffix) of a segment file name, or None for any other file."""
    match = _SEGMENT_NAME.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


def validate_topic_name(topic: str) -> None:
    """Kafka's rule: 1 to 249 of [a-zA-Z0-9._-], and not `.` or `..`. Raises ValueError.

    It matters here because the name becomes a directory name.
    """
    if topic in ("", ".", ".."):
        raise ValueError(f"illegal topic name {topic!r}")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise ValueError(
            f"topic name {topic[:40]!r}... is {len(topic)} characters, "
            f"the limit is {MAX_TOPIC_NAME_LENGTH}"
        )
    if _LEGAL_TOPIC.fullmatch(topic) is None:
        raise ValueError(
            f"illegal topic name {topic!r}: only ASCII letters, digits, '.', '_', '-' allowed"
        )


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int]:
    """(topic, partition) from `<topic>-<partition>`; the partition follows the last `-`.

    Raises ValueError for any other name (including dirs being deleted).
    """
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not a partition directory name (<topic>-<partition>)")
    validate_topic_name(topic)
    return topic, int(partition)


def future_dir_name(topic: str, partition: int, unique_id: str) -> str:
    return f"{partition_dir_name(topic, partition)}.{unique_id}{FUTURE_DIR_SUFFIX}"


def parse_future_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a `<topic>-<p>.<uuid hex>-future` dir; None for any other name."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    stem, dot, unique_id = name.removesuffix(FUTURE_DIR_SUFFIX).rpartition(".")
    if not dot or not unique_id.isalnum():
        return None
    try:
        return parse_partition_dir_name(stem)
    except ValueError:
        return None


def parse_log_dir_name(name: str) -> tuple[str, int]:
    """(topic, partition) of a current (`<topic>-<p>`) or future partition dir."""
    return parse_future_dir_name(name) or parse_partition_dir_name(name)
