"""`DeliveryFuture` behaves as a concurrent.futures.Future, across threads, without a condition
until one is needed."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import pytest

from epochlog.client.delivery import DeliveryFuture


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
