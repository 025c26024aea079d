"""The leader epoch cache's rules, branch by branch (Kafka's LeaderEpochFileCache)."""

from __future__ import annotations

import pytest

from epochlog.storage.epoch_cache import EpochEntry, LeaderEpochCache


def cache_of(*pairs: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache([EpochEntry(e, o) for e, o in pairs])


def test_assign_appends_a_newer_epoch_and_reports_the_change():
    changes: list[list[EpochEntry]] = []
    cache = LeaderEpochCache(on_change=changes.append)
    assert cache.assign(0, 0) is True
    assert cache.assign(2, 10) is True
    assert cache.entries == [(0, 0), (2, 10)]
    assert cache.latest_epoch == 2
    assert cache.earliest_entry == (0, 0)
    assert changes == [[(0, 0)], [(0, 0), (2, 10)]]


def test_assign_of_the_latest_epoch_at_a_later_offset_changes_nothing():
    changes: list[list[EpochEntry]] = []
    cache = LeaderEpochCache([(1, 5)], on_change=changes.append)
    assert cache.assign(1, 5) is False
    assert cache.assign(1, 9) is False
    assert cache.entries == [(1, 5)]
    assert changes == []


def test_assign_of_the_latest_epoch_at_an_earlier_offset_moves_its_start():
    cache = cache_of((0, 0), (1, 5))
    assert cache.assign(1, 3) is True
    assert cache.entries == [(0, 0), (1, 3)]


def test_assign_of_an_older_epoch_truncates_the_conflicting_entries():
    # The log is the truth: a batch of epoch 2 at offset 15 means epochs 3 and 4 never held it.
    cache = cache_of((1, 0), (3, 10), (4, 20))
    assert cache.assign(2, 15) is True
    assert cache.entries == [(1, 0), (2, 15)]


def test_assign_at_an_offset_below_an_older_entry_removes_that_entry_too():
    cache = cache_of((1, 0), (3, 10))
    assert cache.assign(5, 8) is True
    assert cache.entries == [(1, 0), (5, 8)]


@pytest.mark.parametrize(("epoch", "offset"), [(-1, 0), (0, -1)])
def test_assign_refuses_negative_values(epoch, offset):
    with pytest.raises(ValueError, match="invalid leader epoch entry"):
        LeaderEpochCache().assign(epoch, offset)


def test_loading_out_of_order_entries_keeps_the_cache_monotonic():
    cache = cache_of((0, 0), (2, 20), (1, 10))
    assert cache.entries == [(0, 0), (1, 10)]


# ----------------------------------------------------------------------------- end_offset_for


def test_end_offset_for_undefined_epoch_is_undefined():
    assert cache_of((1, 0)).end_offset_for(-1, 100) == (-1, -1)


def test_end_offset_for_the_latest_epoch_is_the_log_end_offset():
    assert cache_of((1, 0), (3, 10)).end_offset_for(3, 42) == (3, 42)


def test_end_offset_for_an_epoch_above_all_known_is_undefined():
    assert cache_of((1, 0), (3, 10)).end_offset_for(7, 42) == (-1, -1)


def test_end_offset_for_an_empty_cache_is_undefined():
    assert LeaderEpochCache().end_offset_for(0, 42) == (-1, -1)


def test_end_offset_for_an_epoch_below_all_known_is_the_first_start():
    assert cache_of((4, 30), (6, 50)).end_offset_for(2, 99) == (2, 30)


def test_end_offset_for_a_known_older_epoch_is_the_next_epochs_start():
    assert cache_of((1, 0), (3, 10), (5, 20)).end_offset_for(3, 99) == (3, 20)


def test_end_offset_for_a_missing_epoch_between_two_is_the_floor_epoch_and_next_start():
    cache = cache_of((1, 0), (3, 10), (5, 20))
    assert cache.end_offset_for(2, 99) == (1, 10)
    assert cache.end_offset_for(4, 99) == (3, 20)


def test_epoch_for_offset_finds_the_epoch_whose_range_holds_it():
    cache = cache_of((1, 5), (3, 10))
    assert cache.epoch_for_offset(4) is None
    assert cache.epoch_for_offset(5) == 1
    assert cache.epoch_for_offset(9) == 1
    assert cache.epoch_for_offset(10) == 3
    assert cache.epoch_for_offset(1000) == 3


# ------------------------------------------------------------------------------- truncation


def test_truncate_from_end_drops_entries_starting_at_or_after_the_offset():
    changes: list[list[EpochEntry]] = []
    cache = LeaderEpochCache([(0, 0), (1, 10), (2, 20)], on_change=changes.append)
    cache.truncate_from_end(20)
    assert cache.entries == [(0, 0), (1, 10)]
    cache.truncate_from_end(11)
    assert cache.entries == [(0, 0), (1, 10)]
    assert len(changes) == 1  # the second call removed nothing and wrote nothing
    cache.truncate_from_end(0)
    assert cache.entries == []


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (5, [(0, 5), (1, 10), (2, 20)]),
        (10, [(1, 10), (2, 20)]),
        (15, [(1, 15), (2, 20)]),
        (25, [(2, 25)]),
    ],
)
def test_truncate_from_start_folds_older_entries_into_the_new_start(start, expected):
    cache = cache_of((0, 0), (1, 10), (2, 20))
    cache.truncate_from_start(start)
    assert cache.entries == expected


def test_truncate_from_start_before_the_first_entry_changes_nothing():
    changes: list[list[EpochEntry]] = []
    cache = LeaderEpochCache([(3, 100)], on_change=changes.append)
    cache.truncate_from_start(50)
    assert cache.entries == [(3, 100)]
    assert changes == []


def test_clear_empties_the_cache_and_reports_it_once():
    changes: list[list[EpochEntry]] = []
    cache = LeaderEpochCache([(3, 100)], on_change=changes.append)
    cache.clear()
    cache.clear()
    assert cache.entries == [] and cache.latest_epoch is None
    assert changes == [[]]
