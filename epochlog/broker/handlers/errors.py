"""Every API's error response: the same error in every place the response has for one.

`error_response(api_key, version, request_body, error)` is Kafka's `AbstractRequest
.getErrorResponse`: a top-level ErrorCode where the response has one at that version, and, when
the request body is known, an entry with the error for each topic or partition it named. The
server uses it for an unexpected failure in a handler (UNKNOWN_SERVER_ERROR); the control
handlers use it for STALE_BROKER_EPOCH and STALE_CONTROLLER_EPOCH. (A request of an API or
version we do not serve gets no error response: the server closes its connection, see
`protocol.api.refusal`.)
"""

from __future__ import annotations

from typing import Any

from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey
from epochlog.protocol.codec import Message
from epochlog.protocol.errors import ErrorCode


def error_response(
    api_key: int, version: int, body: Any | None, error: ErrorCode, message: str | None = None
) -> Message:
    code = int(error)
    builder = _BUILDERS[ApiKey(api_key)]
    return builder(version, body, code, message)


def _produce(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.ProduceResponse
    topics = []
    for topic in body.topic_data if body is not None else []:
        partitions = [
            R.PartitionProduceResponse(
                index=p.index, error_code=code, base_offset=-1, error_message=message
            )
            for p in topic.partition_data
        ]
        topics.append(R.TopicProduceResponse(name=topic.name, partition_responses=partitions))
    return R(responses=topics)


def _fetch(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.FetchResponse
    topics = []
    if body is not None and version < 13:
        for topic in body.topics:
            partitions = [
                R.PartitionData(
                    partition_index=p.partition,
                    error_code=code,
                    high_watermark=-1,
                    records=None,
                )
                for p in topic.partitions
            ]
            topics.append(R.FetchableTopicResponse(topic=topic.topic, partitions=partitions))
    return R(error_code=code, session_id=0, responses=topics)


def _list_offsets(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.ListOffsetsResponse
    topics = []
    for topic in body.topics if body is not None else []:
        partitions = [
            R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code)
            for p in topic.partitions
        ]
        topics.append(R.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return R(topics=topics)


def _metadata(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.MetadataResponse
    topics = []
    for topic in (body.topics or []) if body is not None else []:
        topics.append(
            R.MetadataResponseTopic(error_code=code, name=topic.name, topic_id=topic.topic_id)
        )
    return R(topics=topics, error_code=code)


def _leader_and_isr(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.LeaderAndIsrResponse
    response = R(error_code=code)
    if body is None:
        return response
    for topic in body.topic_states:
        errors = [
            R.LeaderAndIsrPartitionError(
                topic_name=topic.topic_name, partition_index=p.partition_index, error_code=code
            )
            for p in topic.partition_states
        ]
        if version >= 5:
            for e in errors:
                e.topic_name = ""
            response.topics.append(
                R.LeaderAndIsrTopicError(topic_id=topic.topic_id, partition_errors=errors)
            )
        else:
            response.partition_errors.extend(errors)
    return response


def _stop_replica(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.StopReplicaResponse
    errors = []
    if body is not None:
        for topic, index, _epoch, _delete in stop_replica_entries(body, version):
            errors.append(
                R.StopReplicaPartitionError(
                    topic_name=topic, partition_index=index, error_code=code
                )
            )
    return R(error_code=code, partition_errors=errors)


def stop_replica_entries(body: Any, version: int) -> list[tuple[str, int, int, bool]]:
    """(topic, partition, leader epoch, delete) for each partition of a StopReplica body."""
    entries: list[tuple[str, int, int, bool]] = []
    if version >= 3:
        for topic in body.topic_states:
            for p in topic.partition_states:
                entries.append(
                    (topic.topic_name, p.partition_index, p.leader_epoch, p.delete_partition)
                )
    else:
        for topic in body.topics:
            for index in topic.partition_indexes:
                entries.append((topic.name, index, -1, body.delete_partitions))
    return entries


def _top_level(cls: type[Message]) -> Any:
    def build(version: int, body: Any, code: int, message: str | None) -> Message:
        return cls(error_code=code)

    return build


def _create_topics(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.CreateTopicsResponse
    topics = [
        R.CreatableTopicResult(name=t.name, error_code=code, error_message=message)
        for t in (body.topics if body is not None else [])
    ]
    return R(topics=topics)


def _delete_topics(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.DeleteTopicsResponse
    results = []
    if body is not None:
        if version >= 6:
            for t in body.topics:
                results.append(
                    R.DeletableTopicResult(
                        name=t.name, topic_id=t.topic_id, error_code=code, error_message=message
                    )
                )
        else:
            for name in body.topic_names:
                results.append(
                    R.DeletableTopicResult(name=name, error_code=code, error_message=message)
                )
    return R(responses=results)


def _init_producer_id(version: int, body: Any, code: int, message: str | None) -> Message:
    return m.InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)


def _offset_for_leader_epoch(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.OffsetForLeaderEpochResponse
    topics = []
    for topic in body.topics if body is not None else []:
        partitions = [
            R.EpochEndOffset(error_code=code, partition=p.partition) for p in topic.partitions
        ]
        topics.append(R.OffsetForLeaderTopicResult(topic=topic.topic, partitions=partitions))
    return R(topics=topics)


def _describe_cluster(version: int, body: Any, code: int, message: str | None) -> Message:
    return m.DescribeClusterResponse(error_code=code, error_message=message)


def _api_versions(version: int, body: Any, code: int, message: str | None) -> Message:
    return m.ApiVersionsResponse(error_code=code)


def _pin_controller(version: int, body: Any, code: int, message: str | None) -> Message:
    return m.PinControllerResponse(error_code=code, error_message=message)


def _offset_commit(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.OffsetCommitResponse
    return R(
        topics=[
            R.OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    R.OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in (body.topics if body is not None else [])
        ]
    )


def _txn_offset_commit(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.TxnOffsetCommitResponse
    return R(
        topics=[
            R.TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    R.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in (body.topics if body is not None else [])
        ]
    )


def _offset_fetch(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.OffsetFetchResponse
    if version >= 8:
        groups = body.groups if body is not None else []
        return R(
            groups=[
                R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code) for g in groups
            ]
        )
    topics = (body.topics or []) if body is not None else []
    return R(
        error_code=code,
        topics=[
            R.OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    R.OffsetFetchResponsePartition(
                        partition_index=p, committed_offset=-1, metadata="", error_code=code
                    )
                    for p in t.partition_indexes
                ],
            )
            for t in topics
        ],
    )


def _find_coordinator(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.FindCoordinatorResponse
    if version >= 4:
        keys = body.coordinator_keys if body is not None else []
        return R(
            coordinators=[
                R.Coordinator(
                    key=k, node_id=-1, host="", port=-1, error_code=code, error_message=message
                )
                for k in keys
            ]
        )
    return R(error_code=code, error_message=message, node_id=-1, host="", port=-1)


def _join_group(version: int, body: Any, code: int, message: str | None) -> Message:
    member = body.member_id if body is not None else ""
    return m.JoinGroupResponse(
        error_code=code, member_id=member, protocol_name=None if version >= 7 else ""
    )


def _describe_groups(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.DescribeGroupsResponse
    groups = body.groups if body is not None else []
    return R(
        groups=[
            R.DescribedGroup(
                error_code=code,
                group_id=g,
                group_state="",
                protocol_type="",
                protocol_data="",
                authorized_operations=-(2**31),
            )
            for g in groups
        ]
    )


def _delete_groups(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.DeleteGroupsResponse
    names = body.groups_names if body is not None else []
    return R(results=[R.DeletableGroupResult(group_id=g, error_code=code) for g in names])


def _describe_configs(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.DescribeConfigsResponse
    results = [
        R.DescribeConfigsResult(
            error_code=code,
            error_message=message,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r in (body.resources if body is not None else [])
    ]
    return R(results=results)


def _alter_replica_log_dirs(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.AlterReplicaLogDirsResponse
    results = [
        R.AlterReplicaLogDirTopicResult(
            topic_name=t.name,
            partitions=[
                R.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code)
                for p in t.partitions
            ],
        )
        for d in (body.dirs if body is not None else [])
        for t in d.topics
    ]
    return R(results=results)


def _alter_configs(cls: Any) -> Any:
    def build(version: int, body: Any, code: int, message: str | None) -> Message:
        responses = [
            cls.AlterConfigsResourceResponse(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in (body.resources if body is not None else [])
        ]
        return cls(responses=responses)

    return build


def _describe_producers(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.DescribeProducersResponse
    return R(
        topics=[
            R.TopicResponse(
                name=t.name,
                partitions=[
                    R.PartitionResponse(partition_index=p, error_code=code, error_message=message)
                    for p in t.partition_indexes
                ],
            )
            for t in (body.topics if body is not None else [])
        ]
    )


def _describe_topic_partitions(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.DescribeTopicPartitionsResponse
    return R(
        topics=[
            R.DescribeTopicPartitionsResponseTopic(error_code=code, name=t.name, partitions=[])
            for t in (body.topics if body is not None else [])
        ]
    )


def _create_partitions(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.CreatePartitionsResponse
    names = dict.fromkeys(t.name for t in body.topics) if body is not None else {}
    return R(
        results=[
            R.CreatePartitionsTopicResult(name=n, error_code=code, error_message=message)
            for n in names
        ]
    )


def _write_txn_markers(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.WriteTxnMarkersResponse
    markers = []
    for marker in body.markers if body is not None else []:
        topics = [
            R.WritableTxnMarkerTopicResult(
                name=t.name,
                partitions=[
                    R.WritableTxnMarkerPartitionResult(partition_index=index, error_code=code)
                    for index in t.partition_indexes
                ],
            )
            for t in marker.topics
        ]
        markers.append(R.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
    return R(markers=markers)


def _delete_records(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.DeleteRecordsResponse
    topics = []
    for t in body.topics if body is not None else []:
        partitions = [
            R.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=code
            )
            for p in t.partitions
        ]
        topics.append(R.DeleteRecordsTopicResult(name=t.name, partitions=partitions))
    return R(topics=topics)


def _elect_leaders(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.ElectLeadersResponse
    results = []
    for t in (body.topic_partitions or []) if body is not None else []:
        partitions = [
            R.PartitionResult(partition_id=p, error_code=code, error_message=message)
            for p in t.partitions
        ]
        results.append(R.ReplicaElectionResult(topic=t.topic, partition_result=partitions))
    return R(error_code=code if version >= 1 else 0, replica_election_results=results)


def _alter_partition_reassignments(
    version: int, body: Any, code: int, message: str | None
) -> Message:
    R = m.AlterPartitionReassignmentsResponse
    topics = [
        R.ReassignableTopicResponse(
            name=t.name,
            partitions=[
                R.ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=code, error_message=message
                )
                for p in t.partitions
            ],
        )
        for t in (body.topics if body is not None else [])
    ]
    return R(error_code=code, error_message=message, responses=topics)


def _list_partition_reassignments(
    version: int, body: Any, code: int, message: str | None
) -> Message:
    return m.ListPartitionReassignmentsResponse(error_code=code, error_message=message)


def _describe_client_quotas(version: int, body: Any, code: int, message: str | None) -> Message:
    return m.DescribeClientQuotasResponse(error_code=code, error_message=message, entries=None)


def _alter_user_scram_credentials(
    version: int, body: Any, code: int, message: str | None
) -> Message:
    R = m.AlterUserScramCredentialsResponse
    users = [] if body is None else [c.name for c in [*body.deletions, *body.upsertions]]
    return R(
        results=[
            R.AlterUserScramCredentialsResult(user=u, error_code=code, error_message=message)
            for u in dict.fromkeys(users)
        ]
    )


def _alter_client_quotas(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.AlterClientQuotasResponse
    entries = [
        R.EntryData(
            error_code=code,
            error_message=message,
            entity=[
                R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                for e in entry.entity
            ],
        )
        for entry in (body.entries if body is not None else [])
    ]
    return R(entries=entries)


def _add_partitions_to_txn(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.AddPartitionsToTxnResponse

    def topic_results(topics: Any) -> list[Any]:
        return [
            R.AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=[
                    R.AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in topics
        ]

    if version <= 3:
        topics = body.v3_and_below_topics if body is not None else []
        return R(results_by_topic_v3_and_below=topic_results(topics))
    return R(error_code=code, results_by_transaction=[])


def _describe_transactions(version: int, body: Any, code: int, message: str | None) -> Message:
    R = m.DescribeTransactionsResponse
    return R(
        transaction_states=[
            R.TransactionState(
                error_code=code,
                transactional_id=transactional_id,
                transaction_state="",
                transaction_timeout_ms=0,
                transaction_start_time_ms=-1,
                producer_id=-1,
                producer_epoch=-1,
                topics=[],
            )
            for transactional_id in (body.transactional_ids if body is not None else [])
        ]
    )


def _list_transactions(version: int, body: Any, code: int, message: str | None) -> Message:
    return m.ListTransactionsResponse(
        error_code=code, unknown_state_filters=[], transaction_states=[]
    )


_BUILDERS: dict[ApiKey, Any] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.LEADER_AND_ISR: _leader_and_isr,
    ApiKey.STOP_REPLICA: _stop_replica,
    ApiKey.UPDATE_METADATA: _top_level(m.UpdateMetadataResponse),
    ApiKey.CONTROLLED_SHUTDOWN: _top_level(m.ControlledShutdownResponse),
    ApiKey.API_VERSIONS: _api_versions,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.ALTER_PARTITION: _top_level(m.AlterPartitionResponse),
    ApiKey.DESCRIBE_CLUSTER: _describe_cluster,
    ApiKey.PIN_CONTROLLER: _pin_controller,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _join_group,
    ApiKey.HEARTBEAT: _top_level(m.HeartbeatResponse),
    ApiKey.LEAVE_GROUP: _top_level(m.LeaveGroupResponse),
    ApiKey.SYNC_GROUP: _top_level(m.SyncGroupResponse),
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _top_level(m.ListGroupsResponse),
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.OFFSET_DELETE: _top_level(m.OffsetDeleteResponse),
    ApiKey.DESCRIBE_CONFIGS: _describe_configs,
    ApiKey.ALTER_CONFIGS: _alter_configs(m.AlterConfigsResponse),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _alter_configs(m.IncrementalAlterConfigsResponse),
    ApiKey.ALTER_REPLICA_LOG_DIRS: _alter_replica_log_dirs,
    ApiKey.DESCRIBE_LOG_DIRS: _top_level(m.DescribeLogDirsResponse),
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.ELECT_LEADERS: _elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _list_partition_reassignments,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: _alter_client_quotas,
    ApiKey.SASL_HANDSHAKE: _top_level(m.SaslHandshakeResponse),
    ApiKey.SASL_AUTHENTICATE: _top_level(m.SaslAuthenticateResponse),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _top_level(m.DescribeUserScramCredentialsResponse),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_user_scram_credentials,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _top_level(m.AddOffsetsToTxnResponse),
    ApiKey.END_TXN: _top_level(m.EndTxnResponse),
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
}
assert set(_BUILDERS) == set(APIS), "every API we serve needs an error response"
