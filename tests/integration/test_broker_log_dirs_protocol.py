"""DescribeLogDirs, AlterReplicaLogDirs, DescribeProducers and DescribeTopicPartitions on one
broker without ZooKeeper (the harness plays the controller), every version, raw requests."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from epochlog.broker.harness import (
    BrokerThread,
    RawClient,
    become_leader,
    leader_and_isr_request,
    update_metadata_request,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder

TOPIC = "ledger"
ELSEWHERE = "elsewhere"  # a topic whose only replica is on broker 2, which is not live
PRODUCER_ID = 4242


def build_batch(n: int, seq: int) -> bytes:
    b = RecordBatchBuilder(producer_id=PRODUCER_ID, producer_epoch=3, base_sequence=seq)
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"k%d" % i, b"v" * 30)
    return b.build()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    base = tmp_path_factory.mktemp("broker")
    dirs = [str((base / "a").resolve()), str((base / "b").resolve())]
    thread = BrokerThread(
        {
            "broker.id": 1,
            "zookeeper.connect": "unused:2181",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": ",".join(dirs),
        },
        cluster_id="test-cluster",
    ).start()
    with RawClient("127.0.0.1", thread.port) as client:
        become_leader(client, broker_id=1, port=thread.port, topic=TOPIC, partitions=2)
        client.request(
            ApiKey.UPDATE_METADATA,
            7,
            update_metadata_request(
                brokers={1: ("127.0.0.1", thread.port)},
                topic=ELSEWHERE,
                topic_id=uuid.uuid4(),
                assignment={0: [2]},
                leader_epoch=0,
                controller_id=1,
                controller_epoch=1,
            ),
        )
        P = m.ProduceRequest
        for seq in (0, 5):
            client.request(
                ApiKey.PRODUCE,
                9,
                P(
                    acks=-1,
                    timeout_ms=5000,
                    topic_data=[
                        P.TopicProduceData(
                            name=TOPIC,
                            partition_data=[
                                P.PartitionProduceData(index=0, records=build_batch(5, seq))
                            ],
                        )
                    ],
                ),
            )
    yield thread, dirs
    thread.stop()


@pytest.fixture
def client(env):
    with RawClient("127.0.0.1", env[0].port) as c:
        yield c


@pytest.mark.parametrize("version", range(5))
def test_describe_log_dirs_lists_both_dirs_and_each_replica_once(client, env, version):
    _, dirs = env
    R = m.DescribeLogDirsRequest
    answer = client.request(ApiKey.DESCRIBE_LOG_DIRS, version, R(topics=None))
    assert sorted(r.log_dir for r in answer.results) == dirs
    replicas = sorted(
        (t.name, p.partition_index)
        for r in answer.results
        for t in r.topics
        for p in t.partitions
        if not p.is_future_key
    )
    assert replicas == [(TOPIC, 0), (TOPIC, 1)]
    sizes = {
        p.partition_index: p.partition_size
        for r in answer.results
        for t in r.topics
        for p in t.partitions
    }
    assert sizes[0] > sizes[1] == 0  # partition 0 holds the two batches
    if version >= 4:
        assert all(r.total_bytes > 0 and r.usable_bytes >= 0 for r in answer.results)
    only = client.request(
        ApiKey.DESCRIBE_LOG_DIRS,
        version,
        R(topics=[R.DescribableLogDirTopic(topic=TOPIC, partitions=[1])]),
    )
    listed = [
        (t.name, p.partition_index) for r in only.results for t in r.topics for p in t.partitions
    ]
    assert listed == [(TOPIC, 1)]


def test_describe_producers_answers_per_partition_with_kafkas_errors(client):
    R = m.DescribeProducersRequest
    answer = client.request(
        ApiKey.DESCRIBE_PRODUCERS,
        0,
        R(
            topics=[
                R.TopicRequest(name=TOPIC, partition_indexes=[0, 1, 7]),
                R.TopicRequest(name=ELSEWHERE, partition_indexes=[0]),
                R.TopicRequest(name="nope", partition_indexes=[0]),
                R.TopicRequest(name="bad name!", partition_indexes=[0]),
            ]
        ),
    )
    by = {(t.name, p.partition_index): p for t in answer.topics for p in t.partitions}
    (state,) = by[(TOPIC, 0)].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (PRODUCER_ID, 3, 9)
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1)
    assert by[(TOPIC, 1)].error_code == 0 and by[(TOPIC, 1)].active_producers == []
    assert by[(TOPIC, 7)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by[(ELSEWHERE, 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert by[("nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by[("bad name!", 0)].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_describe_topic_partitions_serves_the_cache_with_offline_replicas(client):
    R = m.DescribeTopicPartitionsRequest
    answer = client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, R(topics=[]))
    by = {t.name: t for t in answer.topics}
    assert sorted(by) == [ELSEWHERE, TOPIC] and answer.next_cursor is None
    (gone,) = by[ELSEWHERE].partitions
    assert (gone.leader_id, gone.replica_nodes, gone.offline_replicas) == (-1, [2], [2])
    assert [p.leader_id for p in by[TOPIC].partitions] == [1, 1]
    assert by[TOPIC].partitions[0].eligible_leader_replicas == []
    paged = client.request(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, R(topics=[], response_partition_limit=1)
    )
    assert [t.name for t in paged.topics] == [ELSEWHERE]
    assert (paged.next_cursor.topic_name, paged.next_cursor.partition_index) == (TOPIC, 0)
    bad = client.request(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        0,
        R(
            topics=[R.TopicRequest(name=TOPIC)],
            cursor=R.Cursor(topic_name="zzz", partition_index=0),
        ),
    )
    assert [(t.name, t.error_code) for t in bad.topics] == [(TOPIC, ErrorCode.INVALID_REQUEST)]


def test_alter_replica_log_dirs_moves_a_hosted_replica_and_remembers_one_not_yet_hosted(
    client, env
):
    thread, dirs = env
    R = m.AlterReplicaLogDirsRequest

    def where(topic: str, partition: int) -> str:
        answer = client.request(ApiKey.DESCRIBE_LOG_DIRS, 4, m.DescribeLogDirsRequest(topics=None))
        (found,) = [
            r.log_dir
            for r in answer.results
            for t in r.topics
            if t.name == topic
            for p in t.partitions
            if p.partition_index == partition and not p.is_future_key
        ]
        return found

    source = where(TOPIC, 0)
    target = next(d for d in dirs if d != source)
    answer = client.request(
        ApiKey.ALTER_REPLICA_LOG_DIRS,
        2,
        R(
            dirs=[
                R.AlterReplicaLogDir(
                    path=target,
                    topics=[R.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0])],
                ),
                # Not the dir the broker would choose (both dirs then hold one replica, and a
                # tie goes to the first): where ELSEWHERE-0 lands proves it was remembered.
                R.AlterReplicaLogDir(
                    path=dirs[1],
                    topics=[R.AlterReplicaLogDirTopic(name=ELSEWHERE, partitions=[0])],
                ),
                R.AlterReplicaLogDir(
                    path="/not/a/log/dir",
                    topics=[R.AlterReplicaLogDirTopic(name=TOPIC, partitions=[1])],
                ),
            ]
        ),
    )
    codes = {
        (t.topic_name, p.partition_index): p.error_code
        for t in answer.results
        for p in t.partitions
    }
    assert codes == {
        (TOPIC, 0): ErrorCode.NONE,
        (ELSEWHERE, 0): ErrorCode.REPLICA_NOT_AVAILABLE,
        (TOPIC, 1): ErrorCode.LOG_DIR_NOT_FOUND,
    }
    deadline = time.monotonic() + 10
    while where(TOPIC, 0) != target:
        assert time.monotonic() < deadline, "the move did not finish"
        time.sleep(0.05)
    assert not [p for p in Path(source).iterdir() if p.name.startswith(f"{TOPIC}-0")]
    # The remembered dir is where the replica is created when it comes to this broker.
    topic_id = uuid.uuid4()
    client.request(
        ApiKey.LEADER_AND_ISR,
        6,
        leader_and_isr_request(
            topic=ELSEWHERE,
            topic_id=topic_id,
            assignment={0: [1]},
            leader_epoch=1,
            controller_id=1,
            controller_epoch=1,
            brokers={1: ("127.0.0.1", thread.port)},
        ),
    )
    assert where(ELSEWHERE, 0) == dirs[1]
