"""DescribeTopicPartitions (API key 75): topics and partitions, paginated (KIP-966).

Transcribed from Kafka's `common/message/DescribeTopicPartitions*.json` (apache/kafka branch 3.9,
commit c821449f). One version, flexible. `Cursor` and `NextCursor` are nullable structs: on the
wire an int8 -1 for null, else 1 and the struct.
"""

from epochlog.protocol.schema import F, message

_CURSOR = [
    F("TopicName", "string", "0+"),
    F("PartitionIndex", "int32", "0+"),
]

REQUEST = message(
    "DescribeTopicPartitionsRequest",
    api_key=75,
    valid="0",
    flexible="0+",
    fields=[
        F("Topics", "[]TopicRequest", "0+", [F("Name", "string", "0+")]),
        F("ResponsePartitionLimit", "int32", "0+", default=2000),
        F("Cursor", "Cursor", "0+", _CURSOR, nullable="0+", default=None),
    ],
)

RESPONSE = message(
    "DescribeTopicPartitionsResponse",
    api_key=75,
    valid="0",
    flexible="0+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+", ignorable=True),
        F(
            "Topics",
            "[]DescribeTopicPartitionsResponseTopic",
            "0+",
            [
                F("ErrorCode", "int16", "0+"),
                F("Name", "string", "0+", nullable="0+"),
                F("TopicId", "uuid", "0+", ignorable=True),
                F("IsInternal", "bool", "0+", default=False, ignorable=True),
                F(
                    "Partitions",
                    "[]DescribeTopicPartitionsResponsePartition",
                    "0+",
                    [
                        F("ErrorCode", "int16", "0+"),
                        F("PartitionIndex", "int32", "0+"),
                        F("LeaderId", "int32", "0+"),
                        F("LeaderEpoch", "int32", "0+", default=-1, ignorable=True),
                        F("ReplicaNodes", "[]int32", "0+"),
                        F("IsrNodes", "[]int32", "0+"),
                        F(
                            "EligibleLeaderReplicas",
                            "[]int32",
                            "0+",
                            nullable="0+",
                            default=None,
                        ),
                        F("LastKnownElr", "[]int32", "0+", nullable="0+", default=None),
                        F("OfflineReplicas", "[]int32", "0+", ignorable=True),
                    ],
                ),
                F("TopicAuthorizedOperations", "int32", "0+", default=-2147483648),
            ],
        ),
        F("NextCursor", "Cursor", "0+", _CURSOR, nullable="0+", default=None),
    ],
)
