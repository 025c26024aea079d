"""DescribeProducers (API key 61): the active idempotent producers of partitions (KIP-664).

Transcribed from Kafka's `common/message/DescribeProducers*.json` (apache/kafka branch 3.9,
commit c821449f). One version, flexible.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "DescribeProducersRequest",
    api_key=61,
    valid="0",
    flexible="0+",
    fields=[
        F(
            "Topics",
            "[]TopicRequest",
            "0+",
            [
                F("Name", "string", "0+"),
                F("PartitionIndexes", "[]int32", "0+"),
            ],
        ),
    ],
)

RESPONSE = message(
    "DescribeProducersResponse",
    api_key=61,
    valid="0",
    flexible="0+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Topics",
            "[]TopicResponse",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]PartitionResponse",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                        F(
                            "ActiveProducers",
                            "[]ProducerState",
                            "0+",
                            [
                                F("ProducerId", "int64", "0+"),
                                F("ProducerEpoch", "int32", "0+"),
                                F("LastSequence", "int32", "0+", default=-1),
                                F("LastTimestamp", "int64", "0+", default=-1),
                                F("CoordinatorEpoch", "int32", "0+"),
                                F("CurrentTxnStartOffset", "int64", "0+", default=-1),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
)
