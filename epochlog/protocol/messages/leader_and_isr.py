"""LeaderAndIsr (API key 4): the controller tells a broker which partitions it leads or follows.

Transcribed from Kafka's `common/message/LeaderAndIsr*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "LeaderAndIsrRequest",
    api_key=4,
    valid="2-6",
    flexible="4+",
    fields=[
        F("ControllerId", "int32", "0+"),
        F("ControllerEpoch", "int32", "0+"),
        F("BrokerEpoch", "int64", "2+", default=-1, ignorable=True),
        F("Type", "int8", "5+"),
        F(
            "TopicStates",
            "[]LeaderAndIsrTopicState",
            "2+",
            [
                F("TopicName", "string", "2+"),
                F("TopicId", "uuid", "5+", ignorable=True),
                F(
                    "PartitionStates",
                    "[]LeaderAndIsrPartitionState",
                    "2+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("ControllerEpoch", "int32", "0+"),
                        F("Leader", "int32", "0+"),
                        F("LeaderEpoch", "int32", "0+"),
                        F("Isr", "[]int32", "0+"),
                        F("PartitionEpoch", "int32", "0+"),
                        F("Replicas", "[]int32", "0+"),
                        F("AddingReplicas", "[]int32", "3+", ignorable=True),
                        F("RemovingReplicas", "[]int32", "3+", ignorable=True),
                        F("IsNew", "bool", "1+", default=False, ignorable=True),
                        F("LeaderRecoveryState", "int8", "6+", default=0),
                    ],
                ),
            ],
        ),
        F(
            "LiveLeaders",
            "[]LeaderAndIsrLiveLeader",
            "0+",
            [
                F("BrokerId", "int32", "0+"),
                F("HostName", "string", "0+"),
                F("Port", "int32", "0+"),
            ],
        ),
    ],
)

RESPONSE = message(
    "LeaderAndIsrResponse",
    api_key=4,
    valid="2-6",
    flexible="4+",
    fields=[
        F("ErrorCode", "int16", "0+"),
        F(
            "PartitionErrors",
            "[]LeaderAndIsrPartitionError",
            "0-4",
            [
                F("TopicName", "string", "0-4", ignorable=True),
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
            ],
        ),
        F(
            "Topics",
            "[]LeaderAndIsrTopicError",
            "5+",
            [
                F("TopicId", "uuid", "5+"),
                F("PartitionErrors", "[]LeaderAndIsrPartitionError", "5+", []),
            ],
        ),
    ],
)
