"""`DeliveryFuture` behaves as a concurrent.futures.Future, across threads, without a condition
until one is needed."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest

from epochlog.client.delivery import DeliveryFuture, complete_all, complete_batch


def test_result_and_callbacks_without_waiting() -> None:
    fut = DeliveryFuture()
    seen: list[object] = []
    fut.add_done_callback(lambda f: seen.append(f.result()))
    assert not fut.done()
    fut.set_result(7)
    assert fut.done() and fut.result(0) == 7 and fut.exception() is None and seen == [7]
    assert "_cond" not in fut.__dict__  # nobody waited: no condition was built
    fut.add_done_callback(lambda f: seen.append("late"))  # runs at once when already done
    assert seen == [7, "late"]
    with pytest.raises(concurrent.futures.InvalidStateError):
        fut.set_result(8)


def test_exceptions_are_raised_by_result() -> None:
    fut = DeliveryFuture()
    fut.set_exception(ValueError("no"))
    assert isinstance(fut.exception(), ValueError)
    with pytest.raises(ValueError, match="no"):
        fut.result()


@pytest.mark.parametrize("delay", [0.0, 0.05])
def test_a_thread_waiting_before_completion_is_woken(delay: float) -> None:
    for _ in range(200 if delay == 0 else 3):
        fut = DeliveryFuture()
        got: list[object] = []
        waiter = threading.Thread(target=lambda f=fut, out=got: out.append(f.result(5)))
        waiter.start()
        time.sleep(delay)
        fut.set_result("done")
        waiter.join(5)
        assert got == ["done"]


def test_timeouts_and_concurrent_futures_helpers_work() -> None:
    pending, finished = DeliveryFuture(), DeliveryFuture()
    with pytest.raises(concurrent.futures.TimeoutError):
        pending.result(0.01)
    finished.set_result(1)
    done, not_done = concurrent.futures.wait([pending, finished], timeout=0.05)
    assert done == {finished} and not_done == {pending}
    threading.Timer(0.05, pending.set_result, args=(2,)).start()
    assert [f.result() for f in concurrent.futures.as_completed([pending], timeout=5)] == [2]
    assert pending.cancel() is False


def test_complete_all_completes_a_batch_of_futures_in_every_state() -> None:
    plain, with_callback, waited_on, cancelled = (DeliveryFuture() for _ in range(4))
    seen: list[object] = []
    with_callback.add_done_callback(lambda f: seen.append(f.result()))
    assert cancelled.cancel()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(waited_on.result(5)))
    waiter.start()
    deadline = time.monotonic() + 5
    while waited_on._cond is None and time.monotonic() < deadline:  # the waiter built it
        time.sleep(0.001)
    complete_all([plain, with_callback, waited_on, cancelled], ["a", "b", "c", "d"])
    waiter.join(5)
    assert (plain.result(), with_callback.result(), got, seen) == ("a", "b", ["c"], ["b"])
    assert cancelled.cancelled()
    assert plain._cond is None  # nobody waited on it: no condition was built


def test_complete_all_with_asyncio_futures() -> None:
    loop = asyncio.new_event_loop()
    try:
        futures = [loop.create_future() for _ in range(3)]
        futures[1].cancel()
        complete_all(futures, [1, 2, 3])
        assert futures[0].result() == 1 and futures[1].cancelled() and futures[2].result() == 3
    finally:
        loop.close()


def test_a_new_future_holds_no_per_instance_state() -> None:
    """What makes it cheap: no condition, lists or attributes until they are needed."""
    fut = DeliveryFuture()
    assert vars(fut) == {} and not fut.done()
    fut.set_result(1)
    assert set(vars(fut)) == {"_result", "_state"}


class Outcome:
    """A batch outcome that counts the results it builds."""

    def __init__(self) -> None:
        self.built: list[int] = []

    def result(self, index: int) -> str:
        self.built.append(index)
        return f"record {index}"


def test_complete_batch_builds_a_result_only_when_asked() -> None:
    lazy, with_callback, waited_on, cancelled = (DeliveryFuture() for _ in range(4))
    seen: list[object] = []
    with_callback.add_done_callback(lambda f: seen.append(f.result()))
    assert cancelled.cancel()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(waited_on.result(5)))
    waiter.start()
    deadline = time.monotonic() + 5
    while waited_on._cond is None and time.monotonic() < deadline:  # the waiter built it
        time.sleep(0.001)
    outcome = Outcome()
    complete_batch([lazy, with_callback, waited_on, cancelled], outcome)
    waiter.join(5)
    assert seen == ["record 1"] and got == ["record 2"] and cancelled.cancelled()
    assert lazy.done() and lazy.exception() is None and sorted(outcome.built) == [1, 2]
    assert lazy.result() == "record 0" and lazy.result(0) == "record 0"  # built once
    assert sorted(outcome.built) == [0, 1, 2]
    done, _ = concurrent.futures.wait([lazy, with_callback], timeout=1)
    assert done == {lazy, with_callback}


def test_complete_batch_with_asyncio_futures() -> None:
    loop = asyncio.new_event_loop()
    try:
        futures = [loop.create_future() for _ in range(3)]
        futures[1].cancel()
        complete_batch(futures, Outcome())
        assert futures[0].result() == "record 0" and futures[1].cancelled()
        assert futures[2].result() == "record 2"
    finally:
        loop.close()
