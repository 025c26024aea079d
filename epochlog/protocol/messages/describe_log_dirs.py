"""DescribeLogDirs (API key 35): each log dir of a broker, with the replicas it holds.

Transcribed from Kafka's `common/message/DescribeLogDirs*.json` (apache/kafka branch 3.9, commit
c821449f). v1 is v0 (throttling before the response), v2 is the first flexible version, v3 adds
the top-level ErrorCode, v4 each dir's TotalBytes and UsableBytes. A null Topics asks for every
partition. `Topics[].Topic` is a map key in Kafka's JSON, which does not change the bytes.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "DescribeLogDirsRequest",
    api_key=35,
    valid="0-4",
    flexible="2+",
    fields=[
        F(
            "Topics",
            "[]DescribableLogDirTopic",
            "0+",
            [
                F("Topic", "string", "0+"),
                F("Partitions", "[]int32", "0+"),
            ],
            nullable="0+",
        ),
    ],
)

RESPONSE = message(
    "DescribeLogDirsResponse",
    api_key=35,
    valid="0-4",
    flexible="2+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "3+", ignorable=True),
        F(
            "Results",
            "[]DescribeLogDirsResult",
            "0+",
            [
                F("ErrorCode", "int16", "0+"),
                F("LogDir", "string", "0+"),
                F(
                    "Topics",
                    "[]DescribeLogDirsTopic",
                    "0+",
                    [
                        F("Name", "string", "0+"),
                        F(
                            "Partitions",
                            "[]DescribeLogDirsPartition",
                            "0+",
                            [
                                F("PartitionIndex", "int32", "0+"),
                                F("PartitionSize", "int64", "0+"),
                                F("OffsetLag", "int64", "0+"),
                                F("IsFutureKey", "bool", "0+"),
                            ],
                        ),
                    ],
                ),
                F("TotalBytes", "int64", "4+", ignorable=True, default=-1),
                F("UsableBytes", "int64", "4+", ignorable=True, default=-1),
            ],
        ),
    ],
)
