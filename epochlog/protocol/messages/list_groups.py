"""ListGroups (API key 16): the groups a coordinator knows (admin tools).

Transcribed from Kafka's `common/message/ListGroups*.json` (apache/kafka branch 3.9, commit
c821449f). v1 adds ThrottleTimeMs, v3 is the first flexible version, v4 StatesFilter and each
group's GroupState (KIP-518), v5 TypesFilter and GroupType (KIP-848).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "ListGroupsRequest",
    api_key=16,
    valid="0-5",
    flexible="3+",
    fields=[
        F("StatesFilter", "[]string", "4+"),
        F("TypesFilter", "[]string", "5+"),
    ],
)

RESPONSE = message(
    "ListGroupsResponse",
    api_key=16,
    valid="0-5",
    flexible="3+",
    fields=[
        F("ThrottleTimeMs", "int32", "1+", ignorable=True),
        F("ErrorCode", "int16", "0+"),
        F(
            "Groups",
            "[]ListedGroup",
            "0+",
            [
                F("GroupId", "string", "0+"),
                F("ProtocolType", "string", "0+"),
                F("GroupState", "string", "4+", ignorable=True),
                F("GroupType", "string", "5+", ignorable=True),
            ],
        ),
    ],
)
