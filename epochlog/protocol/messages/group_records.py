"""The record formats of `__consumer_offsets`, as Kafka writes them, so Kafka's tools can read them.

Transcribed from Kafka's `group-coordinator/src/main/resources/common/message/{OffsetCommitKey,
OffsetCommitValue,GroupMetadataKey,GroupMetadataValue}.json` (apache/kafka branch 3.9, commit
c821449f). These are `"type": "data"` schemas: no API key, no header. On disk a record key is an
int16 version followed by the key's fields at that version, and a value is an int16 version
followed by the value's fields; a null value is a tombstone. The key version says what the record
is: 0 or 1 an offset commit (OffsetCommitKey), 2 a group's metadata (GroupMetadataKey); higher
ones are other record types (3-8 are KIP-848 consumer groups in 3.9), which classic groups never
write. Field names keep Kafka's lowerCamelCase, so the attributes are `leader_epoch`,
`commit_timestamp`, ...

`epochlog.protocol.consumer_offsets` encodes and decodes whole keys and values and picks the
versions Kafka 3.9 writes.
"""

from epochlog.protocol.schema import F, message

OFFSET_COMMIT_KEY = message(
    "OffsetCommitKey",
    api_key=None,
    kind="data",
    valid="0-1",
    flexible="none",
    fields=[
        F("group", "string", "0-1"),
        F("topic", "string", "0-1"),
        F("partition", "int32", "0-1"),
    ],
)

# v0 [offset, metadata, commitTimestamp]; v1 adds expireTimestamp (only v1 has it); v2 is v0's
# layout; v3 adds leaderEpoch; v4 is v3 made flexible (KIP-915: new fields must be tagged).
OFFSET_COMMIT_VALUE = message(
    "OffsetCommitValue",
    api_key=None,
    kind="data",
    valid="0-4",
    flexible="4+",
    fields=[
        F("offset", "int64", "0+"),
        F("leaderEpoch", "int32", "3+", default=-1, ignorable=True),
        F("metadata", "string", "0+"),
        F("commitTimestamp", "int64", "0+"),
        F("expireTimestamp", "int64", "1", default=-1, ignorable=True),
    ],
)

GROUP_METADATA_KEY = message(
    "GroupMetadataKey",
    api_key=None,
    kind="data",
    valid="2",
    flexible="none",
    fields=[F("group", "string", "2")],
)

# v1 adds the members' rebalanceTimeout, v2 currentStateTimestamp, v3 the members'
# groupInstanceId, v4 is v3 made flexible. MemberMetadata is a common struct in Kafka's JSON.
GROUP_METADATA_VALUE = message(
    "GroupMetadataValue",
    api_key=None,
    kind="data",
    valid="0-4",
    flexible="4+",
    fields=[
        F("protocolType", "string", "0+"),
        F("generation", "int32", "0+"),
        F("protocol", "string", "0+", nullable="0+"),
        F("leader", "string", "0+", nullable="0+"),
        F("currentStateTimestamp", "int64", "2+", default=-1, ignorable=True),
        F(
            "members",
            "[]MemberMetadata",
            "0+",
            [
                F("memberId", "string", "0+"),
                F(
                    "groupInstanceId",
                    "string",
                    "3+",
                    nullable="3+",
                    default=None,
                    ignorable=True,
                ),
                F("clientId", "string", "0+"),
                F("clientHost", "string", "0+"),
                F("rebalanceTimeout", "int32", "1+", default=-1, ignorable=True),
                F("sessionTimeout", "int32", "0+"),
                F("subscription", "bytes", "0+"),
                F("assignment", "bytes", "0+"),
            ],
        ),
    ],
)
