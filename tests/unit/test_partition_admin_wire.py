"""CreatePartitions, DeleteRecords and ElectLeaders bytes agree with kafka-python's codec, which
kafka-python generates from Kafka's own message JSON: every version both ways."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import topics as kp

from epochlog.protocol import messages as m


def create_partitions_request(version: int) -> tuple[Any, Any]:
    K = kp.CreatePartitionsRequest
    ours = m.CreatePartitionsRequest(
        topics=[
            m.CreatePartitionsRequest.CreatePartitionsTopic(name="a", count=3, assignments=None),
            m.CreatePartitionsRequest.CreatePartitionsTopic(
                name="b",
                count=4,
                assignments=[
                    m.CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=[1, 2])
                ],
            ),
        ],
        timeout_ms=1500,
        validate_only=True,
    )
    theirs = K(
        version=version,
        topics=[
            K.CreatePartitionsTopic(name="a", count=3, assignments=None),
            K.CreatePartitionsTopic(
                name="b",
                count=4,
                assignments=[K.CreatePartitionsTopic.CreatePartitionsAssignment(broker_ids=[1, 2])],
            ),
        ],
        timeout_ms=1500,
        validate_only=True,
    )
    return ours, theirs


def delete_records_response(version: int) -> tuple[Any, Any]:
    K = kp.DeleteRecordsResponse
    R = m.DeleteRecordsResponse
    ours = R(
        throttle_time_ms=0,
        topics=[
            R.DeleteRecordsTopicResult(
                name="t",
                partitions=[
                    R.DeleteRecordsPartitionResult(
                        partition_index=0, low_watermark=7, error_code=0
                    ),
                    R.DeleteRecordsPartitionResult(
                        partition_index=1, low_watermark=-1, error_code=1
                    ),
                ],
            )
        ],
    )
    T = K.DeleteRecordsTopicResult
    theirs = K(
        version=version,
        throttle_time_ms=0,
        topics=[
            T(
                name="t",
                partitions=[
                    T.DeleteRecordsPartitionResult(
                        partition_index=0, low_watermark=7, error_code=0
                    ),
                    T.DeleteRecordsPartitionResult(
                        partition_index=1, low_watermark=-1, error_code=1
                    ),
                ],
            )
        ],
    )
    return ours, theirs


def elect_leaders_request(version: int) -> tuple[Any, Any]:
    K = kp.ElectLeadersRequest
    ours = m.ElectLeadersRequest(
        topic_partitions=[m.ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0, 2])],
        timeout_ms=3000,
    )
    theirs = K(
        version=version,
        topic_partitions=[K.TopicPartitions(topic="t", partitions=[0, 2])],
        timeout_ms=3000,
    )
    if version >= 1:
        ours.election_type = 1
        theirs.election_type = 1
    return ours, theirs


CASES = [
    (create_partitions_request, range(0, 4)),
    (delete_records_response, range(0, 3)),
    (elect_leaders_request, range(0, 3)),
]


@pytest.mark.parametrize(
    ("make", "version"), [(make, v) for make, versions in CASES for v in versions]
)
def test_bytes_agree_with_kafka_python(make: Any, version: int) -> None:
    ours, theirs = make(version)
    expected = bytes(theirs.encode(version=version))
    assert ours.encode(version) == expected
    assert type(ours).decode(expected, version) == ours


def test_elect_leaders_null_partitions_and_its_response() -> None:
    K = kp.ElectLeadersResponse
    for version in range(3):
        ours = m.ElectLeadersRequest(topic_partitions=None, timeout_ms=10)
        theirs = kp.ElectLeadersRequest(version=version, topic_partitions=None, timeout_ms=10)
        if version >= 1:
            theirs.election_type = 0
        assert ours.encode(version) == bytes(theirs.encode(version=version))
        R = m.ElectLeadersResponse
        answer = R(
            replica_election_results=[
                R.ReplicaElectionResult(
                    topic="t",
                    partition_result=[
                        R.PartitionResult(partition_id=0, error_code=84, error_message=None)
                    ],
                )
            ]
        )
        T = K.ReplicaElectionResult
        reference = K(
            version=version,
            throttle_time_ms=0,
            replica_election_results=[
                T(
                    topic="t",
                    partition_result=[
                        T.PartitionResult(partition_id=0, error_code=84, error_message=None)
                    ],
                )
            ],
        )
        if version >= 1:
            reference.error_code = 0
        assert answer.encode(version) == bytes(reference.encode(version=version))
