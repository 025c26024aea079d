"""epochlog.spark.lag: Spark's Kafka source's offsets-behind-latest figures from a progress's
endOffset and latestOffset, and the source's data-loss counts."""

from __future__ import annotations

import json

from epochlog.spark.lag import (
    DATA_LOSS_KEY,
    DataLossCounter,
    offsets_behind_latest,
    source_lag,
    source_metrics,
)


def test_min_max_avg_over_the_partitions_of_latest() -> None:
    end = {"a": {"0": 5, "1": 10}, "$start": {"a": {"0": 0, "1": 0}}}
    latest = {"a": {"0": 100, "1": 10, "2": 7}}  # "2" not in the end: behind by all of it
    assert offsets_behind_latest(end, latest) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "95",
        "avgOffsetsBehindLatest": str(102 / 3),
    }


def test_no_latest_partitions_no_figures() -> None:
    assert offsets_behind_latest({"a": {"0": 1}}, {}) == {}
    assert source_metrics(None, None) == {}
    assert source_metrics('{"a": {"0": 1}}', "not json") == {}


def test_data_loss_counts_come_with_the_latest_offsets() -> None:
    latest = {"a": {"0": 10}, DATA_LOSS_KEY: {"dataLoss": 2, "offsetOutOfRange": 50}}
    assert source_metrics(json.dumps({"a": {"0": 4}}), json.dumps(latest)) == {
        "minOffsetsBehindLatest": "6",
        "maxOffsetsBehindLatest": "6",
        "avgOffsetsBehindLatest": "6.0",
        "dataLoss": "2",
        "offsetOutOfRange": "50",
    }


def test_source_lag_reads_last_progress_dicts() -> None:
    progress = {
        "sources": [
            {"endOffset": '{"a": {"0": 3}}', "latestOffset": '{"a": {"0": 3}}'},
            {"endOffset": "42", "latestOffset": None},  # another source's format
        ]
    }
    assert source_lag(progress) == [
        {
            "minOffsetsBehindLatest": "0",
            "maxOffsetsBehindLatest": "0",
            "avgOffsetsBehindLatest": "0.0",
        },
        {},
    ]


def test_retention_below_the_next_offset_counts_once() -> None:
    counter = DataLossCounter()
    tp = ("a", 0)
    counter.observe({tp: 100}, {tp: 150}, {tp: 200})
    assert counter.report() == {"dataLoss": 1, "offsetOutOfRange": 50}
    counter.observe({tp: 105}, {tp: 150}, {tp: 200})  # a rate-limited batch still below it
    assert counter.report() == {"dataLoss": 1, "offsetOutOfRange": 50}
    counter.observe({tp: 110}, {tp: 160}, {tp: 200})  # retention moved on: 10 more
    assert counter.report() == {"dataLoss": 2, "offsetOutOfRange": 60}
    counter.observe({tp: 160}, {tp: 160}, {tp: 200})  # caught up: nothing lost
    assert counter.report() == {"dataLoss": 2, "offsetOutOfRange": 60}


def test_vanished_partition_and_truncation_are_events() -> None:
    counter = DataLossCounter()
    gone, cut = ("a", 1), ("a", 0)
    counter.observe({gone: 5, cut: 50}, {cut: 0}, {cut: 40})
    counter.observe({gone: 5, cut: 40}, {cut: 0}, {cut: 45})  # gone again: counted once
    assert counter.report() == {"dataLoss": 2, "offsetOutOfRange": 0}


def test_nothing_lost_nothing_counted() -> None:
    counter = DataLossCounter()
    counter.observe({("a", 0): 0}, {("a", 0): 0}, {("a", 0): 10})
    assert counter.report() == {"dataLoss": 0, "offsetOutOfRange": 0}
