"""Epoch checks on the controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica).

Pure decisions, Kafka's rules (fact sheet section 4a), no state of their own:

1. Broker epoch (KIP-380): a request whose BrokerEpoch is not -1 and is older than this broker's
   current epoch was built for an earlier generation of this broker. It is answered with a
   top-level STALE_BROKER_EPOCH and nothing in it is applied. A newer epoch is fine (the
   controller can learn the new czxid before the broker does). With the mechanism switched off
   (`epochlog.test.kip380.enabled=false`) every request passes, which is what the scenario
   tests need to show the damage.
2. Controller epoch: a request from an older controller epoch than the newest seen is answered
   with STALE_CONTROLLER_EPOCH and not applied.
3. Per partition, LeaderAndIsr: a different topic id than the one the log holds is
   INCONSISTENT_TOPIC_ID; a broker not among the replicas answers UNKNOWN_TOPIC_OR_PARTITION; a
   leader epoch newer than the local one is applied (leader if the request names this broker,
   else follower); an older or equal one is STALE_CONTROLLER_EPOCH and ignored, except that an
   equal epoch that only brings the topic id of a partition without one is accepted.
4. Per partition, StopReplica: leader epoch -2 (deletion), -1 (no epoch) or >= the local one is
   accepted; an older one is FENCED_LEADER_EPOCH.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from epochlog.protocol.errors import ErrorCode

NO_EPOCH = -1  # a request (or partition) without a broker or leader epoch
EPOCH_DURING_DELETE = -2  # StopReplica / UpdateMetadata: the topic is being deleted


def is_broker_epoch_stale(request_epoch: int, current_epoch: int) -> bool:
    """KIP-380: the request was built for an earlier generation of this broker."""
    return request_epoch != NO_EPOCH and request_epoch < current_epoch


def check_control_request(
    *,
    kip380_enabled: bool,
    request_broker_epoch: int,
    current_broker_epoch: int,
    request_controller_epoch: int,
    latest_controller_epoch: int,
) -> ErrorCode:
    """The top-level verdict on a control request: NONE to go ahead, else the error to answer."""
    if kip380_enabled and is_broker_epoch_stale(request_broker_epoch, current_broker_epoch):
        return ErrorCode.STALE_BROKER_EPOCH
    if request_controller_epoch < latest_controller_epoch:
        return ErrorCode.STALE_CONTROLLER_EPOCH
    return ErrorCode.NONE


class LeaderAndIsrAction(enum.Enum):
    BECOME_LEADER = "leader"
    BECOME_FOLLOWER = "follower"
    ASSIGN_TOPIC_ID = "topic id"  # equal epoch, only the topic id is new
    SKIP = "skip"


@dataclass(frozen=True, slots=True)
class PartitionVerdict:
    action: LeaderAndIsrAction
    error: ErrorCode


def leader_and_isr_verdict(
    *,
    local_broker_id: int,
    local_leader_epoch: int,
    local_topic_id: uuid.UUID | None,
    request_topic_id: uuid.UUID | None,
    leader: int,
    leader_epoch: int,
    replicas: tuple[int, ...] | list[int],
) -> PartitionVerdict:
    """What to do with one partition of a LeaderAndIsr that passed the top-level checks.

    `local_leader_epoch` is -1 for a partition this broker does not host yet; topic ids are None
    when unknown (the zero UUID means unknown too)."""
    skip = LeaderAndIsrAction.SKIP
    if (
        local_topic_id is not None
        and request_topic_id is not None
        and local_topic_id != request_topic_id
    ):
        return PartitionVerdict(skip, ErrorCode.INCONSISTENT_TOPIC_ID)
    if leader_epoch > local_leader_epoch:
        if local_broker_id not in replicas:
            return PartitionVerdict(skip, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if leader == local_broker_id:
            return PartitionVerdict(LeaderAndIsrAction.BECOME_LEADER, ErrorCode.NONE)
        return PartitionVerdict(LeaderAndIsrAction.BECOME_FOLLOWER, ErrorCode.NONE)
    if leader_epoch == local_leader_epoch and local_topic_id is None and request_topic_id:
        return PartitionVerdict(LeaderAndIsrAction.ASSIGN_TOPIC_ID, ErrorCode.NONE)
    return PartitionVerdict(skip, ErrorCode.STALE_CONTROLLER_EPOCH)


def stop_replica_verdict(*, local_leader_epoch: int | None, request_leader_epoch: int) -> ErrorCode:
    """NONE to stop (and maybe delete) the replica, FENCED_LEADER_EPOCH to refuse.
    `local_leader_epoch` is None for a partition this broker does not host."""
    if local_leader_epoch is None:
        return ErrorCode.NONE
    if request_leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH):
        return ErrorCode.NONE
    if request_leader_epoch >= local_leader_epoch:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH
