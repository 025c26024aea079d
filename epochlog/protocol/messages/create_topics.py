"""CreateTopics (API key 19).

Transcribed from Kafka's `common/message/CreateTopics*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "CreateTopicsRequest",
    api_key=19,
    valid="0-7",
    flexible="5+",
    fields=[
        F(
            "Topics",
            "[]CreatableTopic",
            "0+",
            [
                F("Name", "string", "0+"),
                F("NumPartitions", "int32", "0+"),
                F("ReplicationFactor", "int16", "0+"),
                F(
                    "Assignments",
                    "[]CreatableReplicaAssignment",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("BrokerIds", "[]int32", "0+"),
                    ],
                ),
                F(
                    "Configs",
                    "[]CreatableTopicConfig",
                    "0+",
                    [
                        F("Name", "string", "0+"),
                        F("Value", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
        F("timeoutMs", "int32", "0+", default=60000),
        F("validateOnly", "bool", "1+", default=False),
    ],
)

RESPONSE = message(
    "CreateTopicsResponse",
    api_key=19,
    valid="0-7",
    flexible="5+",
    fields=[
        F("ThrottleTimeMs", "int32", "2+", ignorable=True),
        F(
            "Topics",
            "[]CreatableTopicResult",
            "0+",
            [
                F("Name", "string", "0+"),
                F("TopicId", "uuid", "7+", ignorable=True),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "1+", nullable="0+", ignorable=True),
                F("TopicConfigErrorCode", "int16", "5+", tag=0, ignorable=True),
                F("NumPartitions", "int32", "5+", default=-1, ignorable=True),
                F("ReplicationFactor", "int16", "5+", default=-1, ignorable=True),
                F(
                    "Configs",
                    "[]CreatableTopicConfigs",
                    "5+",
                    [
                        F("Name", "string", "5+"),
                        F("Value", "string", "5+", nullable="5+"),
                        F("ReadOnly", "bool", "5+"),
                        F("ConfigSource", "int8", "5+", default=-1, ignorable=True),
                        F("IsSensitive", "bool", "5+"),
                    ],
                    nullable="5+",
                    ignorable=True,
                ),
            ],
        ),
    ],
)
