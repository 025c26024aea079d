"""Producer state snapshots, `<offset>.snapshot`, in Kafka's format (ProducerStateManager).

A snapshot holds every producer's state as of `offset` (everything below it replayed): version
int16 = 1, crc uint32 (CRC-32C of every byte after it), then an int32 count of entries, each
producer id int64, producer epoch int16, last sequence int32, last offset int64, offset delta
int32 (last sequence - first sequence of its last batch), timestamp int64, coordinator epoch
int32, current transaction's first offset int64 (-1: none). Big-endian, as Kafka's Schema.

The log writes one when a segment rolls (at the new segment's base offset) and when it closes
cleanly (at its end); a load takes the latest usable one and replays the log from there only.
Snapshots above a truncation point are deleted with it; only the newest `KEPT_SNAPSHOTS` stay.
A snapshot that does not parse is deleted and the next older one tried.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

from epochlog.storage.errors import StorageError
from epochlog.storage.files import fsync_dir

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
PRODUCER_SNAPSHOT_VERSION = 1
KEPT_SNAPSHOTS = 3
_HEADER = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_SNAPSHOT_NAME = re.compile(r"(\d{20})\.snapshot")


class CorruptSnapshotError(StorageError):
    """A `.snapshot` file that does not parse or fails its CRC; names the file and why."""


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    producer_id: int
    producer_epoch: int
    last_sequence: int  # -1: no data batch known
    last_offset: int  # of the last data batch, -1 if none
    offset_delta: int  # last sequence - first sequence of that batch
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1: no open transaction


def encode_snapshot(entries: list[ProducerSnapshotEntry]) -> bytes:
    body = bytearray(_COUNT.pack(len(entries)))
    for e in entries:
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
    return _HEADER.pack(PRODUCER_SNAPSHOT_VERSION, crc32c.crc32c(bytes(body))) + bytes(body)


def decode_snapshot(data: bytes, name: str = "snapshot") -> list[ProducerSnapshotEntry]:
    """The entries of a snapshot file's bytes; CorruptSnapshotError says what is wrong."""
    if len(data) < _HEADER.size + _COUNT.size:
        raise CorruptSnapshotError(f"{name}: {len(data)} bytes is shorter than the header")
    version, crc = _HEADER.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(
            f"{name}: snapshot version {version}, expected {PRODUCER_SNAPSHOT_VERSION}"
        )
    body = data[_HEADER.size :]
    computed = crc32c.crc32c(body)
    if computed != crc:
        raise CorruptSnapshotError(
            f"{name}: CRC {computed:#010x} of the entries does not match the stored {crc:#010x}"
        )
    (count,) = _COUNT.unpack_from(body, 0)
    if count < 0 or len(body) != _COUNT.size + count * _ENTRY.size:
        raise CorruptSnapshotError(
            f"{name}: {count} entries do not fill the {len(body) - _COUNT.size} bytes after the "
            "count"
        )
    return [
        ProducerSnapshotEntry(*_ENTRY.unpack_from(body, _COUNT.size + i * _ENTRY.size))
        for i in range(count)
    ]


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerSnapshots:
    """The `.snapshot` files of one partition dir."""

    def __init__(self, directory: Path, kept: int = KEPT_SNAPSHOTS) -> None:
        self.directory = directory
        self.kept = kept

    def offsets(self) -> list[int]:
        found = []
        with os.scandir(self.directory) as entries:
            for entry in entries:
                match = _SNAPSHOT_NAME.fullmatch(entry.name)
                if match is not None:
                    found.append(int(match.group(1)))
        return sorted(found)

    def path(self, offset: int) -> Path:
        return self.directory / snapshot_file_name(offset)

    def write(self, offset: int, entries: list[ProducerSnapshotEntry]) -> Path:
        """Write the snapshot at `offset` durably (temporary file, fsync, rename), then keep
        only the newest `kept`."""
        target = self.path(offset)
        tmp = target.with_name(target.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, encode_snapshot(entries))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        fsync_dir(self.directory)
        for old in self.offsets()[: -self.kept]:
            self.path(old).unlink(missing_ok=True)
        return target

    def latest(self, low: int, high: int) -> tuple[int, list[ProducerSnapshotEntry]] | None:
        """The newest snapshot with low <= offset <= high that parses; corrupt ones on the way
        are deleted. None when there is none."""
        for offset in reversed(self.offsets()):
            if not low <= offset <= high:
                continue
            path = self.path(offset)
            try:
                return offset, decode_snapshot(path.read_bytes(), str(path))
            except CorruptSnapshotError as exc:
                logger.warning("%s; deleting it", exc)
                path.unlink(missing_ok=True)
            except FileNotFoundError:
                continue
        return None

    def delete_above(self, offset: int) -> int:
        """Delete the snapshots past `offset` (a truncation to it); how many."""
        doomed = [o for o in self.offsets() if o > offset]
        for o in doomed:
            self.path(o).unlink(missing_ok=True)
        return len(doomed)

    def delete_below(self, offset: int) -> int:
        """Delete the snapshots before `offset` (segments below it went); how many."""
        doomed = [o for o in self.offsets() if o < offset]
        for o in doomed:
            self.path(o).unlink(missing_ok=True)
        return len(doomed)
