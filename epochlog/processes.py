"""Child processes that die with their parent: the one way epochlog spawns servers.

`die_with_parent(os.getpid())` is a preexec_fn that asks the kernel to SIGKILL the child when the
parent dies (PR_SET_PDEATHSIG). Tests, benchmarks and the demo spawn ZooKeeper and brokers this
way, so even a crashed test run leaves no server behind. (`start_new_session` would not: the
child would outlive the crash.)
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    def preexec() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec
