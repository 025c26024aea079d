"""DescribeCluster (API key 60): cluster id, controller and brokers.

Transcribed from Kafka's `common/message/DescribeCluster*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "DescribeClusterRequest",
    api_key=60,
    valid="0-1",
    flexible="0+",
    fields=[
        F("IncludeClusterAuthorizedOperations", "bool", "0+"),
        F("EndpointType", "int8", "1+", default=1),
    ],
)

RESPONSE = message(
    "DescribeClusterResponse",
    api_key=60,
    valid="0-1",
    flexible="0+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F("EndpointType", "int8", "1+", default=1),
        F("ClusterId", "string", "0+"),
        F("ControllerId", "int32", "0+", default=-1),
        F(
            "Brokers",
            "[]DescribeClusterBroker",
            "0+",
            [
                F("BrokerId", "int32", "0+"),
                F("Host", "string", "0+"),
                F("Port", "int32", "0+"),
                F("Rack", "string", "0+", nullable="0+", default=None),
                # epochlog's extension (not in Kafka): the broker epoch (KIP-380) the controller
                # holds for the broker, in a tagged field that other clients skip.
                F("BrokerEpoch", "int64", "0+", tag=1000, default=-1, ignorable=True),
            ],
        ),
        F("ClusterAuthorizedOperations", "int32", "0+", default=-2147483648),
    ],
)
