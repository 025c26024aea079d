"""Kafka's small text files: offset checkpoints, the leader epoch checkpoint, partition.metadata,
meta.properties.

Kafka's CheckpointFile format is UTF-8 text: line 1 the version (0), line 2 the number of entries,
then one entry per line, fields separated by whitespace. `OffsetCheckpointFile` holds
`topic partition offset` entries (replication-offset-checkpoint, recovery-point-offset-checkpoint,
log-start-offset-checkpoint); `LeaderEpochCheckpointFile` holds `epoch startOffset` entries.
A missing or empty file reads as no entries, as in Kafka (which creates the file empty). Every
write goes to `<file>.tmp`, is fsynced and renamed over the target (`files.write_atomically`), so
a leftover `.tmp` from a crash is simply overwritten by the next write and never read.

`partition.metadata` is two lines, `version: 0` and `topic_id: <id>`, the id being Kafka's Uuid
string (URL-safe base64 of the 16 bytes, no padding). `meta.properties` is java-properties text
with `version=0`, `broker.id=N` and, once known, `cluster.id=...`.

A file that does not parse raises `CheckpointFormatError` naming the file and the line.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from epochlog.storage.epoch_cache import EpochEntry
from epochlog.storage.errors import CheckpointFormatError
from epochlog.storage.files import durable_batch, write_atomically

CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0
META_PROPERTIES_VERSION = 0

T = TypeVar("T")


def kafka_uuid_str(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes without `=` padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Inverse of `kafka_uuid_str`; raises ValueError for anything that is not 16 bytes."""
    if len(text) != 22:
        raise ValueError(f"{text!r} is not a Kafka Uuid (22 base64 characters)")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raise ValueError(f"{text!r} is not a Kafka Uuid (bad base64)") from None
    if len(raw) != 16 or kafka_uuid_str(uuid.UUID(bytes=raw)) != text:
        raise ValueError(f"{text!r} is not a Kafka Uuid")
    return uuid.UUID(bytes=raw)


# ------------------------------------------------------------------- the generic checkpoint


def _read_lines(path: Path) -> list[str] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointFormatError(path, None, f"not UTF-8 text ({exc})") from None
    return text.splitlines()


def read_checkpoint(path: Path, parse_entry: Callable[[list[str]], T]) -> list[T]:
    """The entries of a CheckpointFile; `parse_entry` gets the whitespace-split fields of a line
    and raises ValueError when they are wrong."""
    lines = _read_lines(path)
    if not lines:
        return []
    version = lines[0].strip()
    if version != str(CHECKPOINT_VERSION):
        raise CheckpointFormatError(path, 1, f"unrecognised version {version!r}, expected 0")
    if len(lines) < 2:
        raise CheckpointFormatError(path, 2, "the entry count is missing")
    try:
        expected = int(lines[1].strip())
    except ValueError:
        raise CheckpointFormatError(path, 2, f"entry count {lines[1]!r} is not a number") from None
    entries: list[T] = []
    for number, line in enumerate(lines[2:], start=3):
        try:
            entries.append(parse_entry(line.split()))
        except ValueError as exc:
            raise CheckpointFormatError(path, number, f"malformed entry {line!r}: {exc}") from None
    if len(entries) != expected:
        raise CheckpointFormatError(
            path, None, f"line 2 promises {expected} entries, the file has {len(entries)}"
        )
    return entries


def write_checkpoint(path: Path, lines: list[str]) -> None:
    text = f"{CHECKPOINT_VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    write_atomically(path, text.encode("utf-8"))


def _int_field(text: str, what: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"{what} {value} is below {minimum}")
    return value


class OffsetCheckpointFile:
    """`topic partition offset` entries: high watermarks, recovery points, log start offsets."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> dict[tuple[str, int], int]:
        def parse(fields: list[str]) -> tuple[tuple[str, int], int]:
            if len(fields) != 3:
                raise ValueError(f"expected 3 fields (topic partition offset), got {len(fields)}")
            partition = _int_field(fields[1], "partition", 0)
            return (fields[0], partition), _int_field(fields[2], "offset", 0)

        return dict(read_checkpoint(self.path, parse))

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        lines = []
        for (topic, partition), offset in sorted(offsets.items()):
            if offset < 0:
                raise ValueError(
                    f"cannot checkpoint negative offset {offset} of {topic}-{partition}"
                )
            lines.append(f"{topic} {partition} {offset}")
        write_checkpoint(self.path, lines)


class LeaderEpochCheckpointFile:
    """`epoch startOffset` entries of one partition's leader epoch cache."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> list[EpochEntry]:
        def parse(fields: list[str]) -> EpochEntry:
            if len(fields) != 2:
                raise ValueError(f"expected 2 fields (epoch startOffset), got {len(fields)}")
            return EpochEntry(_int_field(fields[0], "epoch", 0), _int_field(fields[1], "offset", 0))

        return read_checkpoint(self.path, parse)

    def write(self, entries: Iterable[EpochEntry]) -> None:
        write_checkpoint(self.path, [f"{epoch} {start}" for epoch, start in entries])

    def is_empty_file(self) -> bool:
        """The file exists with no bytes at all (no checkpoint is ever written that way)."""
        try:
            return self.path.stat().st_size == 0
        except FileNotFoundError:
            return False


# --------------------------------------------------------------------------- partition.metadata


