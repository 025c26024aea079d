"""Server processes on a core of their own, and the CPU time they spend (Linux /proc).

`os.sched_setaffinity(pid)` moves one thread only (the one whose id is `pid`), so `pin` moves
every thread of every process in the tree: a JVM (ZooKeeper), librdkafka's mock and Tansu all run
many threads. Threads created later inherit the affinity of the thread that creates them, so
pinning once after start-up holds; `pin` is cheap and benchmarks call it again before each timed
phase anyway. `cpu_seconds` sums each process's CPU clock over the tree (`clock_gettime` on the
clock of another process, `MAKE_PROCESS_CPUCLOCK` in the kernel: nanoseconds, every thread of the
process, ended threads included), children counted as their own pids. utime + stime in
/proc/<pid>/stat would do the same in 10 ms ticks: too coarse for a phase in which the mock spends
20 ms, and /proc/<pid>/schedstat is empty on this kernel.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        # the command name (field 2) may hold spaces and parentheses: split after its last ')'
        return stat.read().rpartition(")")[2].split()


def process_tree(pids: Iterable[int]) -> list[int]:
    """The processes and all their living descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(_stat_fields(int(entry))[1])
            except (OSError, IndexError, ValueError):
                continue  # exited meanwhile
            children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.append(pid)
            todo.extend(children.get(pid, []))
    return found


def threads(pid: int) -> list[int]:
    try:
        return [int(task) for task in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return []


def pin(pids: Iterable[int], cores: set[int], *, descendants: bool = True) -> int:
    """Moves every thread of the processes (and of their descendants) onto `cores`; the number
    of threads moved."""
    moved = 0
    for pid in process_tree(pids) if descendants else list(pids):
        for tid in threads(pid):
            try:
                os.sched_setaffinity(tid, cores)
                moved += 1
            except (ProcessLookupError, FileNotFoundError):
                pass  # the thread ended meanwhile
    return moved


def unpinned_threads(pids: Iterable[int], cores: set[int]) -> list[int]:
    """Threads of the trees allowed on other cores than `cores` (for a check after `pin`)."""
    stray = []
    for pid in process_tree(pids):
        for tid in threads(pid):
            try:
                if os.sched_getaffinity(tid) != cores:
                    stray.append(tid)
            except ProcessLookupError:
                pass
    return stray


def process_cpu_clock(pid: int) -> int:
    """The clock id of a process's CPU time (glibc's clock_getcpuclockid: CPUCLOCK_SCHED, the
    whole process)."""
    return ((~pid) << 3) | 2


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds the processes and their descendants have used so far."""
    nanoseconds = 0
    for pid in process_tree(pids):
        try:
            nanoseconds += time.clock_gettime_ns(process_cpu_clock(pid))
        except OSError:  # exited meanwhile; or no CPU clock here: the coarse figure
            try:
                fields = _stat_fields(pid)
            except FileNotFoundError:
                continue
            nanoseconds += (int(fields[11]) + int(fields[12])) * 1_000_000_000 // CLOCK_TICKS
    return nanoseconds / 1e9
