"""Storage fault injection for tests: damaged batches in a broker's log files, and checks that a
partition dir holds only sound batches.

`damage_batch_header` does what the issue's bad disk did: it overwrites the magic byte of a batch
header in the middle of a segment (magic -3), at a batch before the segment's last offset-index
entry, so that a clean-shutdown open (which checks only the indexes and the tail after the last
entry) does not see it. `sound_batches` reads a partition dir the way recovery does (framing, CRC,
dense offsets) and fails naming the file and byte of the first bad batch.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from epochlog.protocol.records import iter_batches, parse_batch_header

MAGIC_OFFSET = 16  # base offset 8, batch length 4, partition leader epoch 4
BAD_MAGIC = 0xFD  # -3 as a signed byte, what the user saw
_INDEX_ENTRY = struct.Struct(">ii")


@dataclass(frozen=True)
class Damage:
    segment: Path
    position: int
    base_offset: int  # of the damaged batch: the log is cut to end here


def _index_positions(index_path: Path) -> list[int]:
    if not index_path.exists():
        return []
    data = index_path.read_bytes()
    usable = len(data) - len(data) % _INDEX_ENTRY.size
    return [p for _, p in _INDEX_ENTRY.iter_unpack(data[:usable]) if p > 0]


def damage_batch_header(partition_dir: Path, fraction: float = 0.3) -> Damage:
    """Give a batch `fraction` of the way into the first segment that has offset-index entries
    a bad magic, choosing one before the last entry; returns where."""
    for log_path in sorted(Path(partition_dir).glob("*.log")):
        indexed = _index_positions(log_path.with_suffix(".index"))
        if not indexed:
            continue
        data = bytearray(log_path.read_bytes())
        positions = [p for p, _ in iter_batches(bytes(data[: indexed[-1]]), verify=False)]
        if len(positions) < 3:
            continue
        position = positions[max(1, min(len(positions) - 1, int(len(positions) * fraction)))]
        base_offset = parse_batch_header(data, position).base_offset
        with open(log_path, "r+b") as out:
            out.seek(position + MAGIC_OFFSET)
            out.write(bytes([BAD_MAGIC]))
        return Damage(log_path, position, base_offset)
    raise ValueError(f"{partition_dir}: no segment with enough indexed batches to damage")


def sound_batches(partition_dir: Path) -> tuple[int, int]:
    """(first offset, next offset) of a partition dir whose every batch passes framing and CRC
    checks with dense offsets; AssertionError naming the file and byte otherwise."""
    first: int | None = None
    expected: int | None = None
    for log_path in sorted(Path(partition_dir).glob("*.log")):
        data = log_path.read_bytes()
        try:
            batches = list(iter_batches(data, verify=True))
        except Exception as exc:
            raise AssertionError(f"{log_path}: {exc}") from None
        for position, header in batches:
            if expected is not None and header.base_offset != expected:
                raise AssertionError(
                    f"{log_path}, byte {position}: offset {header.base_offset}, {expected} expected"
                )
            if first is None:
                first = header.base_offset
            expected = header.next_offset
    return (first or 0, expected or 0)
