"""ListOffsets (API key 2): offsets by timestamp (-1 latest, -2 earliest, -3 max timestamp).

Transcribed from Kafka's `common/message/ListOffsets*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "ListOffsetsRequest",
    api_key=2,
    valid="1-8",
    flexible="6+",
    fields=[
        F("ReplicaId", "int32", "0+"),
        F("IsolationLevel", "int8", "2+"),
        F(
            "Topics",
            "[]ListOffsetsTopic",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]ListOffsetsPartition",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("CurrentLeaderEpoch", "int32", "4+", default=-1, ignorable=True),
                        F("Timestamp", "int64", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = message(
    "ListOffsetsResponse",
    api_key=2,
    valid="1-8",
    flexible="6+",
    fields=[
        F("ThrottleTimeMs", "int32", "2+", ignorable=True),
        F(
            "Topics",
            "[]ListOffsetsTopicResponse",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]ListOffsetsPartitionResponse",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                        F("Timestamp", "int64", "1+", default=-1),
                        F("Offset", "int64", "1+", default=-1),
                        F("LeaderEpoch", "int32", "4+", default=-1),
                    ],
                ),
            ],
        ),
    ],
)
