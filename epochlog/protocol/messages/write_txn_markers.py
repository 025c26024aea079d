"""WriteTxnMarkers (API key 27): a transaction coordinator asks partition leaders to append
COMMIT or ABORT markers for producers (broker to broker).

Transcribed from Kafka's `common/message/WriteTxnMarkers*.json` (apache/kafka branch 3.9).
TransactionResult is true for COMMIT. v1 is the first flexible version.
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "WriteTxnMarkersRequest",
    api_key=27,
    valid="0-1",
    flexible="1+",
    fields=[
        F(
            "Markers",
            "[]WritableTxnMarker",
            "0+",
            [
                F("ProducerId", "int64", "0+"),
                F("ProducerEpoch", "int16", "0+"),
                F("TransactionResult", "bool", "0+"),
                F(
                    "Topics",
                    "[]WritableTxnMarkerTopic",
                    "0+",
                    [
                        F("Name", "string", "0+"),
                        F("PartitionIndexes", "[]int32", "0+"),
                    ],
                ),
                F("CoordinatorEpoch", "int32", "0+"),
            ],
        ),
    ],
)

RESPONSE = message(
    "WriteTxnMarkersResponse",
    api_key=27,
    valid="0-1",
    flexible="1+",
    fields=[
        F(
            "Markers",
            "[]WritableTxnMarkerResult",
            "0+",
            [
                F("ProducerId", "int64", "0+"),
                F(
                    "Topics",
                    "[]WritableTxnMarkerTopicResult",
                    "0+",
                    [
                        F("Name", "string", "0+"),
                        F(
                            "Partitions",
                            "[]WritableTxnMarkerPartitionResult",
                            "0+",
                            [
                                F("PartitionIndex", "int32", "0+"),
                                F("ErrorCode", "int16", "0+"),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
)
