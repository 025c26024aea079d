"""Parity with Spark's Kafka source and sink (issue 18): one test per option or row of the
issue that needs no cluster. The ones that need Spark and a cluster are in
tests/integration/test_spark_parity.py."""

from __future__ import annotations

import logging

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from epochlog.spark import network_timeout_ms
from epochlog.spark.clients import DataLossError
from epochlog.spark.java_regex import JavaRegexError, compile_java, find_in
from epochlog.spark.offsets import resolve_offsets
from epochlog.spark.options import OffsetSpec, OptionError, parse_source_options
from epochlog.spark.source import EpochlogDataSource, check_source_schema

BOOT = {"bootstrap.servers": "localhost:9092"}


def source(streaming: bool = True, **opts: str):  # noqa: ANN201
    return parse_source_options(
        {**BOOT, **{k.lower(): v for k, v in opts.items()}}, streaming=streaming
    )


# ------------------------------------------------------------------ kafka.* pass-through


def test_unknown_kafka_keys_are_warned_about_by_name_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="epochlog.spark.options"):
        o = source(
            subscribe="t",
            **{"kafka.sasl.login.class": "x", "kafka.fetch.max.bytes": "1000"},
        )
    assert o.client == {"bootstrap.servers": "localhost:9092", "fetch.max.bytes": "1000"}
    assert "kafka.sasl.login.class" in caplog.text


def test_kafka_security_protocol_plaintext_is_accepted() -> None:
    o = source(subscribe="t", **{"kafka.security.protocol": "PLAINTEXT"})
    assert o.subscribe == ("t",)


@pytest.mark.parametrize(
    "key",
    ["kafka.auto.offset.reset", "kafka.enable.auto.commit", "kafka.key.deserializer"],
)
def test_client_keys_spark_refuses_are_refused_by_name(key: str) -> None:
    with pytest.raises(OptionError, match=f"{key}.*not supported"):
        source(subscribe="t", **{key: "x"})


# ------------------------------------------------------------------ subscribePattern


@pytest.mark.parametrize(
    ("pattern", "topic", "found"),
    [
        ("orders", "orders-eu", True),  # findFirstIn: anywhere in the name
        ("^orders$", "orders-eu", False),
        ("orders\\z", "orders", True),
        ("\\Qa.b\\E", "a.b-x", True),
        ("\\Qa.b\\E", "axb", False),
        ("(?<region>eu|us)-\\k<region>", "x-eu-eu", True),
        ("(?i)ORDERS", "orders", True),
        ("\\d+", "t٣", False),  # Java's \d is ASCII
    ],
)
def test_subscribe_pattern_is_a_java_regex_found_within_the_name(
    pattern: str, topic: str, found: bool
) -> None:
    assert find_in(compile_java(pattern), topic) is found
    assert source(subscribePattern=pattern).matches(topic) is found


@pytest.mark.parametrize(
    "pattern", ["\\p{Alpha}+", "[a-z&&[^b]]", "[a[bc]]", "a(?i)b", "(?x)a b", "\\h", "\\x{41}"]
)
def test_java_constructs_python_reads_differently_are_refused(pattern: str) -> None:
    with pytest.raises(JavaRegexError):
        compile_java(pattern)
    with pytest.raises(OptionError, match="subscribePattern"):
        source(subscribePattern=pattern)


# ------------------------------------------------------------------ groups, retries, timeouts


def test_kafka_group_id_names_the_progress_group_and_is_not_a_client_setting() -> None:
    o = source(subscribe="t", **{"kafka.group.id": "g1"})
    assert o.commit_group() == "g1"
    assert "group.id" not in o.client


def test_group_id_prefix_makes_a_fresh_group_per_run_and_no_option_no_group() -> None:
    o = source(subscribe="t", groupIdPrefix="etl")
    first, second = o.commit_group(), o.commit_group()
    assert first is not None and first.startswith("etl-") and first != second
    assert source(subscribe="t").commit_group() is None
    with pytest.raises(OptionError, match="groupIdPrefix"):
        source(subscribe="t", groupIdPrefix=" ")


