"""Offsets behind latest and data-loss counts for a streaming query, from its progress.

Spark's Kafka source reports, in each progress's `sources[*].metrics`, how far the batch it just
planned is behind the log: for every partition of the latest offsets it saw, latest minus the
batch's end offset (0 for a partition the end does not have), as `minOffsetsBehindLatest`,
`maxOffsetsBehindLatest` and `avgOffsetsBehindLatest` (KafkaMicroBatchStream.metrics). pyspark's
Python data source API has no way to fill those metrics (no `metrics()` on
DataSourceStreamReader, in 4.3), but it does put the source's `endOffset` and its
`reportLatestOffset()` (as `latestOffset`) in the progress, so the same figures are computed here
from those two (`offsets_behind_latest`), by a StreamingQueryListener (`lag_listener`) or from
`query.lastProgress` (`source_lag`).

Data loss. With failOnDataLoss=false the source goes on when offsets it has not read are gone;
Spark's Kafka source then counts them in task metrics (`dataLoss`, `offsetOutOfRange`). Our
source finds them on the driver, where it plans each batch (`DataLossCounter`): records deleted
below the next offset to read (retention, DeleteRecords) are counted, and a log truncated below
it or a partition that vanished is an event whose lost offsets are not known. It reports the
run's totals under `DATA_LOSS_KEY` in its latest offsets, a key no topic can have ('$' is not
allowed in topic names); that costs one more ListOffsets (earliest) per trigger, with
failOnDataLoss=false only. Records deleted after a batch was planned and before its task read
them are skipped by the task (with a warning) and not counted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TP = tuple[str, int]

DATA_LOSS_KEY = "$dataLoss"  # in the source's reported latest offsets; '$' is no topic's
DATA_LOSS_EVENTS = "dataLoss"  # times offsets were found gone (Spark's task metric's name)
OFFSETS_LOST = "offsetOutOfRange"  # offsets gone before they were read, counted where known


def _partition_offsets(offsets: Mapping[str, Any]) -> dict[TP, int]:
    """{topic: {partition: offset}} JSON into (topic, partition) -> offset; keys starting with
    '$' (the source's own: batch start, data loss) are not topics."""
    out: dict[TP, int] = {}
    for topic, parts in offsets.items():
        if topic.startswith("$") or not isinstance(parts, Mapping):
            continue
        for partition, offset in parts.items():
            out[(topic, int(partition))] = int(offset)
    return out


def offsets_behind_latest(end: Mapping[str, Any], latest: Mapping[str, Any]) -> dict[str, str]:
    """Spark's Kafka source metrics for a batch ending at `end` with `latest` seen: per partition
    of `latest`, latest - end (end 0 if absent); min, max and average. Empty without partitions."""
    consumed = _partition_offsets(end)
    behind = [o - consumed.get(tp, 0) for tp, o in _partition_offsets(latest).items()]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(sum(behind) / len(behind)),
    }


def data_loss_metrics(latest: Mapping[str, Any]) -> dict[str, str]:
    """The data-loss counts the source put in its reported latest offsets (empty if none)."""
    counts = latest.get(DATA_LOSS_KEY)
    if not isinstance(counts, Mapping):
        return {}
    return {name: str(int(counts.get(name, 0))) for name in (DATA_LOSS_EVENTS, OFFSETS_LOST)}


def _json(text: str | None) -> Mapping[str, Any]:
    if not text:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError:  # another source's offset format
        return {}
    return data if isinstance(data, Mapping) else {}


def source_metrics(end_offset: str | None, latest_offset: str | None) -> dict[str, str]:
    """The metrics of one progress source, from its endOffset and latestOffset JSON strings."""
    latest = _json(latest_offset)
    return {**offsets_behind_latest(_json(end_offset), latest), **data_loss_metrics(latest)}


def _get(thing: Any, name: str) -> Any:
    return thing.get(name) if isinstance(thing, Mapping) else getattr(thing, name, None)


def source_lag(progress: Any) -> list[dict[str, str]]:
    """Per source of a progress (a StreamingQueryProgress or `query.lastProgress`'s dict), its
    metrics: the offsets-behind-latest figures and, where the source reports them, data loss."""
    return [
        source_metrics(_get(s, "endOffset"), _get(s, "latestOffset"))
        for s in _get(progress, "sources") or []
    ]


@dataclass
class DataLossCounter:
    """The driver's running count of offsets gone before the source read them (one run)."""

    events: int = 0
    offsets: int = 0
    _counted_to: dict[TP, int] = field(default_factory=dict)  # retention counted up to here
    _vanished: set[TP] = field(default_factory=set)

    def observe(
        self, begin: Mapping[TP, int], earliest: Mapping[TP, int], latest: Mapping[TP, int]
    ) -> None:
        """One planning step: `begin` the next offsets to read, `earliest`/`latest` the logs'
        start and end offsets now (partitions absent from `latest` no longer exist)."""
        for tp, start in begin.items():
            if tp not in latest:
                if tp not in self._vanished:
                    self._vanished.add(tp)
                    self.events += 1
                continue
            if latest[tp] < start:  # truncated below what was read (read already: no offsets lost)
                self.events += 1
                self._counted_to.pop(tp, None)
                continue
            first = earliest.get(tp)
            counted = max(start, self._counted_to.get(tp, start))
            if first is not None and first > counted:
                self.events += 1
                self.offsets += first - counted
                self._counted_to[tp] = first

    def report(self) -> dict[str, int]:
        return {DATA_LOSS_EVENTS: self.events, OFFSETS_LOST: self.offsets}
