"""Compaction decisions and the batch filter, without files (storage/compaction.py)."""

from __future__ import annotations

import pytest

from epochlog.protocol.compression import Compression
from epochlog.protocol.records import (
    DELETE_HORIZON_MASK,
    RecordBatchBuilder,
    decode_batch,
    parse_batch_header,
)
from epochlog.storage.compaction import (
    CleanableRange,
    CleaningCandidate,
    CompactionConfig,
    OffsetMap,
    SegmentSummary,
    add_batch_to_offset_map,
    build_offset_map,
    choose_log_to_clean,
    cleanable_range,
    filter_batch,
    group_segments,
    overdue_for_compaction,
    producers_last_batches,
    scan_records,
)

DAY = 86_400_000


def batch(records, base_offset=10, compression=Compression.NONE, producer_id=-1) -> bytes:
    builder = RecordBatchBuilder(
        compression, base_offset=base_offset, producer_id=producer_id, producer_epoch=0
    )
    for timestamp, key, value in records:
        builder.append(timestamp, key, value)
    return builder.build()


def offsets_map(**latest: int) -> OffsetMap:
    m = OffsetMap(100)
    for key, offset in latest.items():
        m.put(key.encode(), offset)
    return m


@pytest.mark.parametrize("compression", list(Compression))
def test_a_batch_keeps_each_keys_latest_record_at_its_original_offset(compression) -> None:
    data = batch(
        [(1000, b"a", b"1"), (1001, b"b", b"2"), (1002, b"a", b"3"), (1003, b"c", b"4")],
        compression=compression,
    )
    result = filter_batch(data, 0, offsets_map(a=12, b=11, c=13), 5000, DAY)
    assert (result.retained, result.removed) == (3, 1)
    rebuilt = decode_batch(result.data)  # checks the CRC too
    assert [(r.offset, r.key, r.value, r.timestamp) for r in rebuilt.records] == [
        (11, b"b", b"2", 1001),
        (12, b"a", b"3", 1002),
        (13, b"c", b"4", 1003),
    ]
    header = rebuilt.header
    assert (header.base_offset, header.last_offset_delta) == (10, 3)  # offsets do not move
    assert header.compression is compression


def test_a_batch_that_loses_nothing_is_returned_as_it_was() -> None:
    data = batch([(1, b"a", b"1"), (2, b"b", b"2")])
    result = filter_batch(data, 0, offsets_map(a=10, b=11), 5, DAY)
    assert result.data == data


def test_superseded_records_in_a_later_batch_are_dropped_and_an_emptied_batch_goes() -> None:
    old = batch([(1, b"a", b"1"), (2, b"b", b"1")], base_offset=0)
    assert filter_batch(old, 0, offsets_map(a=7, b=8), 10, DAY).data is None
    kept = filter_batch(old, 0, offsets_map(a=7, b=8), 10, DAY, retain_empty=True)
    header = parse_batch_header(kept.data)
    assert (header.records_count, header.base_offset, header.last_offset_delta) == (0, 0, 1)
    assert decode_batch(kept.data).records == []


def test_tombstones_stay_for_delete_retention_then_go_kip534() -> None:
    data = batch([(1000, b"a", None), (1001, b"b", b"x")])
    first = filter_batch(data, 0, offsets_map(a=10, b=11), 5000, DAY)
    header = parse_batch_header(first.data)
    assert header.attributes & DELETE_HORIZON_MASK
    assert header.base_timestamp == 5000 + DAY
    records = decode_batch(first.data).records
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (b"a", None, 1000),
        (b"b", b"x", 1001),
    ]
    # Before the horizon a second pass keeps the tombstone and leaves the batch as it is.
    again = filter_batch(first.data, 0, offsets_map(a=10, b=11), 5000 + DAY - 1, DAY)
    assert again.data == first.data
    later = filter_batch(first.data, 0, offsets_map(a=10, b=11), 5000 + DAY, DAY)
    assert [r.key for r in decode_batch(later.data).records] == [b"b"]
    assert not parse_batch_header(later.data).attributes & DELETE_HORIZON_MASK


def test_keyless_records_are_not_kept() -> None:
    data = batch([(1, None, b"x"), (2, b"k", b"y")])
    result = filter_batch(data, 0, offsets_map(k=11), 5, DAY)
    assert [r.offset for r in decode_batch(result.data).records] == [11]


def test_the_offset_map_is_bounded_and_the_pass_stops_where_it_filled() -> None:
    batches = [
        decode_batch(batch([(1, b"a", b""), (2, b"b", b"")], base_offset=0)),
        decode_batch(batch([(3, b"c", b""), (4, b"a", b"")], base_offset=2)),
    ]
    m = OffsetMap(2)
    end = build_offset_map(((b.header, b.records) for b in batches), m, stop_offset=100)
    assert end == 2  # the second batch's new key did not fit: it waits for the next pass
    assert (m.latest(b"a"), m.latest(b"b"), m.latest(b"c")) == (0, 1, None)
    roomy = OffsetMap(10)
    assert build_offset_map(((b.header, b.records) for b in batches), roomy, 100) == 100
    assert roomy.latest(b"a") == 3


def seg(base: int, end: int, size: int = 1000, first_ts: int = 0, max_ts: int = 0):
    return SegmentSummary(base, end, size, first_ts, max_ts)


def test_the_active_segment_is_never_cleanable() -> None:
    segments = [seg(0, 100), seg(100, 200), seg(200, 250)]
    cleanable = cleanable_range(segments, None, 0, CompactionConfig(), now_ms=10)
    assert (cleanable.first_dirty, cleanable.first_uncleanable) == (0, 200)
    assert (cleanable.clean_bytes, cleanable.dirty_bytes) == (0, 2000)


