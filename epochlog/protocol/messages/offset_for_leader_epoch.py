"""OffsetForLeaderEpoch (API key 23): the end offset of a leader epoch, for follower truncation.

Transcribed from Kafka's `common/message/OffsetForLeaderEpoch*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "OffsetForLeaderEpochRequest",
    api_key=23,
    valid="2-4",
    flexible="4+",
    fields=[
        F("ReplicaId", "int32", "3+", default=-2, ignorable=True),
        F(
            "Topics",
            "[]OffsetForLeaderTopic",
            "0+",
            [
                F("Topic", "string", "0+"),
                F(
                    "Partitions",
                    "[]OffsetForLeaderPartition",
                    "0+",
                    [
                        F("Partition", "int32", "0+"),
                        F("CurrentLeaderEpoch", "int32", "2+", default=-1, ignorable=True),
                        F("LeaderEpoch", "int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = message(
    "OffsetForLeaderEpochResponse",
    api_key=23,
    valid="2-4",
    flexible="4+",
    fields=[
        F("ThrottleTimeMs", "int32", "2+", ignorable=True),
        F(
            "Topics",
            "[]OffsetForLeaderTopicResult",
            "0+",
            [
                F("Topic", "string", "0+"),
                F(
                    "Partitions",
                    "[]EpochEndOffset",
                    "0+",
                    [
                        F("ErrorCode", "int16", "0+"),
                        F("Partition", "int32", "0+"),
                        F("LeaderEpoch", "int32", "1+", default=-1, ignorable=True),
                        F("EndOffset", "int64", "0+", default=-1),
                    ],
                ),
            ],
        ),
    ],
)
