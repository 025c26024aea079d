"""Everything the controller knows, in one place (Kafka's ControllerContext).

The context is plain data: the controller epoch, live brokers with their broker epochs (KIP-380),
the brokers in controlled shutdown, every topic's id and replica assignment, and every
partition's leader-and-ISR with its partition epoch (the znode version of its state in
ZooKeeper), and the replicas a live broker reported it cannot serve (KAFKA_STORAGE_ERROR in a
LeaderAndIsr answer: a damaged log or an offline log dir), which may neither lead nor join an ISR
until a later answer from that broker takes them back or the broker re-registers. Decisions
read it; only the controller's event loop changes it, after ZooKeeper has accepted the matching
write, so the context never runs ahead of ZooKeeper.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

TopicPartition = tuple[str, int]

NO_LEADER = -1
LEADER_DURING_DELETE = -2  # Kafka's marker in UpdateMetadata for partitions being deleted

T = TypeVar("T", bound=tuple[Any, ...])

# Replica sets, ISRs and ISR broker epochs repeat across partitions (100,000 partitions on three
# brokers have a handful of each): the context keeps one object per distinct value instead of one
# per partition. Bounded, in case epochs churn for a long time.
_SHARED: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_SHARED_MAX = 65536


def shared(value: T) -> T:
    """The one stored tuple equal to `value` (it, the first time)."""
    found = _SHARED.get(value)
    if found is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.clear()
        _SHARED[value] = found = value
    return found  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A registered broker as the controller sees it: where it listens and its generation."""

    id: int
    host: str  # host, port and listener: the inter-broker endpoint, where the controller connects
    port: int
    epoch: int  # the czxid of /brokers/ids/<id> (KIP-380)
    rack: str | None = None
    listener: str = "PLAINTEXT"
    # every listener the broker registered, (listener, host, port, security protocol id), for
    # UpdateMetadata: a client is answered with the endpoints of the listener it came in on
    endpoints: tuple[tuple[str, str, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class LeaderIsr:
    """A partition's state znode, with its znode version as the partition epoch.

    One per partition (100,000 in the controller benchmark), so slotted, and made by its
    constructor rather than `dataclasses.replace` on the paths that make one per partition."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int = 0  # znode version; -1 before the znode exists
    # (broker, broker epoch) of the ISR members when the state was last written: a member whose
    # registration is newer has bounced since, whichever controller saw it (see
    # decisions.bounced_isr_members). Empty for a state written without them.
    isr_epochs: tuple[tuple[int, int], ...] = ()

    def with_leader(self, leader: int, isr: Iterable[int], controller_epoch: int) -> LeaderIsr:
        """A new leadership: every change of leader or ISR by the controller bumps the epoch."""
        return LeaderIsr(
            leader,
            self.leader_epoch + 1,
            shared(tuple(isr)),
            controller_epoch,
            self.partition_epoch,
            self.isr_epochs,
        )

    def with_partition_epoch(self, partition_epoch: int) -> LeaderIsr:
        """The state as ZooKeeper holds it after a write that gave its znode this version."""
        return LeaderIsr(
            self.leader,
            self.leader_epoch,
            self.isr,
            self.controller_epoch,
            partition_epoch,
            self.isr_epochs,
        )


@dataclass
class ControllerContext:
    controller_id: int
    epoch: int = 0  # the controller epoch
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    assignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    topics_being_deleted: set[str] = field(default_factory=set)
    # broker -> its replicas that answered KAFKA_STORAGE_ERROR (Kafka's offline replicas)
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)
    # Reassignments in progress (KIP-455): `assignments` holds the full replica set, these the
    # replicas being added and removed, as /brokers/topics/<t> records them.
    adding_replicas: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)

    # -- brokers

    def broker_epochs(self) -> dict[int, int]:
        """Epochs of every broker the controller treats as registered (live or shutting down)."""
        return {b.id: b.epoch for b in self.live_brokers.values()}

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers

    def is_eligible(self, broker_id: int) -> bool:
        """Live and not shutting down: may lead, may join an ISR."""
        return broker_id in self.live_brokers and broker_id not in self.shutting_down

    def eligible_brokers(self) -> set[int]:
        return {b for b in self.live_brokers if b not in self.shutting_down}

    def with_isr_epochs(self, state: LeaderIsr) -> LeaderIsr:
        """The state as it is written: each ISR member with the epoch it is known under now (a
        member that is not live keeps the epoch recorded before, so its return is a bounce)."""
        live_brokers = self.live_brokers
        recorded: dict[int, int] | None = None
        epochs = []
        for broker in state.isr:
            live = live_brokers.get(broker)
            if live is not None:
                epochs.append((broker, live.epoch))
                continue
            if recorded is None:
                recorded = dict(state.isr_epochs)
            epoch = recorded.get(broker)
            if epoch is not None:
                epochs.append((broker, epoch))
        epochs.sort()
        isr_epochs = shared(tuple(epochs))
        if isr_epochs == state.isr_epochs:
            return state
        return LeaderIsr(
            state.leader,
            state.leader_epoch,
            state.isr,
            state.controller_epoch,
            state.partition_epoch,
            isr_epochs,
        )

    def is_replica_online(self, broker_id: int, tp: TopicPartition) -> bool:
        """Live, and its replica of `tp` not reported offline (a storage error)."""
        return self.is_live(broker_id) and tp not in self.offline_replicas.get(broker_id, ())

    def eligible_for(self, tp: TopicPartition, eligible: set[int] | None = None) -> set[int]:
        """The brokers that may lead `tp` or join its ISR: eligible (`eligible_brokers()`,
        or the set given) and their replica of it online."""
        base = self.eligible_brokers() if eligible is None else eligible
        if not self.offline_replicas:
            return base
        return {b for b in base if tp not in self.offline_replicas.get(b, ())}

    # -- topics and partitions

    def topics(self) -> list[str]:
        return sorted(self.topic_ids)

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp[0] == topic)

    def all_partitions(self) -> list[TopicPartition]:
        return sorted(self.assignments)

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        """Partitions with a replica on the broker (Kafka's partitionsOnBroker)."""
        return sorted(tp for tp, replicas in self.assignments.items() if broker_id in replicas)

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, s in self.states.items() if s.leader == broker_id)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignments[tp]

    def offline_partitions(self) -> Iterator[TopicPartition]:
        """Partitions without a live leader, not being deleted, in order."""
        live = self.live_brokers
        deleting = self.topics_being_deleted
        # sort only what is offline (usually nothing): this runs in every election
        offline = [
            tp
            for tp, state in self.states.items()
            if state.leader not in live and tp[0] not in deleting
        ]
        yield from sorted(offline)

    def add_topic(
        self, topic: str, topic_id: uuid.UUID, assignment: dict[int, tuple[int, ...]]
    ) -> None:
        self.topic_ids[topic] = topic_id
        for partition, replicas in assignment.items():
            self.assignments[(topic, partition)] = shared(tuple(replicas))

    def remove_topic(self, topic: str) -> None:
        self.topic_ids.pop(topic, None)
        for tp in self.partitions_of(topic):
            self.assignments.pop(tp, None)
            self.states.pop(tp, None)
            self.adding_replicas.pop(tp, None)
            self.removing_replicas.pop(tp, None)
            for offline in self.offline_replicas.values():
                offline.discard(tp)
        self.topics_being_deleted.discard(topic)
