"""The parity table: every option of Spark's Kafka source and sink that `format("epochlog")`
takes, what it does here, and the test that shows it. README.md's table is `render()`'s output
(`python -m epochlog.spark.parity` prints it, `... --update README.md` rewrites README's block);
tests/unit/test_spark_parity_table.py checks
that the README matches and that the rows are exactly the options `options.py` reads.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParityRow:
    option: str  # Spark's name (case-insensitive, as Spark)
    side: str  # source, source (batch), source (stream), sink, or both
    behaviour: str  # what it does here; where it differs from Spark, said so
    test: str  # the test function that shows it


UNIT = "tests/unit/test_spark_parity.py"
INTEGRATION = "tests/integration/test_spark_parity.py"
OPTIONS_UNIT = "tests/unit/test_spark_options.py"

OPTIONS: tuple[ParityRow, ...] = (
    ParityRow(
        "subscribe",
        "source",
        "comma-separated topics",
        OPTIONS_UNIT + "::test_source_options_parse_like_sparks_kafka_source",
    ),
    ParityRow(
        "subscribePattern",
        "source",
        "Java regex found within the name (`findFirstIn`); "
        "constructs Python reads differently are refused",
        INTEGRATION + "::test_subscribe_pattern_is_found_within_topic_names",
    ),
    ParityRow(
        "assign",
        "source",
        'JSON `{"topic":[0,1]}`',
        OPTIONS_UNIT + "::test_source_options_parse_like_sparks_kafka_source",
    ),
    ParityRow(
        "startingOffsets",
        "source",
        "earliest, latest (stream only), or JSON with -2/-1; batch refuses -1",
        INTEGRATION + "::test_batch_latest_in_starting_offsets_json_is_refused",
    ),
    ParityRow(
        "startingTimestamp",
        "source",
        "one timestamp for every partition; takes precedence",
        OPTIONS_UNIT + "::test_starting_timestamp_takes_precedence",
    ),
    ParityRow(
        "startingOffsetsByTimestamp",
        "source",
        "JSON of timestamps per partition",
        OPTIONS_UNIT + "::test_resolve_offsets_for_every_kind_of_spec",
    ),
    ParityRow(
        "startingOffsetsByTimestampStrategy",
        "source",
        "error (default) or latest",
        OPTIONS_UNIT + "::test_resolve_offsets_for_every_kind_of_spec",
    ),
    ParityRow(
        "endingOffsets",
        "source (batch)",
        "latest or JSON; a JSON leaving a partition out fails",
        INTEGRATION + "::test_ending_offsets_json_leaving_a_partition_out_fails",
    ),
    ParityRow(
        "endingTimestamp",
        "source (batch)",
        "one timestamp for every partition",
        OPTIONS_UNIT + "::test_starting_timestamp_takes_precedence",
    ),
    ParityRow(
        "endingOffsetsByTimestamp",
        "source (batch)",
        "JSON of timestamps per partition",
        OPTIONS_UNIT + "::test_resolve_offsets_for_every_kind_of_spec",
    ),
    ParityRow(
        "failOnDataLoss",
        "source",
        "true: deleted partitions, logs behind the last "
        "offset, new partitions not at 0 fail the query; false: warned, deleted "
        "partitions leave the offsets",
        INTEGRATION
        + "::test_a_deleted_topic_leaves_the_offsets_and_its_re_creation_is_read_from_0",
    ),
    ParityRow(
        "kafkaConsumer.pollTimeoutMs",
        "source",
        "default spark.network.timeout (from `register(spark)`)",
        UNIT + "::test_poll_timeout_defaults_to_spark_network_timeout",
    ),
    ParityRow(
        "fetchOffset.numRetries",
        "source",
        "driver offset lookups retried (default 3)",
        UNIT + "::test_driver_lookups_try_fetch_offset_num_retries_more_times",
    ),
    ParityRow(
        "fetchOffset.retryIntervalMs",
        "source",
        "between those retries (default 1000)",
        UNIT + "::test_fetch_offset_retries_are_parsed_with_sparks_defaults",
    ),
    ParityRow(
        "maxOffsetsPerTrigger",
        "source (stream)",
        "split across partitions by backlog",
        OPTIONS_UNIT + "::test_rate_limit_splits_the_budget_by_backlog",
    ),
    ParityRow(
        "minOffsetsPerTrigger",
        "source (stream)",
        "with maxTriggerDelay; must not exceed "
        "maxOffsetsPerTrigger; off under Trigger.Once/AvailableNow; a run's first batch "
        "never waits",
        INTEGRATION + "::test_trigger_once_reads_everything_despite_min_offsets",
    ),
    ParityRow(
        "maxTriggerDelay",
        "source (stream)",
        "default 15m",
        UNIT + "::test_min_offsets_gate_admits_the_first_batch_of_a_run_and_is_off_under_"
        "trigger_once",
    ),
    ParityRow(
        "minPartitions",
        "source",
        "splits ranges into at least that many tasks",
        OPTIONS_UNIT + "::test_split_ranges_honours_max_records_and_min_partitions",
    ),
    ParityRow(
        "maxRecordsPerPartition",
        "source",
        "caps a task's records",
        OPTIONS_UNIT + "::test_split_ranges_honours_max_records_and_min_partitions",
    ),
    ParityRow(
        "groupIdPrefix",
        "source (stream)",
        "progress committed to group `<prefix>-<uuid>` (fresh per run, as Spark names its groups)",
        UNIT + "::test_group_id_prefix_makes_a_fresh_group_per_run_and_no_option_no_group",
    ),
    ParityRow(
        "kafka.group.id",
        "source (stream)",
        "accepted with Spark's warning; progress "
        "committed to it, so `epochlog groups describe` shows the lag",
        INTEGRATION + "::test_kafka_group_id_gets_the_querys_progress",
    ),
    ParityRow(
        "includeHeaders",
        "source",
        "adds the headers column",
        "tests/integration/"
        "test_spark_read_write.py::test_batch_read_has_kafkas_schema_and_every_record",
    ),
    ParityRow(
        "kafka.*",
        "both",
        "passed to epochlog's client; keys it does not know are "
        "warned about by name and ignored; auto.offset.reset, enable.auto.commit, "
        "(de)serializers, interceptors refused",
        INTEGRATION + "::test_unknown_kafka_options_are_ignored_and_plaintext_accepted",
    ),
    ParityRow(
        "topic",
        "sink",
        "overrides the topic column",
        OPTIONS_UNIT + "::test_sink_rows_take_the_topic_option_over_the_column",
    ),
    ParityRow(
        "deliveryGuarantee",
        "sink",
        "at-least-once (Spark's) or exactly-once (epochlog: Kafka transactions, streaming)",
        OPTIONS_UNIT + "::test_exactly_once_is_for_streaming_and_named_by_the_checkpoint",
    ),
    ParityRow(
        "transactionalIdPrefix",
        "sink",
        "exactly-once: names the transactions",
        OPTIONS_UNIT + "::test_exactly_once_needs_a_name_for_its_transactions",
    ),
    ParityRow(
        "transactionTimeoutMs",
        "sink",
        "exactly-once: the transactions' timeout",
        OPTIONS_UNIT + "::test_exactly_once_needs_a_name_for_its_transactions",
    ),
    ParityRow(
        "stagingLocation",
        "sink",
        "exactly-once: names the sink in place of checkpointLocation",
        OPTIONS_UNIT + "::test_exactly_once_is_for_streaming_and_named_by_the_checkpoint",
    ),
    ParityRow(
        "checkpointLocation",
        "sink",
        "exactly-once: names the transactions",
        OPTIONS_UNIT + "::test_exactly_once_is_for_streaming_and_named_by_the_checkpoint",
    ),
)

BEHAVIOURS: tuple[ParityRow, ...] = (
    ParityRow(
        "`.schema(...)`",
        "source",
        "refused at load: the schema is fixed",
        INTEGRATION + "::test_a_user_schema_is_refused_at_load",
    ),
    ParityRow(
        '`mode("overwrite")`',
        "sink (batch)",
        "refused, nothing written",
        INTEGRATION + "::test_batch_overwrite_is_refused_and_nothing_written",
    ),
    ParityRow(
        "no `mode(...)` (ErrorIfExists)",
        "sink (batch)",
        "Spark's Kafka sink appends; "
        "PySpark refuses it for Python sinks (UNSUPPORTED_DATA_SOURCE_SAVE_MODE): add "
        '`.mode("append")`',
        INTEGRATION + "::test_the_default_save_mode_is_refused_by_pyspark_and_append_writes",
    ),
    ParityRow(
        "`timestamp` column",
        "sink",
        "the record's timestamp (null: write time)",
        INTEGRATION + "::test_the_sink_writes_the_timestamp_column",
    ),
)

BEGIN = "<!-- spark-parity-table: generated by `python -m epochlog.spark.parity` -->"
END = "<!-- /spark-parity-table -->"


def render() -> str:
    """The README block: the options, then the behaviours, each with its test."""
    lines = [BEGIN, "", "| Option | Where | Here | Test |", "|---|---|---|---|"]
    for row in OPTIONS + BEHAVIOURS:
        name = row.option if row.option.startswith("`") else f"`{row.option}`"
        path, _, func = row.test.partition("::")
        lines.append(
            f"| {name} | {row.side} | {row.behaviour} | `{path.rsplit('/', 1)[-1]}`: `{func}` |"
        )
    lines += ["", END]
    return "\n".join(lines)


def update_readme(text: str) -> str:
    """`text` (README.md) with its parity block replaced by `render()`."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + render() + text[end:]


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--update", "README.md"]:
        with open("README.md") as f:
            updated = update_readme(f.read())
        with open("README.md", "w") as f:
            f.write(updated)
    else:
        print(render())
