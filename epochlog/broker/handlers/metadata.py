"""Metadata (v0-13) and DescribeCluster (v0-1): the cluster as this broker's cache knows it.

Every response lists all live brokers (librdkafka 2.10+ forgets brokers missing from a
Metadata response), each at its endpoint for the listener the client connected through, and
this broker itself even before the controller's first UpdateMetadata. Topics follow Kafka's ZK
broker (`KafkaApis.getTopicMetadata`, `ZkMetadataCache.getPartitionMetadata`):

- all topics for a null list (v1+) or an empty one (v0); v12+ may name a topic by id alone, and
  an unknown id is UNKNOWN_TOPIC_ID.
- an illegal name is INVALID_TOPIC_EXCEPTION; an unknown one is UNKNOWN_TOPIC_OR_PARTITION, or,
  when auto.create.topics.enable is on and the request allows it (AllowAutoTopicCreation, v4+),
  the topic is created through the `TopicAutoCreator` and answered LEADER_NOT_AVAILABLE until
  the controller has made its partitions.
- a partition whose leader is not live is LEADER_NOT_AVAILABLE with leader -1; v0 only, replicas
  and ISR are filtered to live brokers and a gap is REPLICA_NOT_AVAILABLE.
- v13's top-level ErrorCode is NONE (a proxy uses it for REBOOTSTRAP_REQUIRED).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.metadata_cache import NO_CONTROLLER, PartitionInfo
from epochlog.broker.replica_manager import known_topic_id
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode
from epochlog.storage.layout import validate_topic_name

log = logging.getLogger(__name__)

R = m.MetadataResponse
UNSUPPORTED_ENDPOINT_TYPE = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
BROKERS_ENDPOINT_TYPE = 1


def broker_endpoints(
    services: BrokerServices, listener: str
) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of every live broker on `listener`, this broker included."""
    result: dict[int, tuple[int, str, int, str | None]] = {}
    for broker in services.metadata_cache.live_brokers():
        endpoint = broker.endpoint_for(listener)
        if endpoint is not None:
            result[broker.broker_id] = (broker.broker_id, endpoint.host, endpoint.port, broker.rack)
    if services.broker_id not in result and services.endpoints:
        own = next((e for e in services.endpoints if e.listener == listener), services.endpoints[0])
        result[services.broker_id] = (services.broker_id, own.host, own.port, services.rack)
    return [result[i] for i in sorted(result)]


async def controller_for_clients(services: BrokerServices) -> int:
    """The controller a Metadata or DescribeCluster response names (-1: none known). While the
    cache names none a client could find, ZooKeeper is asked first (`locate_controller`)."""
    cache = services.metadata_cache
    controller = cache.controller_for_clients(services.broker_id)
    if controller == NO_CONTROLLER and services.locate_controller is not None:
        await services.locate_controller()
        controller = cache.controller_for_clients(services.broker_id)
    return controller


def _epoch_of(services: BrokerServices, broker_id: int) -> int:
    """The broker's epoch: its own generation, or what the controller last told about others."""
    if broker_id == services.broker_id:
        return services.epoch_holder.epoch
    return services.metadata_cache.broker_epoch(broker_id)


def _is_alive(services: BrokerServices, broker_id: int) -> bool:
    return broker_id == services.broker_id or services.metadata_cache.is_alive(broker_id)


def partition_metadata(services: BrokerServices, info: PartitionInfo, version: int) -> Any:
    replicas = list(info.replicas)
    isr = list(info.isr)
    error = ErrorCode.NONE
    leader = info.leader
    if leader < 0 or not _is_alive(services, leader):
        error = ErrorCode.LEADER_NOT_AVAILABLE
        leader = -1
    elif version == 0:
        live_replicas = [r for r in replicas if _is_alive(services, r)]
        live_isr = [r for r in isr if _is_alive(services, r)]
        if len(live_replicas) < len(replicas) or len(live_isr) < len(isr):
            error = ErrorCode.REPLICA_NOT_AVAILABLE
            replicas, isr = live_replicas, live_isr
    return R.MetadataResponsePartition(
        error_code=error,
        partition_index=info.partition,
        leader_id=leader,
        leader_epoch=info.leader_epoch,
        replica_nodes=replicas,
        isr_nodes=isr,
        offline_replicas=list(info.offline_replicas),
    )