def test_fetch_offset_retries_are_parsed_with_sparks_defaults() -> None:
    o = source(subscribe="t")
    assert (o.fetch_offset_num_retries, o.fetch_offset_retry_interval_ms) == (3, 1000)
    o = source(subscribe="t", **{"fetchOffset.numRetries": "0", "fetchOffset.retryIntervalMs": "5"})
    assert (o.fetch_offset_num_retries, o.fetch_offset_retry_interval_ms) == (0, 5)
    with pytest.raises(OptionError, match="fetchOffset.numRetries"):
        source(subscribe="t", **{"fetchOffset.numRetries": "-1"})


def test_poll_timeout_defaults_to_spark_network_timeout() -> None:
    assert source(subscribe="t").poll_timeout_ms == 120_000
    o = parse_source_options({**BOOT, "subscribe": "t"}, streaming=True, network_timeout_ms=7000)
    assert o.poll_timeout_ms == 7000
    o = parse_source_options(
        {**BOOT, "subscribe": "t", "kafkaconsumer.polltimeoutms": "300"},
        streaming=True,
        network_timeout_ms=7000,
    )
    assert o.poll_timeout_ms == 300
    assert network_timeout_ms("60") == 60_000  # a bare number is seconds, as in Spark
    assert network_timeout_ms("2min") == 120_000


# ------------------------------------------------------------------ offsets


def _lookups():  # noqa: ANN202
    return (lambda tps: dict.fromkeys(tps, 0), lambda tps: dict.fromkeys(tps, 10), lambda s: {})


def test_ending_offsets_json_missing_a_partition_fails() -> None:
    earliest, latest, times = _lookups()
    spec = OffsetSpec("offsets", offsets={("t", 0): 5})
    with pytest.raises(OptionError, match="endingOffsets.*t-1"):
        resolve_offsets(spec, [("t", 0), ("t", 1)], earliest, latest, times, option="endingOffsets")


def test_batch_refuses_latest_in_starting_offsets_json() -> None:
    with pytest.raises(OptionError, match="startingOffsets.*-1"):
        source(streaming=False, subscribe="t", startingOffsets='{"t":{"0":-1}}')
    assert source(streaming=True, subscribe="t", startingOffsets='{"t":{"0":-1}}')


def test_min_offsets_above_max_offsets_is_refused() -> None:
    with pytest.raises(OptionError, match="minOffsetsPerTrigger.*higher"):
        source(subscribe="t", minOffsetsPerTrigger="100", maxOffsetsPerTrigger="10")


# ------------------------------------------------------------------ schema, save modes


def _schema(*extra: StructField) -> StructType:
    return StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType()),
            *extra,
        ]
    )


def test_a_user_schema_is_refused() -> None:
    check_source_schema(_schema(), include_headers=False)  # ours, as pyspark passes it
    with pytest.raises(OptionError, match="fixed schema"):
        check_source_schema(StructType([StructField("value", StringType())]), False)


def test_batch_overwrite_is_refused() -> None:
    ds = EpochlogDataSource({**BOOT, "topic": "t"})
    with pytest.raises(OptionError, match="Overwrite is not allowed"):
        ds.writer(StructType([StructField("value", BinaryType())]), overwrite=True)


# ------------------------------------------------------------------ the stream reader


class _View:
    def __init__(self, options, earliest: dict, latest: dict) -> None:  # noqa: ANN001
        self.options, self.earliest_offsets, self.latest_offsets = options, earliest, latest

    def partitions(self) -> list:
        return sorted(self.latest_offsets)

    def earliest(self, tps: list) -> dict:
        return {tp: self.earliest_offsets[tp] for tp in tps}

    def latest(self, tps: list) -> dict:
        return {tp: self.latest_offsets[tp] for tp in tps}


