"""AlterPartitionReassignments (API key 45) and ListPartitionReassignments (API key 46), KIP-455.

Transcribed from Kafka's `common/message/AlterPartitionReassignments{Request,Response}.json` and
`ListPartitionReassignments{Request,Response}.json` (apache/kafka 3.9: only v0, flexible).
A null `Replicas` in an alteration cancels the partition's reassignment; a null `Topics` in a
listing asks for every reassignment in progress.
"""

from epochlog.protocol.schema import F, message

ALTER_REQUEST = message(
    "AlterPartitionReassignmentsRequest",
    api_key=45,
    valid="0",
    flexible="0+",
    fields=[
        F("TimeoutMs", "int32", "0+", default=60000),
        F(
            "Topics",
            "[]ReassignableTopic",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]ReassignablePartition",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("Replicas", "[]int32", "0+", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
)

ALTER_RESPONSE = message(
    "AlterPartitionReassignmentsResponse",
    api_key=45,
    valid="0",
    flexible="0+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F(
            "Responses",
            "[]ReassignableTopicResponse",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]ReassignablePartitionResponse",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
)

LIST_REQUEST = message(
    "ListPartitionReassignmentsRequest",
    api_key=46,
    valid="0",
    flexible="0+",
    fields=[
        F("TimeoutMs", "int32", "0+", default=60000),
        F(
            "Topics",
            "[]ListPartitionReassignmentsTopics",
            "0+",
            [
                F("Name", "string", "0+"),
                F("PartitionIndexes", "[]int32", "0+"),
            ],
            nullable="0+",
            default=None,
        ),
    ],
)

LIST_RESPONSE = message(
    "ListPartitionReassignmentsResponse",
    api_key=46,
    valid="0",
    flexible="0+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F(
            "Topics",
            "[]OngoingTopicReassignment",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]OngoingPartitionReassignment",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("Replicas", "[]int32", "0+"),
                        F("AddingReplicas", "[]int32", "0+"),
                        F("RemovingReplicas", "[]int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)
