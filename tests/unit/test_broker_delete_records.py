"""DeleteRecords on a leader (a Partition on a real log in a temp dir) and the wait for the
followers' log start offsets (DelayedDeleteRecords in a purgatory with a hand-driven timer)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import pytest

from epochlog.broker.delayed import DelayedOperationPurgatory
from epochlog.broker.delete_records import (
    DelayedDeleteRecords,
    DeleteRecordsStatus,
    delete_records_on_leader,
    low_watermark,
)
from epochlog.broker.partition import Partition, PartitionError, PartitionState
from epochlog.broker.produce_validation import validate_partition_records
from epochlog.broker.producer_state import ProducerStateManager
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder
from epochlog.storage import LogConfig, PartitionLog

NOW = 1_700_000_000_000


class Timers:
    """A scheduler whose timers fire only when the test says so."""

    def __init__(self) -> None:
        self.pending: list[Callable[[], None]] = []

    def __call__(self, delay: float, callback: Callable[[], None]) -> Timers:
        self.pending.append(callback)
        return self

    def cancel(self) -> None:
        pass

    def fire(self) -> None:
        for callback in self.pending:
            callback()


def leader(tmp_path, *, isr=(1, 2), records=10, segment_bytes=None, compact=False) -> Partition:
    config = LogConfig()
    if segment_bytes:
        config = replace(config, segment_bytes=segment_bytes)
    if compact:
        config = replace(config, cleanup_policy="compact")
    log = PartitionLog.open(tmp_path / "t-0", config)
    p = Partition("t", 0, 1, log, ProducerStateManager("t-0"))
    p.make_leader(PartitionState(leader=1, leader_epoch=0, isr=isr, replicas=isr), NOW)
    for i in range(records):
        b = RecordBatchBuilder()
        b.append(NOW, f"k{i}".encode(), b"v" * 100)
        raw = b.build()
        header = validate_partition_records(raw, version=9, max_message_bytes=10**6, where="t-0")
        p.append_records_as_leader(raw, header, 1, 1, NOW)
    for follower in isr[1:]:
        p.update_follower_fetch_state(follower, records, 0, 1, p.log_end_offset, NOW)
    assert p.high_watermark == records
    return p


def test_the_leader_moves_its_log_start_and_minus_one_means_the_high_watermark(tmp_path):
    p = leader(tmp_path)
    assert delete_records_on_leader(p, 4) == 4
    assert p.log_start_offset == 4
    assert delete_records_on_leader(p, 2) == 2  # lower: nothing moves, nothing fails
    assert p.log_start_offset == 4
    assert delete_records_on_leader(p, -1) == 10
    assert p.log_start_offset == 10


@pytest.mark.parametrize("offset", [11, -2])
def test_offsets_outside_zero_to_the_high_watermark_are_out_of_range(tmp_path, offset):
    p = leader(tmp_path)
    with pytest.raises(PartitionError) as raised:
        delete_records_on_leader(p, offset)
    assert raised.value.error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert p.log_start_offset == 0


def test_a_follower_or_a_compacted_topic_refuses(tmp_path):
    p = leader(tmp_path / "a")
    p.make_follower(PartitionState(leader=2, leader_epoch=1, isr=(1, 2), replicas=(1, 2)))
    with pytest.raises(PartitionError) as raised:
        delete_records_on_leader(p, 3)
    assert raised.value.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    compacted = leader(tmp_path / "b", compact=True)
    with pytest.raises(PartitionError) as raised:
        delete_records_on_leader(compacted, 3)
    assert raised.value.error_code is ErrorCode.POLICY_VIOLATION
    assert compacted.log_start_offset == 0


def test_the_low_watermark_is_the_smallest_log_start_of_live_replicas(tmp_path):
    p = leader(tmp_path, isr=(1, 2, 3))
    delete_records_on_leader(p, 6)
    assert low_watermark(p) == 0  # the followers still report 0
    p.update_follower_fetch_state(2, 10, 6, 1, p.log_end_offset, NOW)
    assert low_watermark(p) == 0
    p.update_follower_fetch_state(3, 10, 5, 1, p.log_end_offset, NOW)
    assert low_watermark(p) == 5
    p.update_follower_fetch_state(3, 10, 6, 1, p.log_end_offset, NOW)
    assert low_watermark(p) == 6


def test_segments_wholly_below_the_log_start_are_deleted(tmp_path):
    p = leader(tmp_path, records=20, segment_bytes=400)
    bases = [s.base_offset for s in p.log.segments]
    assert len(bases) > 4
    delete_records_on_leader(p, bases[3] + 1)
    deleted = p.log.delete_segments_below_log_start(p.high_watermark, NOW)
    assert deleted == 3
    assert p.log.segments[0].base_offset == bases[3]
    assert p.log_start_offset == bases[3] + 1


def run_delayed(p: Partition, statuses, act: Callable[[], None], fire: bool = False):
    async def scenario():
        future = asyncio.get_running_loop().create_future()
        timers = Timers()
        purgatory = DelayedOperationPurgatory("delete-records", timers)
        op = DelayedDeleteRecords(
            30_000, statuses, lambda tp: p if tp == ("t", 0) else None, future
        )
        done_at_once = purgatory.try_complete_else_watch(op, list(statuses))
        act()
        purgatory.check_and_complete(("t", 0))
        if fire:
            timers.fire()
        return done_at_once, future.result() if future.done() else None

    return asyncio.run(scenario())


def test_the_answer_waits_for_the_followers_log_start(tmp_path):
    p = leader(tmp_path)
    delete_records_on_leader(p, 7)
    statuses = {("t", 0): DeleteRecordsStatus(7)}
    at_once, answer = run_delayed(p, statuses, lambda: None)
    assert not at_once and answer is None
    at_once, answer = run_delayed(
        p,
        {("t", 0): DeleteRecordsStatus(7)},
        lambda: p.update_follower_fetch_state(2, 10, 7, 1, p.log_end_offset, NOW),
    )
    assert answer == {("t", 0): (7, ErrorCode.NONE)}


def test_the_timeout_answers_request_timed_out_and_failures_are_kept(tmp_path):
    p = leader(tmp_path)
    delete_records_on_leader(p, 7)
    statuses = {
        ("t", 0): DeleteRecordsStatus(7),
        ("t", 1): DeleteRecordsStatus(-1, error=ErrorCode.OFFSET_OUT_OF_RANGE, waiting=False),
    }
    _, answer = run_delayed(p, statuses, lambda: None, fire=True)
    assert answer == {
        ("t", 0): (-1, ErrorCode.REQUEST_TIMED_OUT),
        ("t", 1): (-1, ErrorCode.OFFSET_OUT_OF_RANGE),
    }


def test_losing_the_leadership_while_waiting_answers_not_leader(tmp_path):
    p = leader(tmp_path)
    delete_records_on_leader(p, 7)
    _, answer = run_delayed(
        p,
        {("t", 0): DeleteRecordsStatus(7)},
        lambda: p.make_follower(
            PartitionState(leader=2, leader_epoch=1, isr=(1, 2), replicas=(1, 2))
        ),
    )
    assert answer == {("t", 0): (-1, ErrorCode.NOT_LEADER_OR_FOLLOWER)}
