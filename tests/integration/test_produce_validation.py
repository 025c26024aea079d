"""Produce validation as Kafka's LogValidator does it, against a real broker process and a real
ZooKeeper (issue 14): bad batches sent over the wire with valid CRCs are refused with
CORRUPT_MESSAGE or INVALID_RECORD naming the partition and what was wrong, nothing is appended,
the next good batch takes the offset, and a consumer reads every good record. A zip bomb costs
the broker a bounded amount of memory, on produce and when a bomb already on disk is searched by
timestamp. Real clients with every compression type still produce.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import confluent_kafka as ck
import pytest

from epochlog.broker.harness import RawClient
from epochlog.client import Admin
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.bad_batches import (
    BASE_TIMESTAMP,
    batch_of,
    garbage_batch,
    plant_batch,
    record_bytes,
    records_payload,
    zip_bomb_batch,
)
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import confluent_consume
from tests.integration.test_broker_bad_input import assert_serves, batch, log_end, produce

MIB = 1 << 20
# message.max.bytes (1 MiB) x epochlog.message.max.decompressed.multiple (64), both defaults
BOUND = 64 * 1048588
# what a bounded walk may add to the broker's peak RSS: the bound is the most it may hold, and
# the interpreter's own noise
RSS_SLACK = 96 * MIB
COMPRESSED = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("cluster"), 1)
    c.start()
    yield c
    c.close()


@pytest.fixture
def topic(cluster, request):
    name = "v-" + "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:120]
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(name, 1, 1)
    with RawClient("127.0.0.1", cluster.brokers[1].port) as client:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            response = client.request(ApiKey.PRODUCE, 9, produce(batch(1), topic=name))
            if response.responses[0].partition_responses[0].error_code == 0:
                return name
            time.sleep(0.1)
    raise AssertionError(f"topic {name} never accepted a produce")


@pytest.fixture
def client(cluster):
    with RawClient("127.0.0.1", cluster.brokers[1].port, timeout=60) as c:
        yield c


def produce_partition(client, records, topic, version=9):
    response = client.request(ApiKey.PRODUCE, version, produce(records, topic=topic))
    return response.responses[0].partition_responses[0]


def assert_refused(client, topic, raw, code, *fragments):
    """`raw` is refused with `code` and a message naming the partition and each fragment; the
    log end offset does not move; a good batch after it is appended right there."""
    before = log_end(client, topic)
    answer = produce_partition(client, raw, topic)
    assert ErrorCode(answer.error_code) is code, answer.error_message
    assert answer.error_message.startswith(f"{topic}-0: "), answer.error_message
    for fragment in fragments:
        assert fragment in answer.error_message
    assert log_end(client, topic) == before
    good = produce_partition(client, batch(2), topic)
    assert good.error_code == 0 and good.base_offset == before
    return answer


def peak_rss(pid: int) -> int:
    """The process's peak resident set (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


