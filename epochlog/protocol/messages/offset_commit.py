"""OffsetCommit (API key 8): a group member stores its consumed positions.

Transcribed from Kafka's `common/message/OffsetCommit*.json` (apache/kafka branch 3.9, commit
c821449f). v1 adds the generation, member id and a per-partition CommitTimestamp; v2 replaces the
timestamp with a request-level RetentionTimeMs, which v5 drops again (retention is the broker's
`offsets.retention.minutes`); v3 adds ThrottleTimeMs to the response, v6 CommittedLeaderEpoch, v7
GroupInstanceId; v8 is the first flexible version; v9 is v8 usable with KIP-848 groups.

Kafka 3.9 still lists v0-1 but marks them deprecated (KIP-896; Kafka 4.0's JSON starts at v2).
librdkafka sends 0-9, kcat 0-7, aiokafka 2-3, kafka-python up to 8.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "OffsetCommitRequest",
    api_key=8,
    valid="0-9",
    flexible="8+",
    fields=[
        F("GroupId", "string", "0+"),
        F("GenerationIdOrMemberEpoch", "int32", "1+", default=-1, ignorable=True),
        F("MemberId", "string", "1+", ignorable=True),
        F("GroupInstanceId", "string", "7+", nullable="7+", default=None),
        F("RetentionTimeMs", "int64", "2-4", default=-1, ignorable=True),
        F(
            "Topics",
            "[]OffsetCommitRequestTopic",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]OffsetCommitRequestPartition",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("CommittedOffset", "int64", "0+"),
                        F("CommittedLeaderEpoch", "int32", "6+", default=-1, ignorable=True),
                        F("CommitTimestamp", "int64", "1", default=-1),
                        F("CommittedMetadata", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = message(
    "OffsetCommitResponse",
    api_key=8,
    valid="0-9",
    flexible="8+",
    fields=[
        F("ThrottleTimeMs", "int32", "3+", ignorable=True),
        F(
            "Topics",
            "[]OffsetCommitResponseTopic",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]OffsetCommitResponsePartition",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                    ],
                ),
            ],
        ),
    ],
)
