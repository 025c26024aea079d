"""One handler per API, and the table the server dispatches on.

Each handler turns a decoded request into a response body (see `context` for the signature);
the modules group them: `api_versions`, `metadata` (Metadata, DescribeCluster), `produce`,
`fetch`, `offsets` (ListOffsets, OffsetForLeaderEpoch), `admin` (the controller's APIs and
InitProducerId), `control` (LeaderAndIsr, UpdateMetadata, StopReplica), `pin_controller`
(KIP-39), `configs` (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs), `groups`
(FindCoordinator, and the group APIs the coordinator answers), `log_dirs` (DescribeLogDirs,
AlterReplicaLogDirs), `producers` (DescribeProducers), `topic_partitions`
(DescribeTopicPartitions), `partition_admin` (CreatePartitions, ElectLeaders, DeleteRecords),
`reassignments` (KIP-455's two APIs, for the controller), `client_quotas`
(DescribeClientQuotas, AlterClientQuotas), `txn_markers` (WriteTxnMarkers), `transactions`
(the transaction coordinator's APIs), `user_scram` (KIP-554's two APIs; SaslHandshake and
SaslAuthenticate where no SASL gate took them).
`errors` builds every API's error response.
"""

from __future__ import annotations

from epochlog.broker.handlers.admin import (
    handle_alter_partition,
    handle_controlled_shutdown,
    handle_create_topics,
    handle_delete_topics,
    handle_init_producer_id,
)
from epochlog.broker.handlers.api_versions import handle_api_versions
from epochlog.broker.handlers.client_quotas import (
    handle_alter_client_quotas,
    handle_describe_client_quotas,
)
from epochlog.broker.handlers.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from epochlog.broker.handlers.context import (
    BrokerServices,
    CloseConnection,
    ConnectionInfo,
    Handler,
)
from epochlog.broker.handlers.control import (
    handle_leader_and_isr,
    handle_stop_replica,
    handle_update_metadata,
)
from epochlog.broker.handlers.fetch import handle_fetch
from epochlog.broker.handlers.groups import (
    begin_offset_commit,
    handle_find_coordinator,
    handle_group_request,
)
from epochlog.broker.handlers.log_dirs import (
    handle_alter_replica_log_dirs,
    handle_describe_log_dirs,
)
from epochlog.broker.handlers.metadata import handle_describe_cluster, handle_metadata
from epochlog.broker.handlers.offsets import handle_list_offsets, handle_offset_for_leader_epoch
from epochlog.broker.handlers.partition_admin import (
    handle_create_partitions,
    handle_delete_records,
    handle_elect_leaders,
)
from epochlog.broker.handlers.pin_controller import handle_pin_controller
from epochlog.broker.handlers.produce import begin_produce
from epochlog.broker.handlers.producers import handle_describe_producers
from epochlog.broker.handlers.reassignments import (
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
)
from epochlog.broker.handlers.topic_partitions import handle_describe_topic_partitions
from epochlog.broker.handlers.transactions import handle_transaction_request
from epochlog.broker.handlers.txn_markers import handle_write_txn_markers
from epochlog.broker.handlers.user_scram import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
    handle_sasl_authenticate,
    handle_sasl_handshake,
)
from epochlog.protocol.api import APIS, ApiKey

HANDLERS: dict[int, Handler] = {
    # Produce and OffsetCommit begin at once and return a Future (see the server).
    ApiKey.PRODUCE: begin_produce,
    ApiKey.OFFSET_COMMIT: begin_offset_commit,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.LEADER_AND_ISR: handle_leader_and_isr,
    ApiKey.STOP_REPLICA: handle_stop_replica,
    ApiKey.UPDATE_METADATA: handle_update_metadata,
    ApiKey.CONTROLLED_SHUTDOWN: handle_controlled_shutdown,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.ALTER_PARTITION: handle_alter_partition,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.PIN_CONTROLLER: handle_pin_controller,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: handle_alter_replica_log_dirs,
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,  # reached only without SASL (see sasl_gate)
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    **{
        key: handle_transaction_request
        for key in (
            ApiKey.ADD_PARTITIONS_TO_TXN,
            ApiKey.ADD_OFFSETS_TO_TXN,
            ApiKey.END_TXN,
            ApiKey.DESCRIBE_TRANSACTIONS,
            ApiKey.LIST_TRANSACTIONS,
        )
    },
    **{
        key: handle_group_request
        for key in (
            ApiKey.OFFSET_FETCH,
            ApiKey.JOIN_GROUP,
            ApiKey.HEARTBEAT,
            ApiKey.LEAVE_GROUP,
            ApiKey.SYNC_GROUP,
            ApiKey.DESCRIBE_GROUPS,
            ApiKey.LIST_GROUPS,
            ApiKey.DELETE_GROUPS,
            ApiKey.OFFSET_DELETE,
            ApiKey.TXN_OFFSET_COMMIT,
        )
    },
}
assert set(HANDLERS) == set(APIS), "every API in APIS needs a handler"

__all__ = ["HANDLERS", "BrokerServices", "CloseConnection", "ConnectionInfo", "Handler"]
