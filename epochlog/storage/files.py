"""Open segment files, the byte ranges a server sends from them, and durable small-file writes.

A segment's `.log` file is held by a `SharedFile`: one descriptor, written with `pwrite` and read
with `pread` so no operation depends on the shared file offset. Reads hand out `FileSlice`s
(file, position, length) that a server passes to `os.sendfile` or `loop.sendfile`. A slice keeps
its `SharedFile` alive, and the descriptor is closed only when the last holder lets go: when
retention deletes a segment it unlinks the files and drops its own reference, so a sendfile still
in flight reads the old bytes from the unlinked inode instead of failing, and a closed descriptor
number can never be reused under a slice. (CPython frees the object, and closes the descriptor,
as soon as the last reference goes.)

`write_atomically` is how every checkpoint reaches disk: write `<file>.tmp`, flush, fsync, rename
over the target, fsync the directory, so a crash leaves either the old file or the new one.
Inside `durable_batch()` the fsyncs are left out and one `syncfs` per file system at the end of
the batch makes every write durable at once: a broker becoming leader of 10,000 partitions writes
10,000 leader-epoch checkpoints, and an fsync each (about 1 ms here) would hold the LeaderAndIsr
answer for ten seconds.
"""

from __future__ import annotations

import ctypes
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from epochlog.storage.layout import TMP_SUFFIX


class SharedFile:
    """One open file, closed when the last object holding it (segment or slice) is freed."""

    __slots__ = ("path", "_file")

    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        # An unbuffered FileIO: it has fileno() and seek(), which is what loop.sendfile wants.
        self._file: io.FileIO = io.FileIO(fd, "r+", closefd=True)

    @property
    def file(self) -> io.FileIO:
        return self._file

    def fileno(self) -> int:
        return self._file.fileno()

    def size(self) -> int:
        return os.fstat(self._file.fileno()).st_size

    def pread(self, length: int, position: int) -> bytes:
        """Up to `length` bytes at `position`; fewer only at the end of the file."""
        fd = self._file.fileno()
        data = os.pread(fd, length, position)
        if len(data) == length or not data:
            return data
        parts = [data]
        got = len(data)
        while got < length:
            more = os.pread(fd, length - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def pwrite(self, data: bytes | bytearray | memoryview, position: int) -> None:
        view = memoryview(data)
        fd = self._file.fileno()
        while view:
            written = os.pwrite(fd, view, position)
            view = view[written:]
            position += written

    def truncate(self, size: int) -> None:
        os.ftruncate(self._file.fileno(), size)

    def fsync(self) -> None:
        os.fsync(self._file.fileno())

    def __del__(self) -> None:
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()


@dataclass(frozen=True, slots=True)
class FileSlice:
    """`length` bytes of a log file from `position`: whole record batches, ready for sendfile.

    `source` is None only for the empty slice. The slice keeps the file open on its own, so it
    stays valid after its segment is deleted. If a follower truncation shrinks the file under a
    slice, the bytes past the new end are gone and `read_bytes` returns fewer (as Kafka's
    FileRecords does); a server must check what sendfile actually sent.
    """

    source: SharedFile | None
    position: int
    length: int

    @classmethod
    def empty(cls) -> FileSlice:
        return _EMPTY

    def __len__(self) -> int:
        return self.length

    @property
    def file(self) -> io.FileIO:
        """The open file, for `loop.sendfile(transport, slice.file, slice.position, len(slice))`.

        Its file offset is shared by every slice of the segment; use sendfile's explicit offset
        (the native path does) or `read_bytes`, never read() after a seek.
        """
        if self.source is None:
            raise ValueError("the empty slice has no file")
        return self.source.file

    def fileno(self) -> int:
        return self.file.fileno()

    def read_bytes(self) -> bytes:
        """The bytes of the slice, read with pread (safe from any thread)."""
        if self.source is None or self.length == 0:
            return b""
        return self.source.pread(self.length, self.position)


_EMPTY = FileSlice(None, 0, 0)


def fsync_dir(path: Path) -> None:
    """Make a rename, create or unlink in `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# The directories written in the current durable batch; None outside a batch.
_batch_dirs: ContextVar[set[Path] | None] = ContextVar("epochlog_durable_batch", default=None)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves the old content or the new, never a mix."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    batch = _batch_dirs.get()
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        if batch is None:
            os.fsync(out.fileno())
    os.replace(tmp, path)
    if batch is None:
        fsync_dir(path.parent)
    else:
        # The rename is only ordered after the data by the batch's final sync: until then a crash
        # may leave the old file or an empty one. Callers answer nobody before the batch ends, and
        # every reader of these files accepts an empty or missing one (it rebuilds from the log).
        batch.add(path.parent)


def fsync_dir_or_batch(path: Path) -> None:
    """Make a create, rename or unlink in `path` durable: now, or with the current durable batch
    (creating 10,000 partition dirs, one fsync of the parent each cost ten seconds)."""
    batch = _batch_dirs.get()
    if batch is None:
        fsync_dir(path)
    else:
        batch.add(path)


@contextmanager
def collected_durable_writes() -> Iterator[set[Path]]:
    """Like `durable_batch`, but the caller makes the writes durable itself: the block yields
    the set of directories written, to pass to `sync_file_systems` (from a worker thread, so
    the event loop keeps serving). Nothing that depends on them may be acknowledged before."""
    if _batch_dirs.get() is not None:
        raise RuntimeError("collected_durable_writes() inside a durable batch")
    dirs: set[Path] = set()
    token = _batch_dirs.set(dirs)
    try:
        yield dirs
    finally:
        _batch_dirs.reset(token)


@contextmanager
def durable_batch() -> Iterator[None]:
    """Writes made inside become durable together when the block exits (nested blocks join the
    outermost one). Nothing that depends on them may be acknowledged before that."""
    if _batch_dirs.get() is not None:
        yield
        return
    dirs: set[Path] = set()
    token = _batch_dirs.set(dirs)
    try:
        yield
    finally:
        _batch_dirs.reset(token)
        sync_file_systems(dirs)


_libc = ctypes.CDLL(None, use_errno=True)


def sync_file_systems(directories: set[Path]) -> None:
    """Flush every file system holding one of `directories` (data and metadata), once each."""
    seen: set[int] = set()
    for directory in directories:
        try:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue  # deleted since (a StopReplica with deletion): nothing left to make durable
        try:
            device = os.fstat(fd).st_dev
            if device in seen:
                continue
            seen.add(device)
            if _libc.syncfs(fd) != 0:
                error = ctypes.get_errno()
                raise OSError(error, f"syncfs({directory}): {os.strerror(error)}")
        finally:
            os.close(fd)
