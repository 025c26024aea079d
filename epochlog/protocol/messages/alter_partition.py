"""AlterPartition (API key 56): a leader asks the controller to change a partition's ISR;
we serve v3 only (NewIsrWithEpochs, KIP-903).

Transcribed from Kafka's `common/message/AlterPartition*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "AlterPartitionRequest",
    api_key=56,
    valid="3",
    flexible="0+",
    fields=[
        F("BrokerId", "int32", "0+"),
        F("BrokerEpoch", "int64", "0+", default=-1),
        F(
            "Topics",
            "[]TopicData",
            "0+",
            [
                F("TopicId", "uuid", "2+", ignorable=True),
                F(
                    "Partitions",
                    "[]PartitionData",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("LeaderEpoch", "int32", "0+"),
                        F(
                            "NewIsrWithEpochs",
                            "[]BrokerState",
                            "3+",
                            [
                                F("BrokerId", "int32", "3+"),
                                F("BrokerEpoch", "int64", "3+", default=-1),
                            ],
                        ),
                        F("LeaderRecoveryState", "int8", "1+", default=0),
                        F("PartitionEpoch", "int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = message(
    "AlterPartitionResponse",
    api_key=56,
    valid="3",
    flexible="0+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F(
            "Topics",
            "[]TopicData",
            "0+",
            [
                F("TopicId", "uuid", "2+", ignorable=True),
                F(
                    "Partitions",
                    "[]PartitionData",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                        F("LeaderId", "int32", "0+"),
                        F("LeaderEpoch", "int32", "0+"),
                        F("Isr", "[]int32", "0+"),
                        F("LeaderRecoveryState", "int8", "1+", default=0, ignorable=True),
                        F("PartitionEpoch", "int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)
