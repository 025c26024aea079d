"""One class per Kafka message, generated from the schema modules of this package.

Each class has snake_case attributes for the fields of every version, nested struct classes as
attributes (`FetchRequest.FetchTopic`), `obj.encode(version)` and `Cls.decode(data, version)`.
The APIs we serve are those in `epochlog.protocol.api.APIS`. The `__consumer_offsets` record keys
and values (see `epochlog.protocol.consumer_offsets`) and the consumer protocol's subscription and
assignment (see `epochlog.protocol.consumer_protocol`) are data classes without an API.
"""

from __future__ import annotations

from epochlog.protocol.codec import message_class
from epochlog.protocol.messages import (
    alter_partition,
    alter_replica_log_dirs,
    api_versions,
    client_quotas,
    configs,
    consumer_protocol,
    controlled_shutdown,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    elect_leaders,
    fetch,
    find_coordinator,
    group_records,
    heartbeat,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    partition_reassignments,
    pin_controller,
    produce,
    sasl,
    stop_replica,
    sync_group,
    transaction_records,
    transactions,
    update_metadata,
    user_scram_credentials,
    write_txn_markers,
)

ProduceRequest = message_class(produce.REQUEST)
ProduceResponse = message_class(produce.RESPONSE)
FetchRequest = message_class(fetch.REQUEST)
FetchResponse = message_class(fetch.RESPONSE)
ListOffsetsRequest = message_class(list_offsets.REQUEST)
ListOffsetsResponse = message_class(list_offsets.RESPONSE)
MetadataRequest = message_class(metadata.REQUEST)
MetadataResponse = message_class(metadata.RESPONSE)
LeaderAndIsrRequest = message_class(leader_and_isr.REQUEST)
LeaderAndIsrResponse = message_class(leader_and_isr.RESPONSE)
StopReplicaRequest = message_class(stop_replica.REQUEST)
StopReplicaResponse = message_class(stop_replica.RESPONSE)
UpdateMetadataRequest = message_class(update_metadata.REQUEST)
UpdateMetadataResponse = message_class(update_metadata.RESPONSE)
WriteTxnMarkersRequest = message_class(write_txn_markers.REQUEST)
WriteTxnMarkersResponse = message_class(write_txn_markers.RESPONSE)
ControlledShutdownRequest = message_class(controlled_shutdown.REQUEST)
ControlledShutdownResponse = message_class(controlled_shutdown.RESPONSE)
ApiVersionsRequest = message_class(api_versions.REQUEST)
ApiVersionsResponse = message_class(api_versions.RESPONSE)
CreateTopicsRequest = message_class(create_topics.REQUEST)
CreateTopicsResponse = message_class(create_topics.RESPONSE)
DeleteTopicsRequest = message_class(delete_topics.REQUEST)
DeleteTopicsResponse = message_class(delete_topics.RESPONSE)
InitProducerIdRequest = message_class(init_producer_id.REQUEST)
InitProducerIdResponse = message_class(init_producer_id.RESPONSE)
OffsetForLeaderEpochRequest = message_class(offset_for_leader_epoch.REQUEST)
OffsetForLeaderEpochResponse = message_class(offset_for_leader_epoch.RESPONSE)
AlterPartitionRequest = message_class(alter_partition.REQUEST)
AlterPartitionResponse = message_class(alter_partition.RESPONSE)
DescribeClusterRequest = message_class(describe_cluster.REQUEST)
DescribeClusterResponse = message_class(describe_cluster.RESPONSE)
PinControllerRequest = message_class(pin_controller.REQUEST)
PinControllerResponse = message_class(pin_controller.RESPONSE)

# Classic consumer groups (issue 15), served by the group coordinator.
OffsetCommitRequest = message_class(offset_commit.REQUEST)
OffsetCommitResponse = message_class(offset_commit.RESPONSE)
OffsetFetchRequest = message_class(offset_fetch.REQUEST)
OffsetFetchResponse = message_class(offset_fetch.RESPONSE)
FindCoordinatorRequest = message_class(find_coordinator.REQUEST)
FindCoordinatorResponse = message_class(find_coordinator.RESPONSE)
JoinGroupRequest = message_class(join_group.REQUEST)
JoinGroupResponse = message_class(join_group.RESPONSE)
HeartbeatRequest = message_class(heartbeat.REQUEST)
HeartbeatResponse = message_class(heartbeat.RESPONSE)
LeaveGroupRequest = message_class(leave_group.REQUEST)
LeaveGroupResponse = message_class(leave_group.RESPONSE)
SyncGroupRequest = message_class(sync_group.REQUEST)
SyncGroupResponse = message_class(sync_group.RESPONSE)
DescribeGroupsRequest = message_class(describe_groups.REQUEST)
DescribeGroupsResponse = message_class(describe_groups.RESPONSE)
ListGroupsRequest = message_class(list_groups.REQUEST)
ListGroupsResponse = message_class(list_groups.RESPONSE)
DeleteGroupsRequest = message_class(delete_groups.REQUEST)
DeleteGroupsResponse = message_class(delete_groups.RESPONSE)
OffsetDeleteRequest = message_class(offset_delete.REQUEST)
OffsetDeleteResponse = message_class(offset_delete.RESPONSE)

