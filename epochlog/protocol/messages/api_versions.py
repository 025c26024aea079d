"""ApiVersions (API key 18): the API versions a broker serves; its response header is always v0.

Transcribed from Kafka's `common/message/ApiVersions*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "ApiVersionsRequest",
    api_key=18,
    valid="0-4",
    flexible="3+",
    fields=[
        F("ClientSoftwareName", "string", "3+", ignorable=True),
        F("ClientSoftwareVersion", "string", "3+", ignorable=True),
    ],
)

RESPONSE = message(
    "ApiVersionsResponse",
    api_key=18,
    valid="0-4",
    flexible="3+",
    fields=[
        F("ErrorCode", "int16", "0+"),
        F(
            "ApiKeys",
            "[]ApiVersion",
            "0+",
            [
                F("ApiKey", "int16", "0+"),
                F("MinVersion", "int16", "0+"),
                F("MaxVersion", "int16", "0+"),
            ],
        ),
        F("ThrottleTimeMs", "int32", "1+", ignorable=True),
        F(
            "SupportedFeatures",
            "[]SupportedFeatureKey",
            "3+",
            [
                F("Name", "string", "3+"),
                F("MinVersion", "int16", "3+"),
                F("MaxVersion", "int16", "3+"),
            ],
            tag=0,
            ignorable=True,
        ),
        F("FinalizedFeaturesEpoch", "int64", "3+", tag=1, default=-1, ignorable=True),
        F(
            "FinalizedFeatures",
            "[]FinalizedFeatureKey",
            "3+",
            [
                F("Name", "string", "3+"),
                F("MaxVersionLevel", "int16", "3+"),
                F("MinVersionLevel", "int16", "3+"),
            ],
            tag=2,
            ignorable=True,
        ),
        F("ZkMigrationReady", "bool", "3+", tag=3, default=False, ignorable=True),
    ],
)
