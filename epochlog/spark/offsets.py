"""Offset arithmetic of the data source: sans-I/O, so tests drive it with plain dicts.

- Offsets travel through Spark's checkpoint as JSON `{"topic": {"partition": offset}}`
  (`to_json` / `from_json`), like Spark's Kafka source. The end of a batch that starts at the
  query's resolved starting offsets also carries that start under `START_KEY` (no topic can be
  named so), read back by `batch_start`.
- `rate_limit` caps a micro-batch at maxOffsetsPerTrigger, splitting the budget across partitions
  in proportion to their backlog (Kafka's `KafkaMicroBatchStream.rateLimit`).
- `split_ranges` turns per-partition offset ranges into Spark input partitions, honouring
  maxRecordsPerPartition and minPartitions (Kafka's `KafkaOffsetRangeCalculator`).
- `resolve_offsets` turns an `OffsetSpec` (earliest, latest, JSON, timestamps) into offsets, given
  lookup functions for the cluster's earliest / latest / by-time offsets.
- `MinTriggerGate` is minOffsetsPerTrigger with maxTriggerDelay: the sans-I/O clock logic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.spark.options import EARLIEST, LATEST, OffsetSpec, OptionError

TP = tuple[str, int]
Offsets = dict[TP, int]
START_KEY = "$start"  # '$' is not allowed in a topic name


def to_json(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(data: Mapping[str, Mapping[str, int]] | None) -> Offsets:
    if not data:
        return {}
    return {
        (t, int(p)): int(o) for t, parts in data.items() if t != START_KEY for p, o in parts.items()
    }


def batch_start(start: Mapping[str, Any] | None, end: Mapping[str, Any]) -> Offsets:
    """Where the batch (start, end] begins: the start its end carries, if any, else `start`."""
    carried = end.get(START_KEY)
    return from_json(carried if carried is not None else start)


@dataclass(frozen=True)
class OffsetRange:
    """Records [start, end) of one topic-partition; start may be EARLIEST for a partition first
    seen in this range (resolved by the reader)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start) if self.start >= 0 else self.end


