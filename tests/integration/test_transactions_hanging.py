"""Hanging transactions prevented (KIP-890 part 1) and found and aborted (KIP-664), on real
2-broker clusters with a real confluent-kafka transactional producer.

The seed failure: a producer's transaction is committed, then a late write of that producer
(a retry that arrived after the commit, a zombie) reaches the partition leader. Without
verification the leader accepts it and opens a transaction on the partition that the
coordinator knows nothing about: no marker will ever close it, the LSO stops there and
read_committed consumers stall at it. With `transaction.partition.verification.enable` (the
default) the leader asks the coordinator first and refuses the write with INVALID_TXN_STATE;
the LSO moves on. The unverified cluster then shows the operator's way out: `epochlog
transactions find-hanging` lists the transaction and `abort --start-offset` closes it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka as ck
import pytest

from epochlog.broker.harness import RawClient
from epochlog.cli.main import main as epochlog_main
from epochlog.client import Admin
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import wait_until_brokers_name_the_controller

DEADLINE_S = 60  # a failure bound only: every wait ends as soon as its condition holds


def start_cluster(tmp_path_factory: pytest.TempPathFactory, verification: bool) -> LocalCluster:
    local = LocalCluster(
        tmp_path_factory.mktemp("txn-hanging"),
        2,
        broker_config={
            "transaction.state.log.num.partitions": 3,
            "transaction.partition.verification.enable": str(verification).lower(),
        },
    )
    local.start()
    wait_until_brokers_name_the_controller([b.port for b in local.brokers.values()])
    return local


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = start_cluster(tmp_path_factory, True)
    yield local
    local.close()


@pytest.fixture(scope="module")
def unverified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = start_cluster(tmp_path_factory, False)
    yield local
    local.close()


def create_topic(admin: Admin, topic: str) -> int:
    """The topic (1 partition, 2 replicas); its leader."""
    admin.create_topic(topic, 1, 2)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        described = admin.describe_topics([topic]).get(topic)
        if described is not None and described.partitions and described.partitions[0].leader >= 0:
            return described.partitions[0].leader
        time.sleep(0.1)
    raise AssertionError(f"{topic}-0 has no leader")


def committed_transaction(cluster: LocalCluster, topic: str, txn_id: str) -> None:
    producer = ck.Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"committed-{i}".encode(), partition=0)
    producer.commit_transaction(30)


def late_write(
    cluster: LocalCluster, leader: int, topic: str, txn_id: str, pid: int, epoch: int, seq: int
) -> tuple[ErrorCode, int]:
    """A transactional write of the producer that no AddPartitionsToTxn preceded (what a
    delayed retry or a zombie sends): the partition's (error, base offset)."""
    builder = RecordBatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    builder.append(int(time.time() * 1000), None, b"late")
    P = m.ProduceRequest
    with RawClient("127.0.0.1", cluster.brokers[leader].port) as client:
        response = client.request(
            ApiKey.PRODUCE,
            9,
            P(
                transactional_id=txn_id,
                acks=-1,
                timeout_ms=10_000,
                topic_data=[
                    P.TopicProduceData(
                        name=topic,
                        partition_data=[P.PartitionProduceData(index=0, records=builder.build())],
                    )
                ],
            ),
        )
    answer = response.responses[0].partition_responses[0]
    return ErrorCode(answer.error_code), answer.base_offset


def plain_write(cluster: LocalCluster, topic: str, value: bytes) -> None:
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    delivered: list[ck.Message] = []
    producer.produce(topic, value, partition=0, on_delivery=lambda err, msg: delivered.append(msg))
    assert producer.flush(30) == 0
    assert delivered and delivered[0].error() is None, delivered