class PartitionMetadataFile:
    """`partition.metadata`: the topic id of the partition dir, as Kafka writes it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> uuid.UUID | None:
        lines = _read_lines(self.path)
        if lines is None:
            return None
        fields: dict[str, tuple[int, str]] = {}
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            key, sep, value = line.partition(":")
            if not sep or not value.strip():
                raise CheckpointFormatError(
                    self.path, number, f"expected 'key: value', got {line!r}"
                )
            fields[key.strip()] = (number, value.strip())
        if "version" not in fields or "topic_id" not in fields:
            raise CheckpointFormatError(self.path, None, "needs both 'version' and 'topic_id'")
        number, version = fields["version"]
        if version != str(PARTITION_METADATA_VERSION):
            raise CheckpointFormatError(self.path, number, f"unrecognised version {version!r}")
        number, topic_id = fields["topic_id"]
        try:
            return parse_kafka_uuid(topic_id)
        except ValueError as exc:
            raise CheckpointFormatError(self.path, number, str(exc)) from None

    def write(self, topic_id: uuid.UUID) -> None:
        text = f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {kafka_uuid_str(topic_id)}"
        write_atomically(self.path, text.encode("utf-8"))


# ------------------------------------------------------------------------------ meta.properties


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """What a log dir says about its owner (Kafka's ZooKeeper-mode meta.properties, version 0)."""

    broker_id: int
    cluster_id: str | None = None
    version: int = META_PROPERTIES_VERSION


def read_properties(path: Path) -> dict[str, str] | None:
    """A java-properties file as a dict (`key=value` or `key: value`, `#`/`!` comments)."""
    lines = _read_lines(path)
    if lines is None:
        return None
    result: dict[str, str] = {}
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise CheckpointFormatError(path, number, f"expected 'key=value', got {raw!r}")
        result[line[:cut].strip()] = line[cut + 1 :].strip()
    return result


def read_meta_properties(path: Path) -> MetaProperties | None:
    props = read_properties(path)
    if props is None:
        return None
    try:
        version = int(props.get("version", ""))
        broker_id = int(props.get("broker.id", ""))
    except ValueError:
        raise CheckpointFormatError(
            path, None, "version and broker.id must be present and be integers"
        ) from None
    if version != META_PROPERTIES_VERSION:
        raise CheckpointFormatError(path, None, f"unsupported meta.properties version {version}")
    return MetaProperties(broker_id, props.get("cluster.id") or None, version)


def write_meta_properties(path: Path, meta: MetaProperties) -> None:
    lines = [
        "#",
        f"#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}",
        f"version={meta.version}",
        f"broker.id={meta.broker_id}",
    ]
    if meta.cluster_id is not None:
        lines.append(f"cluster.id={meta.cluster_id}")
    write_atomically(path, ("\n".join(lines) + "\n").encode("utf-8"))


# ------------------------------------------------------------------- deferred epoch checkpoints

# The checkpoints changed inside `deferred_checkpoints()`; None outside it.
_deferred: ContextVar[set[DeferrableEpochCheckpoint] | None] = ContextVar(
    "epochlog_deferred_checkpoints", default=None
)


class DeferrableEpochCheckpoint:
    """A log's leader-epoch checkpoint, written at once, or later when changed inside
    `deferred_checkpoints()`.

    A broker made leader of 10,000 partitions changes 10,000 epoch caches; creating and renaming
    10,000 files (about 0.2 ms each here) would hold its LeaderAndIsr answer for seconds. Kafka
    too takes the checkpoint off that path. Deferring is safe because the file is only read at
    startup, where every batch after the recovery point has its epoch re-derived from its header:
    the log writes a pending checkpoint before it moves its recovery point (flush, roll) and when
    it closes, so an epoch missing from the file is one with no batch or one the scan recovers.
    The lock orders the writes of the owning thread and of the worker that writes deferred ones.
    """

    def __init__(self, file: LeaderEpochCheckpointFile) -> None:
        self.file = file
        self._lock = threading.Lock()
        self._pending: tuple[EpochEntry, ...] | None = None

    def on_change(self, entries: Iterable[EpochEntry]) -> None:
        snapshot = tuple(entries)
        deferred = _deferred.get()
        with self._lock:
            if deferred is None:
                self._pending = None
                self.file.write(snapshot)
                return
            self._pending = snapshot
        deferred.add(self)

    def write_pending(self) -> None:
        """Write the deferred change, if one is waiting (any thread)."""
        with self._lock:
            pending, self._pending = self._pending, None
            if pending is None:
                return
            # A partition deleted meanwhile has nothing left to checkpoint.
            with contextlib.suppress(FileNotFoundError):
                self.file.write(pending)

    @property
    def has_pending(self) -> bool:
        return self._pending is not None


@contextmanager
def deferred_checkpoints() -> Iterator[set[DeferrableEpochCheckpoint]]:
    """Epoch checkpoint changes made inside are collected instead of written; the caller writes
    them (`write_deferred`) when it is done answering."""
    collected: set[DeferrableEpochCheckpoint] = set()
    token = _deferred.set(collected)
    try:
        yield collected
    finally:
        _deferred.reset(token)


def write_deferred(checkpoints: Iterable[DeferrableEpochCheckpoint]) -> int:
    """Write every pending checkpoint, made durable by one sync at the end; returns how many."""
    written = 0
    with durable_batch():
        for checkpoint in checkpoints:
            if checkpoint.has_pending:
                checkpoint.write_pending()
                written += 1
    return written
