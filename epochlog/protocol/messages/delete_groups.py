"""DeleteGroups (API key 42): delete empty groups and their committed offsets (admin tools).

Transcribed from Kafka's `common/message/DeleteGroups*.json` (apache/kafka branch 3.9, commit
c821449f). v1 is v0 (throttling before the response), v2 is the first flexible version. Kafka 3.9
marks v0 deprecated (KIP-896) but still lists it. `Results[].GroupId` is a map key in Kafka's JSON,
which does not change the bytes on the wire.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "DeleteGroupsRequest",
    api_key=42,
    valid="0-2",
    flexible="2+",
    fields=[F("GroupsNames", "[]string", "0+")],
)

RESPONSE = message(
    "DeleteGroupsResponse",
    api_key=42,
    valid="0-2",
    flexible="2+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results",
            "[]DeletableGroupResult",
            "0+",
            [
                F("GroupId", "string", "0+"),
                F("ErrorCode", "int16", "0+"),
            ],
        ),
    ],
)
