"""StopReplica (API key 5): the controller tells a broker to stop (and maybe delete) replicas.

Transcribed from Kafka's `common/message/StopReplica*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "StopReplicaRequest",
    api_key=5,
    valid="1-3",
    flexible="2+",
    fields=[
        F("ControllerId", "int32", "0+"),
        F("ControllerEpoch", "int32", "0+"),
        F("BrokerEpoch", "int64", "1+", default=-1, ignorable=True),
        F("DeletePartitions", "bool", "0-2"),
        F(
            "Topics",
            "[]StopReplicaTopicV1",
            "1-2",
            [
                F("Name", "string", "1-2"),
                F("PartitionIndexes", "[]int32", "1-2"),
            ],
        ),
        F(
            "TopicStates",
            "[]StopReplicaTopicState",
            "3+",
            [
                F("TopicName", "string", "3+"),
                F(
                    "PartitionStates",
                    "[]StopReplicaPartitionState",
                    "3+",
                    [
                        F("PartitionIndex", "int32", "3+"),
                        F("LeaderEpoch", "int32", "3+", default=-1),
                        F("DeletePartition", "bool", "3+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = message(
    "StopReplicaResponse",
    api_key=5,
    valid="1-3",
    flexible="2+",
    fields=[
        F("ErrorCode", "int16", "0+"),
        F(
            "PartitionErrors",
            "[]StopReplicaPartitionError",
            "0+",
            [
                F("TopicName", "string", "0+"),
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
            ],
        ),
    ],
)
