"""The data source's option parsing and offset arithmetic, without Spark or a cluster."""

from __future__ import annotations

import pyarrow as pa
import pytest

from epochlog.client.fetch_decoder import ConsumerRecord
from epochlog.spark.offsets import (
    START_KEY,
    MinTriggerGate,
    OffsetRange,
    batch_start,
    from_json,
    ranges_between,
    rate_limit,
    resolve_offsets,
    split_ranges,
    to_json,
)
from epochlog.spark.options import (
    EXACTLY_ONCE,
    OffsetSpec,
    OptionError,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)
from epochlog.spark.rows import arrow_schema, batch_to_records, records_to_batch

BOOT = {"bootstrap.servers": "localhost:9092"}


def source(streaming: bool = True, **opts: str):
    return parse_source_options(
        {**BOOT, **{k.lower(): v for k, v in opts.items()}}, streaming=streaming
    )


# ------------------------------------------------------------------------------ source options


def test_source_needs_exactly_one_of_subscribe_subscribe_pattern_assign() -> None:
    with pytest.raises(OptionError, match="subscribe, subscribePattern or assign"):
        source()
    with pytest.raises(OptionError, match="given: subscribe, assign"):
        source(subscribe="a", assign='{"a":[0]}')


def test_bootstrap_servers_is_required_and_accepted_with_the_kafka_prefix() -> None:
    with pytest.raises(OptionError, match="bootstrap.servers"):
        parse_source_options({"subscribe": "a"}, streaming=True)
    o = parse_source_options(
        {"subscribe": "a", "kafka.bootstrap.servers": "h:1", "kafka.fetch.max.bytes": "1000"},
        streaming=True,
    )
    assert o.client == {"bootstrap.servers": "h:1", "fetch.max.bytes": "1000"}


def test_client_settings_are_checked_by_the_client_and_refused_ones_named() -> None:
    with pytest.raises(OptionError, match="fetch.max.bytes"):
        source(subscribe="a", **{"kafka.fetch.max.bytes": "lots"})
    with pytest.raises(OptionError, match="kafka.enable.auto.commit.*not supported"):
        source(subscribe="a", **{"kafka.enable.auto.commit": "true"})


def test_source_options_parse_like_sparks_kafka_source() -> None:
    o = source(
        subscribePattern="clicks-.*",
        startingOffsets='{"clicks-1":{"0":23,"1":-2}}',
        maxOffsetsPerTrigger="500",
        minOffsetsPerTrigger="10",
        maxTriggerDelay="30s",
        minPartitions="4",
        maxRecordsPerPartition="1000",
        failOnDataLoss="false",
        includeHeaders="true",
    )
    assert o.matches("clicks-1") and not o.matches("views-1")
    assert o.starting == OffsetSpec("offsets", {("clicks-1", 0): 23, ("clicks-1", 1): -2})
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger) == (500, 10)
    assert o.max_trigger_delay_ms == 30_000
    assert (o.min_partitions, o.max_records_per_partition) == (4, 1000)
    assert not o.fail_on_data_loss and o.include_headers


def test_defaults_differ_between_batch_and_streaming_as_in_kafka() -> None:
    assert source(subscribe="a").starting.kind == "latest"
    assert source(streaming=False, subscribe="a").starting.kind == "earliest"
    with pytest.raises(OptionError, match="startingOffsets.*batch"):
        source(streaming=False, subscribe="a", startingOffsets="latest")
    with pytest.raises(OptionError, match="endingOffsets.*batch queries only"):
        source(subscribe="a", endingOffsets="latest")
    with pytest.raises(OptionError, match="endingOffsets.*-2"):
        source(streaming=False, subscribe="a", endingOffsets='{"a":{"0":-2}}')


def test_starting_timestamp_takes_precedence() -> None:
    o = source(subscribe="a", startingTimestamp="1000", startingOffsets="earliest")
    assert o.starting == OffsetSpec("timestamp", timestamp=1000)
    with pytest.raises(OptionError, match="startingTimestamp"):
        source(subscribe="a", startingTimestamp="yesterday")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("assign", "[1,2]"),
        ("assign", '{"a":["x"]}'),
        ("startingOffsets", "{not json"),
        ("maxOffsetsPerTrigger", "0"),
        ("minPartitions", "-1"),
        ("failOnDataLoss", "maybe"),
        ("maxTriggerDelay", "soon"),
        ("subscribePattern", "(unclosed"),
    ],
)
def test_bad_values_name_their_option(option: str, value: str) -> None:
    opts = {"subscribe": "a"} if option not in ("assign", "subscribePattern") else {}
    with pytest.raises(OptionError, match=option):
        source(**opts, **{option: value})


