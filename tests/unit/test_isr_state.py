"""The leader's ISR state machine (`broker/isr_state.py`): its transition table, the errors a
forbidden transition raises, and the phases a partition goes through."""

from __future__ import annotations

import pytest

from epochlog.broker import isr_state
from epochlog.broker.isr_state import (
    TRANSITIONS,
    IsrEvent,
    IsrPhase,
    IsrTransitionError,
    next_phase,
)
from epochlog.broker.partition import PartitionState
from epochlog.protocol.errors import ErrorCode
from tests.unit.test_broker_isr import LAG, NOW, fetch, leader

P, E = IsrPhase, IsrEvent


def test_the_table_is_the_whole_machine():
    assert TRANSITIONS == {
        P.COMMITTED: {
            E.PROPOSE_EXPAND: P.PENDING_EXPAND,
            E.PROPOSE_SHRINK: P.PENDING_SHRINK,
            E.CONTROLLER_STATE: P.COMMITTED,
            E.STOP: P.COMMITTED,
        },
        P.PENDING_EXPAND: {
            E.ANSWER_COMMIT: P.COMMITTED,
            E.ANSWER_REVERT: P.COMMITTED,
            E.ANSWER_RETRY: P.PENDING_EXPAND,
            E.ANSWER_FENCED: P.FENCED,
            E.CONTROLLER_STATE: P.COMMITTED,
            E.STOP: P.COMMITTED,
        },
        P.PENDING_SHRINK: {
            E.ANSWER_COMMIT: P.COMMITTED,
            E.ANSWER_REVERT: P.COMMITTED,
            E.ANSWER_RETRY: P.PENDING_SHRINK,
            E.ANSWER_FENCED: P.FENCED,
            E.CONTROLLER_STATE: P.COMMITTED,
            E.STOP: P.COMMITTED,
        },
        P.FENCED: {
            E.ANSWER_COMMIT: P.COMMITTED,
            E.ANSWER_REVERT: P.COMMITTED,
            E.ANSWER_FENCED: P.FENCED,
            E.CONTROLLER_STATE: P.COMMITTED,
            E.STOP: P.COMMITTED,
        },
    }


@pytest.mark.parametrize("phase", list(IsrPhase))
def test_the_controllers_state_and_a_stop_always_end_in_committed(phase):
    assert next_phase(phase, E.CONTROLLER_STATE) is P.COMMITTED
    assert next_phase(phase, E.STOP) is P.COMMITTED


@pytest.mark.parametrize("phase", [P.PENDING_EXPAND, P.PENDING_SHRINK, P.FENCED])
@pytest.mark.parametrize("event", [E.PROPOSE_EXPAND, E.PROPOSE_SHRINK])
def test_a_second_proposal_while_one_is_in_flight_raises_naming_event_and_phase(phase, event):
    with pytest.raises(IsrTransitionError) as raised:
        next_phase(phase, event, "t-0")
    assert "t-0" in str(raised.value)
    assert event.value in str(raised.value) and phase.name in str(raised.value)


def test_an_expansion_goes_pending_then_committed(tmp_path):
    p = leader(tmp_path)
    fetch(p, 2, 0, 502)
    change = isr_state.maybe_expand_isr(p, 2)
    assert p.isr_phase is P.PENDING_EXPAND and p.pending_isr is change
    isr_state.apply_alter_partition_answer(
        p, change, ErrorCode.NONE, NOW, leader_epoch=3, isr=(1, 2), partition_epoch=8
    )
    assert (p.isr_phase, p.pending_isr, p.isr) == (P.COMMITTED, None, (1, 2))


def test_a_retried_shrink_stays_pending(tmp_path):
    p = leader(tmp_path, isr=(1, 2))
    change = isr_state.maybe_shrink_isr(p, NOW + LAG + 1)
    assert p.isr_phase is P.PENDING_SHRINK
    outcome, _ = isr_state.apply_alter_partition_answer(
        p, change, ErrorCode.REQUEST_TIMED_OUT, NOW
    )
    assert outcome is isr_state.AlterOutcome.RETRY
    assert p.isr_phase is P.PENDING_SHRINK and p.pending_isr is change


def test_a_stale_view_fences_until_leader_and_isr_and_a_retry_is_then_ignored(tmp_path):
    p = leader(tmp_path)
    fetch(p, 2, 0, 502)
    change = isr_state.maybe_expand_isr(p, 2)
    isr_state.apply_alter_partition_answer(p, change, ErrorCode.FENCED_LEADER_EPOCH, NOW)
    assert p.isr_phase is P.FENCED and p.maximal_isr == (1, 2)
    assert isr_state.maybe_shrink_isr(p, NOW + 10 * LAG) is None  # nothing proposed
    outcome, _ = isr_state.apply_alter_partition_answer(p, change, ErrorCode.REQUEST_TIMED_OUT, NOW)
    assert outcome is None and p.isr_phase is P.FENCED  # not re-sent once fenced
    p.make_leader(PartitionState(1, 4, (1,), (1, 2), partition_epoch=9), NOW)
    assert (p.isr_phase, p.pending_isr) == (P.COMMITTED, None)


def test_stopping_drops_the_pending_change(tmp_path):
    p = leader(tmp_path)
    fetch(p, 2, 0, 502)
    isr_state.maybe_expand_isr(p, 2)
    p.stop_leading()
    assert (p.isr_phase, p.pending_isr) == (P.COMMITTED, None)