def topic_metadata(services: BrokerServices, name: str, version: int) -> Any:
    cache = services.metadata_cache
    partitions = cache.partitions(name)
    return R.MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=name,
        topic_id=cache.topic_id(name) or uuid.UUID(int=0),
        partitions=[
            partition_metadata(services, partitions[i], version) for i in sorted(partitions)
        ],
    )


async def _auto_create(services: BrokerServices, name: str) -> ErrorCode:
    creator = services.auto_creator
    assert creator is not None
    try:
        await creator.create_topic(name)
    except Exception as exc:
        code = getattr(exc, "error_code", None)
        if isinstance(code, int):
            log.info("auto-creating topic %s: %s", name, exc)
            return ErrorCode.of(code)
        log.exception("auto-creating topic %s failed", name)
        return ErrorCode.UNKNOWN_SERVER_ERROR
    log.info("auto-created topic %s", name)
    return ErrorCode.LEADER_NOT_AVAILABLE


async def handle_metadata(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    version = request.api_version
    body = request.body
    cache = services.metadata_cache
    controller_id = await controller_for_clients(services)  # first: it may list one more broker
    response = R(
        brokers=[
            R.MetadataResponseBroker(node_id=i, host=h, port=p, rack=r)
            for i, h, p, r in broker_endpoints(services, connection.listener)
        ],
        cluster_id=services.cluster_id,
        controller_id=controller_id,
        error_code=ErrorCode.NONE,
    )
    if body.topics is None or (version == 0 and not body.topics):
        response.topics = [topic_metadata(services, name, version) for name in cache.topics()]
        return response
    allow_auto_create = services.config["auto.create.topics.enable"] and (
        version < 4 or body.allow_auto_topic_creation
    )
    seen: set[str] = set()
    for requested in body.topics:
        name = requested.name
        if name is None:
            topic_id = known_topic_id(requested.topic_id)
            name = services.replica_manager.topic_name_for_id(topic_id) if topic_id else None
            if name is None:
                response.topics.append(
                    R.MetadataResponseTopic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                        name=None,
                        topic_id=requested.topic_id,
                    )
                )
                continue
        if name in seen:
            continue
        seen.add(name)
        try:
            validate_topic_name(name)
        except ValueError:
            response.topics.append(
                R.MetadataResponseTopic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name)
            )
            continue
        if cache.has_topic(name):
            response.topics.append(topic_metadata(services, name, version))
            continue
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if allow_auto_create and services.auto_creator is not None:
            error = await _auto_create(services, name)
        response.topics.append(R.MetadataResponseTopic(error_code=error, name=name))
    return response


async def handle_describe_cluster(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    D = m.DescribeClusterResponse
    endpoint_type = request.body.endpoint_type if request.api_version >= 1 else 1
    if endpoint_type != BROKERS_ENDPOINT_TYPE:
        return D(
            error_code=UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"endpoint type {endpoint_type}: a ZooKeeper-mode broker lists brokers "
            "only (type 1)",
            endpoint_type=endpoint_type,
            cluster_id=services.cluster_id or "",
        )
    controller_id = await controller_for_clients(services)  # first: it may list one more broker
    return D(
        error_code=ErrorCode.NONE,
        endpoint_type=BROKERS_ENDPOINT_TYPE,
        cluster_id=services.cluster_id or "",
        controller_id=controller_id,
        brokers=[
            D.DescribeClusterBroker(
                broker_id=i, host=h, port=p, rack=r, broker_epoch=_epoch_of(services, i)
            )
            for i, h, p, r in broker_endpoints(services, connection.listener)
        ],
    )
