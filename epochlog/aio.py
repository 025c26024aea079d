"""asyncio helpers shared by every package (they depend on nothing else in epochlog).

`wait_for` replaces `asyncio.wait_for`: on Python 3.11, a task cancelled at the moment the
awaitable it waits for completes loses the cancellation (bpo-42130); a fetcher or sender loop
then runs on and `stop()` waits for it forever. `asyncio.timeout` has no such race.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_for(awaitable: Awaitable[T], timeout: float | None) -> T:
    """`await awaitable`, raising TimeoutError after `timeout` seconds (None: no limit)."""
    async with asyncio.timeout(timeout):
        return await awaitable
