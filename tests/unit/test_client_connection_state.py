"""Per-broker connection states, reconnect backoff and node choice, with a fake clock."""

from __future__ import annotations

import math

import pytest

from epochlog.client.connection_state import (
    ConnectionStates,
    ConnEvent,
    ConnState,
    ExponentialBackoff,
    InvalidTransition,
    least_loaded_node,
)

NO_JITTER = lambda: 0.5  # noqa: E731  (random() == 0.5 makes the jitter factor exactly 1)


def states(**kw: float) -> ConnectionStates:
    return ConnectionStates(
        kw.get("backoff", 50),
        kw.get("backoff_max", 1000),
        kw.get("setup", 10000),
        kw.get("setup_max", 30000),
        random=kw.get("random", NO_JITTER),  # type: ignore[arg-type]
    )


def test_a_node_goes_connecting_then_ready() -> None:
    s = states()
    assert s.state(1, 0) is ConnState.DISCONNECTED
    assert s.can_connect(1, 0)
    s.connecting(1, 0)
    assert s.state(1, 5) is ConnState.CONNECTING
    assert s.connection_delay(1, 5) == math.inf
    s.established(1, 10)
    assert s.is_ready(1, 10)


def test_a_failed_attempt_backs_off_and_time_alone_ends_the_backoff() -> None:
    s = states()
    s.connecting(1, 0)
    assert s.failed(1, 100) == 50
    assert s.state(1, 100) is ConnState.BACKOFF
    assert s.is_unavailable(1, 149)
    assert s.connection_delay(1, 120) == 30
    assert not s.can_connect(1, 149)
    assert s.state(1, 150) is ConnState.DISCONNECTED
    assert s.can_connect(1, 150)


def test_reconnect_backoff_doubles_up_to_the_max() -> None:
    s = states()
    delays = []
    now = 0.0
    for _ in range(7):
        s.connecting(1, now)
        delays.append(s.failed(1, now))
        now += delays[-1]
    assert delays == [50, 100, 200, 400, 800, 1000, 1000]


def test_backoff_has_twenty_percent_jitter() -> None:
    low = ExponentialBackoff(100, 10000, random=lambda: 0.0)
    high = ExponentialBackoff(100, 10000, random=lambda: 0.999999)
    assert low.backoff(0) == pytest.approx(80)
    assert high.backoff(0) == pytest.approx(120, rel=1e-4)
    assert low.backoff(2) == pytest.approx(320)
    assert ExponentialBackoff(100, 100).backoff(5) == 100  # no room to grow: constant


def test_a_ready_connection_resets_the_backoff_and_a_lost_one_starts_it_again() -> None:
    s = states()
    for now in (0, 100, 300):
        s.connecting(1, now)
        s.failed(1, now)
    s.connecting(1, 1000)
    s.established(1, 1001)
    assert s.lost(1, 2000) == 50  # failures were reset by READY
    assert s.state(1, 2049) is ConnState.BACKOFF


def test_connection_setup_timeout_grows_with_consecutive_failures() -> None:
    s = states()
    timeouts = []
    now = 0.0
    for _ in range(4):
        timeouts.append(s.connecting(1, now))
        now += 1
        s.failed(1, now)
        now += 2000
    assert timeouts == [10000, 20000, 30000, 30000]
    s.connecting(1, now)
    assert not s.is_setup_timed_out(1, now + 29999)
    assert s.is_setup_timed_out(1, now + 30000)
    s.established(1, now + 1)
    s.lost(1, now + 2)
    assert s.connecting(1, now + 5000) == 10000


def test_an_event_not_valid_in_the_current_state_raises_naming_node_event_and_state() -> None:
    s = states()
    with pytest.raises(InvalidTransition) as info:
        s.established(7, 0)
    assert (info.value.node_id, info.value.event, info.value.state) == (
        7,
        ConnEvent.ESTABLISHED,
        ConnState.DISCONNECTED,
    )
    assert "node 7" in str(info.value) and "established" in str(info.value)
    s.connecting(7, 0)
    with pytest.raises(InvalidTransition, match="connect is not valid in state connecting"):
        s.connecting(7, 1)
    s.failed(7, 1)
    with pytest.raises(InvalidTransition, match="in state backoff"):
        s.connecting(7, 2)


def test_closing_on_purpose_forgets_the_history() -> None:
    s = states()
    s.connecting(1, 0)
    s.failed(1, 0)
    s.closed(1, 10)
    assert s.can_connect(1, 10)
    s.connecting(1, 10)
    assert s.failed(1, 10) == 50


def test_least_loaded_prefers_an_idle_ready_node() -> None:
    s = states()
    for node in (1, 2, 3):
        s.connecting(node, 0)
        s.established(node, 0)
    assert least_loaded_node([1, 2, 3], s, {1: 2, 2: 0, 3: 1}, 0) == 2
    assert least_loaded_node([1, 2, 3], s, {1: 2, 2: 3, 3: 1}, 0) == 3


def test_least_loaded_takes_connecting_over_new_and_new_over_backing_off() -> None:
    s = states()
    s.connecting(1, 0)
    s.failed(1, 0)  # backoff until 50
    s.connecting(2, 0)  # connecting
    assert least_loaded_node([1, 2, 3], s, {}, 10) == 2
    assert least_loaded_node([1, 3], s, {}, 10) == 3
    assert least_loaded_node([1], s, {}, 10) is None
    assert least_loaded_node([1], s, {}, 50) == 1


def test_no_node_is_available_when_every_node_is_backing_off() -> None:
    s = states()
    for node in (1, 2):
        s.connecting(node, 0)
        s.failed(node, 0)
    assert s.all_unavailable([1, 2], 10)
    assert least_loaded_node([1, 2], s, {}, 10) is None
    assert least_loaded_node([], s, {}, 10) is None
    assert not s.all_unavailable([1, 2], 60)


def test_least_loaded_scan_starts_where_the_caller_says() -> None:
    s = states()
    assert least_loaded_node([1, 2, 3], s, {}, 0, start=0) == 1
    assert least_loaded_node([1, 2, 3], s, {}, 0, start=2) == 3
