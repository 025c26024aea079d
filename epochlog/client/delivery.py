"""`DeliveryFuture`: the blocking producer's per-record future, cheap until someone waits.

A `concurrent.futures.Future` builds a `threading.Condition` when it is created and takes it on
every call; at 100-byte records that costs as much as producing the record. This subclass keeps
the full interface (it *is* a `concurrent.futures.Future`: `result`, `exception`,
`add_done_callback`, `concurrent.futures.wait`/`as_completed` all work) but creates the
condition only when a thread has to wait for it (`result()` or `wait()` before completion).
Until then its state changes under one module-wide lock held for a few bytecodes.

Why this is safe: the condition is created under that lock, and completion checks for it under
the same lock. If there is no condition yet, completion records the outcome under the lock; a
waiter that creates the condition afterwards finds the future finished before it waits (the base
class checks the state inside the condition). If the condition exists, completion goes through
the base class, which notifies it.
"""

from __future__ import annotations

import concurrent.futures
import threading
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING
from typing import Any

_LOCK = threading.Lock()
_DONE = (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED)


class DeliveryFuture(concurrent.futures.Future):  # type: ignore[type-arg]
    def __init__(self) -> None:  # noqa: D107 - no super().__init__: it builds the condition
        self._state = PENDING
        self._result = None
        self._exception: BaseException | None = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []

    @property  # type: ignore[override]
    def _condition(self) -> threading.Condition:
        condition = self.__dict__.get("_cond")
        if condition is None:
            with _LOCK:
                condition = self.__dict__.get("_cond")
                if condition is None:
                    condition = self.__dict__["_cond"] = threading.Condition()
        return condition

    def done(self) -> bool:
        return self._state in _DONE

    def result(self, timeout: float | None = None) -> Any:
        if self._state == FINISHED:
            if self._exception is not None:
                raise self._exception
            return self._result
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == FINISHED:
            return self._exception
        return super().exception(timeout)

    def add_done_callback(self, fn: Any) -> None:
        with _LOCK:
            if "_cond" not in self.__dict__ and self._state not in _DONE:
                self._done_callbacks.append(fn)
                return
        super().add_done_callback(fn)

    def set_result(self, result: Any) -> None:
        with _LOCK:
            fast = "_cond" not in self.__dict__ and self._state == PENDING
            if fast:
                self._result = result
                self._state = FINISHED
        if fast:
            self._invoke_callbacks()  # type: ignore[attr-defined]
        else:
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        with _LOCK:
            fast = "_cond" not in self.__dict__ and self._state == PENDING
            if fast:
                self._exception = exception
                self._state = FINISHED
        if fast:
            self._invoke_callbacks()  # type: ignore[attr-defined]
        else:
            super().set_exception(exception)