def test_durations() -> None:
    assert parse_duration_ms("x", "15m") == 900_000
    assert parse_duration_ms("x", "250ms") == 250
    assert parse_duration_ms("x", "2h") == 7_200_000
    assert parse_duration_ms("x", "40") == 40


# ------------------------------------------------------------------------------ sink options


def test_sink_requires_a_value_column_and_a_topic() -> None:
    with pytest.raises(OptionError, match="'value' is required"):
        parse_sink_options({**BOOT, "topic": "t"}, {"key": "binary"}, streaming=False)
    with pytest.raises(OptionError, match="no 'topic' column and no topic option"):
        parse_sink_options(BOOT, {"value": "binary"}, streaming=False)
    with pytest.raises(OptionError, match="partition.*int"):
        parse_sink_options(
            {**BOOT, "topic": "t"}, {"value": "binary", "partition": "string"}, streaming=False
        )
    with pytest.raises(OptionError, match="value.*string or binary"):
        parse_sink_options({**BOOT, "topic": "t"}, {"value": "int"}, streaming=False)
    o = parse_sink_options(BOOT, {"value": "string", "topic": "string"}, streaming=False)
    assert o.topic is None


def test_exactly_once_is_for_streaming_and_named_by_the_checkpoint() -> None:
    with pytest.raises(OptionError, match="deliveryGuarantee.*streaming"):
        parse_sink_options(
            {**BOOT, "topic": "t", "deliveryguarantee": EXACTLY_ONCE},
            {"value": "binary"},
            streaming=False,
        )
    o = parse_sink_options(
        {
            **BOOT,
            "topic": "t",
            "deliveryguarantee": EXACTLY_ONCE,
            "checkpointlocation": "file:/tmp/ck/",
        },
        {"value": "binary"},
        streaming=True,
    )
    assert o.sink_location == "file:/tmp/ck/"
    assert o.transactional_id_prefix is None
    assert o.transaction_timeout_ms == 300_000


def test_exactly_once_needs_a_name_for_its_transactions() -> None:
    with pytest.raises(OptionError, match="transactionalIdPrefix.*checkpointLocation"):
        parse_sink_options(
            {**BOOT, "topic": "t", "deliveryguarantee": EXACTLY_ONCE},
            {"value": "binary"},
            streaming=True,
        )
    o = parse_sink_options(
        {
            **BOOT,
            "topic": "t",
            "deliveryguarantee": EXACTLY_ONCE,
            "transactionalidprefix": " orders ",
            "transactiontimeoutms": "90000",
        },
        {"value": "binary"},
        streaming=True,
    )
    assert (o.transactional_id_prefix, o.transaction_timeout_ms) == ("orders", 90_000)
    with pytest.raises(OptionError, match="transactionTimeoutMs"):
        parse_sink_options(
            {**BOOT, "topic": "t", "transactiontimeoutms": "-1"},
            {"value": "binary"},
            streaming=True,
        )


def test_the_source_reads_with_the_isolation_level_given_as_kafka_option() -> None:
    o = parse_source_options(
        {**BOOT, "subscribe": "t", "kafka.isolation.level": "read_committed"}, streaming=True
    )
    assert o.client["isolation.level"] == "read_committed"
    with pytest.raises(OptionError, match="isolation.level"):
        parse_source_options(
            {**BOOT, "subscribe": "t", "kafka.isolation.level": "committed"}, streaming=True
        )


# ------------------------------------------------------------------------------ offsets


def test_offsets_json_round_trip_uses_string_partition_keys() -> None:
    offsets = {("a", 0): 5, ("a", 1): 7, ("b", 0): 0}
    data = to_json(offsets)
    assert data == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}
    assert from_json(data) == offsets


