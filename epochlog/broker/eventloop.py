"""The event loop a broker runs on: uvloop when it is installed, else asyncio's default.

Choice, measured (the table is in `transmit`): uvloop answers small requests about twice as fast
as the standard selector loop, and with our direct `os.sendfile` path (uvloop has no
`loop.sendfile`) it serves fetches as fast as the standard loop with its native
`loop.sendfile`, or faster up to MiB-sized responses; so the broker prefers it.
`run(main)` runs a coroutine to completion on a fresh loop of that kind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency; a missing one is not fatal
    uvloop = None  # type: ignore[assignment]


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    if uvloop is not None:
        return uvloop.new_event_loop
    return asyncio.new_event_loop


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    return "uvloop" if uvloop is not None and isinstance(loop, uvloop.Loop) else "asyncio"


def run(main: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
