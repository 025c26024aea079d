"""What a scrape reads of a broker process, as plain values: the node assembles a `BrokerView`
from the live broker, controller and coordinators (`epochlog.node.metrics`) when Prometheus
scrapes, and `collector.BrokerCollector` turns it into metric families. Tests build views by
hand."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One replica this broker hosts."""

    topic: str
    partition: int
    leader: bool
    replicas: int
    isr: int
    min_insync_replicas: int
    size_bytes: int
    segments: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class ControllerView:
    """The controller's state; all zero on a broker that is not the active controller (as in
    Kafka, only the active controller reports OfflinePartitionsCount and its queue)."""

    active: bool = False
    offline_partitions: int = 0
    event_queue_size: int = 0
    topics: int = 0
    partitions: int = 0


@dataclass(frozen=True, slots=True)
class GroupLag:
    """A group's committed offset on a partition, against the partition's end (its high
    watermark as this broker knows it)."""

    group: str
    topic: str
    partition: int
    committed_offset: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class GroupsView:
    """The groups this broker coordinates (the __consumer_offsets partitions it leads)."""

    states: dict[str, int] = field(default_factory=dict)  # Kafka's state name -> groups
    offsets: int = 0
    completed_rebalances: int = 0
    offset_commits: int = 0
    lags: tuple[GroupLag, ...] = ()


@dataclass(frozen=True, slots=True)
class BrokerView:
    broker_id: int
    broker_epoch: int = -1
    partitions: tuple[PartitionView, ...] = ()
    # Kafka's purgatory name (Produce, Fetch, DeleteRecords) -> (operations, watched keys)
    purgatories: dict[str, tuple[int, int]] = field(default_factory=dict)
    controller: ControllerView = field(default_factory=ControllerView)
    controller_id: int = -1  # the active controller as this broker knows it
    pinned_controller: int = -1  # KIP-39's pin (/admin/next_controller), -1 when none
    groups: GroupsView = field(default_factory=GroupsView)
