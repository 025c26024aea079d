"""The controller's requests to this broker: LeaderAndIsr (v2-6), UpdateMetadata (v5-7),
StopReplica (v1-3).

Each first passes the top-level gate of `control_rules.check_control_request`: a request built
for an earlier generation of this broker (BrokerEpoch older than the current one, KIP-380) gets
STALE_BROKER_EPOCH, one from an older controller epoch STALE_CONTROLLER_EPOCH; either way nothing
in it is applied and every partition it named carries the same error. Then:

- LeaderAndIsr: the replica manager applies each partition (become leader or follower, per the
  epoch rules) and reports an error code per partition.
- UpdateMetadata: the metadata cache takes the live brokers (with their broker epochs) and the
  partition states.
- StopReplica: the replica manager stops each partition whose leader epoch allows it, deleting
  its log when asked.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from epochlog.broker.control_rules import check_control_request
from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.handlers.errors import error_response, stop_replica_entries
from epochlog.metrics.process_stats import STATS
from epochlog.metrics.request_stats import kafka_request_name
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, Request
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.schema import ZERO_UUID

log = logging.getLogger(__name__)


def _gate(services: BrokerServices, request: Request) -> ErrorCode:
    body = request.body
    error = check_control_request(
        kip380_enabled=services.kip380_enabled,
        request_broker_epoch=body.broker_epoch,
        current_broker_epoch=services.epoch_holder.epoch,
        request_controller_epoch=body.controller_epoch,
        latest_controller_epoch=services.replica_manager.controller_epoch,
    )
    if error is not ErrorCode.NONE:
        STATS.count_fenced(error.name, kafka_request_name(request.api_key))
        log.warning(
            "%s from controller %d refused with %s: request broker epoch %d (current %d), "
            "controller epoch %d (latest %d)",
            ApiKey(request.api_key).name,
            body.controller_id,
            error.name,
            body.broker_epoch,
            services.epoch_holder.epoch,
            body.controller_epoch,
            services.replica_manager.controller_epoch,
        )
    return error


async def handle_leader_and_isr(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.LeaderAndIsrResponse
    version = request.api_version
    error = _gate(services, request)
    if error is not ErrorCode.NONE:
        return error_response(ApiKey.LEADER_AND_ISR, version, request.body, error)
    # In steps: a LeaderAndIsr for thousands of partitions must not stop the broker serving
    # (follower fetches included) for the seconds it takes; the answer waits for every step.
    results = await services.replica_manager.apply_leader_and_isr_in_steps(request.body, version)
    response = R(error_code=ErrorCode.NONE)
    if version < 5:
        response.partition_errors = [
            R.LeaderAndIsrPartitionError(topic_name=topic, partition_index=index, error_code=code)
            for topic, _id, index, code in results
        ]
        return response
    by_topic: dict[tuple[str, uuid.UUID], Any] = {}
    for topic, topic_id, index, code in results:
        key = (topic, topic_id or ZERO_UUID)
        entry = by_topic.get(key)
        if entry is None:
            entry = by_topic[key] = R.LeaderAndIsrTopicError(topic_id=key[1])
            response.topics.append(entry)
        entry.partition_errors.append(
            R.LeaderAndIsrPartitionError(partition_index=index, error_code=code)
        )
    return response


async def handle_update_metadata(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    error = _gate(services, request)
    if error is not ErrorCode.NONE:
        return m.UpdateMetadataResponse(error_code=error)
    body = request.body
    rm = services.replica_manager
    rm.controller_epoch = max(rm.controller_epoch, body.controller_epoch)
    deleted = services.metadata_cache.apply_update_metadata(body)
    if deleted:
        log.info("metadata: %d partitions deleted", len(deleted))
    return m.UpdateMetadataResponse(error_code=ErrorCode.NONE)


async def handle_stop_replica(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.StopReplicaResponse
    version = request.api_version
    error = _gate(services, request)
    if error is not ErrorCode.NONE:
        return error_response(ApiKey.STOP_REPLICA, version, request.body, error)
    rm = services.replica_manager
    rm.controller_epoch = max(rm.controller_epoch, request.body.controller_epoch)
    results = await rm.stop_replicas_in_steps(stop_replica_entries(request.body, version))
    return R(
        error_code=ErrorCode.NONE,
        partition_errors=[
            R.StopReplicaPartitionError(topic_name=topic, partition_index=index, error_code=code)
            for topic, index, code in results
        ],
    )
