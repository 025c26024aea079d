"""DescribeLogDirs' report, AlterReplicaLogDirs' per-partition decision and the mover's steps."""

from __future__ import annotations

from epochlog.broker.log_dir_report import (
    INVALID_OFFSET_LAG,
    LogDirSnapshot,
    MoveDecision,
    ReplicaOnDisk,
    current_offset_lag,
    decide_replica_move,
    describe_log_dirs,
    future_offset_lag,
)
from epochlog.broker.replica_mover import CopyState, CopyStep, next_copy_step
from epochlog.protocol.errors import ErrorCode

A, B = "/data/a", "/data/b"


def snapshots() -> list[LogDirSnapshot]:
    return [
        LogDirSnapshot(
            A,
            False,
            1000,
            600,
            (
                ReplicaOnDisk("t", 1, 300, 0),
                ReplicaOnDisk("t", 0, 200, 5),
                ReplicaOnDisk("u", 0, 100, INVALID_OFFSET_LAG),
            ),
        ),
        LogDirSnapshot(B, False, 2000, 1500, (ReplicaOnDisk("t", 0, 50, 7, is_future=True),)),
        LogDirSnapshot("/data/c", True),
    ]


def test_every_dir_is_reported_and_an_offline_one_is_a_storage_error_without_topics():
    reports = describe_log_dirs(snapshots(), None)
    assert [(r.path, r.error) for r in reports] == [
        (A, ErrorCode.NONE),
        (B, ErrorCode.NONE),
        ("/data/c", ErrorCode.KAFKA_STORAGE_ERROR),
    ]
    assert reports[2].topics == {} and reports[2].total_bytes == -1
    assert (reports[0].total_bytes, reports[0].usable_bytes) == (1000, 600)
    assert [r.partition for r in reports[0].topics["t"]] == [0, 1]
    assert reports[1].topics["t"][0].is_future and reports[1].topics["t"][0].offset_lag == 7


def test_only_the_requested_partitions_are_listed_and_topics_without_any_are_left_out():
    reports = describe_log_dirs(snapshots(), {("t", 0)})
    assert {t: [r.partition for r in rs] for t, rs in reports[0].topics.items()} == {"t": [0]}
    assert list(reports[1].topics) == ["t"]
    assert describe_log_dirs(snapshots(), set())[0].topics == {}


def test_offset_lags():
    assert current_offset_lag(high_watermark=100, log_end_offset=90) == 10
    assert current_offset_lag(high_watermark=100, log_end_offset=120) == 0  # a leader
    assert future_offset_lag(current_log_end_offset=500, future_log_end_offset=200) == 300


def decide(**kwargs):
    values = dict(
        topic="t",
        partition=0,
        destination=B,
        log_dirs=[A, B],
        offline_dirs=[],
        current_dir=A,
        hosted=True,
    )
    values.update(kwargs)
    return decide_replica_move(**values)


def test_a_hosted_replica_in_another_dir_moves():
    assert decide().decision is MoveDecision.MOVE
    assert decide().error is ErrorCode.NONE


def test_a_replica_already_in_the_destination_needs_nothing():
    verdict = decide(destination=A)
    assert (verdict.decision, verdict.error) == (MoveDecision.NOTHING, ErrorCode.NONE)


def test_an_unknown_destination_is_log_dir_not_found():
    verdict = decide(destination="/elsewhere")
    assert (verdict.decision, verdict.error) == (MoveDecision.REFUSE, ErrorCode.LOG_DIR_NOT_FOUND)
    assert "/elsewhere is not one of this broker's log dirs" in verdict.message


def test_an_offline_destination_or_replica_or_any_offline_dir_is_a_storage_error():
    assert decide(offline_dirs=[B]).error is ErrorCode.KAFKA_STORAGE_ERROR
    assert decide(offline_dirs=[A]).error is ErrorCode.KAFKA_STORAGE_ERROR
    third = decide(log_dirs=[A, B, "/data/c"], offline_dirs=["/data/c"])
    assert (third.decision, third.error) == (MoveDecision.REFUSE, ErrorCode.KAFKA_STORAGE_ERROR)


def test_a_replica_not_hosted_here_is_remembered_and_answered_replica_not_available():
    verdict = decide(current_dir=None, hosted=False)
    assert (verdict.decision, verdict.error) == (
        MoveDecision.REMEMBER,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    )


def test_an_illegal_topic_name_is_invalid_topic():
    verdict = decide(topic="bad!", topic_name_error="illegal topic name 'bad!'")
    assert verdict.error is ErrorCode.INVALID_TOPIC_EXCEPTION


def step(**kwargs) -> CopyStep:
    values = dict(
        current_first_base=0,
        current_end=100,
        current_truncations=0,
        truncations_at_start=0,
        future_end=40,
        cleaning=False,
    )
    values.update(kwargs)
    return next_copy_step(CopyState(**values))


def test_copy_steps():
    assert step() is CopyStep.COPY
    assert step(future_end=100) is CopyStep.SWAP
    assert step(future_end=100, cleaning=True) is CopyStep.WAIT
    assert step(current_truncations=1) is CopyStep.RESTART  # the copied batches may be gone
    assert step(future_end=120) is CopyStep.RESTART
    assert step(current_first_base=60) is CopyStep.RESTART  # retention passed the copy
