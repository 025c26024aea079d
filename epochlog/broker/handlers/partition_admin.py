"""CreatePartitions (37), ElectLeaders (43) and DeleteRecords (21).

CreatePartitions and ElectLeaders are controller work, as in Kafka's ZooKeeper mode: the active
controller answers them (through the `ControllerGateway`); any other broker answers
NOT_CONTROLLER for every topic or partition named (for ElectLeaders with null partitions, every
partition in its metadata), and the client retries at the controller after a metadata refresh.
An ElectionType other than 0 (preferred) or 1 (unclean) is INVALID_REQUEST at the top level.

DeleteRecords is the leaders' work: each partition is handled by `broker.delete_records` on this
broker, which answers once the followers have the new log start offset (or the timeout). A
partition named twice is INVALID_REQUEST, as Kafka's broker answers it.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from epochlog.broker.collaborators import CollaboratorError
from epochlog.broker.delete_records import delete_records
from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

PREFERRED, UNCLEAN = 0, 1


async def handle_create_partitions(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.CreatePartitionsResponse

    def not_controller() -> Any:
        names = dict.fromkeys(t.name for t in request.body.topics)
        return R(
            results=[
                R.CreatePartitionsTopicResult(name=n, error_code=ErrorCode.NOT_CONTROLLER)
                for n in names
            ]
        )

    if services.controller.is_active:
        try:
            return await services.controller.create_partitions(request.body, request.api_version)
        except CollaboratorError as exc:
            if exc.error_code is not ErrorCode.NOT_CONTROLLER:
                raise
            log.info("CreatePartitions answered as not the controller: %s", exc)
    return not_controller()


def _requested_partitions(body: Any) -> list[tuple[str, int]] | None:
    if body.topic_partitions is None:
        return None
    return [(t.topic, p) for t in body.topic_partitions for p in t.partitions]


async def handle_elect_leaders(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.ElectLeadersResponse
    body = request.body
    election_type = body.election_type if request.api_version >= 1 else PREFERRED
    if election_type not in (PREFERRED, UNCLEAN):
        return R(error_code=ErrorCode.INVALID_REQUEST)
    partitions = _requested_partitions(body)
    results: dict[tuple[str, int], tuple[ErrorCode, str | None]] | None = None
    if services.controller.is_active:
        try:
            results = await services.controller.elect_leaders(
                partitions, election_type, body.timeout_ms
            )
        except CollaboratorError as exc:
            if exc.error_code is not ErrorCode.NOT_CONTROLLER:
                raise
            log.info("ElectLeaders answered as not the controller: %s", exc)
    if results is None:
        named = partitions
        if named is None:
            cache = services.metadata_cache
            named = [(t, p) for t in cache.topics() for p in cache.partitions(t)]
        results = dict.fromkeys(named, (ErrorCode.NOT_CONTROLLER, None))
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), (error, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            R.PartitionResult(partition_id=partition, error_code=error, error_message=message)
        )
    return R(
        replica_election_results=[
            R.ReplicaElectionResult(topic=topic, partition_result=entries)
            for topic, entries in by_topic.items()
        ]
    )


async def handle_delete_records(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.DeleteRecordsResponse
    body = request.body
    counts = Counter((t.name, p.partition_index) for t in body.topics for p in t.partitions)
    offsets = {
        (t.name, p.partition_index): p.offset
        for t in body.topics
        for p in t.partitions
        if counts[(t.name, p.partition_index)] == 1
    }
    answered = await delete_records(services.replica_manager, offsets, body.timeout_ms)
    topics = []
    for topic in body.topics:
        entries = []
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            low, error = answered.get(key, (-1, ErrorCode.INVALID_REQUEST))
            entries.append(
                R.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=low, error_code=error
                )
            )
        topics.append(R.DeleteRecordsTopicResult(name=topic.name, partitions=entries))
    return R(topics=topics)