def reset_peak_rss(pid: int) -> None:
    """Start the peak over from the current RSS (Linux clear_refs 5), where allowed."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


# ------------------------------------------------------------------------- garbage


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name.lower())
def test_garbage_compressed_payload_is_corrupt_message_and_appends_nothing(client, topic, codec):
    assert_refused(
        client, topic, garbage_batch(codec), ErrorCode.CORRUPT_MESSAGE, codec.name.lower()
    )


def test_garbage_uncompressed_records_are_corrupt_message_and_append_nothing(client, topic):
    raw = batch_of(b"\xff" * 64, 1)  # a record length varint that never ends
    assert_refused(client, topic, raw, ErrorCode.CORRUPT_MESSAGE, "record 0")


# --------------------------------------------------------- disagreement with the header


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD], ids=["none", "zstd"])
def test_a_count_of_int32_max_over_one_record_is_invalid_record_and_leo_stays(client, topic, codec):
    raw = batch_of(records_payload(1), 2**31 - 1, codec=codec)
    assert_refused(
        client, topic, raw, ErrorCode.INVALID_RECORD, "counts 2147483647 records", "holds 1"
    )


def test_an_offset_delta_out_of_order_is_invalid_record_with_its_record_error(client, topic):
    payload = record_bytes(0) + record_bytes(1) + record_bytes(7)
    answer = assert_refused(
        client,
        topic,
        batch_of(payload, 3, codec=Compression.LZ4),
        ErrorCode.INVALID_RECORD,
        "invalid offset",
    )
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
        (2, answer.error_message)
    ]


def test_a_record_length_that_disagrees_with_its_fields_is_invalid_record(client, topic):
    payload = record_bytes(0) + record_bytes(1, length_error=2) + record_bytes(2)
    answer = assert_refused(
        client, topic, batch_of(payload, 3), ErrorCode.INVALID_RECORD, "record 1"
    )
    assert [e.batch_index for e in answer.record_errors] == [1]


def test_a_max_timestamp_that_disagrees_with_the_records_is_invalid_record(client, topic):
    payload = record_bytes(0) + record_bytes(1, timestamp_delta=50)
    raw = batch_of(payload, 2, codec=Compression.GZIP, max_timestamp=BASE_TIMESTAMP + 1)
    assert_refused(client, topic, raw, ErrorCode.INVALID_RECORD, "max timestamp")


# -------------------------------------------------------------------------- zip bombs


@pytest.fixture(scope="module")
def gib_bomb() -> bytes:
    """~32 KiB of zstd holding 1 GiB of records of 1 MiB each (timestamps counting up)."""
    return zip_bomb_batch(Compression.ZSTD, expanded_bytes=1 << 30, record_size=MIB)


@pytest.mark.parametrize("record_size", [None, MIB], ids=["one-record", "1MiB-records"])
def test_a_zstd_bomb_is_refused_at_the_bound_and_the_broker_memory_stays_bounded(
    cluster, client, topic, gib_bomb, record_size
):
    raw = gib_bomb if record_size else zip_bomb_batch(Compression.ZSTD, 1 << 30)
    assert len(raw) < 64 * 1024
    pid = cluster.brokers[1].pid
    reset_peak_rss(pid)
    before = peak_rss(pid)
    assert_refused(client, topic, raw, ErrorCode.INVALID_RECORD, f"more than {BOUND} bytes")
    grown = peak_rss(pid) - before
    assert grown < RSS_SLACK, f"peak RSS grew by {grown >> 20} MiB"


def test_list_offsets_by_timestamp_over_a_bomb_already_on_disk_stays_bounded(
    cluster, topic, gib_bomb
):
    """A bomb written before validation walked records (planted in the stopped broker's log)
    is searched record by record within the bound, then answered from its header."""
    with RawClient("127.0.0.1", cluster.brokers[1].port) as c:
        before = log_end(c, topic)
    cluster.stop_broker(1)
    partition_dir = cluster.brokers[1].directory / "logs" / f"{topic}-0"
    planted_at = plant_batch(partition_dir, gib_bomb)
    assert planted_at == before
    cluster.start_broker(1)
    pid = cluster.brokers[1].pid
    with (
        RawClient("127.0.0.1", cluster.brokers[1].port, timeout=60) as c,
        RawClient("127.0.0.1", cluster.brokers[1].port) as bystander,
    ):
        deadline = time.monotonic() + 30
        # until the broker leads the partition again and its HW has passed the bomb
        while list_offset(c, topic, -1, check=False) != planted_at + 1024:
            assert time.monotonic() < deadline, "the high watermark never passed the bomb"
            time.sleep(0.2)
        reset_peak_rss(pid)
        peak_before = peak_rss(pid)
        started = time.monotonic()
        # record 1000 of the bomb holds this timestamp: 1000 MiB into its records
        offset, timestamp = list_offset(c, topic, BASE_TIMESTAMP + 1000, with_timestamp=True)
        elapsed = time.monotonic() - started
        grown = peak_rss(pid) - peak_before
        assert_serves(bystander)
    assert grown < RSS_SLACK, f"peak RSS grew by {grown >> 20} MiB in {elapsed:.2f} s"
    # the walk stopped at the bound: the answer is the batch's, from its header
    assert (offset, timestamp) == (planted_at, BASE_TIMESTAMP + 1023)


def list_offset(client, topic, timestamp, with_timestamp=False, check=True):
    L = m.ListOffsetsRequest
    response = client.request(
        ApiKey.LIST_OFFSETS,
        7,
        L(
            replica_id=-1,
            topics=[
                L.ListOffsetsTopic(
                    name=topic,
                    partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=timestamp)],
                )
            ],
        ),
    )
    partition = response.topics[0].partitions[0]
    assert partition.error_code == 0 or not check, partition
    return (partition.offset, partition.timestamp) if with_timestamp else partition.offset


def test_list_offsets_by_timestamp_finds_the_record_inside_a_compressed_batch(client, topic):
    payload = b"".join(record_bytes(i, timestamp_delta=10 * i) for i in range(20))
    raw = batch_of(payload, 20, codec=Compression.ZSTD, max_timestamp=BASE_TIMESTAMP + 190)
    answer = produce_partition(client, raw, topic)
    assert answer.error_code == 0, answer.error_message
    found = list_offset(client, topic, BASE_TIMESTAMP + 95, with_timestamp=True)
    assert found == (answer.base_offset + 10, BASE_TIMESTAMP + 100)


# ---------------------------------------------------------------------- consumers


def test_a_consumer_reads_every_good_record_around_refused_batches(cluster, client, topic):
    bad = [
        garbage_batch(Compression.LZ4),
        garbage_batch(Compression.ZSTD, seed=1),
        garbage_batch(Compression.GZIP, seed=2),
        batch_of(b"\xff" * 64, 1),
        batch_of(records_payload(1), 2**31 - 1),
    ]
    for raw in bad:
        answer = produce_partition(client, raw, topic)
        assert answer.error_code != 0
        good = produce_partition(client, batch(3), topic)
        assert good.error_code == 0
    expected = 1 + 3 * len(bad)  # the topic fixture's record, then the good batches
    assert log_end(client, topic) == expected
    got = confluent_consume(cluster.bootstrap_servers, topic, 1, expected)
    assert len(got) == expected
    assert all(value.startswith(b"v") for _, _, value, _ in got)


# ---------------------------------------------------------- real clients, every codec


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_produces_with_every_compression_type(cluster, topic, codec):
    producer = ck.Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "compression.type": codec, "linger.ms": 20}
    )
    errors = []
    for i in range(500):
        producer.produce(
            topic,
            key=b"k%d" % i,
            value=b"value-%d-" % i + bytes(i % 50),
            headers=[("h", b"%d" % i)],
            partition=0,
            on_delivery=lambda err, _msg: err and errors.append(err),
        )
    assert producer.flush(30) == 0 and errors == []
    got = confluent_consume(cluster.bootstrap_servers, topic, 1, 501)
    assert [value for _, _, value, _ in got[1:]] == [
        b"value-%d-" % i + bytes(i % 50) for i in range(500)
    ]


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_kafka_python_produces_with_every_compression_type(cluster, topic, codec):
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, compression_type=codec, linger_ms=20
    )
    futures = [
        producer.send(topic, key=b"k%d" % i, value=b"kp-%d" % i, partition=0) for i in range(300)
    ]
    producer.flush(30)
    assert [f.get(10).offset for f in futures] == list(range(1, 301))
    producer.close()
    got = confluent_consume(cluster.bootstrap_servers, topic, 1, 301)
    assert [value for _, _, value, _ in got[1:]] == [b"kp-%d" % i for i in range(300)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_produces_with_every_compression_type(cluster, topic, codec):
    from aiokafka import AIOKafkaProducer

    async def run() -> list[int]:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers, compression_type=codec, linger_ms=20
        )
        await producer.start()
        try:
            sends = [
                await producer.send(topic, key=b"k%d" % i, value=b"ak-%d" % i, partition=0)
                for i in range(300)
            ]
            return [(await s).offset for s in sends]
        finally:
            await producer.stop()

    assert asyncio.run(run()) == list(range(1, 301))
    got = confluent_consume(cluster.bootstrap_servers, topic, 1, 301)
    assert [value for _, _, value, _ in got[1:]] == [b"ak-%d" % i for i in range(300)]
