"""Storage fault injection for tests: damaged batches in a broker's log files, and checks that a
partition dir holds only sound batches.

`damage_batch_header` does what the issue's bad disk did: it overwrites the magic byte of a batch
header in the middle of a segment (magic -3), at a batch before the segment's last offset-index
entry, so that a clean-shutdown open (which checks only the indexes and the tail after the last
entry) does not see it. `sound_batches` reads a partition dir the way recovery does (framing, CRC,
dense offsets) and fails naming the file and byte of the first bad batch.

A full disk is real: `mount_tmpfs` mounts a small tmpfs as a broker's log dir (root only;
`can_mount_tmpfs` says whether this machine allows it) and `fill_disk` fills it with a filler
file, whose deletion frees the space again.
"""

from __future__ import annotations

import os
import struct
import subprocess
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


# ------------------------------------------------------------------------------ full disks


def mount_tmpfs(path: Path, size_bytes: int) -> None:
    """Mount a small tmpfs at `path` (root only): a real file system that fills up."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)],
        check=True,
        capture_output=True,
    )


def umount(path: Path) -> None:
    """Unmount what `mount_tmpfs` mounted (lazily if something still holds it)."""
    done = subprocess.run(["umount", str(path)], capture_output=True)
    if done.returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def can_mount_tmpfs(scratch: Path) -> bool:
    try:
        mount_tmpfs(scratch, 1 << 20)
    except (OSError, subprocess.CalledProcessError):
        return False
    umount(scratch)
    return True


def fill_disk(directory: Path, leave_bytes: int = 0) -> Path:
    """Write a filler file until `leave_bytes` (or less) are free on `directory`'s file system;
    returns the filler (delete it to free the space)."""
    filler = Path(directory) / "filler.bin"
    chunk = b"\0" * (64 * 1024)
    with open(filler, "ab") as out:
        while True:
            stats = os.statvfs(directory)
            free = stats.f_bavail * stats.f_frsize
            if free <= leave_bytes:
                break
            try:
                out.write(chunk[: max(4096, min(len(chunk), free - leave_bytes))])
                out.flush()
            except OSError:
                break
    return filler
