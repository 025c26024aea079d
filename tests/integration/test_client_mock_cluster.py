"""epochlog.client against librdkafka's mock cluster, and against confluent-kafka itself.

The mock (3 brokers, topics auto-created with 4 partitions) runs as a separate process started
from `/work/shared/tools/librdkafka_mock_cluster.py` once for this module and stopped by its pid.
Every test writes to topics of its own. What is checked: our producer's records come back byte
for byte through our consumer (keys, values, headers, timestamps; each compression; idempotent
or not); confluent-kafka reads what we wrote and we read what it wrote, with the same key ->
partition mapping (its `murmur2_random` partitioner is Kafka's default one).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import confluent_kafka
import pytest

from epochlog.client import (
    Admin,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    Producer,
    RecordMetadata,
    partition_for_key,
)
from epochlog.client.fetch_decoder import ConsumerRecord
from epochlog.processes import spawn

MOCK_TOOL = "/work/shared/tools/librdkafka_mock_cluster.py"
PARTITIONS = 4  # the mock auto-creates topics with 4 partitions


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    proc = spawn(
        [sys.executable, MOCK_TOOL, "3", "seed", str(PARTITIONS), "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        servers = proc.stdout.readline().strip()
        assert servers, "the mock cluster printed no bootstrap list"
        yield servers
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def records_to_send(n: int) -> list[tuple[bytes | None, bytes | None, list, int]]:
    """(key, value, headers, timestamp): binary keys and values, empty and null ones."""
    out = []
    for i in range(n):
        key = None if i % 17 == 5 else b"key-%d-\x00\xff" % (i % 40)
        value = None if i % 23 == 7 else os.urandom(i % 300)
        headers = [("n", b"%d" % i), ("empty", b""), ("null", None), ("dup", b"a"), ("dup", b"b")]
        out.append((key, value, headers if i % 3 else [], 1_700_000_000_000 + i))
    return out


async def consume_all(bootstrap: str, topic: str, count: int, **extra: object) -> list:
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **extra}
    async with AsyncConsumer(config) as consumer:
        consumer.assign([(topic, p) for p in range(PARTITIONS)])
        got: list[ConsumerRecord] = []
        deadline = time.monotonic() + 15
        while len(got) < count and time.monotonic() < deadline:
            got += await consumer.poll(0.2)
        return got


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_records_round_trip_byte_for_byte(
    bootstrap: str, compression: str, idempotent: bool
) -> None:
    topic = f"roundtrip-{compression}-{idempotent}"
    sent = records_to_send(150)
    config = {
        "bootstrap.servers": bootstrap,
        "compression.type": compression,
        "enable.idempotence": idempotent,
        "linger.ms": 2,
        "batch.size": 4096,
    }
    async with AsyncProducer(config) as producer:
        futures = [
            await producer.send(topic, value, key, headers, timestamp=ts)
            for key, value, headers, ts in sent
        ]
        await producer.flush()
        metadata: list[RecordMetadata] = [f.result() for f in futures]
    got = await consume_all(bootstrap, topic, len(sent))
    assert len(got) == len(sent)
    by_position = {(r.partition, r.offset): r for r in got}
    for (key, value, headers, ts), md in zip(sent, metadata, strict=True):
        record = by_position[(md.partition, md.offset)]
        assert (record.key, record.value, record.headers, record.timestamp) == (
            key,
            value,
            headers,
            ts,
        )
        if key is not None:
            assert md.partition == partition_for_key(key, PARTITIONS)
    for p in range(PARTITIONS):  # per partition, offsets are dense and in send order
        offsets = [md.offset for md in metadata if md.partition == p]
        assert offsets == list(range(len(offsets)))


async def test_confluent_kafka_reads_what_we_wrote(bootstrap: str) -> None:
    topic = "ours-to-confluent"
    sent = records_to_send(120)
    async with AsyncProducer({"bootstrap.servers": bootstrap, "compression.type": "lz4"}) as p:
        futures = [
            await p.send(topic, value, key, headers, timestamp=ts)
            for key, value, headers, ts in sent
        ]
        await p.flush()
        written = {
            (f.result().partition, f.result().offset): rec
            for f, rec in zip(futures, sent, strict=True)
        }

    def read() -> list:
        c = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False}
        )
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: list = []
        deadline = time.monotonic() + 15
        while len(out) < len(sent) and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                out.append(msg)
        c.close()
        return out

    messages = await asyncio.to_thread(read)
    assert len(messages) == len(sent)
    for msg in messages:
        key, value, headers, ts = written[(msg.partition(), msg.offset())]
        assert (msg.key(), msg.value(), msg.headers() or [], msg.timestamp()[1]) == (
            key,
            value,
            headers,
            ts,
        )


async def test_we_read_what_confluent_kafka_wrote_with_the_same_partitions(bootstrap: str) -> None:
    topic = "confluent-to-ours"
    keys = [b"user-%d" % i for i in range(200)] + [b"", b"\x00", b"21", b"foobar"]
    delivered: dict[bytes, int] = {}

    def write() -> None:
        p = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "partitioner": "murmur2_random",
                "compression.type": "zstd",
            }
        )
        for i, key in enumerate(keys):
            p.produce(
                topic,
                value=b"value-%d" % i,
                key=key,
                headers=[("i", b"%d" % i)],
                on_delivery=lambda err, msg: delivered.__setitem__(msg.key(), msg.partition()),
            )
        p.flush(15)

    await asyncio.to_thread(write)
    assert len(delivered) == len(keys)
    for key, partition in delivered.items():
        assert partition == partition_for_key(key, PARTITIONS), key
    got = await consume_all(bootstrap, topic, len(keys))
    assert sorted(r.key for r in got) == sorted(keys)
    for r in got:
        i = int(r.headers[0][1])
        assert r.value == b"value-%d" % i and r.key == keys[i]
        assert r.partition == delivered[r.key]
    async with AsyncProducer({"bootstrap.servers": bootstrap}) as ours:
        for key in keys:
            md = await ours.send_and_wait(topic + "-ours", b"x", key)
            assert md.partition == delivered[key]


async def test_keyless_records_stick_to_one_partition_per_batch(bootstrap: str) -> None:
    topic = "sticky"
    async with AsyncProducer({"bootstrap.servers": bootstrap, "linger.ms": 1000}) as producer:
        first = [await producer.send(topic, b"a%d" % i) for i in range(20)]
        await producer.flush()
        second = [await producer.send(topic, b"b%d" % i) for i in range(20)]
        await producer.flush()
    first_parts = {f.result().partition for f in first}
    second_parts = {f.result().partition for f in second}
    assert len(first_parts) == 1 and len(second_parts) == 1
    assert first_parts != second_parts  # the sent batch moved the sticky partition on


@pytest.mark.parametrize("acks", [0, 1])
async def test_acks_0_and_1(bootstrap: str, acks: int) -> None:
    topic = f"acks-{acks}"
    config = {"bootstrap.servers": bootstrap, "acks": acks}
    async with AsyncProducer(config) as producer:
        assert not producer.idempotent
        mds = [await producer.send_and_wait(topic, b"v%d" % i, b"k%d" % i) for i in range(20)]
    if acks == 0:
        assert {md.offset for md in mds} == {-1}
    else:
        assert all(md.offset >= 0 for md in mds)
    got = await consume_all(bootstrap, topic, 20)
    assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(20))


async def test_a_record_over_max_request_size_is_refused_at_send(bootstrap: str) -> None:
    config = {"bootstrap.servers": bootstrap, "max.request.size": 10_000}
    async with AsyncProducer(config) as producer:
        with pytest.raises(MessageTooLargeError, match="max.request.size=10000"):
            await producer.send("too-large", b"x" * 20_000)
        md = await producer.send_and_wait("too-large", b"x" * 5_000)
        assert md.offset == 0


async def test_seek_position_and_offset_resets(bootstrap: str) -> None:
    topic = "seeking"
    async with AsyncProducer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(10):
            await producer.send(topic, b"%d" % i, partition=0)
        await producer.flush()
    tp = (topic, 0)
    async with AsyncConsumer({"bootstrap.servers": bootstrap}) as consumer:
        consumer.assign([tp])
        assert await consumer.position(tp) == 10  # auto.offset.reset=latest
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
        assert await consumer.end_offsets([tp]) == {tp: 10}
        consumer.seek(tp, 6)
        records = await consumer.poll(5)
        assert [r.offset for r in records] == [6, 7, 8, 9]
        assert await consumer.position(tp) == 10
        consumer.seek_to_beginning()
        assert await consumer.position(tp) == 0
        consumer.seek(tp, 500)  # out of range: reset per auto.offset.reset (latest)
        for _ in range(50):
            if await consumer.position(tp) != 500:
                break
            await consumer.poll(0.1)
        assert await consumer.position(tp) == 10
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "none"}
    async with AsyncConsumer(config) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 500)
        with pytest.raises(OffsetOutOfRangeError, match="seeking-0 at 500"):
            for _ in range(50):
                await consumer.poll(0.1)


def test_blocking_producer_in_a_tight_loop_keeps_order_and_loses_nothing(bootstrap: str) -> None:
    """More records than the hand-over to the loop thread holds (4096), of every shape (the
    fast path's bytes without headers; str, None, headers), sent as fast as the caller can:
    each future's RecordMetadata matches what a consumer reads at that position, offsets are
    dense and in send order per partition; a delivery callback (on the loop thread) may send
    too without waiting on itself."""
    topic = "tight-loop"
    sent = []
    for i in range(5000):
        key = None if i % 7 == 0 else b"k%d" % (i % 50)
        value: bytes | str | None = b"v%d" % i if i % 11 else f"s{i}"
        headers = [("h", b"%d" % i)] if i % 13 == 0 else None
        sent.append((key, value, headers))
    from_callback: list = []
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 2}) as producer:
        producer.partitions_for(topic)
        futures = [producer.send(topic, v, k, h) for k, v, h in sent]
        futures[0].add_done_callback(
            lambda f: from_callback.append(producer.send(topic, b"from-callback"))
        )
        producer.flush(60)
        metadata = [f.result(0) for f in futures]
        assert len(from_callback) == 1 and from_callback[0].result(10).offset >= 0
    got = asyncio.run(consume_all(bootstrap, topic, len(sent) + 1))
    by_position = {(r.partition, r.offset): r for r in got}
    for (key, value, headers), md in zip(sent, metadata, strict=True):
        record = by_position[(md.partition, md.offset)]
        expected = value.encode() if isinstance(value, str) else value
        assert (record.key, record.value) == (key, expected)
        assert list(record.headers) == (headers or [])
    for p in range(PARTITIONS):
        offsets = [md.offset for md in metadata if md.partition == p]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)


def test_blocking_facades(bootstrap: str) -> None:
    topic = "facades"
    delivered: list = []
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 1}) as producer:
        futures = [
            producer.send(
                topic,
                b"v%d" % i,
                b"k%d" % i,
                on_delivery=lambda md, err: delivered.append((md, err)),
            )
            for i in range(30)
        ]
        producer.flush(10)
        assert all(f.result(0).offset >= 0 for f in futures)
        with pytest.raises(MessageTooLargeError):
            producer.send(topic, b"x" * 2_000_000)
    assert len(delivered) == 30 and all(err is None for _, err in delivered)
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(topic, p) for p in range(PARTITIONS)])
        got: list = []
        deadline = time.monotonic() + 10
        while len(got) < 30 and time.monotonic() < deadline:
            got += consumer.poll(0.2)
        assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(30))
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert topic in admin.list_topics()
        description = admin.describe_topics([topic])[topic]
        assert [p.partition for p in description.partitions] == list(range(PARTITIONS))
        assert all(p.leader in (1, 2, 3) and len(p.replicas) == 3 for p in description.partitions)
        cluster = admin.describe_cluster()  # the mock has no DescribeCluster: Metadata fallback
        assert [b.node_id for b in cluster.brokers] == [1, 2, 3]
