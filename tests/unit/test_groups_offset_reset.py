"""`epochlog groups reset-offsets` decided without I/O: kafka-consumer-groups' semantics for each
way of resetting, clamping to the log, the refusal of an active group, and argument parsing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from epochlog.cli.offset_reset import (
    LogRange,
    PartitionReset,
    ResetError,
    ResetHow,
    ResetSpec,
    check_group_resettable,
    clamp_offset,
    parse_datetime_ms,
    parse_topic_partitions,
    plan_reset,
)

T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)
LOGS = {T0: LogRange(5, 50), T1: LogRange(0, 10), T2: LogRange(0, 0)}
COMMITTED: dict[tuple[str, int], int | None] = {T0: 20, T1: 10, T2: None}


def new_offsets(spec: ResetSpec, at_time: dict | None = None) -> dict[tuple[str, int], int]:
    plan = plan_reset("g", spec, [T2, T0, T1], COMMITTED, LOGS, at_time)
    return {(r.topic, r.partition): r.new for r in plan}


def test_to_earliest_and_to_latest_are_the_log_start_and_end() -> None:
    assert new_offsets(ResetSpec(ResetHow.TO_EARLIEST)) == {T0: 5, T1: 0, T2: 0}
    assert new_offsets(ResetSpec(ResetHow.TO_LATEST)) == {T0: 50, T1: 10, T2: 0}


def test_to_offset_is_clamped_to_the_log_with_a_note() -> None:
    plan = plan_reset("g", ResetSpec(ResetHow.TO_OFFSET, 7), [T0, T1, T2], COMMITTED, LOGS)
    assert plan == [
        PartitionReset("t", 0, 20, 7),
        PartitionReset("t", 1, 10, 7),
        PartitionReset("t", 2, None, 0, "7 is above the log end offset; set to 0"),
    ]
    assert new_offsets(ResetSpec(ResetHow.TO_OFFSET, 0))[T0] == 5  # below the log start


def test_shift_by_moves_the_committed_offset_within_the_log() -> None:
    plan = plan_reset("g", ResetSpec(ResetHow.SHIFT_BY, -18), [T0, T1], COMMITTED, LOGS)
    assert [(r.new, r.note) for r in plan] == [
        (5, "2 is below the log start offset; set to 5"),
        (0, "-8 is below the log start offset; set to 0"),
    ]
    plan = plan_reset("g", ResetSpec(ResetHow.SHIFT_BY, 3), [T0, T1], COMMITTED, LOGS)
    assert [r.new for r in plan] == [23, 10]


def test_shift_by_refuses_a_partition_without_a_committed_offset() -> None:
    with pytest.raises(ResetError, match=r"group 'g': cannot shift t-2: it has no committed"):
        plan_reset("g", ResetSpec(ResetHow.SHIFT_BY, 1), [T2], COMMITTED, LOGS)


def test_to_datetime_takes_the_offset_at_that_time_or_the_log_end() -> None:
    plan = plan_reset(
        "g", ResetSpec(ResetHow.TO_DATETIME, 1000), [T0, T1], COMMITTED, LOGS, {T0: 12, T1: -1}
    )
    assert plan == [
        PartitionReset("t", 0, 20, 12),
        PartitionReset(
            "t", 1, 10, 10, "no record at or after that time; set to the log end offset"
        ),
    ]


def test_clamp_offset_leaves_offsets_inside_the_log_alone() -> None:
    assert clamp_offset(5, LogRange(5, 9)) == (5, "")
    assert clamp_offset(9, LogRange(5, 9)) == (9, "")
    assert clamp_offset(10, LogRange(5, 9))[0] == 9


def test_a_partition_without_log_offsets_is_named() -> None:
    with pytest.raises(ResetError, match="no log offsets for u-0"):
        plan_reset("g", ResetSpec(ResetHow.TO_LATEST), [("u", 0)], {}, LOGS)


@pytest.mark.parametrize("state", ["Empty", "Dead"])
def test_only_an_inactive_group_may_be_reset(state: str) -> None:
    check_group_resettable("g", state, 0)


@pytest.mark.parametrize("state", ["Stable", "PreparingRebalance", "CompletingRebalance"])
def test_an_active_group_is_refused_naming_it_and_its_state(state: str) -> None:
    with pytest.raises(ResetError, match=f"group 'g' is {state} with 2 member"):
        check_group_resettable("g", state, 2)


def test_topic_arguments_name_a_topic_or_some_partitions() -> None:
    assert parse_topic_partitions("clicks") == ("clicks", None)
    assert parse_topic_partitions("clicks:2,0,2") == ("clicks", [0, 2])
    for bad in ("clicks:", "clicks:x", ":1", "clicks:-1"):
        with pytest.raises(ResetError, match=f"--topic '{bad}'"):
            parse_topic_partitions(bad)


def test_datetimes_are_iso_8601_in_local_time_unless_zoned() -> None:
    assert parse_datetime_ms("2024-05-01T12:00:00Z") == int(
        datetime(2024, 5, 1, 12, tzinfo=UTC).timestamp() * 1000
    )
    assert parse_datetime_ms("2024-05-01T14:00:00.250+02:00") == int(
        datetime(2024, 5, 1, 12, tzinfo=UTC).timestamp() * 1000 + 250
    )
    local = datetime(2024, 5, 1, 12).astimezone()
    assert parse_datetime_ms("2024-05-01T12:00:00") == int(local.timestamp() * 1000)
    with pytest.raises(ResetError, match="--to-datetime 'yesterday' is not ISO 8601"):
        parse_datetime_ms("yesterday")
