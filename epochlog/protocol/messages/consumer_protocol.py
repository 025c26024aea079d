"""The consumer protocol: what consumers put in JoinGroup metadata and SyncGroup assignments.

Kafka's `"type": "data"` schemas `ConsumerProtocolSubscription` and `ConsumerProtocolAssignment`
(apache/kafka 3.9 `clients/src/main/resources/common/message/`, the same JSON as kafka-python
3.0.12's bundled copy). The broker never reads them past the subscription's topics; admin tools
decode them to show members' assignments. Both are written version-prefixed (int16, then the
fields) and are never flexible.

Subscription: v0 Topics and UserData; v1 adds OwnedPartitions (cooperative rebalancing), v2
GenerationId, v3 RackId. Assignment: the same layout at every version 0-3 (versions 1-3 exist
only to follow the subscription's). Kafka reads a newer version with the highest layout it knows
(new versions may only append fields); see `epochlog.protocol.consumer_protocol`.
"""

from epochlog.protocol.schema import F, message

SUBSCRIPTION = message(
    "ConsumerProtocolSubscription",
    api_key=None,
    kind="data",
    valid="0-3",
    flexible="none",
    fields=[
        F("Topics", "[]string", "0+"),
        F("UserData", "bytes", "0+", nullable="0+", default=None),
        F(
            "OwnedPartitions",
            "[]TopicPartition",
            "1+",
            [
                F("Topic", "string", "1+"),
                F("Partitions", "[]int32", "1+"),
            ],
            ignorable=True,
        ),
        F("GenerationId", "int32", "2+", default=-1, ignorable=True),
        F("RackId", "string", "3+", nullable="3+", default=None, ignorable=True),
    ],
)

ASSIGNMENT = message(
    "ConsumerProtocolAssignment",
    api_key=None,
    kind="data",
    valid="0-3",
    flexible="none",
    fields=[
        F(
            "AssignedPartitions",
            "[]TopicPartition",
            "0+",
            [
                F("Topic", "string", "0+"),
                F("Partitions", "[]int32", "0+"),
            ],
        ),
        F("UserData", "bytes", "0+", nullable="0+", default=None),
    ],
)