def test_a_batch_starts_where_its_end_says_else_at_its_given_start() -> None:
    end = {"a": {"0": 9}, START_KEY: {"a": {"0": 2}}}
    assert from_json(end) == {("a", 0): 9}  # the carried start is not an offset of the batch
    assert batch_start({"a": {"0": 7}}, end) == {("a", 0): 2}
    assert batch_start({"a": {"0": 7}}, {"a": {"0": 9}}) == {("a", 0): 7}
    assert batch_start(None, {"a": {"0": 9}}) == {}


class _FakeView:
    """The stream reader's cluster lookups, answered from dicts."""

    def __init__(self, options, earliest: dict, latest: dict) -> None:  # noqa: ANN001
        self.options = options
        self.earliest_offsets = earliest
        self.latest_offsets = latest

    def partitions(self) -> list:
        return sorted(self.latest_offsets)

    def earliest(self, tps: list) -> dict:
        return {tp: self.earliest_offsets[tp] for tp in tps}

    def latest(self, tps: list) -> dict:
        return {tp: self.latest_offsets[tp] for tp in tps}

    def for_times(self, stamps: dict) -> dict:
        raise AssertionError("no timestamps here")


def _stream_reader(starting: str, earliest: dict, latest: dict):  # noqa: ANN202
    from epochlog.spark.reader import EpochlogStreamReader

    options = parse_source_options(
        {**BOOT, "subscribe": "t", "startingoffsets": starting}, streaming=True
    )
    reader = EpochlogStreamReader(options)
    reader._view = _FakeView(options, earliest, latest)  # type: ignore[assignment]
    return reader


def test_stream_batch_0_carries_data_and_its_replay_reads_from_the_recorded_start() -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    tps = [("t", 0), ("t", 1)]
    run1 = _stream_reader("latest", dict.fromkeys(tps, 0), {("t", 0): 5, ("t", 1): 8})
    initial = run1.initialOffset()
    assert initial == {"t": {"0": 5, "1": 8}}
    # nothing new yet: an empty batch 0 whose end is the resolved start
    assert run1.latestOffset(initial, ReadAllAvailable()) == initial
    run1.view.latest_offsets = {("t", 0): 9, ("t", 1): 8}  # type: ignore[attr-defined]
    end0 = run1.latestOffset(initial, ReadAllAvailable())
    assert end0 == {"t": {"0": 9, "1": 8}, START_KEY: initial}
    assert [
        (r.partition, r.start, r.end) for r in (p.value for p in run1.partitions(initial, end0))
    ] == [(0, 5, 9)]
    # Restart before batch 0 was committed: initialOffset() resolves `latest` anew (the log
    # grew), Spark passes that as batch 0's start; the records 5..9 are still read.
    run2 = _stream_reader("latest", dict.fromkeys(tps, 0), {("t", 0): 12, ("t", 1): 8})
    again = run2.initialOffset()
    assert again == {"t": {"0": 12, "1": 8}}
    replayed = [
        (r.partition, r.start, r.end) for r in (p.value for p in run2.partitions(again, end0))
    ]
    assert replayed == [(0, 5, 9)]
    # the next batch starts at batch 0's end, and carries no start of its own
    end1 = run2.latestOffset(end0, ReadAllAvailable())
    assert end1 == {"t": {"0": 12, "1": 8}}
    assert [
        (r.partition, r.start, r.end) for r in (p.value for p in run2.partitions(end0, end1))
    ] == [(0, 9, 12)]
    assert run2.latestOffset(end1, ReadAllAvailable()) == end1  # nothing new: no batch


def test_rate_limit_splits_the_budget_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 100}
    latest = {("t", 0): 1000, ("t", 1): 200}
    end = rate_limit(start, latest, 110)
    assert end == {("t", 0): 100, ("t", 1): 110}
    assert rate_limit(start, latest, 5000) == latest
    # a share below one record is rounded up, so small partitions still move
    assert (
        rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 10_000, ("t", 1): 1}, 100)[("t", 1)] == 1
    )


def test_split_ranges_honours_max_records_and_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 10, 10)]
    assert split_ranges(ranges) == [OffsetRange("t", 0, 0, 100)]
    pieces = split_ranges(ranges, max_records=30)
    assert [(r.start, r.end) for r in pieces] == [(0, 25), (25, 50), (50, 75), (75, 100)]
    pieces = split_ranges([OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 0, 10)], 10)
    assert sum(r.size for r in pieces) == 100 and len(pieces) == 10
    covered = sorted((r.partition, r.start, r.end) for r in pieces)
    assert covered[0] == (0, 0, 10) and covered[-1] == (1, 0, 10)


