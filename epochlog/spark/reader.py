"""Reading a log with Spark: the batch reader and the micro-batch stream reader.

Where things run (pyspark 4.3): `partitions()` of the batch reader and every offset method of
the stream reader run on the driver; `read()` runs on executors, on a pickled copy of the reader,
so it is a pure function of its `OffsetRangePartition`.

Deterministic start. The Python source never sees the checkpoint, and when batch 0 is planned
again after a failure Spark calls `initialOffset()` again and takes batch 0's start from it
(only batch 0's end is in the checkpoint). If the answer changed (startingOffsets=latest, or a
timestamp, resolved anew) records would be skipped silently. So the end offset of a batch that
starts at the resolved starting offsets carries that start (`offsets.START_KEY`), Spark writes it
to `offsets/0`, and `partitions()` reads a batch from the start its end carries: a replayed batch
0 reads the same records whatever `initialOffset()` says then. Batch 0 carries data (no empty
batch first); with nothing to read yet, Spark runs an empty batch 0 whose end is the resolved
start. `partitions()` reads nothing where end <= start.

Admission control: maxOffsetsPerTrigger is the default `ReadMaxRows` limit (split across
partitions by backlog, `offsets.rate_limit`); minOffsetsPerTrigger with maxTriggerDelay is kept
in `latestOffset` (pyspark has no composite limit); Trigger.AvailableNow snapshots the latest
offsets in `prepareForTriggerAvailableNow` and never reads past them. Partitions that appear
while the query runs are read from their earliest offset.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from epochlog.spark.clients import ClusterView, DataLossError, read_range
from epochlog.spark.lag import DATA_LOSS_KEY, DataLossCounter
from epochlog.spark.offsets import (
    START_KEY,
    TP,
    MinTriggerGate,
    OffsetRange,
    Offsets,
    batch_start,
    from_json,
    ranges_between,
    rate_limit,
    resolve_offsets,
    split_ranges,
    to_json,
)
from epochlog.spark.options import OptionError, SourceOptions

log = logging.getLogger(__name__)


class OffsetRangePartition(InputPartition):
    """One Spark input partition: records [start, end) of a topic-partition."""

    def __init__(self, offsets: OffsetRange) -> None:
        super().__init__(offsets)
        self.range = offsets


def read_partition(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Executor side: the Arrow batches of one input partition, one per fetch (records are
    decoded straight into Arrow columns, `arrow_records`)."""
    # Imported here: the driver's per-query source process never reads (see clients.py).
    from epochlog.spark.rows import arrow_schema, columns_to_batch

    r = partition.value  # pyspark may hand back a plain InputPartition carrying our value
    if not isinstance(r, OffsetRange):  # the InputPartition(None) Spark uses for "no partitions"
        return
    schema = arrow_schema(options.include_headers)
    for columns in read_range(
        options.client,
        r,
        fail_on_data_loss=options.fail_on_data_loss,
        poll_timeout_ms=options.poll_timeout_ms,
        want_headers=options.include_headers,
    ):
        yield columns_to_batch(columns, r.topic, r.partition, schema, options.include_headers)


def _resolve(view: ClusterView, which: str, partitions: list[TP]) -> Offsets:
    o = view.options
    spec = o.starting if which == "starting" else o.ending
    option = {
        "timestamp": f"{which}Timestamp",
        "timestamps": f"{which}OffsetsByTimestamp",
    }.get(spec.kind, f"{which}Offsets")
    return resolve_offsets(
        spec,
        partitions,
        view.earliest,
        view.latest,
        view.for_times,
        option=option,
        timestamp_strategy=o.timestamp_strategy,
    )


class EpochlogBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        view = ClusterView(self.options)
        tps = view.partitions()
        start = _resolve(view, "starting", tps)
        end = _resolve(view, "ending", tps)
        ranges = []
        for tp in tps:
            if start[tp] > end[tp]:
                raise OptionError(
                    "startingOffsets",
                    f"{tp[0]}-{tp[1]}: starts at {start[tp]}, after its ending offset {end[tp]}",
                )
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        split = split_ranges(
            ranges, self.options.min_partitions, self.options.max_records_per_partition
        )
        return [OffsetRangePartition(r) for r in split]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)


class EpochlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._initial: dict | None = None
        self._available_now_end: Offsets | None = None
        self._latest_seen: dict | None = None
        self._gate = MinTriggerGate(
            options.min_offsets_per_trigger, options.max_trigger_delay_ms, time.monotonic() * 1000
        )
        self._view: ClusterView | None = None
        self._data_loss = DataLossCounter()  # reported with the latest offsets (`lag`)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_view"] = None  # clients stay in the process that made them
        return state

    @property
    def view(self) -> ClusterView:
        if self._view is None:
            self._view = ClusterView(self.options)
        return self._view

    # ------------------------------------------------------------------ driver: offsets

    def initialOffset(self) -> dict:
        if self._initial is None:
            tps = self.view.partitions()
            self._initial = to_json(_resolve(self.view, "starting", tps))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.view.partitions()
        self._available_now_end = self.view.latest(tps)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        tps = self.view.partitions()
        if self._available_now_end is not None:
            tps = [tp for tp in tps if tp in self._available_now_end]
        latest = self.view.latest(tps)
        if self._available_now_end is not None:
            latest = {tp: min(o, self._available_now_end[tp]) for tp, o in latest.items()}
        if not self.options.fail_on_data_loss:  # else a loss fails the query: nothing to count
            known = [tp for tp in begin if tp in latest]
            self._data_loss.observe(begin, self.view.earliest(known), latest)
        self._check_data_loss(begin, latest)
        new = [tp for tp in tps if tp not in begin]
        origin = dict(begin)
        origin.update(self.view.earliest(new))
        latest = {tp: max(o, origin.get(tp, 0)) for tp, o in latest.items()}
        self._latest_seen = to_json(latest)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(origin, latest, limit.max_rows)
        else:
            end = dict(latest)
        available = sum(max(0, end[tp] - origin[tp]) for tp in end)
        if self._available_now_end is None and not self._gate.admit(
            available, time.monotonic() * 1000
        ):
            return start
        if available == 0 and not new:
            return start
        merged = dict(begin)
        merged.update(end)
        out: dict = to_json(merged)
        if self._initial is not None and begin == from_json(self._initial):
            # This batch starts at the resolved starting offsets (batch 0): its end carries its
            # start, for a replay (module docstring).
            out[START_KEY] = to_json(begin)
        return out

    def _check_data_loss(self, begin: Offsets, latest: Offsets) -> None:
        gone = [tp for tp in begin if tp not in latest]
        behind = [tp for tp, o in latest.items() if tp in begin and o < begin[tp]]
        if not gone and not behind:
            return
        message = []
        if gone:
            message.append("partitions no longer exist: " + ", ".join(f"{t}-{p}" for t, p in gone))
        if behind:
            message.append(
                "the log ends before the last read offset in "
                + ", ".join(f"{t}-{p} ({latest[(t, p)]} < {begin[(t, p)]})" for t, p in behind)
            )
        text = "; ".join(message)
        if self.options.fail_on_data_loss:
            raise DataLossError(text + ". Set failOnDataLoss=false to go on.")
        log.warning("%s; going on (failOnDataLoss=false)", text)
        for tp in behind:
            begin[tp] = latest[tp]

    def reportLatestOffset(self) -> dict | None:
        if self._latest_seen is None or self.options.fail_on_data_loss:
            return self._latest_seen
        return {**self._latest_seen, DATA_LOSS_KEY: self._data_loss.report()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        ranges = ranges_between(batch_start(start, end), from_json(end))
        split = split_ranges(
            ranges, self.options.min_partitions, self.options.max_records_per_partition
        )
        return [OffsetRangePartition(r) for r in split]

    def commit(self, end: dict) -> None:
        pass  # offsets live in Spark's checkpoint; nothing is committed to the log

    # ------------------------------------------------------------------ executors

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)
