"""DescribeClientQuotas (API key 48) and AlterClientQuotas (49): client quotas per user,
client id, or both, with defaults.

Transcribed from Kafka's `common/message/{Describe,Alter}ClientQuotas{Request,Response}.json`
(Kafka 3.9: versions 0-1, v1 the first flexible version, nothing else changed). MatchType:
0 exact name, 1 the default entity, 2 any specified entity. A null EntityName is the default
entity (`<default>` in ZooKeeper). Values are float64 on the wire.
"""

from epochlog.protocol.schema import F, message

_ENTITY = [
    F("EntityType", "string", "0+"),
    F("EntityName", "string", "0+", nullable="0+", default=None),
]

DESCRIBE_REQUEST = message(
    "DescribeClientQuotasRequest",
    api_key=48,
    valid="0-1",
    flexible="1+",
    fields=[
        F(
            "Components",
            "[]ComponentData",
            "0+",
            [
                F("EntityType", "string", "0+"),
                F("MatchType", "int8", "0+"),
                F("Match", "string", "0+", nullable="0+", default=None),
            ],
        ),
        F("Strict", "bool", "0+"),
    ],
)

DESCRIBE_RESPONSE = message(
    "DescribeClientQuotasResponse",
    api_key=48,
    valid="0-1",
    flexible="1+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F(
            "Entries",
            "[]EntryData",
            "0+",
            [
                F("Entity", "[]EntityData", "0+", _ENTITY),
                F(
                    "Values",
                    "[]ValueData",
                    "0+",
                    [F("Key", "string", "0+"), F("Value", "float64", "0+")],
                ),
            ],
            nullable="0+",
            default=None,
        ),
    ],
)

ALTER_REQUEST = message(
    "AlterClientQuotasRequest",
    api_key=49,
    valid="0-1",
    flexible="1+",
    fields=[
        F(
            "Entries",
            "[]EntryData",
            "0+",
            [
                F("Entity", "[]EntityData", "0+", _ENTITY),
                F(
                    "Ops",
                    "[]OpData",
                    "0+",
                    [
                        F("Key", "string", "0+"),
                        F("Value", "float64", "0+"),
                        F("Remove", "bool", "0+"),
                    ],
                ),
            ],
        ),
        F("ValidateOnly", "bool", "0+"),
    ],
)

ALTER_RESPONSE = message(
    "AlterClientQuotasResponse",
    api_key=49,
    valid="0-1",
    flexible="1+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Entries",
            "[]EntryData",
            "0+",
            [
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                F("Entity", "[]EntityData", "0+", _ENTITY),
            ],
        ),
    ],
)
