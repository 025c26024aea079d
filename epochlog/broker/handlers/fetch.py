"""Fetch (v4-16): consumers and followers read; the log bytes go out with sendfile.

The request is turned into `reads.FetchParams` and one `PartitionFetch` per partition; v13+
names topics by id (an id this broker does not know is UNKNOWN_TOPIC_ID), v15+ carries the
follower's id and broker epoch in the ReplicaState tag instead of ReplicaId. The answer's
Records are the `FileSlice`s the log returned: the server encodes the response with holes and
sends each slice straight from its segment file. A READ_COMMITTED consumer reads up to the
last stable offset and gets the aborted transactions (producer id, first offset) overlapping
what it may read; a READ_UNCOMMITTED one reads to the HW and gets a null list, as Kafka sends.

Incremental fetch sessions (KIP-227) are not supported: every response has SessionId 0, which
tells the client there is no session, so it sends full fetch requests (librdkafka, kafka-python
and aiokafka all cope). Partitions that answer NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
carry the leader this broker knows (CurrentLeader, v12+; NodeEndpoints, v16+). A consumer's
Fetch below v10 on a topic whose compression.type is zstd answers UNSUPPORTED_COMPRESSION_TYPE,
as Kafka does.
"""

from __future__ import annotations

from typing import Any

from epochlog.broker.client_quotas import ANONYMOUS_USER
from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.reads import (
    READ_COMMITTED,
    FetchParams,
    PartitionFetch,
    PartitionFetchResult,
    fetch_messages,
)
from epochlog.broker.replica_manager import ReplicaManager, known_topic_id
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.recompression import ZSTD_MIN_FETCH_VERSION, fetch_compression_error

R = m.FetchResponse
_REDIRECT = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


async def handle_fetch(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    body = request.body
    version = request.api_version
    rm = services.replica_manager
    if version >= 15:
        replica_id, replica_epoch = body.replica_state.replica_id, body.replica_state.replica_epoch
    else:
        replica_id, replica_epoch = body.replica_id, -1
    max_bytes = body.max_bytes
    if replica_id < 0:
        # A consumer under a byte-rate quota gets at most what the quota window holds
        # (Kafka's getMaxValueInQuotaWindow), so one answer cannot overrun it by far.
        most = services.client_quotas.fetch.max_value_in_window(
            ANONYMOUS_USER, request.header.client_id or ""
        )
        if most is not None:
            max_bytes = max(1, min(max_bytes, int(most)))
    params = FetchParams(
        replica_id=replica_id,
        replica_epoch=replica_epoch,
        max_wait_ms=body.max_wait_ms,
        min_bytes=min(body.min_bytes, max_bytes),
        max_bytes=max_bytes,
        isolation_level=body.isolation_level,
    )
    requests: list[PartitionFetch] = []
    for topic in body.topics:
        error = ErrorCode.NONE
        if version >= 13:
            topic_id = topic.topic_id
            known = known_topic_id(topic_id)
            name = rm.topic_name_for_id(known) if known is not None else None
            if name is None:
                name, error = "", ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic_id, name = None, topic.topic
        for p in topic.partitions:
            partition_error = error
            if error is ErrorCode.NONE and replica_id < 0 and version < ZSTD_MIN_FETCH_VERSION:
                partition_error = _old_consumer_error(rm, name, p.partition, version)
            requests.append(
                PartitionFetch(
                    topic=name,
                    partition=p.partition,
                    fetch_offset=p.fetch_offset,
                    max_bytes=p.partition_max_bytes,
                    current_leader_epoch=p.current_leader_epoch,
                    last_fetched_epoch=p.last_fetched_epoch,
                    log_start_offset=p.log_start_offset,
                    topic_id=topic_id,
                    error=partition_error,
                )
            )
    results = await fetch_messages(rm, params, requests)
    return _response(services, body, version, results, connection.listener)


def _old_consumer_error(rm: ReplicaManager, topic: str, index: int, version: int) -> ErrorCode:
    """UNSUPPORTED_COMPRESSION_TYPE for a consumer's Fetch below v10 on a zstd topic."""
    partition = rm.get_partition(topic, index)
    if partition is None:
        return ErrorCode.NONE  # the read answers for a partition this broker does not have
    return fetch_compression_error(version, partition.log.config.compression_type)


def _response(
    services: BrokerServices,
    body: Any,
    version: int,
    results: list[PartitionFetchResult],
    listener: str,
) -> Any:
    cache = services.metadata_cache
    committed = body.isolation_level == READ_COMMITTED
    leaders: set[int] = set()
    topics: list[Any] = []
    position = 0
    for topic in body.topics:
        partitions = []
        for _ in topic.partitions:
            result = results[position]
            position += 1
            aborted: list[Any] | None = None
            if committed:
                aborted = [
                    R.AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
                    for t in result.aborted_transactions or ()
                ]
            entry = R.PartitionData(
                partition_index=result.request.partition,
                error_code=result.error,
                high_watermark=result.high_watermark,
                last_stable_offset=result.last_stable_offset,
                log_start_offset=result.log_start_offset,
                aborted_transactions=aborted,
                records=result.records,
            )
            if result.diverging_epoch is not None:
                entry.diverging_epoch = R.EpochEndOffset(
                    epoch=result.diverging_epoch.epoch,
                    end_offset=result.diverging_epoch.end_offset,
                )
            if version >= 12 and result.error in _REDIRECT:
                info = cache.partition(result.request.topic, result.request.partition)
                if info is not None and info.leader >= 0:
                    entry.current_leader = R.LeaderIdAndEpoch(
                        leader_id=info.leader, leader_epoch=info.leader_epoch
                    )
                    leaders.add(info.leader)
            partitions.append(entry)
        topics.append(
            R.FetchableTopicResponse(
                topic=topic.topic, topic_id=topic.topic_id, partitions=partitions
            )
        )
    response = R(error_code=ErrorCode.NONE, session_id=0, responses=topics)
    if version >= 16:
        for broker_id in sorted(leaders):
            broker = cache.broker(broker_id)
            endpoint = broker.endpoint_for(listener) if broker is not None else None
            if broker is not None and endpoint is not None:
                response.node_endpoints.append(
                    R.NodeEndpoint(
                        node_id=broker_id, host=endpoint.host, port=endpoint.port, rack=broker.rack
                    )
                )
    return response
