"""ElectLeaders (API key 43): preferred (0) or unclean (1) leader elections (KIP-460).

Transcribed from Kafka's `common/message/ElectLeaders*.json` (apache/kafka branch 3.9). v1 adds
ElectionType and the response's top-level ErrorCode; v2 is the first flexible version. Null
TopicPartitions means every partition.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "ElectLeadersRequest",
    api_key=43,
    valid="0-2",
    flexible="2+",
    fields=[
        F("ElectionType", "int8", "1+", default=0),
        F(
            "TopicPartitions",
            "[]TopicPartitions",
            "0+",
            [
                F("Topic", "string", "0+"),
                F("Partitions", "[]int32", "0+"),
            ],
            nullable="0+",
            default=None,
        ),
        F("TimeoutMs", "int32", "0+", default=60000),
    ],
)

RESPONSE = message(
    "ElectLeadersResponse",
    api_key=43,
    valid="0-2",
    flexible="2+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "1+"),
        F(
            "ReplicaElectionResults",
            "[]ReplicaElectionResult",
            "0+",
            [
                F("Topic", "string", "0+"),
                F(
                    "PartitionResult",
                    "[]PartitionResult",
                    "0+",
                    [
                        F("PartitionId", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
)
