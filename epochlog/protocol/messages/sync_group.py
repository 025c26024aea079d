"""SyncGroup (API key 14): the leader hands out the assignment; every member receives its own.

Transcribed from Kafka's `common/message/SyncGroup*.json` (apache/kafka branch 3.9, commit
c821449f). v1 adds ThrottleTimeMs to the response, v3 GroupInstanceId, v4 is the first flexible
version, v5 ProtocolType and ProtocolName in both directions (KIP-559). librdkafka and kcat send
0-3, aiokafka {0, 1, 3}, kafka-python up to 5.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "SyncGroupRequest",
    api_key=14,
    valid="0-5",
    flexible="4+",
    fields=[
        F("GroupId", "string", "0+"),
        F("GenerationId", "int32", "0+"),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        F("ProtocolType", "string", "5+", nullable="5+", default=None, ignorable=True),
        F("ProtocolName", "string", "5+", nullable="5+", default=None, ignorable=True),
        F(
            "Assignments",
            "[]SyncGroupRequestAssignment",
            "0+",
            [
                F("MemberId", "string", "0+"),
                F("Assignment", "bytes", "0+"),
            ],
        ),
    ],
)

RESPONSE = message(
    "SyncGroupResponse",
    api_key=14,
    valid="0-5",
    flexible="4+",
    fields=[
        F("ThrottleTimeMs", "int32", "1+", ignorable=True),
        F("ErrorCode", "int16", "0+"),
        F("ProtocolType", "string", "5+", nullable="5+", default=None, ignorable=True),
        F("ProtocolName", "string", "5+", nullable="5+", default=None, ignorable=True),
        F("Assignment", "bytes", "0+"),
    ],
)
