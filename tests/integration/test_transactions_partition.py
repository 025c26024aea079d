"""The partition side of transactions on a real 3-broker cluster, driven on the wire.

The test plays the producer and the transaction coordinator itself (epochlog has no coordinator
yet): producer ids from InitProducerId without a transactional id, raw Produce requests that
carry a transactional id and transactional batches, and raw WriteTxnMarkers to the partition
leader. Real consumers then read with isolation.level=read_committed: confluent-kafka sees the
LSO as the end of the partition while a transaction is open, and neither it nor kafka-python
reads a record of an aborted transaction."""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka as ck
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.broker.harness import RawClient
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import wait_until_brokers_name_the_controller

TOPIC = "txn-part"
DEADLINE_S = 60  # a failure bound only: the reads below stop as soon as they have the data


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # The test plays the coordinator, which KIP-890 verification would ask: off, as in Kafka.
    local = LocalCluster(
        tmp_path_factory.mktemp("txn-part"),
        3,
        broker_config={"transaction.partition.verification.enable": "false"},
    )
    local.start()
    yield local
    local.close()


def leader_of(cluster: LocalCluster) -> int:
    wait_until_brokers_name_the_controller([b.port for b in cluster.brokers.values()])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(TOPIC, 1, 3)])
    futures[TOPIC].result(30)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        topic = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if topic is not None and topic.partitions and topic.partitions[0].leader >= 0:
            return topic.partitions[0].leader
        time.sleep(0.1)
    raise AssertionError(f"{TOPIC}-0 has no leader")


def producer_id(client: RawClient) -> int:
    response = client.request(
        ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(transactional_id=None)
    )
    assert response.error_code == ErrorCode.NONE
    return response.producer_id


def produce(client: RawClient, values: list[str], pid: int = -1, txn_id: str | None = None):
    builder = RecordBatchBuilder(
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        is_transactional=txn_id is not None,
    )
    for value in values:
        builder.append(int(time.time() * 1000), None, value.encode())
    P = m.ProduceRequest
    response = client.request(
        ApiKey.PRODUCE,
        9,
        P(
            transactional_id=txn_id,
            acks=-1,
            timeout_ms=10_000,
            topic_data=[
                P.TopicProduceData(
                    name=TOPIC,
                    partition_data=[P.PartitionProduceData(index=0, records=builder.build())],
                )
            ],
        ),
    )
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NONE, answer
    return answer.base_offset


def write_marker(
    client: RawClient, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0
) -> int:
    R = m.WriteTxnMarkersRequest
    response = client.request(
        ApiKey.WRITE_TXN_MARKERS,
        1,
        R(
            markers=[
                R.WritableTxnMarker(
                    producer_id=pid,
                    producer_epoch=epoch,
                    transaction_result=commit,
                    topics=[R.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])],
                    coordinator_epoch=coordinator_epoch,
                )
            ]
        ),
    )
    return response.markers[0].topics[0].partitions[0].error_code


def latest(client: RawClient, isolation_level: int) -> int:
    L = m.ListOffsetsRequest
    response = client.request(
        ApiKey.LIST_OFFSETS,
        7,
        L(
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[
                L.ListOffsetsTopic(
                    name=TOPIC, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)]
                )
            ],
        ),
    )
    answer = response.topics[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE
    return answer.offset


def confluent_read_committed(cluster: LocalCluster) -> ck.Consumer:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "txn-part-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([ck.TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)])
    return consumer


def confluent_values_until(consumer: ck.Consumer, last: str) -> list[str]:
    values: list[str] = []
    deadline = time.monotonic() + DEADLINE_S
    while last not in values and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value().decode())
    return values


def test_read_committed_consumers_see_only_committed_records(cluster: LocalCluster) -> None:
    leader = leader_of(cluster)
    with RawClient("127.0.0.1", cluster.brokers[leader].port) as client:
        committed_pid, aborted_pid = producer_id(client), producer_id(client)
        assert produce(client, ["a-0", "a-1", "a-2"], committed_pid, "tx-a") == 0
        assert produce(client, ["b-0", "b-1"], aborted_pid, "tx-b") == 3
        assert write_marker(client, committed_pid, commit=True) == ErrorCode.NONE  # offset 5
        assert produce(client, ["plain-0"]) == 6
        # The open transaction of tx-b holds the LSO at its first offset.
        assert (latest(client, 0), latest(client, 1)) == (7, 3)
        consumer = confluent_read_committed(cluster)
        try:
            assert confluent_values_until(consumer, "a-2") == ["a-0", "a-1", "a-2"]
            low, high = consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, 0), timeout=10)
            assert high == 3  # librdkafka's end of a read_committed partition is the LSO
            assert write_marker(client, aborted_pid, commit=False) == ErrorCode.NONE  # 7
            assert (latest(client, 0), latest(client, 1)) == (8, 8)
            assert confluent_values_until(consumer, "plain-0") == ["plain-0"]
        finally:
            consumer.close()
        # A stale epoch and a stale coordinator epoch are refused, and write nothing.
        assert write_marker(client, aborted_pid, commit=False, epoch=-1) == (
            ErrorCode.INVALID_PRODUCER_EPOCH
        )
        assert write_marker(client, aborted_pid, commit=False, coordinator_epoch=-1) == (
            ErrorCode.TRANSACTION_COORDINATOR_FENCED
        )
        assert latest(client, 0) == 8
    follower = next(b for b in cluster.brokers.values() if b.broker_id != leader)
    with RawClient("127.0.0.1", follower.port) as other:
        assert write_marker(other, committed_pid, commit=True) == (ErrorCode.NOT_LEADER_OR_FOLLOWER)

    fresh = confluent_read_committed(cluster)
    try:
        assert confluent_values_until(fresh, "plain-0") == ["a-0", "a-1", "a-2", "plain-0"]
    finally:
        fresh.close()

    reader = kafka.KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        tp = kafka.TopicPartition(TOPIC, 0)
        reader.assign([tp])
        reader.seek_to_beginning(tp)
        values: list[str] = []
        deadline = time.monotonic() + DEADLINE_S
        while "plain-0" not in values and time.monotonic() < deadline:
            for records in reader.poll(500).values():
                values.extend(r.value.decode() for r in records)
        assert values == ["a-0", "a-1", "a-2", "plain-0"]
    finally:
        reader.close()
    assert_every_replica_settled(cluster)


def assert_every_replica_settled(cluster: LocalCluster) -> None:
    """Each follower's producer state saw the markers: DescribeProducers on every replica
    reports both transactional producers with no open transaction."""
    deadline = time.monotonic() + DEADLINE_S
    for broker in cluster.brokers.values():
        with RawClient("127.0.0.1", broker.port) as client:
            D = m.DescribeProducersRequest
            while True:
                response = client.request(
                    ApiKey.DESCRIBE_PRODUCERS,
                    0,
                    D(topics=[D.TopicRequest(name=TOPIC, partition_indexes=[0])]),
                )
                partition = response.topics[0].partitions[0]
                assert partition.error_code == ErrorCode.NONE
                open_txns = [p.current_txn_start_offset for p in partition.active_producers]
                if len(open_txns) == 2 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert open_txns == [-1, -1], broker.broker_id
