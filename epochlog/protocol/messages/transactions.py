"""The transaction APIs a transactional producer and the admin tools send to the transaction
coordinator: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), TxnOffsetCommit (28, to
the group coordinator), DescribeTransactions (65) and ListTransactions (66, KIP-664).

Transcribed from Kafka's `common/message/{AddPartitionsToTxn,AddOffsetsToTxn,EndTxn,
TxnOffsetCommit,DescribeTransactions,ListTransactions}{Request,Response}.json` (apache/kafka branch
3.9, commit c821449f), every version. Not yet in `protocol.api.APIS`: advertising them waits for
the coordinator's shell and handlers.

AddPartitionsToTxn v4+ (KIP-890) batches several transactions per request and is sent by brokers
(with VerifyOnly, to check a partition was added before a transactional write); v0-3 carry one
transaction in the `V3AndBelow*` fields.
"""

from epochlog.protocol.schema import F, message

_ADD_PARTITIONS_TOPIC = [
    F("Name", "string", "0+"),
    F("Partitions", "[]int32", "0+"),
]
_ADD_PARTITIONS_TOPIC_RESULT = [
    F("Name", "string", "0+"),
    F(
        "ResultsByPartition",
        "[]AddPartitionsToTxnPartitionResult",
        "0+",
        [
            F("PartitionIndex", "int32", "0+"),
            F("PartitionErrorCode", "int16", "0+"),
        ],
    ),
]

ADD_PARTITIONS_REQUEST = message(
    "AddPartitionsToTxnRequest",
    api_key=24,
    valid="0-5",
    flexible="3+",
    fields=[
        F(
            "Transactions",
            "[]AddPartitionsToTxnTransaction",
            "4+",
            [
                F("TransactionalId", "string", "4+"),
                F("ProducerId", "int64", "4+"),
                F("ProducerEpoch", "int16", "4+"),
                F("VerifyOnly", "bool", "4+", default=False),
                F("Topics", "[]AddPartitionsToTxnTopic", "4+", _ADD_PARTITIONS_TOPIC),
            ],
        ),
        F("V3AndBelowTransactionalId", "string", "0-3"),
        F("V3AndBelowProducerId", "int64", "0-3"),
        F("V3AndBelowProducerEpoch", "int16", "0-3"),
        F("V3AndBelowTopics", "[]AddPartitionsToTxnTopic", "0-3", _ADD_PARTITIONS_TOPIC),
    ],
)

ADD_PARTITIONS_RESPONSE = message(
    "AddPartitionsToTxnResponse",
    api_key=24,
    valid="0-5",
    flexible="3+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "4+", ignorable=True),
        F(
            "ResultsByTransaction",
            "[]AddPartitionsToTxnResult",
            "4+",
            [
                F("TransactionalId", "string", "4+"),
                F(
                    "TopicResults",
                    "[]AddPartitionsToTxnTopicResult",
                    "4+",
                    _ADD_PARTITIONS_TOPIC_RESULT,
                ),
            ],
        ),
        F(
            "ResultsByTopicV3AndBelow",
            "[]AddPartitionsToTxnTopicResult",
            "0-3",
            _ADD_PARTITIONS_TOPIC_RESULT,
        ),
    ],
)

ADD_OFFSETS_REQUEST = message(
    "AddOffsetsToTxnRequest",
    api_key=25,
    valid="0-4",
    flexible="3+",
    fields=[
        F("TransactionalId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("GroupId", "string", "0+"),
    ],
)

ADD_OFFSETS_RESPONSE = message(
    "AddOffsetsToTxnResponse",
    api_key=25,
    valid="0-4",
    flexible="3+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
    ],
)

END_TXN_REQUEST = message(
    "EndTxnRequest",
    api_key=26,
    valid="0-4",
    flexible="3+",
    fields=[
        F("TransactionalId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("Committed", "bool", "0+"),
    ],
)

END_TXN_RESPONSE = message(
    "EndTxnResponse",
    api_key=26,
    valid="0-4",
    flexible="3+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
    ],
)

TXN_OFFSET_COMMIT_REQUEST = message(
    "TxnOffsetCommitRequest",
    api_key=28,
    valid="0-4",
    flexible="3+",
    fields=[
        F("TransactionalId", "string", "0+"),
        F("GroupId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("GenerationId", "int32", "3+", default=-1),
        F("MemberId", "string", "3+", default=""),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        F(
            "Topics",
            "[]TxnOffsetCommitRequestTopic",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]TxnOffsetCommitRequestPartition",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("CommittedOffset", "int64", "0+"),
                        F("CommittedLeaderEpoch", "int32", "2+", default=-1, ignorable=True),
                        F("CommittedMetadata", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)

TXN_OFFSET_COMMIT_RESPONSE = message(
    "TxnOffsetCommitResponse",
    api_key=28,
    valid="0-4",
    flexible="3+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Topics",
            "[]TxnOffsetCommitResponseTopic",
            "0+",
            [
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]TxnOffsetCommitResponsePartition",
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

DESCRIBE_TRANSACTIONS_REQUEST = message(
    "DescribeTransactionsRequest",
    api_key=65,
    valid="0",
    flexible="0+",
    fields=[F("TransactionalIds", "[]string", "0+")],
)

DESCRIBE_TRANSACTIONS_RESPONSE = message(
    "DescribeTransactionsResponse",
    api_key=65,
    valid="0",
    flexible="0+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "TransactionStates",
            "[]TransactionState",
            "0+",
            [
                F("ErrorCode", "int16", "0+"),
                F("TransactionalId", "string", "0+"),
                F("TransactionState", "string", "0+"),
                F("TransactionTimeoutMs", "int32", "0+"),
                F("TransactionStartTimeMs", "int64", "0+"),
                F("ProducerId", "int64", "0+"),
                F("ProducerEpoch", "int16", "0+"),
                F(
                    "Topics",
                    "[]TopicData",
                    "0+",
                    [
                        F("Topic", "string", "0+"),
                        F("Partitions", "[]int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

LIST_TRANSACTIONS_REQUEST = message(
    "ListTransactionsRequest",
    api_key=66,
    valid="0-1",
    flexible="0+",
    fields=[
        F("StateFilters", "[]string", "0+"),
        F("ProducerIdFilters", "[]int64", "0+"),
        F("DurationFilter", "int64", "1+", default=-1),
    ],
)

LIST_TRANSACTIONS_RESPONSE = message(
    "ListTransactionsResponse",
    api_key=66,
    valid="0-1",
    flexible="0+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("UnknownStateFilters", "[]string", "0+"),
        F(
            "TransactionStates",
            "[]TransactionState",
            "0+",
            [
                F("TransactionalId", "string", "0+"),
                F("ProducerId", "int64", "0+"),
                F("TransactionState", "string", "0+"),
            ],
        ),
    ],
)

# Every transaction API above, request and response, by API key (for tests and, later, APIS).
TRANSACTION_API_MESSAGES = {
    24: (ADD_PARTITIONS_REQUEST, ADD_PARTITIONS_RESPONSE),
    25: (ADD_OFFSETS_REQUEST, ADD_OFFSETS_RESPONSE),
    26: (END_TXN_REQUEST, END_TXN_RESPONSE),
    28: (TXN_OFFSET_COMMIT_REQUEST, TXN_OFFSET_COMMIT_RESPONSE),
    65: (DESCRIBE_TRANSACTIONS_REQUEST, DESCRIBE_TRANSACTIONS_RESPONSE),
    66: (LIST_TRANSACTIONS_REQUEST, LIST_TRANSACTIONS_RESPONSE),
}
