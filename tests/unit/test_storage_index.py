"""Offset and time indexes: Kafka's entry formats, lookups, truncation and the load-time check."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from epochlog.storage.errors import CorruptIndexError
from epochlog.storage.index import OffsetIndex, TimeIndex

BASE = 1000


def offset_index(tmp_path: Path, max_bytes: int = 1024) -> OffsetIndex:
    return OffsetIndex(tmp_path / "00000000000000001000.index", BASE, max_bytes)


def time_index(tmp_path: Path, max_bytes: int = 1024) -> TimeIndex:
    return TimeIndex(tmp_path / "00000000000000001000.timeindex", BASE, max_bytes)


def test_offset_index_entries_are_relative_offset_and_position_big_endian(tmp_path):
    index = offset_index(tmp_path)
    index.append(1004, 0)
    index.append(1010, 4200)
    index.close()
    assert index.path.read_bytes() == struct.pack(">iiii", 4, 0, 10, 4200)
    reloaded = offset_index(tmp_path)
    assert reloaded.last_entry == (1010, 4200)
    reloaded.sanity_check(segment_size=5000)


def test_offset_index_lookup_is_the_largest_entry_at_or_below(tmp_path):
    index = offset_index(tmp_path)
    for offset, position in [(1002, 100), (1005, 300), (1009, 700)]:
        index.append(offset, position)
    assert index.lookup(1001) is None
    assert index.lookup(1002) == (1002, 100)
    assert index.lookup(1008) == (1005, 300)
    assert index.lookup(5000) == (1009, 700)
    assert index.floor_position(299) == 100 and index.floor_position(99) is None


def test_offset_index_refuses_entries_that_do_not_ascend(tmp_path):
    index = offset_index(tmp_path)
    index.append(1005, 300)
    with pytest.raises(CorruptIndexError):
        index.append(1005, 400)
    with pytest.raises(CorruptIndexError):
        index.append(1006, 300)
    with pytest.raises(CorruptIndexError):
        index.append(999, 500)


def test_a_full_offset_index_skips_entries(tmp_path):
    index = offset_index(tmp_path, max_bytes=16)
    for i in range(5):
        index.append(BASE + i, i * 100)
    assert len(index) == 2 and index.is_full
    assert index.path.stat().st_size == 16


def test_offset_index_truncation_removes_entries_at_and_above_the_offset(tmp_path):
    index = offset_index(tmp_path)
    for i in range(1, 6):
        index.append(BASE + i * 10, i * 100)
    index.truncate_to(1030)
    assert index.last_entry == (1020, 200)
    assert index.path.stat().st_size == 16
    index.append(1025, 250)  # appends land after the cut
    index.close()
    assert offset_index(tmp_path).last_entry == (1025, 250)


@pytest.mark.parametrize(
    "content",
    [
        b"\x00" * 7,  # not whole entries
        struct.pack(">iiii", 5, 100, 4, 200),  # offsets go down
        struct.pack(">iiii", 4, 200, 5, 100),  # positions go down
        struct.pack(">ii", -1, 0),  # below the base offset
        struct.pack(">ii", 3, 99_999),  # beyond the segment
    ],
)
def test_offset_index_sanity_check_catches_damage(tmp_path, content):
    (tmp_path / "00000000000000001000.index").write_bytes(content)
    with pytest.raises(CorruptIndexError):
        offset_index(tmp_path).sanity_check(segment_size=5000)


def test_time_index_keeps_only_growing_timestamps(tmp_path):
    index = time_index(tmp_path)
    index.maybe_append(500, 1003)
    index.maybe_append(500, 1004)
    index.maybe_append(400, 1005)
    index.maybe_append(900, 1007)
    assert (len(index), index.last_entry) == (2, (900, 1007))
    index.close()
    assert index.path.read_bytes() == struct.pack(">qiqi", 500, 3, 900, 7)


def test_time_index_lookup_is_strictly_below_the_target(tmp_path):
    index = time_index(tmp_path)
    for ts, offset in [(100, 1001), (200, 1004), (300, 1009)]:
        index.maybe_append(ts, offset)
    assert index.last_entry_before(100) is None
    assert index.last_entry_before(101) == (100, 1001)
    assert index.last_entry_before(300) == (200, 1004)
    assert index.last_entry_before(10**12) == (300, 1009)


def test_time_index_truncation_and_sanity_check(tmp_path):
    index = time_index(tmp_path)
    for ts, offset in [(100, 1001), (200, 1004), (300, 1009)]:
        index.maybe_append(ts, offset)
    index.truncate_to(1004)
    assert index.last_entry == (100, 1001)
    index.close()
    path = tmp_path / "00000000000000001000.timeindex"
    time_index(tmp_path).sanity_check(last_offset=1001)
    with pytest.raises(CorruptIndexError):
        time_index(tmp_path).sanity_check(last_offset=1000)  # an offset past the segment
    path.write_bytes(struct.pack(">qiqi", 200, 1, 100, 2))
    with pytest.raises(CorruptIndexError):
        time_index(tmp_path).sanity_check(last_offset=2000)


def test_entries_reach_the_file_in_groups_and_all_at_flush(tmp_path):
    from epochlog.storage.index import PENDING_ENTRIES

    index = offset_index(tmp_path, max_bytes=8 * (PENDING_ENTRIES * 3))
    for i in range(PENDING_ENTRIES + 5):
        index.append(BASE + i, i * 100)
    # One group written, five entries still pending: a crash now keeps a consistent prefix.
    assert index.path.stat().st_size == 8 * PENDING_ENTRIES
    crashed = offset_index(tmp_path, max_bytes=8 * (PENDING_ENTRIES * 3))
    crashed.sanity_check(segment_size=10**6)
    assert crashed.last_entry == (BASE + PENDING_ENTRIES - 1, (PENDING_ENTRIES - 1) * 100)
    assert index.lookup(BASE + 10**6) == (BASE + PENDING_ENTRIES + 4, (PENDING_ENTRIES + 4) * 100)
    index.flush()
    assert index.path.stat().st_size == 8 * (PENDING_ENTRIES + 5)
    index.append(BASE + 10**5, 10**7)
    index.truncate_to(BASE + 3)  # pending entries are written before the cut
    assert index.path.stat().st_size == 8 * 3 and len(index) == 3
