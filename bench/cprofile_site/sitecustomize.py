"""cProfile for a broker process under a benchmark (`bench/produce_path.py --cprofile`).

On the PYTHONPATH of a process with EPOCHLOG_CPROFILE=<path>: a first SIGUSR2 starts profiling the
main thread (the event loop's), the next stops and writes the stats to <path>.<pid> (the broker
keeps SIGUSR1 for its task dump). Nothing in epochlog knows about it; without the variable this
module does nothing.
"""

from __future__ import annotations

import cProfile
import os
import signal
import time
from types import FrameType

_path = os.environ.get("EPOCHLOG_CPROFILE")
_profile: cProfile.Profile | None = None


def _toggle(_signum: int, _frame: FrameType | None) -> None:
    global _profile
    if _profile is None:
        _profile = cProfile.Profile(time.thread_time)  # CPU, not wall: the machine is shared
        _profile.enable()
        return
    _profile.disable()
    _profile.dump_stats(f"{_path}.{os.getpid()}")
    _profile = None


if _path:
    signal.signal(signal.SIGUSR2, _toggle)
