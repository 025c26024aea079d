"""ControlledShutdown (API key 7): a broker asks the controller to move leadership away.

Transcribed from Kafka's `common/message/ControlledShutdown*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "ControlledShutdownRequest",
    api_key=7,
    valid="2-3",
    flexible="3+",
    fields=[
        F("BrokerId", "int32", "0+"),
        F("BrokerEpoch", "int64", "2+", default=-1, ignorable=True),
    ],
)

RESPONSE = message(
    "ControlledShutdownResponse",
    api_key=7,
    valid="2-3",
    flexible="3+",
    fields=[
        F("ErrorCode", "int16", "0+"),
        F(
            "RemainingPartitions",
            "[]RemainingPartition",
            "0+",
            [
                F("TopicName", "string", "0+"),
                F("PartitionIndex", "int32", "0+"),
            ],
        ),
    ],
)