def latest(cluster: LocalCluster, leader: int, topic: str, isolation_level: int) -> int:
    L = m.ListOffsetsRequest
    with RawClient("127.0.0.1", cluster.brokers[leader].port) as client:
        response = client.request(
            ApiKey.LIST_OFFSETS,
            7,
            L(
                replica_id=-1,
                isolation_level=isolation_level,
                topics=[
                    L.ListOffsetsTopic(
                        name=topic,
                        partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)],
                    )
                ],
            ),
        )
    answer = response.topics[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE
    return answer.offset


def read_committed_to_end(cluster: LocalCluster, topic: str) -> list[str]:
    """What a read_committed consumer reads from the start until it reaches the partition's
    end as it sees it (the LSO): the first end-of-partition event stops it."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"{topic}-reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    values: list[str] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == ck.KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(message.error())
            values.append(message.value().decode())
    finally:
        consumer.close()
    raise AssertionError(f"no end of {topic}-0 within {DEADLINE_S}s; read {values}")


def transactions_cli(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """`epochlog transactions ARGS --bootstrap-server ...` in-process: (code, stdout, stderr)."""
    capsys.readouterr()
    code = epochlog_main(["transactions", *args, "--bootstrap-server", cluster.bootstrap_servers])
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


def finished_producer(
    cluster: LocalCluster, admin: Admin, topic: str, txn_id: str
) -> tuple[int, int, int]:
    """A committed confluent-kafka transaction on the topic: (producer id, epoch, next seq)."""
    committed_transaction(cluster, topic, txn_id)
    deadline = time.monotonic() + DEADLINE_S
    # EndTxn is answered at PrepareCommit; the markers follow
    while (described := admin.describe_transactions([txn_id])[txn_id]).state != "CompleteCommit":
        assert time.monotonic() < deadline, described
        time.sleep(0.05)
    ((state,),) = admin.describe_producers([(topic, 0)]).values()
    assert state.producer_id == described.producer_id
    return described.producer_id, described.producer_epoch, state.last_sequence + 1


def test_with_verification_a_late_write_is_refused_and_the_lso_moves_on(
    verified: LocalCluster,
) -> None:
    topic, txn_id = "hang-verified", "hang-verified-tx"
    with Admin({"bootstrap.servers": verified.bootstrap_servers}) as admin:
        leader = create_topic(admin, topic)
        pid, epoch, seq = finished_producer(verified, admin, topic, txn_id)
    error, _ = late_write(verified, leader, topic, txn_id, pid, epoch, seq)
    assert error is ErrorCode.INVALID_TXN_STATE
    plain_write(verified, topic, b"after")
    end = latest(verified, leader, topic, 0)
    assert latest(verified, leader, topic, 1) == end  # nothing unstable: LSO = HW
    assert read_committed_to_end(verified, topic) == [
        "committed-0",
        "committed-1",
        "committed-2",
        "after",
    ]


def test_without_verification_the_late_write_hangs_until_found_and_aborted(
    unverified: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, txn_id = "hang-unverified", "hang-unverified-tx"
    with Admin({"bootstrap.servers": unverified.bootstrap_servers}) as admin:
        leader = create_topic(admin, topic)
        pid, epoch, seq = finished_producer(unverified, admin, topic, txn_id)
    error, late_offset = late_write(unverified, leader, topic, txn_id, pid, epoch, seq)
    assert error is ErrorCode.NONE  # accepted: a transaction no coordinator will ever end
    plain_write(unverified, topic, b"after")
    end = latest(unverified, leader, topic, 0)
    assert late_offset < end
    assert latest(unverified, leader, topic, 1) == late_offset  # the LSO is stuck
    committed = ["committed-0", "committed-1", "committed-2"]
    assert read_committed_to_end(unverified, topic) == committed  # "after" is out of reach

    code, out, err = transactions_cli(
        unverified, capsys, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"
    )
    assert code == 0, err
    header, *rows = table(out)
    assert header == [
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
        "LastTimestamp",
        "Duration(min)",
    ]
    assert [row[:4] + row[5:6] for row in rows] == [
        [topic, "0", str(pid), str(epoch), str(late_offset)]
    ]

    code, _, err = transactions_cli(
        unverified,
        capsys,
        "abort",
        "--topic",
        topic,
        "--partition",
        "0",
        "--start-offset",
        str(late_offset),
    )
    assert code == 0, err
    assert latest(unverified, leader, topic, 1) == latest(unverified, leader, topic, 0)
    assert read_committed_to_end(unverified, topic) == [*committed, "after"]
    code, out, err = transactions_cli(
        unverified, capsys, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"
    )
    assert (code, table(out)[1:]) == (0, [])


def test_list_and_describe_an_ongoing_confluent_kafka_transaction(
    verified: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, txn_id = "txn-listed", "txn-listed-tx"
    with Admin({"bootstrap.servers": verified.bootstrap_servers}) as admin:
        create_topic(admin, topic)
    producer = ck.Producer(
        {"bootstrap.servers": verified.bootstrap_servers, "transactional.id": txn_id}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    assert producer.flush(30) == 0
    try:
        code, out, err = transactions_cli(verified, capsys, "list")
        assert code == 0, err
        header, *rows = table(out)
        assert header == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        (listed,) = [row for row in rows if row[0] == txn_id]
        assert listed[3] == "Ongoing"
        assert int(listed[1]) in verified.brokers

        code, out, err = transactions_cli(
            verified, capsys, "describe", "--transactional-id", txn_id
        )
        assert code == 0, err
        header, row = table(out)
        assert header[:5] == [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
        ]
        assert (row[0], row[1], row[2], row[4], row[8]) == (
            listed[1],
            txn_id,
            listed[2],
            "Ongoing",
            f"{topic}-0",
        )
        assert int(row[7]) >= 0  # TransactionDurationMs

        code, out, err = transactions_cli(
            verified, capsys, "describe-producers", "--topic", topic, "--partition", "0"
        )
        assert code == 0, err
        header, producer_row = table(out)
        assert header[-1] == "CurrentTransactionStartOffset"
        assert (producer_row[0], producer_row[-1]) == (listed[2], "0")

        # nothing hangs: the coordinator counts the partition in its transaction
        code, out, err = transactions_cli(
            verified, capsys, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"
        )
        assert (code, table(out)[1:]) == (0, []), err
    finally:
        producer.abort_transaction(30)