def rate_limit(start: Mapping[TP, int], latest: Mapping[TP, int], limit: int) -> Offsets:
    """End offsets reading at most about `limit` records past `start`, split in proportion to
    each partition's backlog (rounded down, or up for a share below one record, as Kafka)."""
    backlog = {tp: max(0, end - start.get(tp, 0)) for tp, end in latest.items()}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    out: Offsets = {}
    for tp, end in latest.items():
        begin = start.get(tp, 0)
        size = backlog[tp]
        share = limit * (size / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(begin + step, end) if size else end
    return out


def split_ranges(
    ranges: Iterable[OffsetRange],
    min_partitions: int | None = None,
    max_records: int | None = None,
) -> list[OffsetRange]:
    """Input partitions for these ranges (empty ranges dropped)."""
    parts = [r for r in ranges if r.size > 0]
    if max_records:
        parts = [piece for r in parts for piece in _split(r, math.ceil(r.size / max_records))]
    if min_partitions and len(parts) < min_partitions:
        total = sum(r.size for r in parts)
        if total > 0:
            parts = [
                piece
                for r in parts
                for piece in _split(r, max(1, round(r.size / total * min_partitions)))
            ]
    return parts


def _split(r: OffsetRange, pieces: int) -> list[OffsetRange]:
    if pieces <= 1 or r.start < 0:
        return [r]
    pieces = min(pieces, r.size)
    out = []
    for i in range(pieces):
        lo = r.start + r.size * i // pieces
        hi = r.start + r.size * (i + 1) // pieces
        out.append(OffsetRange(r.topic, r.partition, lo, hi))
    return out


def ranges_between(start: Mapping[TP, int], end: Mapping[TP, int]) -> list[OffsetRange]:
    """The ranges of a micro-batch; partitions new in `end` start at EARLIEST; a partition whose
    end is not past its start (e.g. a replayed batch 0) reads nothing."""
    out = []
    for tp, stop in sorted(end.items()):
        begin = start.get(tp, EARLIEST)
        if begin >= 0 and stop <= begin:
            continue
        out.append(OffsetRange(tp[0], tp[1], begin, stop))
    return out


Lookup = Callable[[list[TP]], Mapping[TP, int]]
TimeLookup = Callable[[Mapping[TP, int]], Mapping[TP, int | None]]


def resolve_offsets(
    spec: OffsetSpec,
    partitions: list[TP],
    earliest: Lookup,
    latest: Lookup,
    for_times: TimeLookup,
    *,
    option: str,
    timestamp_strategy: str = "error",
) -> Offsets:
    """Concrete offsets for every partition in `partitions`.

    JSON naming a partition not in `partitions` is an error naming `option`, and so is a JSON
    that leaves a partition out, starting or ending (as Spark's Kafka source). A starting
    timestamp with no record at or after it is an error with strategy "error" (Kafka's
    default) and resolves to latest with "latest"; an ending one to latest."""
    if spec.kind == "earliest":
        return dict(earliest(partitions))
    if spec.kind == "latest":
        return dict(latest(partitions))
    if spec.kind == "offsets":
        unknown = sorted(set(spec.offsets) - set(partitions))
        if unknown:
            names = ", ".join(f"{t}-{p}" for t, p in unknown)
            raise OptionError(
                option, f"names partitions that are not read or do not exist: {names}"
            )
        missing = [tp for tp in partitions if tp not in spec.offsets]
        if missing:
            raise OptionError(
                option, "gives no offset for " + ", ".join(f"{t}-{p}" for t, p in missing)
            )
        out: Offsets = {}
        want_earliest = [tp for tp, o in spec.offsets.items() if o == EARLIEST]
        want_latest = [tp for tp in partitions if spec.offsets.get(tp, LATEST) == LATEST]
        if want_earliest:
            out.update(earliest(want_earliest))
        if want_latest:
            out.update(latest(want_latest))
        for tp, o in spec.offsets.items():
            if o >= 0:
                out[tp] = o
        return out
    if spec.kind == "timestamp":
        assert spec.timestamp is not None
        stamps = {tp: spec.timestamp for tp in partitions}
    else:
        unknown = sorted(set(spec.offsets) - set(partitions))
        if unknown:
            names = ", ".join(f"{t}-{p}" for t, p in unknown)
            raise OptionError(
                option, f"names partitions that are not read or do not exist: {names}"
            )
        missing = [tp for tp in partitions if tp not in spec.offsets]
        if missing:
            raise OptionError(
                option, "gives no timestamp for " + ", ".join(f"{t}-{p}" for t, p in missing)
            )
        stamps = dict(spec.offsets)
    found = for_times(stamps)
    out = {}
    unresolved = [tp for tp in stamps if found.get(tp) is None]
    if unresolved:
        if timestamp_strategy == "error" and option.startswith("starting"):
            names = ", ".join(f"{t}-{p}" for t, p in unresolved)
            raise OptionError(option, f"no record at or after the timestamp in {names}")
        out.update(latest(unresolved))
    for tp in stamps:
        offset = found.get(tp)
        if offset is not None:
            out[tp] = offset
    return out


class MinTriggerGate:
    """minOffsetsPerTrigger with maxTriggerDelay: hold a micro-batch back until enough records
    are waiting, or the delay since the last batch has passed.

    As Spark's source, the delay counts from the last batch this run admitted: the first batch
    of a run (after a restart too) is admitted as soon as there is a record, never held back
    for maxTriggerDelay by a batch an earlier run made."""

    def __init__(self, min_records: int | None, max_delay_ms: int) -> None:
        self.min_records = min_records
        self.max_delay_ms = max_delay_ms
        self.last_trigger_ms: float | None = None

    def admit(self, available: int, now_ms: float) -> bool:
        if self.min_records is None or available <= 0:
            return available > 0
        if (
            self.last_trigger_ms is None
            or available >= self.min_records
            or now_ms - self.last_trigger_ms >= self.max_delay_ms
        ):
            self.last_trigger_ms = now_ms
            return True
        return False
