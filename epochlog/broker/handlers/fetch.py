"""Fetch (v4-16): consumers and followers read; the log bytes go out with sendfile.

The request is turned into `reads.FetchParams` and one `PartitionFetch` per partition; v13+
names topics by id (an id this broker does not know is UNKNOWN_TOPIC_ID), v15+ carries the
follower's id and broker epoch in the ReplicaState tag instead of ReplicaId. The answer's
Records are the `FileSlice`s the log returned: the server encodes the response with holes and
sends each slice straight from its segment file. A READ_COMMITTED consumer reads up to the
last stable offset and gets the aborted transactions (producer id, first offset) overlapping
what it may read; a READ_UNCOMMITTED one reads to the HW and gets a null list, as Kafka sends.

Incremental fetch sessions (KIP-227, v7+; `fetch_session`): the request's SessionId and
SessionEpoch pick a context; an incremental one reads every partition of the session and answers
only those with something new; a session error answers the error with no partitions. librdkafka
sends no session (id 0, epoch -1); kafka-python, the Java client and our followers open one.
Partitions that answer NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
carry the leader this broker knows (CurrentLeader, v12+; NodeEndpoints, v16+). A consumer's
Fetch below v10 on a topic whose compression.type is zstd answers UNSUPPORTED_COMPRESSION_TYPE,
as Kafka does.
"""

from __future__ import annotations

import uuid
from typing import Any

from epochlog.broker.client_quotas import ANONYMOUS_USER
from epochlog.broker.fetch_session import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    ContextKind,
    PartitionAnswer,
    PartitionParams,
    SessionKey,
)
from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.reads import (
    READ_COMMITTED,
    FetchParams,
    PartitionFetch,
    PartitionFetchResult,
    fetch_messages,
)
from epochlog.broker.replica_manager import ReplicaManager, known_topic_id, now_ms
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
    keys_and_params: list[tuple[SessionKey, PartitionParams]] = []
    for topic in body.topics:
        topic_id, key_name = _session_topic(version, topic.topic_id, topic.topic)
        for p in topic.partitions:
            keys_and_params.append(
                (
                    (topic_id, key_name, p.partition),
                    PartitionParams(
                        p.fetch_offset,
                        p.partition_max_bytes,
                        p.current_leader_epoch,
                        p.last_fetched_epoch,
                        p.log_start_offset,
                    ),
                )
            )
    forgotten: list[SessionKey] = []
    if version >= 7:
        for topic in body.forgotten_topics_data:
            topic_id, key_name = _session_topic(version, topic.topic_id, topic.topic)
            forgotten.extend((topic_id, key_name, index) for index in topic.partitions)
    sessions = services.fetch_sessions
    now = now_ms()
    context = sessions.new_context(
        session_id=body.session_id if version >= 7 else INVALID_SESSION_ID,
        epoch=body.session_epoch if version >= 7 else FINAL_EPOCH,
        partitions=keys_and_params,
        forgotten=forgotten,
        privileged=replica_id >= 0,
        uses_topic_ids=version >= 13,
        now_ms=now,
    )
    if context.kind is ContextKind.ERROR:
        return R(error_code=context.error, session_id=INVALID_SESSION_ID, responses=[])
    requests: list[PartitionFetch] = []
    names: dict[uuid.UUID, str] = {}  # topic id -> name, resolved once per request
    for (topic_id, name, index), fetch in context.partitions:
        if topic_id is not None:
            # Resolved at every read, not when the partition joined the session: a leader that
            # learns the topic after a follower's first fetch (a LeaderAndIsr just behind it)
            # then serves it, where a name cached as unknown answered UNKNOWN_TOPIC_ID forever.
            found = names.get(topic_id)
            if found is None:
                found = names[topic_id] = _topic_name(rm, topic_id)
            name = found
        error = ErrorCode.NONE
        if version >= 13 and not name:
            error = ErrorCode.UNKNOWN_TOPIC_ID
        elif replica_id < 0 and version < ZSTD_MIN_FETCH_VERSION:
            error = _old_consumer_error(rm, name, index, version)
        requests.append(
            PartitionFetch(
                topic=name,
                partition=index,
                fetch_offset=fetch.fetch_offset,
                max_bytes=fetch.max_bytes,
                current_leader_epoch=fetch.current_leader_epoch,
                last_fetched_epoch=fetch.last_fetched_epoch,
                log_start_offset=fetch.log_start_offset,
                topic_id=topic_id,
                error=error,
            )
        )
    results = await fetch_messages(rm, params, requests)
    traffic = rm.traffic
    if traffic is not None:
        for r in results:
            size = len(r.records)
            if size:
                traffic.record_out(r.request.topic, size, replica_id >= 0)
    if context.kind is ContextKind.SESSIONLESS:  # librdkafka's every fetch: nothing to keep
        return _response(services, body, version, INVALID_SESSION_ID, results, connection.listener)
    session_id, carried = sessions.answer(
        context,
        [
            PartitionAnswer(
                r.error,
                r.high_watermark,
                r.last_stable_offset,
                r.log_start_offset,
                len(r.records),
                r.diverging_epoch is not None,
            )
            for r in results
        ],
        now,
    )
    if len(carried) != len(results):
        results = [results[i] for i in carried]
    return _response(services, body, version, session_id, results, connection.listener)


def _session_topic(version: int, topic_id: uuid.UUID, topic: str) -> tuple[uuid.UUID | None, str]:
    """How a requested topic is keyed in a fetch session (KIP-227): by name below v13, by id
    alone from v13 (its name is looked up at each read, `_topic_name`)."""
    if version < 13:
        return None, topic
    return topic_id, ""


def _topic_name(rm: ReplicaManager, topic_id: uuid.UUID) -> str:
    """The name of a topic id this broker knows, else "" (UNKNOWN_TOPIC_ID)."""
    known = known_topic_id(topic_id)
    name = rm.topic_name_for_id(known) if known is not None else None
    return name or ""


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
    session_id: int,
    results: list[PartitionFetchResult],
    listener: str,
) -> Any:
    cache = services.metadata_cache
    committed = body.isolation_level == READ_COMMITTED
    leaders: set[int] = set()
    topics: dict[tuple[uuid.UUID | None, str], Any] = {}
    for result in results:
        request = result.request
        aborted: list[Any] | None = None
        if committed:
            aborted = [
                R.AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
                for t in result.aborted_transactions or ()
            ]
        entry = R.PartitionData(
            partition_index=request.partition,
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
            info = cache.partition(request.topic, request.partition)
            if info is not None and info.leader >= 0:
                entry.current_leader = R.LeaderIdAndEpoch(
                    leader_id=info.leader, leader_epoch=info.leader_epoch
                )
                leaders.add(info.leader)
        topic_key = (request.topic_id, request.topic)
        topic = topics.get(topic_key)
        if topic is None:
            topic = topics[topic_key] = R.FetchableTopicResponse(topic=request.topic)
            if request.topic_id is not None:
                topic.topic_id = request.topic_id
        topic.partitions.append(entry)
    response = R(error_code=ErrorCode.NONE, session_id=session_id, responses=list(topics.values()))
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
