"""The demo's check of its counts topic (`epochlog.cli.demo_topic_check.check_counts`)."""

from __future__ import annotations

import json

from epochlog.cli.demo_topic_check import check_counts

MINUTE = 60_000


def row(window: int, dimension: str, value: str, count: int) -> bytes:
    return json.dumps(
        {"window_start": window, "dimension": dimension, "value": value, "count": count}
    ).encode()


ROWS = [
    row(0, "page", "/", 3),
    row(0, "page", "/cart", 2),
    row(0, "country", "NL", 5),
    row(MINUTE, "page", "/", 4),
    row(MINUTE, "country", "DE", 4),
]


def test_every_window_once_with_totals_equal_to_produced_passes() -> None:
    check = check_counts(ROWS)
    assert (check.rows, check.repeated, check.unreadable) == (5, 0, 0)
    assert check.totals == {"page": 9, "country": 9}
    assert check.per_minute == {0: 5, MINUTE: 4}
    assert check.exactly_once(9, {0: 5, MINUTE: 4})


def test_a_window_read_twice_is_counted_once_and_fails_the_check() -> None:
    check = check_counts([*ROWS, row(0, "page", "/", 3)])
    assert check.repeated == 1 and check.totals["page"] == 9
    assert not check.exactly_once(9, {0: 5, MINUTE: 4})


def test_a_missing_window_fails_the_check() -> None:
    check = check_counts(ROWS[1:])
    assert check.totals["page"] == 6
    assert not check.exactly_once(9, {0: 5, MINUTE: 4})


def test_per_minute_totals_must_match_too() -> None:
    assert not check_counts(ROWS).exactly_once(9, {0: 4, MINUTE: 5})


def test_rows_that_are_not_the_jobs_json_are_counted_as_unreadable() -> None:
    check = check_counts([*ROWS, b"not json", None, b'{"window_start": 1}'])
    assert check.unreadable == 3 and check.rows == 8
    assert not check.exactly_once(9, {0: 5, MINUTE: 4})
