"""ListOffsets (v1-8) and OffsetForLeaderEpoch (v2-4): offsets by time and by leader epoch.

ListOffsets: ReplicaId -1 is a client (latest = the HW, or with IsolationLevel 1,
read_committed, the last stable offset), -2 a debugging client allowed to ask any replica, and a
broker id a follower (latest = the LEO). -2 / -4 give the log start offset, -3 the record with
the largest timestamp, other timestamps the first record at or after them. Each answer carries
the leader epoch of the found offset. A partition named twice is INVALID_REQUEST.

OffsetForLeaderEpoch: the end offset of the requested leader epoch in the leader's epoch cache,
which a follower (ReplicaId >= 0, v3+) truncates to. Leader only. Both APIs check the request's
CurrentLeaderEpoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.partition import PartitionError
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode
from epochlog.storage import StorageError
from epochlog.storage.errors import LogDamageError

log = logging.getLogger(__name__)

CONSUMER_REPLICA_ID = -1
DEBUG_REPLICA_ID = -2


async def handle_list_offsets(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.ListOffsetsResponse
    body = request.body
    version = request.api_version
    rm = services.replica_manager
    is_client = body.replica_id == CONSUMER_REPLICA_ID
    from_leader_only = body.replica_id != DEBUG_REPLICA_ID
    counts = Counter((t.name, p.partition_index) for t in body.topics for p in t.partitions)
    topics = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            entry = R.ListOffsetsPartitionResponse(partition_index=p.partition_index)
            partitions.append(entry)
            if counts[(topic.name, p.partition_index)] > 1:
                entry.error_code = ErrorCode.INVALID_REQUEST
                continue
            try:
                partition = rm.partition_or_error(topic.name, p.partition_index)
                found = partition.fetch_offset_for_timestamp(
                    p.timestamp,
                    current_leader_epoch=p.current_leader_epoch,
                    is_client=is_client,
                    fetch_only_from_leader=from_leader_only,
                    version=version,
                    isolation_level=body.isolation_level,
                )
            except (PartitionError, StorageError) as exc:
                log.debug("ListOffsets %s-%d: %s", topic.name, p.partition_index, exc)
                if isinstance(exc, LogDamageError):
                    rm.on_log_damage(partition, exc)
                entry.error_code = exc.error_code
                continue
            if found is not None:
                entry.timestamp = found.timestamp
                entry.offset = found.offset
                if version >= 4:
                    epoch = found.leader_epoch
                    entry.leader_epoch = epoch if epoch is not None else -1
        topics.append(R.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return R(topics=topics)


async def handle_offset_for_leader_epoch(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.OffsetForLeaderEpochResponse
    rm = services.replica_manager
    topics = []
    for topic in request.body.topics:
        partitions = []
        for p in topic.partitions:
            entry = R.EpochEndOffset(partition=p.partition)
            partitions.append(entry)
            try:
                partition = rm.partition_or_error(topic.topic, p.partition)
                epoch, end_offset = partition.last_offset_for_leader_epoch(
                    p.current_leader_epoch, p.leader_epoch
                )
            except (PartitionError, StorageError) as exc:
                entry.error_code = exc.error_code
                continue
            entry.leader_epoch = epoch
            entry.end_offset = end_offset
        topics.append(R.OffsetForLeaderTopicResult(topic=topic.topic, partitions=partitions))
    return R(topics=topics)
