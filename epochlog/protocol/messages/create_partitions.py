"""CreatePartitions (API key 37): add partitions to existing topics.

Transcribed from Kafka's `common/message/CreatePartitions*.json` (apache/kafka branch 3.9). v1 is
v0; v2 is the first flexible version; v3 is v2 that may answer THROTTLING_QUOTA_EXCEEDED.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "CreatePartitionsRequest",
    api_key=37,
    valid="0-3",
    flexible="2+",
    fields=[
        F(
            "Topics",
            "[]CreatePartitionsTopic",
            "0+",
            [
                F("Name", "string", "0+"),
                F("Count", "int32", "0+"),
                F(
                    "Assignments",
                    "[]CreatePartitionsAssignment",
                    "0+",
                    [F("BrokerIds", "[]int32", "0+")],
                    nullable="0+",
                    default=None,
                ),
            ],
        ),
        F("TimeoutMs", "int32", "0+"),
        F("ValidateOnly", "bool", "0+"),
    ],
)

RESPONSE = message(
    "CreatePartitionsResponse",
    api_key=37,
    valid="0-3",
    flexible="2+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results",
            "[]CreatePartitionsTopicResult",
            "0+",
            [
                F("Name", "string", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
            ],
        ),
    ],
)