def test_the_checkpoint_splits_clean_from_dirty() -> None:
    segments = [seg(0, 100), seg(100, 200), seg(200, 300), seg(300, 301)]
    cleanable = cleanable_range(segments, 100, 0, CompactionConfig(), now_ms=10)
    assert (cleanable.first_dirty, cleanable.clean_bytes, cleanable.dirty_bytes) == (
        100,
        1000,
        2000,
    )
    assert cleanable.dirty_ratio == pytest.approx(2 / 3)


def test_min_compaction_lag_keeps_young_segments_dirty() -> None:
    segments = [seg(0, 100, max_ts=1000), seg(100, 200, max_ts=9000), seg(200, 201)]
    config = CompactionConfig(min_compaction_lag_ms=5000)
    cleanable = cleanable_range(segments, None, 0, config, now_ms=10_000)
    assert cleanable.first_uncleanable == 100


def test_max_compaction_lag_makes_a_log_overdue_whatever_its_ratio() -> None:
    segments = [seg(0, 100, first_ts=1000), seg(100, 101)]
    config = CompactionConfig(max_compaction_lag_ms=5000)
    cleanable = cleanable_range(segments, None, 0, config, now_ms=7000)
    assert overdue_for_compaction(segments, cleanable, config, 7000)
    assert not overdue_for_compaction(segments, cleanable, config, 5000)
    assert not overdue_for_compaction(segments, cleanable, CompactionConfig(), 10**12)


def test_the_filthiest_log_over_its_ratio_is_cleaned_first_and_overdue_logs_before_it() -> None:
    def candidate(name, clean, dirty, overdue=False, ratio=0.5):
        return CleaningCandidate(name, CleanableRange(0, 0, clean, dirty), overdue, ratio)

    assert choose_log_to_clean([candidate("a", 600, 400), candidate("b", 100, 100)]).name == "b"
    assert choose_log_to_clean([candidate("a", 600, 400)]) is None  # 0.4 < 0.5
    picked = choose_log_to_clean([candidate("a", 900, 10, overdue=True), candidate("b", 0, 10)])
    assert picked.name == "a"
    assert choose_log_to_clean([candidate("a", 10, 0, overdue=True)]) is None  # nothing dirty


def test_nothing_reaching_past_the_high_watermark_is_cleanable() -> None:
    segments = [seg(0, 100), seg(100, 200), seg(200, 300), seg(300, 301)]
    cleanable = cleanable_range(segments, None, 0, CompactionConfig(), 10, high_watermark=150)
    assert cleanable.first_uncleanable == 100
    assert cleanable_range(segments, None, 0, CompactionConfig(), 10, 300).first_uncleanable == 300


def test_segments_are_grouped_up_to_a_segments_size() -> None:
    segments = [seg(0, 10, 400), seg(10, 20, 400), seg(20, 30, 400), seg(30, 40, 900)]
    assert group_segments(segments, 1000, 10**6) == [[0, 1], [2], [3]]
    assert group_segments(segments, 10**6, 24, [12, 12, 12, 12]) == [[0, 1], [2, 3]]
    assert group_segments([seg(0, 2**31 + 5), seg(2**31 + 5, 2**31 + 9)], 10**9, 10**9) == [
        [0],
        [1],
    ]


def test_the_record_scan_finds_keys_tombstones_and_each_records_bytes() -> None:
    data = batch([(1, b"a", b"1"), (2, None, b"2"), (3, b"c", None)])
    spans = scan_records(data[61:], 3)
    assert [(s[2], s[3], s[4], s[5]) for s in spans] == [
        (0, 0, b"a", False),
        (1, 1, None, False),
        (2, 2, b"c", True),
    ]
    assert spans[0][0] == 0 and spans[-1][1] == len(data) - 61


def test_kept_records_are_copied_byte_for_byte() -> None:
    data = batch([(1, b"a", b"1"), (2, b"b", b"2"), (3, b"a", b"3")])
    result = filter_batch(data, 0, offsets_map(a=12, b=11), 5, DAY)
    body = data[61:]
    spans = scan_records(body, 3)
    assert result.data[61:] == body[spans[1][0] : spans[2][1]]
    assert parse_batch_header(result.data).base_timestamp == 1


def test_the_offset_map_fills_from_raw_batches_and_stops_where_it_is_full() -> None:
    first = batch([(1, b"a", b""), (2, b"b", b"")], base_offset=0)
    second = batch([(3, b"c", b""), (4, b"a", b"")], base_offset=2)
    m = OffsetMap(2)
    assert add_batch_to_offset_map(first[61:], parse_batch_header(first), m, 100) is None
    assert add_batch_to_offset_map(second[61:], parse_batch_header(second), m, 100) == 2
    roomy = OffsetMap(10)
    assert add_batch_to_offset_map(second[61:], parse_batch_header(second), roomy, 3) == 3
    assert roomy.latest(b"c") == 2 and roomy.latest(b"a") is None


def test_each_producers_last_batch_is_found_from_headers() -> None:
    headers = [
        parse_batch_header(batch([(1, b"a", b"")], base_offset=0, producer_id=5)),
        parse_batch_header(batch([(1, b"a", b""), (1, b"b", b"")], base_offset=1, producer_id=6)),
        parse_batch_header(batch([(1, b"a", b"")], base_offset=3, producer_id=5)),
        parse_batch_header(batch([(1, b"a", b"")], base_offset=4)),
    ]
    assert producers_last_batches(headers) == {5: 3, 6: 2}