def _reader(earliest: dict, latest: dict, **opts: str):  # noqa: ANN202
    from epochlog.spark.reader import EpochlogStreamReader

    options = source(subscribePattern="t.*", **opts)
    reader = EpochlogStreamReader(options)
    reader._view = _View(options, earliest, latest)  # type: ignore[assignment]
    return reader


def test_min_offsets_gate_admits_the_first_batch_of_a_run_and_is_off_under_trigger_once() -> None:
    r = _reader({("t", 0): 0}, {("t", 0): 5}, minOffsetsPerTrigger="100", maxTriggerDelay="15m")
    assert isinstance(r.getDefaultReadLimit(), ReadMinRows)
    start = {"t": {"0": 0}}
    default = r.getDefaultReadLimit()
    assert r.latestOffset(start, default)["t"] == {"0": 5}  # no 15-minute wait after a restart
    r.view.latest_offsets = {("t", 0): 8}  # type: ignore[attr-defined]
    assert r.latestOffset({"t": {"0": 5}}, default) == {"t": {"0": 5}}  # 3 < 100: held
    # Trigger.Once: Spark passes ReadAllAvailable instead of the default; the gate is off
    assert r.latestOffset({"t": {"0": 5}}, ReadAllAvailable()) == {"t": {"0": 8}}
    both = _reader({("t", 0): 0}, {("t", 0): 5}, minOffsetsPerTrigger="2", maxOffsetsPerTrigger="9")
    assert both.getDefaultReadLimit() == ReadMaxRows(9)


def test_a_deleted_topic_leaves_the_offsets_without_fail_on_data_loss() -> None:
    r = _reader({("t2", 0): 0}, {("t2", 0): 4}, failOnDataLoss="false")
    end = r.latestOffset({"t": {"0": 7}, "t2": {"0": 0}}, ReadAllAvailable())
    assert end == {"t2": {"0": 4}}  # t-0 is gone from the offsets, so a re-created t starts at 0


def test_a_deleted_topic_is_data_loss_with_fail_on_data_loss() -> None:
    r = _reader({("t2", 0): 0}, {("t2", 0): 4})
    with pytest.raises(DataLossError, match="t-0 are gone"):
        r.latestOffset({"t": {"0": 7}, "t2": {"0": 0}}, ReadAllAvailable())


def test_a_new_partition_not_starting_at_zero_is_data_loss() -> None:
    r = _reader({("t", 0): 0, ("t", 1): 3}, {("t", 0): 5, ("t", 1): 6})
    with pytest.raises(DataLossError, match="added partition t-1 starts from 3 instead of 0"):
        r.latestOffset({"t": {"0": 5}}, ReadAllAvailable())
    r = _reader({("t", 0): 0, ("t", 1): 3}, {("t", 0): 5, ("t", 1): 6}, failOnDataLoss="false")
    assert r.latestOffset({"t": {"0": 5}}, ReadAllAvailable()) == {"t": {"0": 5, "1": 6}}


class _Group:
    def __init__(self) -> None:
        self.commits: list[dict] = []

    def commit(self, offsets: dict) -> bool:
        self.commits.append(dict(offsets))
        return True


def test_the_progress_group_gets_each_finished_batchs_end_once() -> None:
    r = _reader({("t", 0): 0}, {("t", 0): 5}, **{"kafka.group.id": "g"})
    group = _Group()
    r._progress = group  # type: ignore[assignment]
    end = r.latestOffset({"t": {"0": 0}}, ReadAllAvailable())
    assert group.commits == [{("t", 0): 0}]  # where the query stands before batch 0
    r.commit(end)  # Spark: batch 0 done, batch 1 planned
    r.latestOffset(end, ReadAllAvailable())  # the same offsets: not committed again
    assert group.commits == [{("t", 0): 0}, {("t", 0): 5}]


