"""OffsetDelete (API key 47): delete a group's committed offsets for some partitions (KIP-496).

Transcribed from Kafka's `common/message/OffsetDelete*.json` (apache/kafka branch 3.9, commit
c821449f): one version, never flexible. Note the response puts ErrorCode before ThrottleTimeMs.
Topic names and partition indexes are map keys in Kafka's JSON, which does not change the bytes.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "OffsetDeleteRequest",
    api_key=47,
    valid="0",
    flexible="none",
    fields=[
        F("GroupId", "string", "0+"),
        F(
            "Topics",
            "[]OffsetDeleteRequestTopic",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]OffsetDeleteRequestPartition",
                    "0+",
                    [F("PartitionIndex", "int32", "0+")],
                ),
            ],
        ),
    ],
)

RESPONSE = message(
    "OffsetDeleteResponse",
    api_key=47,
    valid="0",
    flexible="none",
    fields=[
        F("ErrorCode", "int16", "0+"),
        F("ThrottleTimeMs", "int32", "0+", ignorable=True),
        F(
            "Topics",
            "[]OffsetDeleteResponseTopic",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]OffsetDeleteResponsePartition",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                    ],
                ),
            ],
        ),
    ],
)
