"""Heartbeat (API key 12): a classic group member says it is alive; the answer may ask it to
rejoin (REBALANCE_IN_PROGRESS).

Transcribed from Kafka's `common/message/Heartbeat*.json` (apache/kafka branch 3.9, commit
c821449f). v1 adds ThrottleTimeMs to the response, v3 GroupInstanceId, v4 is the first flexible
version. librdkafka and kcat send 0-3, aiokafka 0-1, kafka-python up to 4.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "HeartbeatRequest",
    api_key=12,
    valid="0-4",
    flexible="4+",
    fields=[
        F("GroupId", "string", "0+"),
        F("GenerationId", "int32", "0+"),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
    ],
)

RESPONSE = message(
    "HeartbeatResponse",
    api_key=12,
    valid="0-4",
    flexible="4+",
    fields=[
        F("ThrottleTimeMs", "int32", "1+", ignorable=True),
        F("ErrorCode", "int16", "0+"),
    ],
)
