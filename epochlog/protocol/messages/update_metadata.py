"""UpdateMetadata (API key 6): the controller pushes live brokers and partition states.

Transcribed from Kafka's `common/message/UpdateMetadata*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "UpdateMetadataRequest",
    api_key=6,
    valid="5-7",
    flexible="6+",
    fields=[
        F("ControllerId", "int32", "0+"),
        F("ControllerEpoch", "int32", "0+"),
        F("BrokerEpoch", "int64", "5+", default=-1, ignorable=True),
        F(
            "TopicStates",
            "[]UpdateMetadataTopicState",
            "5+",
            [
                F("TopicName", "string", "5+"),
                F("TopicId", "uuid", "7+", ignorable=True),
                F(
                    "PartitionStates",
                    "[]UpdateMetadataPartitionState",
                    "5+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("ControllerEpoch", "int32", "0+"),
                        F("Leader", "int32", "0+"),
                        F("LeaderEpoch", "int32", "0+"),
                        F("Isr", "[]int32", "0+"),
                        F("ZkVersion", "int32", "0+"),
                        F("Replicas", "[]int32", "0+"),
                        F("OfflineReplicas", "[]int32", "4+", ignorable=True),
                    ],
                ),
            ],
        ),
        F(
            "LiveBrokers",
            "[]UpdateMetadataBroker",
            "0+",
            [
                F("Id", "int32", "0+"),
                F(
                    "Endpoints",
                    "[]UpdateMetadataEndpoint",
                    "1+",
                    [
                        F("Port", "int32", "1+"),
                        F("Host", "string", "1+"),
                        F("Listener", "string", "3+", ignorable=True),
                        F("SecurityProtocol", "int16", "1+"),
                    ],
                    ignorable=True,
                ),
                F("Rack", "string", "2+", nullable="0+", ignorable=True),
                # epochlog's extension (not in Kafka): the broker epoch the controller holds for
                # this broker, so leaders can check a follower's fetch epoch (KIP-903 in ZK mode).
                F("BrokerEpoch", "int64", "6+", tag=1000, default=-1, ignorable=True),
            ],
        ),
    ],
)

RESPONSE = message(
    "UpdateMetadataResponse",
    api_key=6,
    valid="5-7",
    flexible="6+",
    fields=[
        F("ErrorCode", "int16", "0+"),
    ],
)
