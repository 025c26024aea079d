"""Whether an offline log dir is usable again (KIP-112, with the way back epochlog adds).

A log dir goes offline on the first I/O error (EIO, ENOSPC, EROFS, ...) while a log in it is
written, read, flushed or checkpointed: the log manager closes its logs and every partition in
it answers KAFKA_STORAGE_ERROR. Kafka keeps the dir offline until the broker restarts; epochlog
probes it every `epochlog.log.dir.probe.interval.ms`: it writes, fsyncs and deletes a small probe
file and reads the free space. `probe_verdict` decides (no I/O): usable when the probe worked and
the free bytes exceed the required margin (`epochlog.log.dir.min.free.bytes`, by default
`log.segment.bytes`: room for one more segment, so a dir freed by a few kilobytes does not go
straight back offline). `probe_dir` does the I/O.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PROBE_FILE = ".epochlog-dir-probe"
PROBE_BYTES = 4096


def probe_verdict(probe_error: OSError | None, free_bytes: int, min_free_bytes: int) -> str | None:
    """None when the dir is usable, else why not (for the log)."""
    if probe_error is not None:
        return f"probe write failed: {probe_error}"
    if free_bytes < min_free_bytes:
        return f"{free_bytes} bytes free, {min_free_bytes} required"
    return None


def probe_dir(log_dir: Path, min_free_bytes: int) -> str | None:
    """Write + fsync + delete a probe file in `log_dir`, read its free space; `probe_verdict`."""
    path = Path(log_dir) / PROBE_FILE
    error: OSError | None = None
    free = 0
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"\0" * PROBE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
        stats = os.statvfs(log_dir)
        free = stats.f_bavail * stats.f_frsize
    except OSError as exc:
        error = exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return probe_verdict(error, free, min_free_bytes)
