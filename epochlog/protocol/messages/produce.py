"""Produce (API key 0): append record batches to partitions.

Transcribed from Kafka's `common/message/Produce*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "ProduceRequest",
    api_key=0,
    valid="3-11",
    flexible="9+",
    fields=[
        F("TransactionalId", "string", "3+", nullable="3+", default=None),
        F("Acks", "int16", "0+"),
        F("TimeoutMs", "int32", "0+"),
        F(
            "TopicData",
            "[]TopicProduceData",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "PartitionData",
                    "[]PartitionProduceData",
                    "0+",
                    [
                        F("Index", "int32", "0+"),
                        F("Records", "records", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = message(
    "ProduceResponse",
    api_key=0,
    valid="3-11",
    flexible="9+",
    fields=[
        F(
            "Responses",
            "[]TopicProduceResponse",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "PartitionResponses",
                    "[]PartitionProduceResponse",
                    "0+",
                    [
                        F("Index", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                        F("BaseOffset", "int64", "0+"),
                        F("LogAppendTimeMs", "int64", "2+", default=-1, ignorable=True),
                        F("LogStartOffset", "int64", "5+", default=-1, ignorable=True),
                        F(
                            "RecordErrors",
                            "[]BatchIndexAndErrorMessage",
                            "8+",
                            [
                                F("BatchIndex", "int32", "8+"),
                                F(
                                    "BatchIndexErrorMessage",
                                    "string",
                                    "8+",
                                    nullable="8+",
                                    default=None,
                                ),
                            ],
                            ignorable=True,
                        ),
                        F(
                            "ErrorMessage",
                            "string",
                            "8+",
                            nullable="8+",
                            default=None,
                            ignorable=True,
                        ),
                        F(
                            "CurrentLeader",
                            "LeaderIdAndEpoch",
                            "10+",
                            [
                                F("LeaderId", "int32", "10+", default=-1),
                                F("LeaderEpoch", "int32", "10+", default=-1),
                            ],
                            tag=0,
                        ),
                    ],
                ),
            ],
        ),
        F("ThrottleTimeMs", "int32", "1+", default=0, ignorable=True),
        F(
            "NodeEndpoints",
            "[]NodeEndpoint",
            "10+",
            [
                F("NodeId", "int32", "10+"),
                F("Host", "string", "10+"),
                F("Port", "int32", "10+"),
                F("Rack", "string", "10+", nullable="10+", default=None),
            ],
            tag=0,
        ),
    ],
)
