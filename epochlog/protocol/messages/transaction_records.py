"""The record formats of `__transaction_state`, as Kafka writes them, so Kafka's tools read them.

Transcribed from Kafka's `transaction-coordinator/src/main/resources/common/message/
{TransactionLogKey,TransactionLogValue}.json` (apache/kafka). These are data schemas: on disk a key
is an int16 version (0) followed by the transactional id, and a value an int16 version followed by
the value's fields; a null value is a tombstone (the transactional id expired).

TransactionLogValue v1 is v0 made flexible (KIP-915); its tagged fields (previous and next
producer id, KIP-890; the client's transaction version, tag 2, from Kafka 4.0) are read by every
v1 reader and skipped if unknown. `TransactionStatus` is the state's byte: 0 Empty, 1 Ongoing,
2 PrepareCommit, 3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort, 6 Dead, 7 PrepareEpochFence.
"""

from epochlog.protocol.schema import F, message

TRANSACTION_LOG_KEY = message(
    "TransactionLogKey",
    api_key=None,
    kind="data",
    valid="0",
    flexible="none",
    fields=[F("TransactionalId", "string", "0")],
)

TRANSACTION_LOG_VALUE = message(
    "TransactionLogValue",
    api_key=None,
    kind="data",
    valid="0-1",
    flexible="1+",
    fields=[
        F("ProducerId", "int64", "0+"),
        F("PreviousProducerId", "int64", "1+", tag=0, default=-1),
        F("NextProducerId", "int64", "1+", tag=1, default=-1),
        F("ProducerEpoch", "int16", "0+"),
        F("TransactionTimeoutMs", "int32", "0+"),
        F("TransactionStatus", "int8", "0+"),
        F(
            "TransactionPartitions",
            "[]PartitionsSchema",
            "0+",
            [
                F("Topic", "string", "0+"),
                F("PartitionIds", "[]int32", "0+"),
            ],
            nullable="0+",
        ),
        F("TransactionLastUpdateTimestampMs", "int64", "0+"),
        F("TransactionStartTimestampMs", "int64", "0+"),
        F("ClientTransactionVersion", "int16", "1+", tag=2, default=0),
    ],
)
