"""Control requests collected per event and built once per broker (ControllerBrokerRequestBatch).

While the controller handles one event it notes which brokers must hear about which partitions
(LeaderAndIsr), which brokers need fresh metadata (UpdateMetadata) and which replicas must stop
(StopReplica). `build` then turns the notes into at most one request of each kind per broker,
from the context as it stands after the event's ZooKeeper writes, each carrying the destination
broker's epoch as the controller knows it (KIP-380), so a broker can tell a request meant for
an earlier generation of itself.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from epochlog.controller.context import (
    LEADER_DURING_DELETE,
    ControllerContext,
    TopicPartition,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey
from epochlog.protocol.codec import Message
from epochlog.protocol.schema import ZERO_UUID

LEADER_AND_ISR_FULL = 2  # LeaderAndIsr v5+ Type: a full list of the broker's partitions


@dataclass(frozen=True)
class ControlRequest:
    """A request for one broker. `build(version)` gives the body at the version the connection
    negotiated (fields of other versions left at their defaults)."""

    broker_id: int
    api_key: ApiKey
    build: Callable[[int], Message]
    broker_epoch: int  # the destination's epoch the request was built for

    @property
    def body(self) -> Message:
        """The body at the newest version we speak."""
        return self.build(APIS[self.api_key].max_version)


@dataclass
class RequestBatch:
    leader_and_isr: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)
    full_leader_and_isr: set[int] = field(default_factory=set)
    update_metadata: dict[int, set[TopicPartition]] = field(default_factory=dict)
    # partitions whose state changed: every live broker hears about them (as Kafka does)
    changed_partitions: set[TopicPartition] = field(default_factory=set)
    stop_replica: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)

    def add_leader_and_isr(
        self, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False
    ) -> None:
        for broker in brokers:
            self.leader_and_isr.setdefault(broker, {})[tp] = is_new
        self.changed_partitions.add(tp)

    def mark_full(self, broker: int) -> None:
        """The broker's LeaderAndIsr lists every partition it hosts (first of a generation)."""
        self.full_leader_and_isr.add(broker)

    def add_update_metadata(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        """UpdateMetadata to `brokers` with `partitions` (none: just the live broker list)."""
        partitions = set(partitions)
        for broker in brokers:
            self.update_metadata.setdefault(broker, set()).update(partitions)

    def add_changed_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions every live broker must hear about (deletions, ISR changes)."""
        self.changed_partitions.update(partitions)

    def add_stop_replica(self, broker: int, tp: TopicPartition, delete: bool) -> None:
        self.stop_replica.setdefault(broker, {})[tp] = delete

    def build(self, ctx: ControllerContext) -> Iterator[ControlRequest]:
        """The requests, LeaderAndIsr first, built one at a time so the caller can send each
        as soon as it exists (new leaders start while later requests are still being built).
        `ctx` must not change until the iteration ends."""
        # A partition's state is built once and shared by every broker's LeaderAndIsr that
        # carries it (a failover tells both replicas of each partition the same state).
        shared: dict[tuple[TopicPartition, bool], Any] = {}
        for broker, partitions in sorted(self.leader_and_isr.items()):
            info = ctx.live_brokers.get(broker)
            if info is None:
                continue
            yield ControlRequest(
                broker,
                ApiKey.LEADER_AND_ISR,
                _versioned(self._leader_and_isr(ctx, broker, partitions, info.epoch, shared)),
                info.epoch,
            )
        targets = set(self.update_metadata)
        if self.changed_partitions:
            targets |= set(ctx.live_brokers)
        # Brokers told about the same partitions share one body but for the broker epoch: a
        # failover sends the same 10,000 partition states to every broker.
        bodies: dict[frozenset[TopicPartition], m.UpdateMetadataRequest] = {}
        for broker in sorted(targets):
            info = ctx.live_brokers.get(broker)
            if info is None:
                continue
            named = self.update_metadata.get(broker, set())
            partitions = frozenset(named | self.changed_partitions)
            body = bodies.get(partitions)
            if body is None:
                body = bodies[partitions] = update_metadata(ctx, partitions, info.epoch)
            yield ControlRequest(
                broker,
                ApiKey.UPDATE_METADATA,
                _versioned(_with_broker_epoch(body, info.epoch)),
                info.epoch,
            )
        for broker, stopped in sorted(self.stop_replica.items()):
            info = ctx.live_brokers.get(broker)
            if info is None:
                continue
            yield ControlRequest(
                broker,
                ApiKey.STOP_REPLICA,
                _versioned(self._stop_replica(ctx, stopped, info.epoch)),
                info.epoch,
            )

    def _leader_and_isr(
        self,
        ctx: ControllerContext,
        broker: int,
        partitions: dict[TopicPartition, bool],
        broker_epoch: int,
        shared: dict[tuple[TopicPartition, bool], Any],
    ) -> m.LeaderAndIsrRequest:
        # Per partition: one dict lookup each and a positional constructor (the codec takes
        # tuples for arrays), as this runs once per partition of a 100,000-partition event.
        by_topic: dict[str, list[m.LeaderAndIsrRequest.LeaderAndIsrPartitionState]] = {}
        leaders: set[int] = set()
        states = ctx.states
        assignments = ctx.assignments
        adding = ctx.adding_replicas
        removing = ctx.removing_replicas
        make = m.LeaderAndIsrRequest.LeaderAndIsrPartitionState
        current_topic = None
        current: list[m.LeaderAndIsrRequest.LeaderAndIsrPartitionState] = []
        for key in sorted(partitions.items()):
            tp = key[0]
            state = states.get(tp)
            if state is None:
                continue
            topic = tp[0]
            if topic != current_topic:
                current_topic = topic
                current = by_topic.setdefault(topic, [])
            entry = shared.get(key)
            if entry is None:
                entry = shared[key] = make(
                    partition_index=tp[1],
                    controller_epoch=state.controller_epoch,
                    leader=state.leader,
                    leader_epoch=state.leader_epoch,
                    isr=state.isr,
                    partition_epoch=state.partition_epoch,
                    replicas=assignments[tp],
                    adding_replicas=adding.get(tp, ()) if adding else (),
                    removing_replicas=removing.get(tp, ()) if removing else (),
                    is_new=key[1],
                )
            current.append(entry)
            leaders.add(state.leader)
        leaders.discard(-1)
        return m.LeaderAndIsrRequest(
            controller_id=ctx.controller_id,
            controller_epoch=ctx.epoch,
            broker_epoch=broker_epoch,
            type=LEADER_AND_ISR_FULL if broker in self.full_leader_and_isr else 0,
            topic_states=[
                m.LeaderAndIsrRequest.LeaderAndIsrTopicState(
                    topic_name=topic, topic_id=ctx.topic_ids[topic], partition_states=states
                )
                for topic, states in sorted(by_topic.items())
                if topic in ctx.topic_ids
            ],
            live_leaders=[
                m.LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
                    broker_id=b, host_name=ctx.live_brokers[b].host, port=ctx.live_brokers[b].port
                )
                for b in sorted(leaders)
                if b in ctx.live_brokers
            ],
        )

    def _stop_replica(
        self, ctx: ControllerContext, partitions: dict[TopicPartition, bool], broker_epoch: int
    ) -> m.StopReplicaRequest:
        by_topic: dict[str, list[m.StopReplicaRequest.StopReplicaPartitionState]] = {}
        for (topic, partition), delete in sorted(partitions.items()):
            state = ctx.states.get((topic, partition))
            by_topic.setdefault(topic, []).append(
                m.StopReplicaRequest.StopReplicaPartitionState(
                    partition_index=partition,
                    # -2 overrides any epoch check when deleting (Kafka's EpochDuringDelete)
                    leader_epoch=-2 if delete else (state.leader_epoch if state else -1),
                    delete_partition=delete,
                )
            )
        delete_all = all(partitions.values())
        return m.StopReplicaRequest(
            controller_id=ctx.controller_id,
            controller_epoch=ctx.epoch,
            broker_epoch=broker_epoch,
            delete_partitions=delete_all,
            topics=[
                m.StopReplicaRequest.StopReplicaTopicV1(
                    name=topic, partition_indexes=[p.partition_index for p in states]
                )
                for topic, states in sorted(by_topic.items())
            ],
            topic_states=[
                m.StopReplicaRequest.StopReplicaTopicState(
                    topic_name=topic, partition_states=states
                )
                for topic, states in sorted(by_topic.items())
            ],
        )


def _with_broker_epoch(body: m.UpdateMetadataRequest, epoch: int) -> m.UpdateMetadataRequest:
    copied = copy.copy(body)  # shallow: the topic states stay shared
    copied.broker_epoch = epoch
    return copied


def _versioned(body: Message) -> Callable[[int], Message]:
    """A builder that clears the fields `version` lacks (the newest layout is built first)."""

    def build(version: int) -> Message:
        if isinstance(body, m.StopReplicaRequest):
            if version >= 3:
                return m.StopReplicaRequest(
                    controller_id=body.controller_id,
                    controller_epoch=body.controller_epoch,
                    broker_epoch=body.broker_epoch,
                    topic_states=body.topic_states,
                )
            return m.StopReplicaRequest(
                controller_id=body.controller_id,
                controller_epoch=body.controller_epoch,
                broker_epoch=body.broker_epoch,
                delete_partitions=body.delete_partitions,
                topics=body.topics,
            )
        if isinstance(body, m.LeaderAndIsrRequest) and version < 5:
            body.type = 0
        return body

    return build


def update_metadata(
    ctx: ControllerContext, partitions: Iterable[TopicPartition], broker_epoch: int
) -> m.UpdateMetadataRequest:
    """UpdateMetadata with the named partitions' states and every live broker (with its epoch)."""
    by_topic: dict[str, list[m.UpdateMetadataRequest.UpdateMetadataPartitionState]] = {}
    states = ctx.states
    assignments = ctx.assignments
    live = ctx.live_brokers
    offline = ctx.offline_replicas
    deleted = ctx.topics_being_deleted
    make = m.UpdateMetadataRequest.UpdateMetadataPartitionState
    current_topic = None
    current: list[m.UpdateMetadataRequest.UpdateMetadataPartitionState] = []
    deleting = False
    # replica set -> its replicas on brokers that are gone (shared: few distinct replica sets)
    offline_by_replicas: dict[tuple[int, ...], list[int]] = {}
    for tp in sorted(partitions):
        state = states.get(tp)
        if state is None:
            continue
        topic = tp[0]
        if topic != current_topic:
            current_topic = topic
            current = by_topic.setdefault(topic, [])
            deleting = topic in deleted
        replicas = assignments.get(tp, ())
        if offline:
            offline_replicas = [r for r in replicas if not ctx.is_replica_online(r, tp)]
        else:  # the usual case: a replica is offline only when its broker is gone
            found = offline_by_replicas.get(replicas)
            if found is None:
                found = offline_by_replicas[replicas] = [r for r in replicas if r not in live]
            offline_replicas = found
        current.append(
            make(
                partition_index=tp[1],
                controller_epoch=state.controller_epoch,
                leader=LEADER_DURING_DELETE if deleting else state.leader,
                leader_epoch=state.leader_epoch,
                isr=state.isr,
                zk_version=state.partition_epoch,
                replicas=replicas,
                offline_replicas=offline_replicas,
            )
        )
    return m.UpdateMetadataRequest(
        controller_id=ctx.controller_id,
        controller_epoch=ctx.epoch,
        broker_epoch=broker_epoch,
        topic_states=[
            m.UpdateMetadataRequest.UpdateMetadataTopicState(
                topic_name=topic,
                topic_id=ctx.topic_ids.get(topic, ZERO_UUID),
                partition_states=states,
            )
            for topic, states in sorted(by_topic.items())
        ],
        live_brokers=[
            m.UpdateMetadataRequest.UpdateMetadataBroker(
                id=b.id,
                endpoints=[
                    m.UpdateMetadataRequest.UpdateMetadataEndpoint(
                        port=port, host=host, listener=listener, security_protocol=protocol
                    )
                    for listener, host, port, protocol in (
                        b.endpoints or ((b.listener, b.host, b.port, 0),)
                    )
                ],
                rack=b.rack,
                broker_epoch=b.epoch,
            )
            for b in sorted(ctx.live_brokers.values(), key=lambda b: b.id)
        ],
    )
