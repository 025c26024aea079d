"""Fetch (API key 1): consumers and followers read partitions; topic IDs from v13,
ReplicaState (follower id and broker epoch) from v15.

Transcribed from Kafka's `common/message/Fetch*.json` (apache/kafka branch 3.9).
"""

from epochlog.protocol.schema import F, message

REQUEST = message(
    "FetchRequest",
    api_key=1,
    valid="4-16",
    flexible="12+",
    fields=[
        F("ClusterId", "string", "12+", nullable="12+", tag=0, default=None, ignorable=True),
        F("ReplicaId", "int32", "0-14", default=-1),
        F(
            "ReplicaState",
            "ReplicaState",
            "15+",
            [
                F("ReplicaId", "int32", "15+", default=-1),
                F("ReplicaEpoch", "int64", "15+", default=-1),
            ],
            tag=1,
        ),
        F("MaxWaitMs", "int32", "0+"),
        F("MinBytes", "int32", "0+"),
        F("MaxBytes", "int32", "3+", default=2147483647, ignorable=True),
        F("IsolationLevel", "int8", "4+", default=0, ignorable=True),
        F("SessionId", "int32", "7+", default=0, ignorable=True),
        F("SessionEpoch", "int32", "7+", default=-1, ignorable=True),
        F(
            "Topics",
            "[]FetchTopic",
            "0+",
            [
                F("Topic", "string", "0-12", ignorable=True),
                F("TopicId", "uuid", "13+", ignorable=True),
                F(
                    "Partitions",
                    "[]FetchPartition",
                    "0+",
                    [
                        F("Partition", "int32", "0+"),
                        F("CurrentLeaderEpoch", "int32", "9+", default=-1, ignorable=True),
                        F("FetchOffset", "int64", "0+"),
                        F("LastFetchedEpoch", "int32", "12+", default=-1),
                        F("LogStartOffset", "int64", "5+", default=-1, ignorable=True),
                        F("PartitionMaxBytes", "int32", "0+"),
                    ],
                ),
            ],
        ),
        F(
            "ForgottenTopicsData",
            "[]ForgottenTopic",
            "7+",
            [
                F("Topic", "string", "7-12", ignorable=True),
                F("TopicId", "uuid", "13+", ignorable=True),
                F("Partitions", "[]int32", "7+"),
            ],
        ),
        F("RackId", "string", "11+", default="", ignorable=True),
    ],
)

RESPONSE = message(
    "FetchResponse",
    api_key=1,
    valid="4-16",
    flexible="12+",
    fields=[
        F("ThrottleTimeMs", "int32", "1+", ignorable=True),
        F("ErrorCode", "int16", "7+", ignorable=True),
        F("SessionId", "int32", "7+", default=0),
        F(
            "Responses",
            "[]FetchableTopicResponse",
            "0+",
            [
                F("Topic", "string", "0-12", ignorable=True),
                F("TopicId", "uuid", "13+", ignorable=True),
                F(
                    "Partitions",
                    "[]PartitionData",
                    "0+",
                    [
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                        F("HighWatermark", "int64", "0+"),
                        F("LastStableOffset", "int64", "4+", default=-1, ignorable=True),
                        F("LogStartOffset", "int64", "5+", default=-1, ignorable=True),
                        F(
                            "DivergingEpoch",
                            "EpochEndOffset",
                            "12+",
                            [
                                F("Epoch", "int32", "12+", default=-1),
                                F("EndOffset", "int64", "12+", default=-1),
                            ],
                            tag=0,
                        ),
                        F(
                            "CurrentLeader",
                            "LeaderIdAndEpoch",
                            "12+",
                            [
                                F("LeaderId", "int32", "12+", default=-1),
                                F("LeaderEpoch", "int32", "12+", default=-1),
                            ],
                            tag=1,
                        ),
                        F(
                            "SnapshotId",
                            "SnapshotId",
                            "12+",
                            [
                                F("EndOffset", "int64", "0+", default=-1),
                                F("Epoch", "int32", "0+", default=-1),
                            ],
                            tag=2,
                        ),
                        F(
                            "AbortedTransactions",
                            "[]AbortedTransaction",
                            "4+",
                            [
                                F("ProducerId", "int64", "4+"),
                                F("FirstOffset", "int64", "4+"),
                            ],
                            nullable="4+",
                            ignorable=True,
                        ),
                        F("PreferredReadReplica", "int32", "11+", default=-1),
                        F("Records", "records", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
        F(
            "NodeEndpoints",
            "[]NodeEndpoint",
            "16+",
            [
                F("NodeId", "int32", "16+"),
                F("Host", "string", "16+"),
                F("Port", "int32", "16+"),
                F("Rack", "string", "16+", nullable="16+", default=None),
            ],
            tag=0,
        ),
    ],
)
