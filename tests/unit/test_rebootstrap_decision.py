"""The rebootstrap decision (KIP-899 / KIP-1102), driven with a fake clock: every branch of
`recovery.Rebootstrap` and `recovery.NeverRebootstrap`, and `recovery_for`'s choice by config."""

from __future__ import annotations

import math

import pytest

from epochlog.client.config import Role, load_config
from epochlog.client.recovery import (
    NeverRebootstrap,
    Rebootstrap,
    RebootstrapReason,
    recovery_for,
)
from epochlog.protocol.errors import ErrorCode

TRIGGER = 1000.0
OK = ErrorCode.NONE
REQUIRED = ErrorCode.REBOOTSTRAP_REQUIRED


def test_nothing_to_do_before_any_request() -> None:
    r = Rebootstrap(TRIGGER)
    assert r.decide(10**9, any_node_available=True) is None
    assert r.time_to_trigger_ms(0) == TRIGGER


def test_the_trigger_runs_from_the_first_attempt_not_the_latest() -> None:
    r = Rebootstrap(TRIGGER)
    r.on_metadata_request(100)
    r.on_metadata_request(600)  # a later attempt does not restart the timer
    assert r.decide(1099, True) is None
    assert r.time_to_trigger_ms(1099) == 1
    assert r.decide(1100, True) is RebootstrapReason.TRIGGER_ELAPSED
    assert r.should_rebootstrap(1100, True) and r.reason is RebootstrapReason.TRIGGER_ELAPSED
    assert r.time_to_trigger_ms(5000) == 0


def test_a_response_with_brokers_clears_the_timer() -> None:
    r = Rebootstrap(TRIGGER)
    r.on_metadata_request(0)
    r.on_metadata_response(500, brokers=3, error=OK)
    assert r.first_attempt_ms is None
    assert r.decide(5000, True) is None
    r.on_metadata_request(6000)
    assert r.decide(6999, True) is None
    assert r.decide(7000, True) is RebootstrapReason.TRIGGER_ELAPSED


def test_a_response_without_brokers_does_not_clear_the_timer() -> None:
    r = Rebootstrap(TRIGGER)
    r.on_metadata_request(0)
    r.on_metadata_response(500, brokers=0, error=OK)
    assert r.decide(1000, True) is RebootstrapReason.TRIGGER_ELAPSED


def test_an_error_response_with_brokers_does_not_clear_the_timer() -> None:
    r = Rebootstrap(TRIGGER)
    r.on_metadata_request(0)
    r.on_metadata_response(500, brokers=3, error=ErrorCode.UNKNOWN_SERVER_ERROR)
    assert r.first_attempt_ms == 0
    assert r.decide(1000, True) is RebootstrapReason.TRIGGER_ELAPSED


def test_rebootstrap_required_decides_at_once_and_outranks_the_rest() -> None:
    r = Rebootstrap(TRIGGER)
    r.on_metadata_request(0)
    r.on_metadata_response(1, brokers=0, error=REQUIRED)
    assert r.decide(1, any_node_available=True) is RebootstrapReason.REQUIRED
    assert r.decide(5000, any_node_available=False) is RebootstrapReason.REQUIRED


def test_a_good_response_after_rebootstrap_required_withdraws_it() -> None:
    r = Rebootstrap(TRIGGER)
    r.on_metadata_response(1, brokers=0, error=REQUIRED)
    r.on_metadata_response(2, brokers=1, error=OK)
    assert r.decide(3, True) is None


def test_no_available_node_rebootstraps_only_off_the_bootstrap_servers() -> None:
    r = Rebootstrap(TRIGGER)
    r.on_metadata_request(0)
    assert r.decide(1, any_node_available=False) is RebootstrapReason.NO_NODE_AVAILABLE
    # on the bootstrap servers already: wait for the trigger instead of a reconnect storm
    assert r.decide(1, any_node_available=False, using_bootstrap=True) is None
    assert (
        r.decide(1000, any_node_available=False, using_bootstrap=True)
        is RebootstrapReason.TRIGGER_ELAPSED
    )


def test_rebootstrapping_clears_required_and_restarts_the_timer() -> None:
    r = Rebootstrap(TRIGGER)
    r.on_metadata_request(0)
    r.on_metadata_response(10, brokers=0, error=REQUIRED)
    assert r.should_rebootstrap(10, True)
    r.on_rebootstrap(2000)
    assert r.decide(2000, True) is None
    r.on_metadata_request(2100)  # does not move the timer set by the rebootstrap
    assert r.decide(2999, True) is None
    assert r.decide(3000, True) is RebootstrapReason.TRIGGER_ELAPSED


def test_should_rebootstrap_records_no_reason_when_false() -> None:
    r = Rebootstrap(TRIGGER)
    r.on_metadata_request(0)
    assert r.should_rebootstrap(1, True) is False
    assert r.reason is None


@pytest.mark.parametrize(
    ("now", "available", "bootstrap"),
    [(10**9, False, False), (10**9, True, False), (0, False, True)],
)
def test_strategy_none_never_rebootstraps(now: float, available: bool, bootstrap: bool) -> None:
    r = NeverRebootstrap()
    r.on_metadata_request(0)
    r.on_metadata_response(1, 0, REQUIRED)
    assert r.should_rebootstrap(now, available, bootstrap) is False
    r.on_rebootstrap(now)
    assert r.time_to_trigger_ms(now) == math.inf
    assert r.reason is None


def test_recovery_for_follows_the_config() -> None:
    default = recovery_for(load_config(Role.PRODUCER, {"bootstrap.servers": "h:1"}))
    assert isinstance(default, Rebootstrap) and default.trigger_ms == 300000
    tuned = recovery_for(
        load_config(
            Role.CONSUMER,
            {"bootstrap.servers": "h:1", "metadata.recovery.rebootstrap.trigger.ms": "2500"},
        )
    )
    assert isinstance(tuned, Rebootstrap) and tuned.trigger_ms == 2500
    none = recovery_for(
        load_config(Role.ADMIN, {"bootstrap.servers": "h:1", "metadata.recovery.strategy": "none"})
    )
    assert isinstance(none, NeverRebootstrap)
