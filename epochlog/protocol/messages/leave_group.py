"""LeaveGroup (API key 13): members leave a classic group so it rebalances at once.

Transcribed from Kafka's `common/message/LeaveGroup*.json` (apache/kafka branch 3.9, commit
c821449f). v0-2 name one MemberId; v3 batches members with their GroupInstanceId (KIP-345), v4 is
the first flexible version, v5 adds a per-member Reason (KIP-800). librdkafka, kcat and aiokafka
send 0-1, kafka-python up to 5.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "LeaveGroupRequest",
    api_key=13,
    valid="0-5",
    flexible="4+",
    fields=[
        F("GroupId", "string", "0+"),
        F("MemberId", "string", "0-2"),
        F(
            "Members",
            "[]MemberIdentity",
            "3+",
            [
                F("MemberId", "string", "3+"),
                F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
                F("Reason", "string", "5+", nullable="5+", default=None, ignorable=True),
            ],
        ),
    ],
)

RESPONSE = message(
    "LeaveGroupResponse",
    api_key=13,
    valid="0-5",
    flexible="4+",
    fields=[
        F("ThrottleTimeMs", "int32", "1+", ignorable=True),
        F("ErrorCode", "int16", "0+"),
        F(
            "Members",
            "[]MemberResponse",
            "3+",
            [
                F("MemberId", "string", "3+"),
                F("GroupInstanceId", "string", "3+", nullable="3+"),
                F("ErrorCode", "int16", "3+"),
            ],
        ),
    ],
)
