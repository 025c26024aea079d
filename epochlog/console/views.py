"""What each console page shows, as plain values, and the pure rules that derive them from admin
answers: which partitions are under-replicated or offline, a partition's size, a group's lag,
how a record's bytes are shown. No I/O here; `reader` asks the cluster, `pages` renders.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from epochlog.client.metadata import BrokerNode, PartitionInfo

# -- the cluster ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerMetrics:
    """A few gauges and counters from a broker's Prometheus endpoint (None: not exported)."""

    url: str
    values: Mapping[str, float | None]


@dataclass(frozen=True)
class BrokerRow:
    node: BrokerNode
    is_controller: bool
    is_pinned: bool
    metrics: BrokerMetrics | None = None  # None: no endpoint known, or it did not answer
    metrics_error: str | None = None  # why the endpoint gave nothing


@dataclass(frozen=True)
class PartitionRow:
    """A partition as the overview and the topic page show it."""

    info: PartitionInfo
    size_bytes: int | None  # the leader's replica (DescribeLogDirs); None: unknown
    under_replicated: bool
    offline: bool


@dataclass(frozen=True)
class TopicRow:
    name: str
    is_internal: bool
    partitions: list[PartitionRow]

    @property
    def size_bytes(self) -> int | None:
        sizes = [p.size_bytes for p in self.partitions if p.size_bytes is not None]
        return sum(sizes) if sizes else None

    @property
    def under_replicated(self) -> int:
        return sum(p.under_replicated for p in self.partitions)

    @property
    def offline(self) -> int:
        return sum(p.offline for p in self.partitions)


@dataclass(frozen=True)
class ClusterView:
    cluster_id: str | None
    controller_id: int  # -1: none known
    pin_summary: str  # `pinned to broker 2 (in force)`, `not pinned`
    brokers: list[BrokerRow]
    topics: list[TopicRow]

    @property
    def under_replicated(self) -> list[PartitionRow]:
        return [p for t in self.topics for p in t.partitions if p.under_replicated]

    @property
    def offline(self) -> list[PartitionRow]:
        return [p for t in self.topics for p in t.partitions if p.offline]


def partition_row(
    info: PartitionInfo, live_brokers: Iterable[int], sizes: Mapping[tuple[str, int, int], int]
) -> PartitionRow:
    """Under-replicated: fewer in the ISR than replicas (Kafka's UnderReplicatedPartitions).
    Offline: no leader, or a leader that is not a live broker (OfflinePartitionsCount)."""
    live = set(live_brokers)
    offline = info.leader < 0 or info.leader not in live
    size = sizes.get((info.topic, info.partition, info.leader))
    if size is None:  # no leader answered: the largest replica anyone reported
        found = [s for (t, p, _b), s in sizes.items() if (t, p) == (info.topic, info.partition)]
        size = max(found) if found else None
    return PartitionRow(info, size, len(info.isr) < len(info.replicas), offline)


# -- consumer groups --------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: nothing committed
    log_end: int | None  # None: unknown (the leader did not answer)

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(self.log_end - self.committed, 0)


@dataclass(frozen=True)
class MemberRow:
    member_id: str
    client_id: str
    host: str
    assignment: list[tuple[str, int]]


@dataclass(frozen=True)
class GroupRow:
    group_id: str
    state: str
    protocol_type: str
    assignor: str
    coordinator: int | None
    members: list[MemberRow]
    lags: list[PartitionLag] = field(default_factory=list)
    error: str | None = None  # why the group could not be described

    @property
    def total_lag(self) -> int | None:
        known = [p.lag for p in self.lags if p.lag is not None]
        return sum(known) if known else None


def partition_lags(
    committed: Mapping[tuple[str, int], int | None], log_ends: Mapping[tuple[str, int], int]
) -> list[PartitionLag]:
    """Lag per partition = log end offset - committed offset (Kafka's kafka-consumer-groups)."""
    return [
        PartitionLag(topic, partition, offset, log_ends.get((topic, partition)))
        for (topic, partition), offset in sorted(committed.items())
    ]


# -- records ----------------------------------------------------------------------------------

DECODINGS = ("auto", "text", "json", "hex")


@dataclass(frozen=True)
class ShownBytes:
    """A key or value as a page shows it: `kind` is json, text, hex or null."""

    kind: str
    text: str


def show_bytes(data: bytes | None, decoding: str = "auto") -> ShownBytes:
    """auto: pretty JSON if it parses, else text if it is UTF-8 without control characters, else
    hex. `json` and `text` fall back to hex for bytes they cannot decode, so nothing is lost."""
    if decoding not in DECODINGS:
        raise ValueError(f"decoding must be one of {', '.join(DECODINGS)}, got {decoding!r}")
    if data is None:
        return ShownBytes("null", "null")
    if decoding == "hex":
        return ShownBytes("hex", data.hex(" "))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ShownBytes("hex", data.hex(" "))
    if decoding in ("auto", "json"):
        try:
            return ShownBytes("json", json.dumps(json.loads(text), indent=2, ensure_ascii=False))
        except ValueError:
            if decoding == "json":
                return ShownBytes("text", text)
    if any(ord(c) < 32 and c not in "\t\n\r" for c in text):
        return ShownBytes("hex", data.hex(" "))
    return ShownBytes("text", text)


@dataclass(frozen=True)
class RecordRow:
    offset: int
    timestamp_ms: int
    key: ShownBytes
    value: ShownBytes
    headers: list[tuple[str, ShownBytes]]


@dataclass(frozen=True)
class MessagesPage:
    """One page of a partition's records, from `start` on."""

    topic: str
    partition: int
    partitions: int  # how many the topic has (for the partition chooser)
    start: int
    limit: int
    decoding: str
    log_start: int
    log_end: int
    records: list[RecordRow]
    from_timestamp_ms: int | None = None  # the page was asked for by time

    @property
    def next_start(self) -> int | None:
        """Where the next page starts (None: this page reached the log end)."""
        following = (self.records[-1].offset + 1) if self.records else self.start
        return following if following < self.log_end else None

    @property
    def previous_start(self) -> int | None:
        if self.start <= self.log_start:
            return None
        return max(self.log_start, self.start - self.limit)


def page_start(requested: int | None, log_start: int, log_end: int, limit: int) -> int:
    """Where a page starts: the requested offset clamped into the log; by default the last
    `limit` records (the newest page, as consoles open a topic)."""
    if requested is None:
        return max(log_start, log_end - limit)
    return min(max(requested, log_start), log_end)