def test_ranges_between_skip_replayed_empty_batches_and_start_new_partitions_early() -> None:
    start = {("t", 0): 50, ("t", 1): 10}
    end = {("t", 0): 40, ("t", 1): 20, ("t", 2): 5}
    assert ranges_between(start, end) == [
        OffsetRange("t", 1, 10, 20),
        OffsetRange("t", 2, -2, 5),
    ]


def _lookups(earliest: dict, latest: dict, times: dict):
    return (
        lambda tps: {tp: earliest[tp] for tp in tps},
        lambda tps: {tp: latest[tp] for tp in tps},
        lambda stamps: {tp: times.get((tp, ts)) for tp, ts in stamps.items()},
    )


def test_resolve_offsets_for_every_kind_of_spec() -> None:
    tps = [("t", 0), ("t", 1)]
    early, late, times = _lookups(
        {("t", 0): 3, ("t", 1): 0}, {("t", 0): 90, ("t", 1): 80}, {(("t", 0), 500): 40}
    )

    def resolve(spec: OffsetSpec, strategy: str = "error") -> dict:
        return resolve_offsets(
            spec, tps, early, late, times, option="startingX", timestamp_strategy=strategy
        )

    assert resolve(OffsetSpec("earliest")) == {("t", 0): 3, ("t", 1): 0}
    assert resolve(OffsetSpec("latest")) == {("t", 0): 90, ("t", 1): 80}
    assert resolve(OffsetSpec("offsets", {("t", 0): -2, ("t", 1): 7})) == {("t", 0): 3, ("t", 1): 7}
    with pytest.raises(OptionError, match="gives no offset for t-1"):
        resolve(OffsetSpec("offsets", {("t", 0): 5}))
    with pytest.raises(OptionError, match="t-9"):
        resolve(OffsetSpec("offsets", {("t", 0): 5, ("t", 1): 5, ("t", 9): 1}))
    with pytest.raises(OptionError, match="no record at or after the timestamp in t-1"):
        resolve(OffsetSpec("timestamp", timestamp=500))
    assert resolve(OffsetSpec("timestamp", timestamp=500), "latest") == {("t", 0): 40, ("t", 1): 80}


def test_min_trigger_gate_waits_for_enough_records_or_the_delay() -> None:
    gate = MinTriggerGate(100, 1000)
    assert gate.admit(50, now_ms=10)  # the run's first batch: no wait (Spark's rule)
    assert not gate.admit(50, now_ms=15)
    assert gate.admit(100, now_ms=20)
    assert not gate.admit(10, now_ms=500)
    assert gate.admit(10, now_ms=1020)
    assert not gate.admit(0, now_ms=5000)
    assert MinTriggerGate(None, 0).admit(1, 0)


# ------------------------------------------------------------------------------ rows


def test_records_become_an_arrow_batch_with_sparks_types() -> None:
    records = [
        ConsumerRecord("t", 1, 7, 1_700_000_000_123, b"k", b"v", [("h", b"x")], 0),
        ConsumerRecord("t", 1, 8, 1_700_000_000_124, None, None, [], 1),
    ]
    batch = records_to_batch(records, arrow_schema(True), True)
    assert batch.schema == arrow_schema(True)
    rows = batch.to_pylist()
    assert rows[0]["offset"] == 7 and rows[0]["partition"] == 1
    assert rows[0]["timestamp"].timestamp() == pytest.approx(1_700_000_000.123)
    assert rows[0]["headers"] == [{"key": "h", "value": b"x"}]
    assert rows[1]["key"] is None and rows[1]["timestampType"] == 1


def test_sink_rows_take_the_topic_option_over_the_column() -> None:
    batch = pa.RecordBatch.from_pydict(
        {"value": ["a", "b"], "topic": ["x", "y"], "partition": pa.array([None, 2], pa.int32())}
    )
    assert list(batch_to_records(batch, None)) == [
        ("x", b"a", None, [], None),
        ("y", b"b", None, [], 2),
    ]
    assert [r[0] for r in batch_to_records(batch, "z")] == ["z", "z"]
