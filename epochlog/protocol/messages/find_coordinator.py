"""FindCoordinator (API key 10): which broker coordinates a group (or a transactional id).

Transcribed from Kafka's `common/message/FindCoordinator*.json` (apache/kafka branch 3.9, commit
c821449f). v0-3 ask for one key and answer one coordinator; v4+ batch the keys (KIP-699). KeyType
0 = group, 1 = transaction, 2 = share group (v6). Kafka 3.9 still lists v0 but marks it deprecated
(KIP-896); librdkafka and kcat send 0-2, aiokafka 0-1, kafka-python up to 6.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "FindCoordinatorRequest",
    api_key=10,
    valid="0-6",
    flexible="3+",
    fields=[
        F("Key", "string", "0-3"),
        F("KeyType", "int8", "1+", default=0),
        F("CoordinatorKeys", "[]string", "4+"),
    ],
)

RESPONSE = message(
    "FindCoordinatorResponse",
    api_key=10,
    valid="0-6",
    flexible="3+",
    fields=[
        F("ThrottleTimeMs", "int32", "1+", ignorable=True),
        F("ErrorCode", "int16", "0-3"),
        F("ErrorMessage", "string", "1-3", nullable="1-3", ignorable=True),
        F("NodeId", "int32", "0-3"),
        F("Host", "string", "0-3"),
        F("Port", "int32", "0-3"),
        F(
            "Coordinators",
            "[]Coordinator",
            "4+",
            [
                F("Key", "string", "4+"),
                F("NodeId", "int32", "4+"),
                F("Host", "string", "4+"),
                F("Port", "int32", "4+"),
                F("ErrorCode", "int16", "4+"),
                F("ErrorMessage", "string", "4+", nullable="4+", ignorable=True),
            ],
        ),
    ],
)
