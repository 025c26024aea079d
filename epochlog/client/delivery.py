"""Delivery: how a batch's records learn their outcome, and the futures they learn it through.

`succeed_batch` and `fail_batch` complete the handles (futures) of a batch's records: with a
`RecordMetadata` each (built on demand, for the blocking facade's futures, by `BatchOutcome`), or
with the exception. `DeliveryFuture` is the blocking producer's per-record future, cheap until
someone waits:

A `concurrent.futures.Future` builds a `threading.Condition` and two lists when it is created
and takes the condition on every call; at 100-byte records that costs as much as producing the
record, and the hundred thousand extra objects the garbage collector has to walk cost as much
again. This subclass keeps the full interface (it *is* a `concurrent.futures.Future`: `result`,
`exception`, `add_done_callback`, `concurrent.futures.wait`/`as_completed` all work) but starts
with no per-instance state at all (class-level defaults) and creates the condition only when a
thread has to wait for it (`result()` or `wait()` before completion), the callback list only
when a callback is added before completion. Until then its state changes under one module-wide
lock held for a few bytecodes; `complete_all` completes a whole batch under one acquisition.

Why this is safe: the condition is created under that lock, and completion checks for it under
the same lock. If there is no condition yet, completion records the outcome under the lock; a
waiter that creates the condition afterwards finds the future finished before it waits (the base
class checks the state inside the condition). If the condition exists, completion goes through
the base class, which notifies it. Callbacks added before completion are appended under the lock
too, so completion either sees them or the adder sees the future done and runs them itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures._base import (
    CANCELLED,
    CANCELLED_AND_NOTIFIED,
    FINISHED,
    PENDING,
    RUNNING,
)
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from epochlog.client.producer_batch import ProducerBatch

_LOCK = threading.Lock()
_DONE = (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED)


class DeliveryFuture(concurrent.futures.Future):  # type: ignore[type-arg]
    # Defaults on the class: a new future sets nothing (instances shadow them when they change).
    _state = PENDING
    _result = None
    _exception: BaseException | None = None
    _cond: threading.Condition | None = None  # built when a thread has to wait
    _callbacks: list[Any] | None = None  # built when a callback is added before completion
    _waiter_list: list[Any] | None = None  # concurrent.futures.wait/as_completed waiters
    _outcome: BatchOutcome | None = None  # completed by complete_batch: the result, unbuilt
    _index = 0  # this record's index in that batch

    # no super().__init__ (it builds the condition), and no Python-level __init__ at all
    __init__ = object.__init__

    @property  # type: ignore[override]
    def _condition(self) -> threading.Condition:
        condition = self._cond
        if condition is None:
            with _LOCK:
                condition = self._cond
                if condition is None:
                    condition = self._cond = threading.Condition()
        return condition

    @property  # type: ignore[override]
    def _waiters(self) -> list[Any]:
        # only touched by the base class with the condition held (so built once)
        waiters = self._waiter_list
        if waiters is None:
            waiters = self._waiter_list = []
        return waiters

    @property  # type: ignore[override]
    def _done_callbacks(self) -> list[Any]:
        with _LOCK:
            callbacks = self._callbacks
            if callbacks is None:
                callbacks = self._callbacks = []
        return callbacks

    def done(self) -> bool:
        return self._state in _DONE

    def cancelled(self) -> bool:  # the base class takes the condition (so would build it)
        return self._state in (CANCELLED, CANCELLED_AND_NOTIFIED)

    def running(self) -> bool:  # the base class takes the condition (so would build it)
        return self._state == RUNNING

    def result(self, timeout: float | None = None) -> Any:
        if self._state == FINISHED:
            if self._exception is not None:
                raise self._exception
            return self._Future__get_result()
        return super().result(timeout)

    def __repr__(self) -> str:
        if self._state == FINISHED and self._exception is None:
            self._Future__get_result()  # the base class names the result's type
        return super().__repr__()

    def _Future__get_result(self) -> Any:  # what the base class's result() returns
        if self._exception is not None:
            raise self._exception
        result = self._result
        if result is None and self._outcome is not None:
            result = self._result = self._outcome.result(self._index)
        return result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == FINISHED:
            return self._exception
        return super().exception(timeout)

    def add_done_callback(self, fn: Any) -> None:
        with _LOCK:
            if self._cond is None and self._state not in _DONE:
                callbacks = self._callbacks
                if callbacks is None:
                    callbacks = self._callbacks = []
                callbacks.append(fn)
                return
        super().add_done_callback(fn)

    def set_result(self, result: Any) -> None:
        with _LOCK:
            fast = self._cond is None and self._state == PENDING
            if fast:
                self._result = result
                self._state = FINISHED
        if fast:
            if self._callbacks:
                self._invoke_callbacks()  # type: ignore[attr-defined]
        else:
            super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        with _LOCK:
            fast = self._cond is None and self._state == PENDING
            if fast:
                self._exception = exception
                self._state = FINISHED
        if fast:
            if self._callbacks:
                self._invoke_callbacks()  # type: ignore[attr-defined]
        else:
            super().set_exception(exception)


class BatchOutcome(Protocol):
    """The outcome of a batch of records, which builds a record's result when asked."""

    def result(self, index: int) -> Any: ...


