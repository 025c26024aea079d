"""Metadata (API key 3): brokers, controller and partition leaders; v13 adds a top-level
ErrorCode (REBOOTSTRAP_REQUIRED, KIP-1102).

Transcribed from Kafka's `common/message/Metadata*.json` (apache/kafka branch 3.9, which stops at
v12); v13 (request unchanged, response ErrorCode) from the post-4.0 JSON (fact sheet section 2.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "MetadataRequest",
    api_key=3,
    valid="0-13",
    flexible="9+",
    fields=[
        F(
            "Topics",
            "[]MetadataRequestTopic",
            "0+",
            [
                F("TopicId", "uuid", "10+", ignorable=True),
                F("Name", "string", "0+", nullable="10+"),
            ],
            nullable="1+",
        ),
        F("AllowAutoTopicCreation", "bool", "4+", default=True),
        F("IncludeClusterAuthorizedOperations", "bool", "8-10"),
        F("IncludeTopicAuthorizedOperations", "bool", "8+"),
    ],
)

RESPONSE = message(
    "MetadataResponse",
    api_key=3,
    valid="0-13",
    flexible="9+",
    fields=[
        F("ThrottleTimeMs", "int32", "3+", ignorable=True),
        F(
            "Brokers",
            "[]MetadataResponseBroker",
            "0+",
            [
                F("NodeId", "int32", "0+"),
                F("Host", "string", "0+"),
                F("Port", "int32", "0+"),
                F("Rack", "string", "1+", nullable="1+", default=None, ignorable=True),
            ],
        ),
        F("ClusterId", "string", "2+", nullable="2+", default=None, ignorable=True),
        F("ControllerId", "int32", "1+", default=-1, ignorable=True),
        F(
            "Topics",
            "[]MetadataResponseTopic",
            "0+",
            [
                F("ErrorCode", "int16", "0+"),
                F("Name", "string", "0+", nullable="12+"),
                F("TopicId", "uuid", "10+", ignorable=True),
                F("IsInternal", "bool", "1+", default=False, ignorable=True),
                F(
                    "Partitions",
                    "[]MetadataResponsePartition",
                    "0+",
                    [
                        F("ErrorCode", "int16", "0+"),
                        F("PartitionIndex", "int32", "0+"),
                        F("LeaderId", "int32", "0+"),
                        F("LeaderEpoch", "int32", "7+", default=-1, ignorable=True),
                        F("ReplicaNodes", "[]int32", "0+"),
                        F("IsrNodes", "[]int32", "0+"),
                        F("OfflineReplicas", "[]int32", "5+", ignorable=True),
                    ],
                ),
                F("TopicAuthorizedOperations", "int32", "8+", default=-2147483648),
            ],
        ),
        F("ClusterAuthorizedOperations", "int32", "8-10", default=-2147483648),
        F("ErrorCode", "int16", "13+", ignorable=True),
    ],
)
