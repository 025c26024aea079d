"""The event loop thread each blocking facade (`sync.Consumer`, `sync.Admin`,
`sync_producer.Producer`) runs its asyncio client on."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self.ident = self._thread.ident

    def run(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(as_coroutine(coro), self.loop).result(timeout)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a plain function on the loop and return its result."""

        async def call() -> T:
            return fn(*args)

        return self.run(call())

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def as_coroutine(aw: Awaitable[T]) -> T:
    """`aw` as a coroutine, which run_coroutine_threadsafe needs (a future is not one)."""
    return await aw


def start_on_loop_thread(name: str, factory: Callable[[], T]) -> tuple[LoopThread, T]:
    """A new loop thread and the client `factory` makes on it (the thread stopped if that fails)."""
    thread = LoopThread(name)
    try:
        client = thread.call(factory)
    except BaseException:
        thread.stop()
        raise
    return thread, client
