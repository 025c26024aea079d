"""JoinGroup (API key 11): a member joins a classic group and the coordinator elects a leader.

Transcribed from Kafka's `common/message/JoinGroup*.json` (apache/kafka branch 3.9, commit
c821449f). v1 adds RebalanceTimeoutMs, v4 the two-step join with a coordinator-assigned member id
(MEMBER_ID_REQUIRED), v5 GroupInstanceId (static membership), v6 is the first flexible version,
v7 returns ProtocolType, v8 adds Reason (KIP-800), v9 SkipAssignment. Kafka 3.9 marks v0-1
deprecated (KIP-896) but still lists them; librdkafka and kcat send 0-5, aiokafka {0, 1, 2, 5},
kafka-python up to 7.

`Protocols[].Name` is a map key in Kafka's JSON: that only shapes Kafka's Java collection, not the
bytes on the wire, so it is a plain array here.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "JoinGroupRequest",
    api_key=11,
    valid="0-9",
    flexible="6+",
    fields=[
        F("GroupId", "string", "0+"),
        F("SessionTimeoutMs", "int32", "0+"),
        F("RebalanceTimeoutMs", "int32", "1+", default=-1, ignorable=True),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "5+", nullable="5+", default=None),
        F("ProtocolType", "string", "0+"),
        F(
            "Protocols",
            "[]JoinGroupRequestProtocol",
            "0+",
            [
                F("Name", "string", "0+"),
                F("Metadata", "bytes", "0+"),
            ],
        ),
        F("Reason", "string", "8+", nullable="8+", default=None, ignorable=True),
    ],
)

RESPONSE = message(
    "JoinGroupResponse",
    api_key=11,
    valid="0-9",
    flexible="6+",
    fields=[
        F("ThrottleTimeMs", "int32", "2+", ignorable=True),
        F("ErrorCode", "int16", "0+"),
        F("GenerationId", "int32", "0+", default=-1),
        F("ProtocolType", "string", "7+", nullable="7+", default=None, ignorable=True),
        F("ProtocolName", "string", "0+", nullable="7+"),
        F("Leader", "string", "0+"),
        F("SkipAssignment", "bool", "9+", default=False),
        F("MemberId", "string", "0+"),
        F(
            "Members",
            "[]JoinGroupResponseMember",
            "0+",
            [
                F("MemberId", "string", "0+"),
                F(
                    "GroupInstanceId",
                    "string",
                    "5+",
                    nullable="5+",
                    default=None,
                    ignorable=True,
                ),
                F("Metadata", "bytes", "0+"),
            ],
        ),
    ],
)
