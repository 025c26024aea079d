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
partitions by backlog, `offsets.rate_limit`); minOffsetsPerTrigger alone is the default
`ReadMinRows`; with maxTriggerDelay it is kept in `latestOffset` (pyspark has no composite
limit), and only while Spark passes the default limit: under Trigger.Once Spark passes
`ReadAllAvailable` and the gate is off, as it is under Trigger.AvailableNow, which snapshots the
latest offsets in `prepareForTriggerAvailableNow` and never reads past them.

Partitions, as Spark's source: one that appears while the query runs is read from its earliest
offset, and if that is not 0 it is data loss (failOnDataLoss); one that disappears (its topic
deleted) is data loss and leaves the offsets, so a topic re-created later is a new partition
read from its start.

Progress group: with kafka.group.id or groupIdPrefix, the source commits the offsets the query
has processed to that group (`progress_group`), for `epochlog groups describe`. Spark calls
`commit(end)` of batch N only when it plans batch N+1, so the last batch of a Trigger.AvailableNow
run is never committed that way; but Spark asks `latestOffset(start)` only once every batch up
to `start` is done (its commit log written), so `start` is committed there too.
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
    ReadMinRows,
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
from epochlog.spark.progress_group import ProgressGroup

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
        self._gate = MinTriggerGate(options.min_offsets_per_trigger, options.max_trigger_delay_ms)
        self._view: ClusterView | None = None
        group = options.commit_group()  # once per run: groupIdPrefix makes a fresh one
        self._progress = ProgressGroup(options.client, group) if group is not None else None
        self._progress_committed: Offsets = {}
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
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.view.partitions()
        self._available_now_end = self.view.latest(tps)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        self._commit_progress(begin)
        tps = self.view.partitions()
        if self._available_now_end is not None:
            tps = [tp for tp in tps if tp in self._available_now_end]
        latest = self.view.latest(tps)
        if self._available_now_end is not None:
            latest = {tp: min(o, self._available_now_end[tp]) for tp, o in latest.items()}
        if not self.options.fail_on_data_loss:  # else a loss fails the query: nothing to count
            known = [tp for tp in begin if tp in latest]
            self._data_loss.observe(begin, self.view.earliest(known), latest)
        new = [tp for tp in tps if tp not in begin]
        new_starts = self.view.earliest(new)
        begin = self._check_data_loss(begin, latest, new_starts)
        origin = dict(begin)
        origin.update(new_starts)
        latest = {tp: max(o, origin.get(tp, 0)) for tp, o in latest.items()}
        self._latest_seen = to_json(latest)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(origin, latest, limit.max_rows)
        else:
            end = dict(latest)
        available = sum(max(0, end[tp] - origin[tp]) for tp in end)
        # The gate holds batches back only under the default limit: Trigger.Once passes
        # ReadAllAvailable, AvailableNow has its snapshot.
        gated = self._available_now_end is None and not (
            isinstance(limit, ReadAllAvailable)
            and not isinstance(self.getDefaultReadLimit(), ReadAllAvailable)
        )
        if gated and not self._gate.admit(available, time.monotonic() * 1000):
            return start
        gone = set(from_json(start)) - set(latest)
        if available == 0 and not new and not gone:
            return start
        merged = {tp: o for tp, o in begin.items() if tp in latest}  # deleted partitions leave
        merged.update(end)
        out: dict = to_json(merged)
        if self._initial is not None and begin == from_json(self._initial):
            # This batch starts at the resolved starting offsets (batch 0): its end carries its
            # start, for a replay (module docstring).
            out[START_KEY] = to_json(begin)
        return out

    def _check_data_loss(self, begin: Offsets, latest: Offsets, new_starts: Offsets) -> Offsets:
        """Spark's checks between batches: deleted partitions, logs that now end before the
        last read offset, new partitions that do not start at 0. Raises DataLossError with
        failOnDataLoss, else logs and returns the start to go on from."""
        gone = [tp for tp in begin if tp not in latest]
        behind = [tp for tp, o in latest.items() if tp in begin and o < begin[tp]]
        late = [tp for tp, o in sorted(new_starts.items()) if o != 0]
        if not gone and not behind and not late:
            return begin
        message = []
        if gone:
            message.append(", ".join(f"{t}-{p}" for t, p in gone) + " are gone")
        if behind:
            message.append(
                "; ".join(
                    f"partition {t}-{p}'s offset was changed from {begin[(t, p)]} to "
                    f"{latest[(t, p)]}"
                    for t, p in behind
                )
            )
        if late:
            message.append(
                "; ".join(
                    f"added partition {t}-{p} starts from {new_starts[(t, p)]} instead of 0"
                    for t, p in late
                )
            )
        text = "; ".join(message) + ". Some data may have been missed"
        if self.options.fail_on_data_loss:
            raise DataLossError(
                text + ". If you want your streaming query to go on, set failOnDataLoss=false."
            )
        log.warning("%s; going on (failOnDataLoss=false)", text)
        out = {tp: o for tp, o in begin.items() if tp in latest}
        for tp in behind:
            out[tp] = latest[tp]
        return out

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
        # Spark's checkpoint is the truth; the progress group, if any, is for lag reporting.
        self._commit_progress(from_json(end))

    def _commit_progress(self, offsets: Offsets) -> None:
        if (
            self._progress is not None
            and offsets
            and offsets != self._progress_committed
            and self._progress.commit(offsets)
        ):
            self._progress_committed = dict(offsets)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.close()

    # ------------------------------------------------------------------ executors

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)
