"""AlterReplicaLogDirs (API key 34): move replicas between one broker's log dirs.

Transcribed from Kafka's `common/message/AlterReplicaLogDirs*.json` (apache/kafka branch 3.9,
commit c821449f). v1 is v0 (throttling before the response), v2 is the first flexible version.
`Dirs[].Path` and `Topics[].Name` are map keys in Kafka's JSON, which does not change the bytes.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "AlterReplicaLogDirsRequest",
    api_key=34,
    valid="0-2",
    flexible="2+",
    fields=[
        F(
            "Dirs",
            "[]AlterReplicaLogDir",
            "0+",
            [
                F("Path", "string", "0+"),
                F(
                    "Topics",
                    "[]AlterReplicaLogDirTopic",
                    "0+",
                    [
                        F("Name", "string", "0+"),
                        F("Partitions", "[]int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = message(
    "AlterReplicaLogDirsResponse",
    api_key=34,
    valid="0-2",
    flexible="2+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results",
            "[]AlterReplicaLogDirTopicResult",
            "0+",
            [
                F("TopicName", "string", "0+"),
                F(
                    "Partitions",
                    "[]AlterReplicaLogDirPartitionResult",
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
