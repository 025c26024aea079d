"""The sparse offset and time indexes of a segment, in Kafka's file formats.

`<base>.index` holds 8-byte entries (offset - base int32, file position int32): after every
`index.interval.bytes` of log the segment records the last offset of a batch and the position
where that batch starts. `<base>.timeindex` holds 12-byte entries (timestamp int64, offset - base
int32): the largest timestamp seen so far and the last offset of the batch that carried it,
recorded only when the timestamp grows. Both are big-endian, as in Kafka.

A lookup finds the nearest entry at or below the target and the segment walks batch headers
from there, so an index only ever saves work; it never decides an answer. That is why a damaged
index is harmless once detected: `sanity_check` (called when a segment is loaded) refuses entries
that are not ascending, point outside the segment, or do not fill whole entries, and the segment
then rebuilds both indexes from the log.

Entries live in memory (arrays searched with bisect) and are appended to the file in groups of
up to `PENDING_ENTRIES` (all of them when the index is full, flushed, closed or truncated): a
write per entry was a system call per batch on a busy partition. Unlike Kafka, the files are
not preallocated: their length is exactly their entries, so a file cut short by a crash (or a
process killed with entries not yet written) just loses its last entries, which only makes a
lookup walk further. The file descriptor is opened only while
the index is being written (the active segment), so inactive segments cost no descriptors.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from array import array
from pathlib import Path

from epochlog.storage.errors import CorruptIndexError

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
INT32_MAX = 2**31 - 1
PENDING_ENTRIES = 64


class _IndexFile:
    """Entries of fixed size in a file, with keys and values mirrored in two arrays."""

    entry_size: int

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_index_bytes // self.entry_size
        self._keys = array("q")
        self._values = array("q")
        self._fd: int | None = None
        self._pending = bytearray()  # entries made but not yet in the file, packed
        # Problems found while loading are reported by sanity_check, not by the constructor,
        # so that opening a segment never fails because of an index.
        self._load_problem: str | None = None
        self.existed = path.exists()
        if self.existed:
            self._load()

    def _load(self) -> None:
        size = self.path.stat().st_size
        if size % self.entry_size:
            self._load_problem = f"length {size} is not a multiple of {self.entry_size}"
            return
        # One entry over the limit is legitimate: the final time index entry of a sealed segment.
        if size > (self.max_entries + 1) * self.entry_size:
            self._load_problem = f"length {size} is larger than the index limit"
            return
        for key, value in self._struct.iter_unpack(self.path.read_bytes()):
            self._keys.append(self._key_from_file(key))
            self._values.append(self._value_from_file(value))

    _struct: struct.Struct

    def _key_from_file(self, key: int) -> int:
        return key

    def _value_from_file(self, value: int) -> int:
        return value

    def _pack(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries

    def _write_entry(self, key: int, value: int) -> None:
        self._pending += self._pack(key, value)
        self._keys.append(key)
        self._values.append(value)
        if len(self._pending) >= PENDING_ENTRIES * self.entry_size or self.is_full:
            self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        data = bytes(self._pending)
        self._pending.clear()
        written = 0
        while written < len(data):
            written += os.write(self._fd, data[written:])

    def _truncate_to_entries(self, count: int) -> None:
        self._write_pending()
        if count >= len(self._keys) and self._load_problem is None and self.path.exists():
            return
        count = min(count, len(self._keys))
        del self._keys[count:]
        del self._values[count:]
        self._load_problem = None
        # O_APPEND writes land at the new end after ftruncate.
        with open(self.path, "r+b" if self.path.exists() else "w+b") as file:
            file.truncate(count * self.entry_size)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._truncate_to_entries(0)

    def flush(self) -> None:
        self._write_pending()
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Write what is pending and release the descriptor; entries stay available for
        lookups."""
        self._write_pending()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def discard(self) -> None:
        """Release the descriptor without writing what is pending (the file was renamed away)."""
        self._pending.clear()
        self.close()

    def delete(self) -> None:
        self._pending.clear()
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def _check_loaded(self) -> None:
        if self._load_problem is not None:
            raise CorruptIndexError(f"index {self.path}: {self._load_problem}")