# Partition admin (issue 16): CreatePartitions, DeleteRecords, ElectLeaders.
CreatePartitionsRequest = message_class(create_partitions.REQUEST)
CreatePartitionsResponse = message_class(create_partitions.RESPONSE)
DeleteRecordsRequest = message_class(delete_records.REQUEST)
DeleteRecordsResponse = message_class(delete_records.RESPONSE)
ElectLeadersRequest = message_class(elect_leaders.REQUEST)
ElectLeadersResponse = message_class(elect_leaders.RESPONSE)
# Dynamic configs (issue 16).
DescribeConfigsRequest = message_class(configs.DESCRIBE_REQUEST)
DescribeConfigsResponse = message_class(configs.DESCRIBE_RESPONSE)
AlterConfigsRequest = message_class(configs.ALTER_REQUEST)
AlterConfigsResponse = message_class(configs.ALTER_RESPONSE)
IncrementalAlterConfigsRequest = message_class(configs.INCREMENTAL_ALTER_REQUEST)
IncrementalAlterConfigsResponse = message_class(configs.INCREMENTAL_ALTER_RESPONSE)
# Log dirs, producers and paginated topic descriptions (issue 16), for admin tools.
AlterReplicaLogDirsRequest = message_class(alter_replica_log_dirs.REQUEST)
AlterReplicaLogDirsResponse = message_class(alter_replica_log_dirs.RESPONSE)
DescribeLogDirsRequest = message_class(describe_log_dirs.REQUEST)
DescribeLogDirsResponse = message_class(describe_log_dirs.RESPONSE)
DescribeProducersRequest = message_class(describe_producers.REQUEST)
DescribeProducersResponse = message_class(describe_producers.RESPONSE)
DescribeTopicPartitionsRequest = message_class(describe_topic_partitions.REQUEST)
DescribeTopicPartitionsResponse = message_class(describe_topic_partitions.RESPONSE)

# Partition reassignments (KIP-455), answered by the controller.
AlterPartitionReassignmentsRequest = message_class(partition_reassignments.ALTER_REQUEST)
AlterPartitionReassignmentsResponse = message_class(partition_reassignments.ALTER_RESPONSE)
ListPartitionReassignmentsRequest = message_class(partition_reassignments.LIST_REQUEST)
ListPartitionReassignmentsResponse = message_class(partition_reassignments.LIST_RESPONSE)

# Client quotas (issue 16).
DescribeClientQuotasRequest = message_class(client_quotas.DESCRIBE_REQUEST)
DescribeClientQuotasResponse = message_class(client_quotas.DESCRIBE_RESPONSE)
AlterClientQuotasRequest = message_class(client_quotas.ALTER_REQUEST)
AlterClientQuotasResponse = message_class(client_quotas.ALTER_RESPONSE)

# __consumer_offsets record keys and values (Kafka's "data" schemas, no API key).
OffsetCommitKey = message_class(group_records.OFFSET_COMMIT_KEY)
OffsetCommitValue = message_class(group_records.OFFSET_COMMIT_VALUE)
GroupMetadataKey = message_class(group_records.GROUP_METADATA_KEY)
GroupMetadataValue = message_class(group_records.GROUP_METADATA_VALUE)

# The consumer protocol's JoinGroup and SyncGroup metadata (data schemas, no API key).
ConsumerProtocolSubscription = message_class(consumer_protocol.SUBSCRIPTION)
ConsumerProtocolAssignment = message_class(consumer_protocol.ASSIGNMENT)

# The transaction APIs (issue 17), not yet served: not in `protocol.api.APIS`.
AddPartitionsToTxnRequest = message_class(transactions.ADD_PARTITIONS_REQUEST)
AddPartitionsToTxnResponse = message_class(transactions.ADD_PARTITIONS_RESPONSE)
AddOffsetsToTxnRequest = message_class(transactions.ADD_OFFSETS_REQUEST)
AddOffsetsToTxnResponse = message_class(transactions.ADD_OFFSETS_RESPONSE)
EndTxnRequest = message_class(transactions.END_TXN_REQUEST)
EndTxnResponse = message_class(transactions.END_TXN_RESPONSE)
TxnOffsetCommitRequest = message_class(transactions.TXN_OFFSET_COMMIT_REQUEST)
TxnOffsetCommitResponse = message_class(transactions.TXN_OFFSET_COMMIT_RESPONSE)
DescribeTransactionsRequest = message_class(transactions.DESCRIBE_TRANSACTIONS_REQUEST)
DescribeTransactionsResponse = message_class(transactions.DESCRIBE_TRANSACTIONS_RESPONSE)
ListTransactionsRequest = message_class(transactions.LIST_TRANSACTIONS_REQUEST)
ListTransactionsResponse = message_class(transactions.LIST_TRANSACTIONS_RESPONSE)

# __transaction_state record keys and values (Kafka's data schemas, no API key).
TransactionLogKey = message_class(transaction_records.TRANSACTION_LOG_KEY)
TransactionLogValue = message_class(transaction_records.TRANSACTION_LOG_VALUE)
SaslHandshakeRequest = message_class(sasl.HANDSHAKE_REQUEST)
SaslHandshakeResponse = message_class(sasl.HANDSHAKE_RESPONSE)
SaslAuthenticateRequest = message_class(sasl.AUTHENTICATE_REQUEST)
SaslAuthenticateResponse = message_class(sasl.AUTHENTICATE_RESPONSE)
DescribeUserScramCredentialsRequest = message_class(user_scram_credentials.DESCRIBE_REQUEST)
DescribeUserScramCredentialsResponse = message_class(user_scram_credentials.DESCRIBE_RESPONSE)
AlterUserScramCredentialsRequest = message_class(user_scram_credentials.ALTER_REQUEST)
AlterUserScramCredentialsResponse = message_class(user_scram_credentials.ALTER_RESPONSE)
