"""Transactions on disk, on a real broker with real clients: the `.txnindex` and `.snapshot` files
a broker writes, a restart that keeps aborted records invisible to read_committed consumers, and
compaction of a topic holding committed and aborted transactions.

As in test_transactions_partition, the test plays producer and coordinator itself: producer ids
from InitProducerId (no transactional id), raw transactional Produce requests and raw
WriteTxnMarkers to the leader."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.broker.harness import RawClient
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder, decode_batches
from epochlog.storage.producer_snapshot import decode_snapshot
from epochlog.storage.txn_index import decode_txn_index
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import wait_until_brokers_name_the_controller

DEADLINE_S = 60  # a failure bound only: every wait below ends as soon as its condition holds
BROKER = 1


@pytest.fixture
def cluster(tmp_path: Path, zk_hosts: str) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path / "cluster",
        1,
        zookeeper=zk_hosts,
        # the test plays the coordinator: KIP-890 verification off, as Kafka would need
        broker_config={
            "log.cleaner.backoff.ms": 200,
            "transaction.partition.verification.enable": "false",
        },
        zk_session_timeout_ms=3000,
    )
    local.start()
    yield local
    local.close()


def create_topic(cluster: LocalCluster, topic: str, config: dict[str, str] | None = None) -> None:
    wait_until_brokers_name_the_controller([b.port for b in cluster.brokers.values()])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(30)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if found is not None and found.partitions and found.partitions[0].leader >= 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic}-0 has no leader")


def partition_dir(cluster: LocalCluster, topic: str) -> Path:
    return cluster.brokers[BROKER].directory / "logs" / f"{topic}-0"


def client(cluster: LocalCluster) -> RawClient:
    return RawClient("127.0.0.1", cluster.brokers[BROKER].port)


def producer_id(raw: RawClient) -> int:
    response = raw.request(
        ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(transactional_id=None)
    )
    assert response.error_code == ErrorCode.NONE
    return response.producer_id


class Writer:
    """One producer id writing (transactional when `txn_id` is given) to partition 0 of a topic,
    numbering its sequences as a client would."""

    def __init__(self, raw: RawClient, topic: str, txn_id: str | None = None) -> None:
        self.raw, self.topic, self.txn_id = raw, topic, txn_id
        self.pid = producer_id(raw)
        self.seq = 0

    def produce(self, records: list[tuple[bytes, bytes]]) -> int:
        builder = RecordBatchBuilder(
            producer_id=self.pid,
            producer_epoch=0,
            base_sequence=self.seq,
            is_transactional=self.txn_id is not None,
        )
        for key, value in records:
            builder.append(int(time.time() * 1000), key, value)
        self.seq += len(records)
        P = m.ProduceRequest
        response = self.raw.request(
            ApiKey.PRODUCE,
            9,
            P(
                transactional_id=self.txn_id,
                acks=-1,
                timeout_ms=10_000,
                topic_data=[
                    P.TopicProduceData(
                        name=self.topic,
                        partition_data=[P.PartitionProduceData(index=0, records=builder.build())],
                    )
                ],
            ),
        )
        answer = response.responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.NONE, answer
        return answer.base_offset

    def end(self, commit: bool) -> None:
        R = m.WriteTxnMarkersRequest
        response = self.raw.request(
            ApiKey.WRITE_TXN_MARKERS,
            1,
            R(
                markers=[
                    R.WritableTxnMarker(
                        producer_id=self.pid,
                        producer_epoch=0,
                        transaction_result=commit,
                        topics=[R.WritableTxnMarkerTopic(name=self.topic, partition_indexes=[0])],
                        coordinator_epoch=0,
                    )
                ]
            ),
        )
        assert response.markers[0].topics[0].partitions[0].error_code == ErrorCode.NONE


def consume_until(
    cluster: LocalCluster, topic: str, isolation: str, last: bytes
) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record a confluent-kafka consumer reads from the beginning, up to
    and including the record whose value is `last`."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"reader-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got: list[tuple[bytes, bytes]] = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and (not got or got[-1][1] != last):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append((message.key(), message.value()))
    finally:
        consumer.close()
    assert got and got[-1][1] == last, f"{isolation}: never read {last!r}, got {got}"
    return got


def test_a_restart_keeps_aborted_records_invisible_to_read_committed(
    cluster: LocalCluster,
) -> None:
    topic = "txn-restart"
    create_topic(cluster, topic)
    with client(cluster) as raw:
        committed, aborted = Writer(raw, topic, "tx-c"), Writer(raw, topic, "tx-a")
        plain = Writer(raw, topic)
        assert committed.produce([(b"c", b"c-0"), (b"c", b"c-1")]) == 0
        assert aborted.produce([(b"a", b"a-0"), (b"a", b"a-1"), (b"a", b"a-2")]) == 2
        committed.end(commit=True)  # 5
        aborted.end(commit=False)  # 6
        assert plain.produce([(b"p", b"end")]) == 7
    expected = [(b"c", b"c-0"), (b"c", b"c-1"), (b"p", b"end")]
    assert consume_until(cluster, topic, "read_committed", b"end") == expected

    cluster.stop_broker(BROKER)
    directory = partition_dir(cluster, topic)
    index = decode_txn_index((directory / "00000000000000000000.txnindex").read_bytes())
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in index] == [(aborted.pid, 2, 6)]
    snapshot = decode_snapshot((directory / "00000000000000000008.snapshot").read_bytes())
    assert {e.producer_id: (e.last_sequence, e.last_offset) for e in snapshot} == {
        committed.pid: (1, 1),
        aborted.pid: (2, 4),
        plain.pid: (0, 7),
    }
    assert all(e.current_txn_first_offset == -1 for e in snapshot)

    cluster.start_broker(BROKER)
    assert consume_until(cluster, topic, "read_committed", b"end") == expected
    uncommitted = consume_until(cluster, topic, "read_uncommitted", b"end")
    assert [v for _, v in uncommitted] == [b"c-0", b"c-1", b"a-0", b"a-1", b"a-2", b"end"]


def test_compaction_drops_aborted_records_and_keeps_committed_ones(cluster: LocalCluster) -> None:
    topic = "txn-compacted"
    create_topic(
        cluster,
        topic,
        {
            "cleanup.policy": "compact",
            "segment.bytes": "1024",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "86400000",
        },
    )
    keys = [b"k%d" % i for i in range(5)]
    with client(cluster) as raw:
        committed, aborted = Writer(raw, topic, "tx-c"), Writer(raw, topic, "tx-a")
        plain = Writer(raw, topic)
        committed.produce([(k, b"committed") for k in keys])
        committed.end(commit=True)
        # Later than the committed values: were they read as updates, they would win.
        aborted.produce([(k, b"aborted") for k in keys] + [(b"only-aborted", b"aborted")])
        aborted.end(commit=False)
        for i in range(40):  # enough 1 KiB segments for the cleaner to have sealed ones
            plain.produce([(b"filler-%d" % (i % 4), b"x" * 100)])
        plain.produce([(b"last", b"end")])

    directory = partition_dir(cluster, topic)

    def aborted_records_on_disk() -> int:
        count = 0
        for path in directory.glob("*.log"):
            for batch in decode_batches(path.read_bytes()):
                count += sum(1 for r in batch.records if r.value == b"aborted")
        return count

    deadline = time.monotonic() + DEADLINE_S
    while aborted_records_on_disk() and time.monotonic() < deadline:
        time.sleep(0.25)
    assert aborted_records_on_disk() == 0, "the cleaner never removed the aborted records"

    for isolation in ("read_committed", "read_uncommitted"):
        folded = dict(consume_until(cluster, topic, isolation, b"end"))
        assert {k: folded[k] for k in keys} == dict.fromkeys(keys, b"committed"), isolation
        assert b"only-aborted" not in folded, isolation
        assert b"aborted" not in folded.values(), isolation
    # Both markers are still on disk (the aborted data was removed only by this pass, and the
    # committed data is still there), and the abort is still indexed.
    markers = [
        batch.header.producer_id
        for path in sorted(directory.glob("*.log"))
        for batch in decode_batches(path.read_bytes())
        if batch.header.is_control
    ]
    assert markers == [committed.pid, aborted.pid]