class OffsetIndex(_IndexFile):
    """(offset, position) entries; keys are absolute offsets, values file positions."""

    entry_size = _OFFSET_ENTRY.size
    _struct = _OFFSET_ENTRY

    def _key_from_file(self, key: int) -> int:
        return self.base_offset + key

    def _pack(self, key: int, value: int) -> bytes:
        return _OFFSET_ENTRY.pack(key - self.base_offset, value)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; a full index skips it (the index is sparse, lookups just walk more)."""
        if self.is_full:
            return
        if self._keys and (offset <= self._keys[-1] or position <= self._values[-1]):
            raise CorruptIndexError(
                f"index {self.path}: entry ({offset}, {position}) does not follow "
                f"({self._keys[-1]}, {self._values[-1]})"
            )
        if not 0 <= offset - self.base_offset <= INT32_MAX or not 0 <= position <= INT32_MAX:
            raise CorruptIndexError(f"index {self.path}: entry ({offset}, {position}) out of range")
        self._write_entry(offset, position)

    @property
    def last_entry(self) -> tuple[int, int] | None:
        return (self._keys[-1], self._values[-1]) if self._keys else None

    def lookup(self, offset: int) -> tuple[int, int] | None:
        """The entry with the largest offset <= `offset`, or None."""
        index = bisect.bisect_right(self._keys, offset)
        return (self._keys[index - 1], self._values[index - 1]) if index else None

    def floor_position(self, position: int) -> int | None:
        """The largest indexed batch position <= `position`, or None."""
        index = bisect.bisect_right(self._values, position)
        return self._values[index - 1] if index else None

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= `offset`."""
        self._truncate_to_entries(bisect.bisect_left(self._keys, offset))

    def sanity_check(self, segment_size: int) -> None:
        """Raise CorruptIndexError unless entries ascend and point inside the segment."""
        self._check_loaded()
        previous_offset, previous_position = self.base_offset - 1, -1
        for offset, position in zip(self._keys, self._values, strict=True):
            if offset <= previous_offset or position <= previous_position:
                raise CorruptIndexError(
                    f"index {self.path}: entry ({offset}, {position}) is not above "
                    f"({previous_offset}, {previous_position})"
                )
            previous_offset, previous_position = offset, position
        if previous_position >= segment_size:
            raise CorruptIndexError(
                f"index {self.path}: position {previous_position} is beyond the segment's "
                f"{segment_size} bytes"
            )


class TimeIndex(_IndexFile):
    """(timestamp, offset) entries with strictly growing timestamps."""

    entry_size = _TIME_ENTRY.size
    _struct = _TIME_ENTRY

    def _value_from_file(self, value: int) -> int:
        return self.base_offset + value

    def _pack(self, key: int, value: int) -> bytes:
        return _TIME_ENTRY.pack(key, value - self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        if self._keys and timestamp <= self._keys[-1]:
            return
        if not skip_full_check and self.is_full:
            return
        if self._values and offset < self._values[-1]:
            raise CorruptIndexError(
                f"time index {self.path}: offset {offset} is below the last entry's "
                f"{self._values[-1]}"
            )
        if not 0 <= offset - self.base_offset <= INT32_MAX:
            raise CorruptIndexError(f"time index {self.path}: offset {offset} out of range")
        self._write_entry(timestamp, offset)

    @property
    def last_entry(self) -> tuple[int, int] | None:
        return (self._keys[-1], self._values[-1]) if self._keys else None

    def last_entry_before(self, timestamp: int) -> tuple[int, int] | None:
        """The entry with the largest timestamp strictly below `timestamp`, or None.

        Strictly below: every batch up to that entry's offset has a smaller timestamp, so a
        search for `timestamp` may start right there.
        """
        index = bisect.bisect_left(self._keys, timestamp)
        return (self._keys[index - 1], self._values[index - 1]) if index else None

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is >= `offset`."""
        self._truncate_to_entries(bisect.bisect_left(self._values, offset))

    def sanity_check(self, last_offset: int) -> None:
        """Raise CorruptIndexError unless timestamps grow, offsets do not shrink and every offset
        lies in the segment (`last_offset` is the segment's last offset)."""
        self._check_loaded()
        previous_timestamp: int | None = None
        previous_offset = self.base_offset
        for timestamp, offset in zip(self._keys, self._values, strict=True):
            if previous_timestamp is not None and timestamp <= previous_timestamp:
                raise CorruptIndexError(
                    f"time index {self.path}: timestamp {timestamp} does not grow "
                    f"past {previous_timestamp}"
                )
            if offset < previous_offset or offset > last_offset:
                raise CorruptIndexError(
                    f"time index {self.path}: offset {offset} outside {previous_offset}.."
                    f"{last_offset}"
                )
            previous_timestamp, previous_offset = timestamp, offset