class RecordMetadata(NamedTuple):
    """Where a record was written. offset is -1 when unknown (acks=0, or a duplicate).

    A named tuple (as in kafka-python): immutable, and built for every record acknowledged,
    which a frozen dataclass made five times as expensive."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class AcknowledgedBatch:
    """An acknowledged batch, which builds the RecordMetadata of its i-th record on demand."""

    __slots__ = ("topic", "partition", "base_offset", "log_append_time", "timestamps")

    def __init__(
        self,
        topic: str,
        partition: int,
        base_offset: int,
        log_append_time: int,
        batch: ProducerBatch,
    ) -> None:
        self.topic, self.partition = topic, partition
        self.base_offset, self.log_append_time = base_offset, log_append_time
        self.timestamps = batch.timestamps if log_append_time < 0 else None

    def result(self, index: int) -> RecordMetadata:
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        timestamp = self.timestamps[index] if self.timestamps is not None else self.log_append_time
        return RecordMetadata(self.topic, self.partition, offset, timestamp)


def succeed_batch(batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
    """Complete every record of an acknowledged batch with its RecordMetadata (offset -1 when
    unknown; the batch's timestamps unless the broker appended at log-append time)."""
    topic, partition = batch.tp
    handles = batch.handles
    if handles and type(handles[0]) is DeliveryFuture:  # the blocking facade's futures
        # each builds its RecordMetadata when asked: most never are (a fire-and-forget
        # send, or a caller that only checks for errors)
        complete_batch(
            handles, AcknowledgedBatch(topic, partition, base_offset, log_append_time, batch)
        )
        return
    n = len(handles)
    offsets = range(base_offset, base_offset + n) if base_offset >= 0 else repeat(-1, n)
    stamps = batch.timestamps if log_append_time < 0 else repeat(log_append_time, n)
    new = tuple.__new__  # RecordMetadata(...) without the named tuple's argument parsing
    fields = zip(repeat(topic, n), repeat(partition, n), offsets, stamps, strict=True)
    complete_all(handles, [new(RecordMetadata, f) for f in fields])


def fail_batch(batch: ProducerBatch, exc: Exception) -> None:
    """Fail every record of a batch not done yet with `exc`."""
    for fut in batch.handles:
        if not fut.done():
            fut.set_exception(exc)
            fut.exception()  # marks it retrieved: a fire-and-forget send logs nothing


def complete_batch(futures: Sequence[Any], outcome: BatchOutcome) -> None:
    """Complete each future with `outcome.result(i)`, skipping futures already done (cancelled
    by their owner). A DeliveryFuture nobody waits for gets the outcome and its index, under
    one acquisition of the lock for the batch, and builds its result only if asked; any
    other future (an asyncio one, or one a thread waits on) is completed the usual way."""
    if futures and type(futures[0]) is not DeliveryFuture:  # the asyncio producer's futures
        for i, fut in enumerate(futures):
            if not fut.done():
                fut.set_result(outcome.result(i))
        return
    with_callbacks: list[DeliveryFuture] = []
    others: list[tuple[Any, int]] = []
    with _LOCK:
        for i, fut in enumerate(futures):
            if type(fut) is DeliveryFuture and fut._cond is None:
                if fut._state == PENDING:
                    fut._outcome = outcome
                    fut._index = i
                    fut._state = FINISHED
                    if fut._callbacks:
                        with_callbacks.append(fut)
            else:
                others.append((fut, i))
    for fut in with_callbacks:
        fut._invoke_callbacks()  # type: ignore[attr-defined]
    for fut, i in others:
        if not fut.done():
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                fut.set_result(outcome.result(i))  # a thread cancelled it meanwhile


def complete_all(futures: Sequence[Any], results: Iterable[Any]) -> None:
    """`set_result` of each future with its result, skipping futures already done (cancelled
    by their owner). DeliveryFutures nobody waits for are completed under one acquisition of
    the lock; any other future (an asyncio one, or one a thread waits on) the usual way."""
    if futures and type(futures[0]) is not DeliveryFuture:  # the asyncio producer's futures
        for fut, result in zip(futures, results, strict=True):
            try:  # noqa: SIM105 - a with-statement a record costs more
                fut.set_result(result)
            except (asyncio.InvalidStateError, concurrent.futures.InvalidStateError):
                pass  # done already: cancelled by its owner
        return
    with_callbacks: list[DeliveryFuture] = []
    others: list[tuple[Any, Any]] = []
    with _LOCK:
        for fut, result in zip(futures, results, strict=True):
            if type(fut) is DeliveryFuture and fut._cond is None:
                if fut._state == PENDING:
                    fut._result = result
                    fut._state = FINISHED
                    if fut._callbacks:
                        with_callbacks.append(fut)
            else:
                others.append((fut, result))
    for fut in with_callbacks:
        fut._invoke_callbacks()  # type: ignore[attr-defined]
    for fut, result in others:
        if not fut.done():
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                fut.set_result(result)  # a thread cancelled it meanwhile
