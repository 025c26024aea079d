"""Child processes that die with their parent: the one way epochlog spawns servers.

`spawn(cmd, die_with_parent=True, ...)` starts a child that the kernel SIGKILLs when this
process dies (PR_SET_PDEATHSIG). Tests, benchmarks and the demo start ZooKeeper and brokers this
way, so even a crashed test run leaves no server behind. (`start_new_session` would not: the
child would outlive the crash.)

Linux sends the signal when the *thread* that forked the child exits, not only the process. So
every such child is forked from one long-lived spawner thread of this process; a child started
from a short-lived worker thread would otherwise be killed as soon as that thread ends.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_PR_SET_PDEATHSIG = 1
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="epochlog-spawner")


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn: SIGKILL the child when the forking thread of `parent_pid` ends."""

    def preexec() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def spawn(
    cmd: Sequence[str], *, die_with_parent_process: bool = True, **kwargs: Any
) -> subprocess.Popen[Any]:
    """`subprocess.Popen(cmd, **kwargs)`; with `die_with_parent_process` the child is tied to
    this process's life (forked from the spawner thread), otherwise it starts its own session."""
    if not die_with_parent_process:
        return subprocess.Popen(cmd, start_new_session=True, **kwargs)
    pid = os.getpid()
    return _spawner.submit(
        lambda: subprocess.Popen(cmd, preexec_fn=die_with_parent(pid), **kwargs)
    ).result()
