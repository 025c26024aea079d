"""DescribeConfigs (API key 32), AlterConfigs (33) and IncrementalAlterConfigs (44): read and
change topic and broker configs at runtime.

Transcribed from Kafka's `common/message/{Describe,Alter,IncrementalAlter}Configs*.json`
(apache/kafka, trunk of 2024-10-25, 1eb76443, the same schemas as branch 3.9). DescribeConfigs:
v1 adds IncludeSynonyms, ConfigSource and the synonyms, v3 IncludeDocumentation, ConfigType and
Documentation, v4 is the first flexible version (v0 is deprecated, still listed). AlterConfigs:
v2 is the first flexible version. IncrementalAlterConfigs: v1 is the first flexible version.
The `mapKey` markers of Kafka's JSON do not change the bytes on the wire.
"""

from epochlog.protocol.schema import F, message

DESCRIBE_REQUEST = message(
    "DescribeConfigsRequest",
    api_key=32,
    valid="0-4",
    flexible="4+",
    fields=[
        F(
            "Resources",
            "[]DescribeConfigsResource",
            "0+",
            [
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
                F("ConfigurationKeys", "[]string", "0+", nullable="0+", default=None),
            ],
        ),
        F("IncludeSynonyms", "bool", "1+", default=False),
        F("IncludeDocumentation", "bool", "3+", default=False),
    ],
)

DESCRIBE_RESPONSE = message(
    "DescribeConfigsResponse",
    api_key=32,
    valid="0-4",
    flexible="4+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results",
            "[]DescribeConfigsResult",
            "0+",
            [
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
                F(
                    "Configs",
                    "[]DescribeConfigsResourceResult",
                    "0+",
                    [
                        F("Name", "string", "0+"),
                        F("Value", "string", "0+", nullable="0+", default=None),
                        F("ReadOnly", "bool", "0+"),
                        F("IsDefault", "bool", "0"),
                        F("ConfigSource", "int8", "1+", default=-1, ignorable=True),
                        F("IsSensitive", "bool", "0+"),
                        F(
                            "Synonyms",
                            "[]DescribeConfigsSynonym",
                            "1+",
                            [
                                F("Name", "string", "1+"),
                                F("Value", "string", "1+", nullable="0+", default=None),
                                F("Source", "int8", "1+"),
                            ],
                            ignorable=True,
                        ),
                        F("ConfigType", "int8", "3+", default=0, ignorable=True),
                        F(
                            "Documentation",
                            "string",
                            "3+",
                            nullable="0+",
                            default=None,
                            ignorable=True,
                        ),
                    ],
                ),
            ],
        ),
    ],
)

_ALTER_RESPONSES = F(
    "Responses",
    "[]AlterConfigsResourceResponse",
    "0+",
    [
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F("ResourceType", "int8", "0+"),
        F("ResourceName", "string", "0+"),
    ],
)

ALTER_REQUEST = message(
    "AlterConfigsRequest",
    api_key=33,
    valid="0-2",
    flexible="2+",
    fields=[
        F(
            "Resources",
            "[]AlterConfigsResource",
            "0+",
            [
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
                F(
                    "Configs",
                    "[]AlterableConfig",
                    "0+",
                    [
                        F("Name", "string", "0+"),
                        F("Value", "string", "0+", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
        F("ValidateOnly", "bool", "0+"),
    ],
)

ALTER_RESPONSE = message(
    "AlterConfigsResponse",
    api_key=33,
    valid="0-2",
    flexible="2+",
    fields=[F("ThrottleTimeMs", "int32", "0+"), _ALTER_RESPONSES],
)

INCREMENTAL_ALTER_REQUEST = message(
    "IncrementalAlterConfigsRequest",
    api_key=44,
    valid="0-1",
    flexible="1+",
    fields=[
        F(
            "Resources",
            "[]AlterConfigsResource",
            "0+",
            [
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
                F(
                    "Configs",
                    "[]AlterableConfig",
                    "0+",
                    [
                        F("Name", "string", "0+"),
                        F("ConfigOperation", "int8", "0+"),
                        F("Value", "string", "0+", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
        F("ValidateOnly", "bool", "0+"),
    ],
)

INCREMENTAL_ALTER_RESPONSE = message(
    "IncrementalAlterConfigsResponse",
    api_key=44,
    valid="0-1",
    flexible="1+",
    fields=[F("ThrottleTimeMs", "int32", "0+"), _ALTER_RESPONSES],
)
