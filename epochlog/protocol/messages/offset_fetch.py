"""OffsetFetch (API key 9): a group's committed positions.

Transcribed from Kafka's `common/message/OffsetFetch*.json` (apache/kafka branch 3.9, commit
c821449f). v0 read offsets from ZooKeeper, v1+ from `__consumer_offsets` (the same bytes); v2
allows a null Topics array (all topics) and adds a top-level ErrorCode; v3 adds ThrottleTimeMs, v5
CommittedLeaderEpoch, v6 is the first flexible version, v7 RequireStable; v8 asks for many groups
at once (Groups replaces GroupId and Topics, KIP-709); v9 adds MemberId and MemberEpoch for
KIP-848 groups.

Kafka 3.9 still lists v0 but marks it deprecated (KIP-896; Kafka 4.0's JSON starts at v1).
librdkafka sends 0-9, kcat 0-7, aiokafka 1-3, kafka-python up to 8.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "OffsetFetchRequest",
    api_key=9,
    valid="0-9",
    flexible="6+",
    fields=[
        F("GroupId", "string", "0-7"),
        F(
            "Topics",
            "[]OffsetFetchRequestTopic",
            "0-7",
            [
                F("Name", "string", "0-7"),
                F("PartitionIndexes", "[]int32", "0-7"),
            ],
            nullable="2-7",
        ),
        F(
            "Groups",
            "[]OffsetFetchRequestGroup",
            "8+",
            [
                F("GroupId", "string", "8+"),
                F("MemberId", "string", "9+", nullable="9+", default=None, ignorable=True),
                F("MemberEpoch", "int32", "9+", default=-1, ignorable=True),
                F(
                    "Topics",
                    "[]OffsetFetchRequestTopics",
                    "8+",
                    [
                        F("Name", "string", "8+"),
                        F("PartitionIndexes", "[]int32", "8+"),
                    ],
                    nullable="8+",
                ),
            ],
        ),
        F("RequireStable", "bool", "7+", default=False),
    ],
)

RESPONSE = message(
    "OffsetFetchResponse",
    api_key=9,
    valid="0-9",
    flexible="6+",
    fields=[
        F("ThrottleTimeMs", "int32", "3+", ignorable=True),
        F(
            "Topics",
            "[]OffsetFetchResponseTopic",
            "0-7",
            [
                F("Name", "string", "0-7"),
                F(
                    "Partitions",
                    "[]OffsetFetchResponsePartition",
                    "0-7",
                    [
                        F("PartitionIndex", "int32", "0-7"),
                        F("CommittedOffset", "int64", "0-7"),
                        F("CommittedLeaderEpoch", "int32", "5-7", default=-1, ignorable=True),
                        F("Metadata", "string", "0-7", nullable="0-7"),
                        F("ErrorCode", "int16", "0-7"),
                    ],
                ),
            ],
        ),
        F("ErrorCode", "int16", "2-7", default=0, ignorable=True),
        F(
            "Groups",
            "[]OffsetFetchResponseGroup",
            "8+",
            [
                F("GroupId", "string", "8+"),
                F(
                    "Topics",
                    "[]OffsetFetchResponseTopics",
                    "8+",
                    [
                        F("Name", "string", "8+"),
                        F(
                            "Partitions",
                            "[]OffsetFetchResponsePartitions",
                            "8+",
                            [
                                F("PartitionIndex", "int32", "8+"),
                                F("CommittedOffset", "int64", "8+"),
                                F(
                                    "CommittedLeaderEpoch",
                                    "int32",
                                    "8+",
                                    default=-1,
                                    ignorable=True,
                                ),
                                F("Metadata", "string", "8+", nullable="8+"),
                                F("ErrorCode", "int16", "8+"),
                            ],
                        ),
                    ],
                ),
                F("ErrorCode", "int16", "8+", default=0),
            ],
        ),
    ],
)
