"""DescribeGroups (API key 15): state, protocol and members of classic groups (admin tools).

Transcribed from Kafka's `common/message/DescribeGroups*.json` (apache/kafka branch 3.9, commit
c821449f). v1 adds ThrottleTimeMs, v3 authorized operations, v4 members' GroupInstanceId, v5 is the
first flexible version. (Kafka 4.x adds v6 with a per-group ErrorMessage; 3.9 stops at v5.)
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "DescribeGroupsRequest",
    api_key=15,
    valid="0-5",
    flexible="5+",
    fields=[
        F("Groups", "[]string", "0+"),
        F("IncludeAuthorizedOperations", "bool", "3+"),
    ],
)

RESPONSE = message(
    "DescribeGroupsResponse",
    api_key=15,
    valid="0-5",
    flexible="5+",
    fields=[
        F("ThrottleTimeMs", "int32", "1+", ignorable=True),
        F(
            "Groups",
            "[]DescribedGroup",
            "0+",
            [
                F("ErrorCode", "int16", "0+"),
                F("GroupId", "string", "0+"),
                F("GroupState", "string", "0+"),
                F("ProtocolType", "string", "0+"),
                F("ProtocolData", "string", "0+"),
                F(
                    "Members",
                    "[]DescribedGroupMember",
                    "0+",
                    [
                        F("MemberId", "string", "0+"),
                        F(
                            "GroupInstanceId",
                            "string",
                            "4+",
                            nullable="4+",
                            default=None,
                            ignorable=True,
                        ),
                        F("ClientId", "string", "0+"),
                        F("ClientHost", "string", "0+"),
                        F("MemberMetadata", "bytes", "0+"),
                        F("MemberAssignment", "bytes", "0+"),
                    ],
                ),
                F("AuthorizedOperations", "int32", "3+", default=-2147483648),
            ],
        ),
    ],
)
