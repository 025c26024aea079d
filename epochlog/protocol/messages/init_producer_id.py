"""InitProducerId (API key 22): producer id and epoch for idempotent producers.

Transcribed from Kafka's `common/message/InitProducerId*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "InitProducerIdRequest",
    api_key=22,
    valid="0-4",
    flexible="2+",
    fields=[
        F("TransactionalId", "string", "0+", nullable="0+"),
        F("TransactionTimeoutMs", "int32", "0+"),
        F("ProducerId", "int64", "3+", default=-1),
        F("ProducerEpoch", "int16", "3+", default=-1),
    ],
)

RESPONSE = message(
    "InitProducerIdResponse",
    api_key=22,
    valid="0-4",
    flexible="2+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+", ignorable=True),
        F("ErrorCode", "int16", "0+"),
        F("ProducerId", "int64", "0+", default=-1),
        F("ProducerEpoch", "int16", "0+"),
    ],
)
