"""DeleteTopics (API key 20); v6 names topics by name or ID.

Transcribed from Kafka's `common/message/DeleteTopics*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "DeleteTopicsRequest",
    api_key=20,
    valid="0-6",
    flexible="4+",
    fields=[
        F(
            "Topics",
            "[]DeleteTopicState",
            "6+",
            [
                F("Name", "string", "6+", nullable="6+", default=None),
                F("TopicId", "uuid", "6+"),
            ],
        ),
        F("TopicNames", "[]string", "0-5", ignorable=True),
        F("TimeoutMs", "int32", "0+"),
    ],
)

RESPONSE = message(
    "DeleteTopicsResponse",
    api_key=20,
    valid="0-6",
    flexible="4+",
    fields=[
        F("ThrottleTimeMs", "int32", "1+", ignorable=True),
        F(
            "Responses",
            "[]DeletableTopicResult",
            "0+",
            [
                F("Name", "string", "0+", nullable="6+"),
                F("TopicId", "uuid", "6+", ignorable=True),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "5+", nullable="5+", default=None, ignorable=True),
            ],
        ),
    ],
)
