"""The broker's open-files limit, raised at start.

A broker keeps each log's active segment open, so it needs about one descriptor per partition
replica it hosts, plus its connections: 100,000 partitions at replication factor 2 on 3 brokers
is ~67,000 logs a broker. Kafka documents the same need ("file descriptor limits", 100,000 or
more) and leaves it to the service manager; a process may raise its own soft limit up to its hard
limit, and a privileged one the hard limit too, so the broker does that itself at start, as many
servers do (a shell's default soft limit is often 1,024, this sandbox's hard limit 20,000).
`wanted_limit` decides (sans-I/O); `raise_open_files_limit` applies it and says what it did.
"""

from __future__ import annotations

import logging
import resource
from pathlib import Path

log = logging.getLogger(__name__)

# Raised to at most this (Linux's default fs.nr_open): enough for a million logs' active segments.
TARGET_OPEN_FILES = 1_048_576
# Below this the broker says so at start (Kafka's documentation: "100,000 or more").
RECOMMENDED_OPEN_FILES = 100_000


def wanted_limit(
    soft: int, hard: int, nr_open: int, privileged: bool, target: int = TARGET_OPEN_FILES
) -> tuple[int, int] | None:
    """The (soft, hard) limits to set, or None when nothing would grow. A privileged process
    raises the hard limit to the target (never past the kernel's nr_open); any process raises the
    soft limit to its hard limit, never above the target. Unlimited (RLIM_INFINITY) stays."""
    infinity = resource.RLIM_INFINITY
    new_hard = hard
    if privileged and hard != infinity and hard < target:
        new_hard = min(target, nr_open)
    ceiling = target if new_hard == infinity else min(new_hard, target)
    new_soft = soft if soft == infinity or soft >= ceiling else ceiling
    if (new_soft, new_hard) == (soft, hard):
        return None
    return new_soft, new_hard


def raise_open_files_limit() -> int:
    """Raise RLIMIT_NOFILE as `wanted_limit` says; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        nr_open = int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        nr_open = TARGET_OPEN_FILES
    now = soft
    for privileged in (True, False):  # the hard limit needs CAP_SYS_RESOURCE: try, then without
        wanted = wanted_limit(soft, hard, nr_open, privileged)
        if wanted is None:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, wanted)
        except (ValueError, OSError):
            continue
        log.info("open files limit raised from %d/%d to %d/%d", soft, hard, *wanted)
        now = wanted[0]
        break
    if now != resource.RLIM_INFINITY and now < RECOMMENDED_OPEN_FILES:
        log.warning(
            "open files limit %d: this broker cannot host more than about that many partition "
            "replicas (each keeps its active segment open; Kafka recommends %d or more)",
            now,
            RECOMMENDED_OPEN_FILES,
        )
    return now
