"""The admin client's log-dir, producer and topic-partition requests and answers (no I/O), and
`epochlog log-dirs describe --json`'s document."""

from __future__ import annotations

import uuid

import pytest

from epochlog.cli.log_dirs_cmd import describe_as_json
from epochlog.client.admin_log_dirs import (
    ReplicaInfo,
    TopicPartitionReplica,
    alter_replica_log_dirs_requests,
    describe_producers_request,
    describe_topic_partitions_request,
    read_alter_replica_log_dirs,
    read_describe_log_dirs,
    read_describe_producers,
    read_describe_topic_partitions_page,
)
from epochlog.client.errors import KafkaError
from epochlog.client.metadata import TopicPartition
from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode


def log_dirs_response():
    R = m.DescribeLogDirsResponse
    return R(
        results=[
            R.DescribeLogDirsResult(
                error_code=0,
                log_dir="/d/a",
                total_bytes=100,
                usable_bytes=40,
                topics=[
                    R.DescribeLogDirsTopic(
                        name="t",
                        partitions=[
                            R.DescribeLogDirsPartition(
                                partition_index=0, partition_size=12, offset_lag=0
                            ),
                            R.DescribeLogDirsPartition(
                                partition_index=1,
                                partition_size=5,
                                offset_lag=3,
                                is_future_key=True,
                            ),
                        ],
                    ),
                    R.DescribeLogDirsTopic(
                        name="u",
                        partitions=[
                            R.DescribeLogDirsPartition(partition_index=0, partition_size=1)
                        ],
                    ),
                ],
            ),
            R.DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir="/d/b"),
        ]
    )


def test_describe_log_dirs_answers_become_descriptions_and_kafka_log_dirs_json():
    dirs = read_describe_log_dirs(log_dirs_response(), 3)
    assert dirs["/d/a"].error is None and (dirs["/d/a"].total_bytes, dirs["/d/a"].usable_bytes) == (
        100,
        40,
    )
    assert dirs["/d/a"].replicas[TopicPartition("t", 1)] == ReplicaInfo(5, 3, True)
    assert dirs["/d/b"].error.code is ErrorCode.KAFKA_STORAGE_ERROR
    document = describe_as_json({3: dirs}, {"t"})
    assert document == {
        "version": 1,
        "brokers": [
            {
                "broker": 3,
                "logDirs": [
                    {
                        "logDir": "/d/a",
                        "error": None,
                        "partitions": [
                            {"partition": "t-0", "size": 12, "offsetLag": 0, "isFuture": False},
                            {"partition": "t-1", "size": 5, "offsetLag": 3, "isFuture": True},
                        ],
                    },
                    {
                        "logDir": "/d/b",
                        "error": "org.apache.kafka.common.errors.KafkaStorageException",
                        "partitions": [],
                    },
                ],
            }
        ],
    }
    assert len(describe_as_json({3: dirs}, set())["brokers"][0]["logDirs"][0]["partitions"]) == 3


def test_a_top_level_describe_log_dirs_error_raises_naming_the_broker():
    with pytest.raises(KafkaError, match="DescribeLogDirs on broker 3: CLUSTER_AUTHORIZATION"):
        read_describe_log_dirs(
            m.DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED), 3
        )


def test_alter_replica_log_dirs_groups_per_broker_dir_and_topic_and_reads_errors():
    requests = alter_replica_log_dirs_requests(
        {
            TopicPartitionReplica("t", 0, 1): "/d/a",
            TopicPartitionReplica("t", 2, 1): "/d/a",
            TopicPartitionReplica("u", 0, 1): "/d/b",
            TopicPartitionReplica("t", 0, 2): "/x",
        }
    )
    assert sorted(requests) == [1, 2]
    one = requests[1]
    assert [(d.path, [(t.name, t.partitions) for t in d.topics]) for d in one.dirs] == [
        ("/d/a", [("t", [0, 2])]),
        ("/d/b", [("u", [0])]),
    ]
    R = m.AlterReplicaLogDirsResponse
    answer = R(
        results=[
            R.AlterReplicaLogDirTopicResult(
                topic_name="t",
                partitions=[
                    R.AlterReplicaLogDirPartitionResult(partition_index=0, error_code=0),
                    R.AlterReplicaLogDirPartitionResult(
                        partition_index=2, error_code=ErrorCode.LOG_DIR_NOT_FOUND
                    ),
                ],
            )
        ]
    )
    results = read_alter_replica_log_dirs(answer, 1)
    assert results[TopicPartitionReplica("t", 0, 1)] is None
    assert results[TopicPartitionReplica("t", 2, 1)].code is ErrorCode.LOG_DIR_NOT_FOUND


def test_describe_producers_request_and_answer():
    request = describe_producers_request([TopicPartition("t", 0), TopicPartition("t", 3)])
    assert [(t.name, t.partition_indexes) for t in request.topics] == [("t", [0, 3])]
    R = m.DescribeProducersResponse
    answer = R(
        topics=[
            R.TopicResponse(
                name="t",
                partitions=[
                    R.PartitionResponse(
                        partition_index=0,
                        active_producers=[
                            R.ProducerState(producer_id=9, producer_epoch=1, last_sequence=4)
                        ],
                    ),
                    R.PartitionResponse(
                        partition_index=3,
                        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        error_message="moved",
                    ),
                ],
            )
        ]
    )
    read = read_describe_producers(answer)
    (state,) = read[TopicPartition("t", 0)]
    assert (state.producer_id, state.last_sequence, state.current_txn_start_offset) == (9, 4, -1)
    assert read[TopicPartition("t", 3)].code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_describe_topic_partitions_pages_accumulate_and_an_error_raises():
    request = describe_topic_partitions_request(["t"], 2, ("t", 2))
    assert (request.cursor.topic_name, request.cursor.partition_index) == ("t", 2)
    assert describe_topic_partitions_request([], 5, None).cursor is None
    R = m.DescribeTopicPartitionsResponse
    topic_id = uuid.uuid4()

    def page(first: int, end: int, cursor):
        return R(
            topics=[
                R.DescribeTopicPartitionsResponseTopic(
                    name="t",
                    topic_id=topic_id,
                    partitions=[
                        R.DescribeTopicPartitionsResponsePartition(
                            partition_index=i, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                        )
                        for i in range(first, end)
                    ],
                )
            ],
            next_cursor=cursor,
        )

    described: dict = {}
    assert read_describe_topic_partitions_page(
        page(0, 2, R.Cursor(topic_name="t", partition_index=2)), described
    ) == ("t", 2)
    assert read_describe_topic_partitions_page(page(2, 3, None), described) is None
    assert [p.partition for p in described["t"].partitions] == [0, 1, 2]
    with pytest.raises(KafkaError, match="topic 'gone'"):
        read_describe_topic_partitions_page(
            R(
                topics=[
                    R.DescribeTopicPartitionsResponseTopic(
                        name="gone", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                ]
            ),
            {},
        )
