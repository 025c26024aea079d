"""The transaction history checker on hand-made histories, one per anomaly, and the workload
planner it is fed by."""

from __future__ import annotations

import pytest

from epochlog.testing.txn_checker import (
    Anomaly,
    HistoryError,
    Outcome,
    ReadRecord,
    Transaction,
    Write,
    check,
    check_exactly_once,
)
from epochlog.testing.txn_workload import plan_transactions

COMMITTED = Transaction("t1", (Write("a", 0, "t1-w0"), Write("b", 1, "t1-w1")), Outcome.COMMITTED)
ABORTED = Transaction("t2", (Write("a", 0, "t2-w0"), Write("a", 1, "t2-w1")), Outcome.ABORTED)


def read(*entries: tuple[str, int, int, str]) -> list[ReadRecord]:
    return [ReadRecord(*entry) for entry in entries]


CLEAN = read(("a", 0, 0, "t1-w0"), ("b", 1, 0, "t1-w1"))


def test_a_clean_history_has_no_findings() -> None:
    report = check([COMMITTED, ABORTED], [CLEAN, CLEAN])
    assert report.ok, report
    assert (report.committed, report.aborted) == (1, 1)


def test_an_aborted_record_read_is_g1a() -> None:
    report = check([COMMITTED, ABORTED], [CLEAN + read(("a", 1, 0, "t2-w1"))])
    assert report.anomalies() == {Anomaly.ABORTED_READ}
    assert "t2-w1" in str(report)


def test_part_of_a_committed_transaction_is_a_torn_transaction() -> None:
    report = check([COMMITTED], [read(("a", 0, 0, "t1-w0"))])
    assert report.anomalies() == {Anomaly.TORN_TRANSACTION}
    assert "t1-w1" in report.findings[0].detail


def test_a_transaction_of_unknown_outcome_goes_either_way_but_not_in_part() -> None:
    unknown = Transaction("t3", COMMITTED.writes, Outcome.UNKNOWN)
    assert check([unknown], [CLEAN]).ok
    assert check([unknown], [[]]).ok
    assert (check([unknown], [CLEAN]).unknown_seen, check([unknown], [[]]).unknown_unseen) == (1, 1)
    assert check([unknown], [CLEAN[:1]]).anomalies() == {Anomaly.TORN_TRANSACTION}


def test_a_value_read_twice_is_a_duplicate() -> None:
    report = check([COMMITTED], [CLEAN + read(("a", 0, 1, "t1-w0"))])
    assert report.anomalies() == {Anomaly.DUPLICATE}
    assert "('a', 0, 0), ('a', 0, 1)" in report.findings[0].detail


def test_a_committed_transaction_nobody_read_is_lost() -> None:
    report = check([COMMITTED], [CLEAN, []])
    assert report.anomalies() == {Anomaly.LOST_COMMITTED}
    assert "reader 1" in report.findings[0].detail


def test_readers_that_disagree_about_an_offset_are_inconsistent() -> None:
    other = Transaction("t4", (Write("a", 0, "t4-w0"),), Outcome.COMMITTED)
    first = CLEAN + read(("a", 0, 1, "t4-w0"))
    second = read(("a", 0, 0, "t4-w0"), ("a", 0, 1, "t1-w0"), ("b", 1, 0, "t1-w1"))
    report = check([COMMITTED, other], [first, second])
    assert report.anomalies() == {Anomaly.INCONSISTENT_OFFSET}
    assert len(report.findings) == 2  # offsets 0 and 1 of a-0


def test_a_value_nobody_wrote_is_reported() -> None:
    report = check([COMMITTED], [CLEAN + read(("a", 0, 5, "ghost"))])
    assert report.anomalies() == {Anomaly.UNKNOWN_VALUE}


def test_a_value_written_by_two_transactions_is_a_malformed_history() -> None:
    twin = Transaction("t9", (Write("a", 0, "t1-w0"),), Outcome.COMMITTED)
    with pytest.raises(HistoryError, match="'t1-w0' written by both 't1' and 't9'"):
        check([COMMITTED, twin], [CLEAN])


def test_exactly_once_names_missing_duplicated_and_unexpected_outputs() -> None:
    assert check_exactly_once(["out-1", "out-2"], ["out-2", "out-1"]).ok
    report = check_exactly_once(["out-1", "out-2", "out-3"], ["out-1", "out-1", "out-3", "out-x"])
    assert (report.missing, report.duplicated, report.unexpected) == (
        ("out-2",),
        ("out-1",),
        ("out-x",),
    )
    assert not report.ok


def test_the_plan_is_seeded_unique_and_spreads_over_partitions() -> None:
    partitions = [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    plan = plan_transactions(7, 50, partitions, "run")
    assert plan == plan_transactions(7, 50, partitions, "run")
    values = [w.value for t in plan for w in t.writes]
    assert len(values) == len(set(values))
    assert all(len({(w.topic, w.partition) for w in t.writes}) >= 2 for t in plan)
    assert {t.commit for t in plan} == {True, False}


def test_a_plan_with_bad_arguments_names_them() -> None:
    with pytest.raises(ValueError, match="max_writes 1 >= 2"):
        plan_transactions(1, 3, [("a", 0)], "x", max_writes=1)
    with pytest.raises(ValueError, match=r"partitions non-empty \(0\)"):
        plan_transactions(1, 3, [], "x")
