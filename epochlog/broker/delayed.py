"""Delayed operations: requests that wait for the log to move (Kafka's purgatory).

An operation (a produce with acks=all waiting for the high watermark, a fetch waiting for
min.bytes) is first tried at once; if it cannot complete it is watched under the keys it depends
on (topic-partitions) and a timer is set. Whoever moves a partition (an append, a HW change, a
leadership change) calls `check_and_complete(key)`, which re-tries every operation watching that
key. An operation completes exactly once: because its condition holds (`try_complete` returns
True after calling `force_complete`), because its timer fires, or because the purgatory shuts
down. `on_complete` builds the result and resolves the future its request handler awaits.

Everything runs on the broker's event loop, so there is no locking. The timer is injectable
(`schedule(delay_seconds, callback) -> handle with cancel()`), so tests can drive expiry by hand.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Protocol

from mypy_extensions import mypyc_attr

log = logging.getLogger(__name__)


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


Scheduler = Callable[[float, Callable[[], None]], TimerHandle]


# Compiled by mypyc (epochlog._build); DelayedDeleteRecords and tests extend it uncompiled.
@mypyc_attr(allow_interpreted_subclasses=True)
class DelayedOperation:
    """Subclasses implement `try_complete` (check, and call `force_complete` when done) and
    `on_complete`; `on_expiration` runs after an expiry's `on_complete`."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = max(0, timeout_ms)
        self.completed = False
        self.expired = False
        self._timer: TimerHandle | None = None
        self._keys: tuple[Hashable, ...] = ()

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Hook for subclasses; the default does nothing."""

    def force_complete(self) -> bool:
        """Complete now unless already completed; True if this call completed it."""
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.on_complete()
        return True


def _loop_scheduler(delay: float, callback: Callable[[], None]) -> TimerHandle:
    return asyncio.get_running_loop().call_later(delay, callback)


class DelayedOperationPurgatory:
    """Operations watched by key, completed by `check_and_complete` or by their timers."""

    def __init__(self, name: str, schedule: Scheduler | None = None) -> None:
        self.name = name
        self._schedule = schedule or _loop_scheduler
        self._watchers: dict[Hashable, dict[int, DelayedOperation]] = {}

    def __len__(self) -> int:
        """Operations still waiting."""
        waiting = {id(op) for ops in self._watchers.values() for op in ops.values()}
        return len(waiting)

    def watch_entries(self) -> int:
        """Operations counted once per key they wait on (Kafka's PurgatorySize)."""
        return sum(len(ops) for ops in self._watchers.values())

    def watching(self, key: Hashable) -> bool:
        """Whether some operation waits on `key`."""
        return key in self._watchers

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete `op` now if it can; otherwise watch it under `keys` until it can or times
        out. True if it completed at once."""
        if op.try_complete():
            return True
        op._keys = tuple(keys)
        for key in op._keys:
            self._watchers.setdefault(key, {})[id(op)] = op
        op._timer = self._schedule(op.timeout_ms / 1000.0, lambda: self._expire(op))
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Re-try the operations watching `key`; how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        return self._retry(list(ops.values()))

    def check_and_complete_keys(self, keys: Iterable[Hashable]) -> int:
        """Re-try once each operation watching any of `keys` (moved together); how many
        completed. One re-try per operation, not one per key: an operation waiting on several
        of the keys would otherwise be re-tried, all its keys checked, for each of them."""
        found: dict[int, DelayedOperation] = {}
        for key in keys:
            ops = self._watchers.get(key)
            if ops:
                found.update(ops)
        return self._retry(list(found.values())) if found else 0

    def _retry(self, ops: list[DelayedOperation]) -> int:
        completed = 0
        for op in ops:
            if op.completed:
                self._unwatch(op)
                continue
            try:
                done = op.try_complete()
            except Exception:
                log.exception("%s: delayed operation failed; completing it", self.name)
                done = op.force_complete()
            if done or op.completed:
                self._unwatch(op)
                completed += 1
        return completed

    def _expire(self, op: DelayedOperation) -> None:
        op._timer = None
        self._unwatch(op)
        if not op.completed:
            op.expired = True
            if op.force_complete():
                op.on_expiration()

    def _unwatch(self, op: DelayedOperation) -> None:
        for key in op._keys:
            ops = self._watchers.get(key)
            if ops is not None:
                ops.pop(id(op), None)
                if not ops:
                    del self._watchers[key]
        op._keys = ()

    def complete_all(self) -> int:
        """Force every waiting operation to complete (shutdown); how many."""
        ops = {id(op): op for watched in self._watchers.values() for op in watched.values()}
        self._watchers.clear()
        count = 0
        for op in ops.values():
            op._keys = ()
            if op.force_complete():
                count += 1
        return count


def resolve(future: asyncio.Future[Any], value: Any) -> None:
    """Set a future's result unless its waiter has gone (connection closed, task cancelled)."""
    if not future.done():
        future.set_result(value)
