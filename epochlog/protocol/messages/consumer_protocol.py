"""The consumer protocol's member metadata: what a consumer puts in JoinGroup and SyncGroup.

Transcribed from Kafka's `clients/src/main/resources/common/message/` files
`ConsumerProtocolSubscription.json` and `ConsumerProtocolAssignment.json` (apache/kafka branch 3.9,
commit c821449f; unchanged on trunk of 2024-10-25). These are `"type": "data"` schemas: no
API key, no header. A consumer in a group with protocol type "consumer" sends a Subscription as
the metadata of each assignor it offers in JoinGroup; the leader sends each member an
Assignment in SyncGroup. Both are version-prefixed (an int16, then the fields), never flexible.

Subscription: v0 Topics and UserData; v1 adds OwnedPartitions (KIP-429, cooperative
rebalancing); v2 GenerationId (so a leader can tell stale owned partitions, KAFKA-12984); v3
RackId (KIP-881, rack-aware assignment). Assignment: v0 AssignedPartitions and UserData; its
versions 1-3 only keep pace with the Subscription's and add nothing.

`Topic` in the partition lists is a map key in Kafka's JSON; that only shapes Kafka's Java
collection, not the bytes, so it is a plain array here. `epochlog.protocol.consumer_protocol`
encodes and decodes whole version-prefixed values.
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
