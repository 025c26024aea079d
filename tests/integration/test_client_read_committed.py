"""epochlog.client's read_committed consumer against epochlog's brokers, over raw transactional
writes (the brokers have no transaction coordinator yet, so the test writes transactional
batches with a transactional id and ends them with WriteTxnMarkers itself, as
`test_transactions_partition.py` does).

One broker, one partition, laid out as:

    0-1 txn A (committed at 6)   2-4 txn B (aborted at 7)   5 plain   6 COMMIT A   7 ABORT B
    8 txn C (open, later committed at 10)   9 plain

read_committed reads A and the plain record, never B, stops at the last stable offset (8)
while C is open, and goes on once C's marker is written; its positions step over the markers.
read_uncommitted reads every data record.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.broker.harness import RawClient
from epochlog.client import Consumer, TopicPartition
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import wait_until_brokers_name_the_controller

TOPIC = "client-read-committed"
TP = TopicPartition(TOPIC, 0)
DEADLINE_S = 60  # a failure bound only: reads stop as soon as they have what they wait for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # The test plays the transaction coordinator (raw transactional writes and markers), which
    # KIP-890 verification would ask: off, as test_transactions_partition does.
    local = LocalCluster(
        tmp_path_factory.mktemp("client-rc"),
        1,
        broker_config={"transaction.partition.verification.enable": "false"},
    )
    local.start()
    try:
        wait_until_brokers_name_the_controller([b.port for b in local.brokers.values()])
        admin = AdminClient({"bootstrap.servers": local.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        yield local
    finally:
        local.close()


def producer_id(client: RawClient) -> int:
    response = client.request(
        ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(transactional_id=None)
    )
    assert response.error_code == ErrorCode.NONE
    return response.producer_id


def produce(
    client: RawClient, values: list[bytes], pid: int = -1, txn_id: str | None = None
) -> int:
    builder = RecordBatchBuilder(
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        is_transactional=txn_id is not None,
    )
    for value in values:
        builder.append(int(time.time() * 1000), None, value)
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


def write_marker(client: RawClient, pid: int, commit: bool) -> None:
    R = m.WriteTxnMarkersRequest
    response = client.request(
        ApiKey.WRITE_TXN_MARKERS,
        1,
        R(
            markers=[
                R.WritableTxnMarker(
                    producer_id=pid,
                    producer_epoch=0,
                    transaction_result=commit,
                    topics=[R.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])],
                    coordinator_epoch=0,
                )
            ]
        ),
    )
    assert response.markers[0].topics[0].partitions[0].error_code == ErrorCode.NONE


def reader(cluster: LocalCluster, isolation: str) -> Consumer:
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "isolation.level": isolation}
    )
    consumer.assign([(TOPIC, 0)])
    consumer.seek_to_beginning([(TOPIC, 0)])
    return consumer


def poll_until(consumer: Consumer, position: int) -> list[bytes]:
    """The values polled until the consumer's position reaches `position`."""
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while consumer.position((TOPIC, 0)) < position and time.monotonic() < deadline:
        values.extend(r.value or b"" for r in consumer.poll(0.2))
    return values


def test_read_committed_skips_aborted_records_and_waits_at_the_last_stable_offset(
    cluster: LocalCluster,
) -> None:
    (broker,) = cluster.brokers.values()
    with RawClient("127.0.0.1", broker.port) as client:
        pid_a, pid_b, pid_c = producer_id(client), producer_id(client), producer_id(client)
        assert produce(client, [b"a-0", b"a-1"], pid_a, "tx-a") == 0
        assert produce(client, [b"b-0", b"b-1", b"b-2"], pid_b, "tx-b") == 2
        assert produce(client, [b"plain-0"]) == 5
        write_marker(client, pid_a, commit=True)  # 6
        write_marker(client, pid_b, commit=False)  # 7
        assert produce(client, [b"c-0"], pid_c, "tx-c") == 8
        assert produce(client, [b"plain-1"]) == 9

        committed = reader(cluster, "read_committed")
        uncommitted = reader(cluster, "read_uncommitted")
        try:
            # the end of a read_committed partition is its last stable offset
            assert committed.end_offsets([(TOPIC, 0)]) == {TP: 8}
            assert uncommitted.end_offsets([(TOPIC, 0)]) == {TP: 10}
            assert poll_until(committed, 8) == [b"a-0", b"a-1", b"plain-0"]
            assert committed.position((TOPIC, 0)) == 8
            assert committed.poll(0.5) == []  # C is open: nothing past the LSO
            assert poll_until(uncommitted, 10) == [
                b"a-0", b"a-1", b"b-0", b"b-1", b"b-2", b"plain-0", b"c-0", b"plain-1",
            ]
            write_marker(client, pid_c, commit=True)  # 10
            assert poll_until(committed, 11) == [b"c-0", b"plain-1"]
            assert committed.position((TOPIC, 0)) == 11  # past C's marker
            # a reader that starts inside aborted B reads on from the first record after it
            committed.seek((TOPIC, 0), 3)
            assert poll_until(committed, 11) == [b"plain-0", b"c-0", b"plain-1"]
        finally:
            committed.close()
            uncommitted.close()