# ------------------------------------------------------------------ the sink's timestamp column


def test_the_sink_timestamp_column_gives_each_record_its_time() -> None:
    import datetime as dt

    import numpy as np
    import pyarrow as pa

    from epochlog.protocol.records import decode_batch
    from epochlog.spark.arrow_records import encode_records
    from epochlog.spark.writer import record_timestamps

    utc = dt.UTC
    batch = pa.RecordBatch.from_pydict(
        {
            "value": pa.array([b"a", b"b", b"c"]),
            "timestamp": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=utc), None, dt.datetime(2023, 1, 1, tzinfo=utc)],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )
    stamps = record_timestamps(batch, now=1_000)
    assert stamps is not None
    assert stamps.tolist() == [1704067200000, 1000, 1672531200000]
    assert record_timestamps(pa.RecordBatch.from_pydict({"value": [b"x"]}), 5) is None
    (encoded,) = encode_records(pa.array([None, None, None], pa.binary()), batch.column(0), stamps)
    decoded = decode_batch(encoded.data)
    assert [r.timestamp for r in decoded.records] == [1704067200000, 1000, 1672531200000]
    assert [r.value for r in decoded.records] == [b"a", b"b", b"c"]
    assert decoded.header.max_timestamp == 1704067200000
    # with headers (the protocol's builder), the same timestamps
    (with_headers,) = encode_records(
        pa.array([None] * 3, pa.binary()), batch.column(0), stamps, headers=[[("h", b"1")]] * 3
    )
    assert [r.timestamp for r in decode_batch(with_headers.data).records] == stamps.tolist()
    assert np.array_equal(stamps, np.array([1704067200000, 1000, 1672531200000]))


def test_a_timestamp_column_of_another_type_is_refused() -> None:
    from epochlog.spark.options import check_sink_columns

    with pytest.raises(OptionError, match="column 'timestamp' must be timestamp"):
        check_sink_columns({"value": "binary", "timestamp": "bigint"}, has_topic_option=True)


def test_register_carries_spark_network_timeout_to_the_workers() -> None:
    import pickle

    from pyspark import cloudpickle

    from epochlog.spark import register

    class _Conf:
        def __init__(self, value: str | None) -> None:
            self.value = value

        def get(self, key: str, default: str | None = None) -> str | None:
            assert key == "spark.network.timeout"
            return self.value if self.value is not None else default

    class _Spark:
        def __init__(self, value: str | None) -> None:
            self.conf = _Conf(value)
            self.registered: list = []
            self.dataSource = self  # noqa: N815 - pyspark's attribute name

        def register(self, cls: type) -> None:
            self.registered.append(cls)

    plain = _Spark(None)
    register(plain)
    assert plain.registered == [EpochlogDataSource]
    timed = _Spark("45s")
    register(timed)
    (cls,) = timed.registered
    assert cls.name() == "epochlog" and issubclass(cls, EpochlogDataSource)
    # Spark ships the class to its Python workers pickled: the timeout must travel with it
    shipped = pickle.loads(cloudpickle.dumps(cls))
    source_opts = shipped({**BOOT, "subscribe": "t"})._source_options(_schema(), streaming=True)
    assert source_opts.poll_timeout_ms == 45_000


@pytest.mark.parametrize("retries", [0, 2])
def test_driver_lookups_try_fetch_offset_num_retries_more_times(retries: int) -> None:
    from epochlog.client.errors import KafkaError
    from epochlog.protocol.errors import ErrorCode
    from epochlog.spark.clients import ClusterView

    options = source(
        subscribe="t",
        **{"fetchOffset.numRetries": str(retries), "fetchOffset.retryIntervalMs": "1"},
    )
    view = ClusterView(options)
    calls: list[int] = []

    def lookup() -> int:
        calls.append(1)
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "lookup")

    with pytest.raises(KafkaError):
        view._call("driver-consumer", lookup)
    assert len(calls) == retries + 1
