"""Damage in the middle of a segment that a clean-shutdown open does not scan (issue 14, item 2).

A clean open trusts the segments (only the indexes and the tail after the last index entry are
checked), so a damaged batch header in the middle of a segment is found later, by a walk over the
headers: the producer-state rebuild every partition does when it is first hosted, or a read's
index walk. Each test damages a real log the way a bad disk would, opens it cleanly, and checks
that the walk reports `LogDamageError` (KAFKA_STORAGE_ERROR, naming the segment and the byte), and
that `recover_from_damage` cuts the log exactly before the damaged batch, like crash recovery.
"""

from __future__ import annotations

import pytest

from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import decode_batch, parse_batch_header
from epochlog.storage import PartitionLog
from epochlog.storage.errors import LogDamageError
from tests.unit.test_storage_recovery import (
    CONFIG,
    COUNTS,
    assert_log_holds_exactly,
    assert_log_takes_appends,
    build_log,
    flip,
)

MAGIC_BYTE = 16  # base offset 8, batch length 4, leader epoch 4, then the magic


def open_clean(directory) -> PartitionLog:
    return PartitionLog.open(directory, CONFIG, had_clean_shutdown=True)


def test_a_bad_magic_in_a_middle_segment_survives_a_clean_open_and_is_found_by_a_header_walk(
    tmp_path,
):
    directory = tmp_path / "t-0"
    stored = build_log(directory, COUNTS)
    segments = sorted({b.segment for b in stored})
    assert len(segments) > 3
    # the second batch of the second segment: before that segment's last index entry
    victims = [b for b in stored if b.segment == segments[1]]
    victim = victims[1]
    flip(victim.segment, victim.position + MAGIC_BYTE, 0xFF)
    log = open_clean(directory)
    with pytest.raises(LogDamageError) as caught:
        list(log.iter_headers())
    damage = caught.value
    assert damage.error_code is ErrorCode.KAFKA_STORAGE_ERROR
    assert damage.segment_base == int(segments[1].stem)
    assert damage.position == victim.position
    assert str(victim.segment) in str(damage) and f"position {victim.position}" in str(damage)

    removed = log.recover_from_damage(damage)
    survivors = stored[: stored.index(victim)]
    assert removed == sum(len(b.data) for b in stored[stored.index(victim) :])
    assert_log_holds_exactly(log, survivors)
    assert log.log_end_offset == decode_batch(survivors[-1].data).next_offset
    assert log.recovery_point <= log.log_end_offset
    assert log.leader_epoch_cache.latest_epoch is not None
    assert [e for e, _ in log.leader_epoch_cache.entries] == sorted(
        {parse_batch_header(b.data).partition_leader_epoch for b in survivors}
    )
    assert list(log.iter_headers())  # sound now
    assert_log_takes_appends(log)


def test_a_read_whose_index_walk_meets_damage_raises_storage_error_not_corrupt_bytes(tmp_path):
    directory = tmp_path / "t-0"
    stored = build_log(directory, COUNTS)
    first_segment = [b for b in stored if b.segment == stored[0].segment]
    victim = first_segment[2]
    flip(victim.segment, victim.position + MAGIC_BYTE, 0xFF)
    log = open_clean(directory)
    target = decode_batch(first_segment[3].data).base_offset
    with pytest.raises(LogDamageError):
        log.read(target, 1 << 20)
    log.close()


def test_a_body_crc_flip_in_a_sealed_segment_is_cut_by_recovery_from_the_damage(tmp_path):
    # A header walk cannot see a flipped record byte, but recovery of the damaged segment checks
    # CRCs: damage reported anywhere in a segment cuts it at its first bad batch.
    directory = tmp_path / "t-0"
    stored = build_log(directory, COUNTS)
    segments = sorted({b.segment for b in stored})
    in_second = [b for b in stored if b.segment == segments[1]]
    crc_victim, magic_victim = in_second[0], in_second[2]
    flip(crc_victim.segment, crc_victim.end - 1)
    flip(magic_victim.segment, magic_victim.position + MAGIC_BYTE, 0xFF)
    log = open_clean(directory)
    with pytest.raises(LogDamageError) as caught:
        list(log.iter_headers())
    log.recover_from_damage(caught.value)
    assert_log_holds_exactly(log, stored[: stored.index(crc_victim)])
    log.close()


def test_damage_reported_for_a_segment_already_gone_changes_nothing(tmp_path):
    directory = tmp_path / "t-0"
    build_log(directory, COUNTS)
    log = open_clean(directory)
    end = log.log_end_offset
    assert log.recover_from_damage(LogDamageError("gone", 123456, 0)) == 0
    assert log.log_end_offset == end
    log.close()
