"""DeleteRecords (API key 21): move partitions' log start offsets forward.

Transcribed from Kafka's `common/message/DeleteRecords*.json` (apache/kafka branch 3.9). v1 is
v0; v2 is the first flexible version. Offset -1 means the high watermark.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "DeleteRecordsRequest",
    api_key=21,
    valid="0-2",
    flexible="2+",
    fields=[
        F(
            "Topics",
            "[]DeleteRecordsTopic",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]DeleteRecordsPartition",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("Offset", "int64", "0+"),
                    ],
                ),
            ],
        ),
        F("TimeoutMs", "int32", "0+"),
    ],
)

RESPONSE = message(
    "DeleteRecordsResponse",
    api_key=21,
    valid="0-2",
    flexible="2+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Topics",
            "[]DeleteRecordsTopicResult",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]DeleteRecordsPartitionResult",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("LowWatermark", "int64", "0+"),
                        F("ErrorCode", "int16", "0+"),
                    ],
                ),
            ],
        ),
    ],
)
