"""Everything the controller reacts to, as typed values (Kafka's ControllerEvent classes).

How it works. Every input — a ZooKeeper watch firing, a request from a broker or a client, a
timer, the answer to a LeaderAndIsr — becomes one of the frozen values below, put on the
controller's single queue and handled to completion before the next (`Controller._run`), so the
context has one mutator and no locks. `Controller` maps each type to its one handler in a table
(`Controller._handlers`); this module is the whole list of what can happen to a controller, and
no code is queued as a closure.

Events from ZooKeeper carry nothing: their handler reads what changed (a watch says only that
something did). Requests carry their body and are answered with the handler's return value
(`Controller._enqueue_and_wait`); the others are fire-and-forget (`Controller._enqueue`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.config.broker import BrokerConfig
from epochlog.controller.context import TopicPartition
from epochlog.controller.decisions import Plan
from epochlog.controller.partition_admin import ElectionType
from epochlog.controller.request_batch import ControlRequest

# -- ZooKeeper watches and timers (fire-and-forget) ------------------------------------------


@dataclass(frozen=True, slots=True)
class Failover:
    """This broker was elected: tell every broker the loaded context, elect what is offline."""


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """/brokers/ids changed: brokers registered, died or bounced (KIP-380)."""


@dataclass(frozen=True, slots=True)
class TopicChange:
    """/brokers/topics changed: topics created (by us or a tool) or removed."""


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """/admin/delete_topics changed: topics marked for deletion."""


@dataclass(frozen=True, slots=True)
class PreferredReplicaElection:
    """/admin/preferred_replica_election appeared (`epochlog leaders elect --preferred`)."""


@dataclass(frozen=True, slots=True)
class AutoLeaderRebalance:
    """The leader.imbalance.check.interval.seconds timer fired."""


@dataclass(frozen=True, slots=True)
class LogDirEvents:
    """/log_dir_event_notification has children (a broker's log dir failed or came back)."""


@dataclass(frozen=True, slots=True)
class ZkReassignment:
    """/admin/reassign_partitions was created (the ZooKeeper way to reassign)."""


@dataclass(frozen=True, slots=True)
class TopicConfigChanged:
    """A topic's dynamic config changed (ZooKeeper notification, via this broker)."""

    topic: str
    config: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class BrokerConfigChanged:
    """This broker's dynamic configs changed."""

    config: BrokerConfig


@dataclass(frozen=True, slots=True)
class LeaderAndIsrAnswered:
    """A broker answered a LeaderAndIsr (storage errors, or a retriable error for all)."""

    request: ControlRequest
    response: Any


@dataclass(frozen=True, slots=True)
class LeaderAndIsrResend:
    """The backoff after a failed LeaderAndIsr ran out: send its partitions' states again."""

    broker: int
    broker_epoch: int  # the generation the failed request was for
    partitions: tuple[TopicPartition, ...]
    full: bool


@dataclass(frozen=True, slots=True)
class ReassignmentIsrChanged:
    """Accepted ISR changes of partitions being reassigned: they may complete now."""

    partitions: tuple[TopicPartition, ...]


# -- requests (answered with the handler's result) ------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTopics:
    request: Any  # CreateTopicsRequest


@dataclass(frozen=True, slots=True)
class DeleteTopics:
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AlterPartition:
    request: Any  # AlterPartitionRequest


@dataclass(frozen=True, slots=True)
class ControlledShutdown:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class CreatePartitions:
    request: Any  # CreatePartitionsRequest


@dataclass(frozen=True, slots=True)
class ElectLeaders:
    partitions: tuple[TopicPartition, ...] | None  # None: every partition
    election_type: ElectionType
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class ElectPreferredLeaders:
    partitions: tuple[TopicPartition, ...] | None  # None: every partition


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignments:
    request: Any  # AlterPartitionReassignmentsRequest


@dataclass(frozen=True, slots=True)
class ListPartitionReassignments:
    request: Any  # ListPartitionReassignmentsRequest


@dataclass(frozen=True, slots=True)
class ExecutePlan:
    """Write and send a plan made outside the controller (an operator's tool, a test)."""

    plan: Plan


@dataclass(frozen=True, slots=True)
class StopTakingEvents:
    """The controller steps down once the events before this one are done."""


ControllerEvent = (
    Failover
    | BrokerChange
    | TopicChange
    | TopicDeletion
    | PreferredReplicaElection
    | AutoLeaderRebalance
    | LogDirEvents
    | ZkReassignment
    | TopicConfigChanged
    | BrokerConfigChanged
    | LeaderAndIsrAnswered
    | LeaderAndIsrResend
    | ReassignmentIsrChanged
    | CreateTopics
    | DeleteTopics
    | AlterPartition
    | ControlledShutdown
    | CreatePartitions
    | ElectLeaders
    | ElectPreferredLeaders
    | AlterPartitionReassignments
    | ListPartitionReassignments
    | ExecutePlan
    | StopTakingEvents
)
