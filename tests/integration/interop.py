"""Real Kafka clients producing and reading back records: shared by the broker and cluster tests.

Each function drives one client library exactly as an application would (confluent-kafka,
kafka-python with its default idempotent producer, aiokafka, kcat) and returns what it read, as
(partition, key, value, headers) tuples, so tests compare byte for byte.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

Record = tuple[int, bytes, bytes, list[tuple[str, bytes]]]  # partition, key, value, headers


def records(tag: str, n: int, partitions: int = 2) -> list[Record]:
    return [
        (
            i % partitions,
            f"{tag}-key-{i}".encode(),
            f"{tag}-value-{i}-".encode() + bytes(range(i % 256)),
            [("h1", f"{i}".encode()), ("bin", bytes([i % 256, 0, 255]))],
        )
        for i in range(n)
    ]


def by_partition(items: list[Record]) -> dict[int, list[Record]]:
    result: dict[int, list[Record]] = {}
    for item in items:
        result.setdefault(item[0], []).append(item)
    return result


def assert_same(got: list[Record], expected: list[Record]) -> None:
    assert by_partition(got) == by_partition(expected)


def confluent_produce(bootstrap: str, topic: str, items: list[Record], **conf: object) -> None:
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[object] = []
    for partition, key, value, headers in items:
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=headers,
            partition=partition,
            on_delivery=lambda err, _msg: err and errors.append(err),
        )
    assert producer.flush(30) == 0
    assert errors == []


def confluent_consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[Record]:
    import confluent_kafka as ck

    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "test", "enable.auto.commit": False}
    )
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[Record] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.partition(), msg.key(), msg.value(), list(msg.headers() or [])))
    finally:
        consumer.close()
    return got


def kafka_python_round_trip(
    bootstrap: str, topic: str, items: list[Record], partitions: int
) -> tuple[list[int], list[Record]]:
    """Produce with kafka-python's default (idempotent) producer, read back with assign()."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    futures = [producer.send(topic, key=k, value=v, headers=h, partition=p) for p, k, v, h in items]
    producer.flush(30)
    offsets = [f.get(10).offset for f in futures]
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    got: list[Record] = []
    deadline = time.monotonic() + 20
    while len(got) < len(items) and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=500).values():
            got.extend((r.partition, r.key, r.value, list(r.headers)) for r in messages)
    consumer.close()
    return offsets, got


def aiokafka_round_trip(
    bootstrap: str, topic: str, items: list[Record], partitions: int
) -> list[Record]:
    """Produce with aiokafka's idempotent producer, read back with assign()."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def run() -> list[Record]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True
        )
        await producer.start()
        try:
            sends = [
                await producer.send(topic, key=k, value=v, headers=h, partition=p)
                for p, k, v, h in items
            ]
            await asyncio.gather(*sends)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False
        )
        await consumer.start()
        got: list[Record] = []
        try:
            parts = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            deadline = time.monotonic() + 20
            while len(got) < len(items) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for messages in batches.values():
                    got.extend((r.partition, r.key, r.value, list(r.headers)) for r in messages)
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def kcat_round_trip(bootstrap: str, topic: str, n: int) -> list[dict]:
    """`kcat -P` n keyed lines with a header into partition 0, then `kcat -C -J` them back."""
    lines = [f"key{i}:value {i} é" for i in range(n)]
    produced = subprocess.run(
        ["kcat", "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-K:", "-H", "src=kcat"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-J"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.returncode == 0, consumed.stderr
    return [json.loads(line) for line in consumed.stdout.splitlines()]


def wait_until_brokers_name_the_controller(ports: list[int], timeout_s: float = 30) -> None:
    """Until each broker's Metadata names a controller. A cluster is ready once ZooKeeper has
    one; a broker names it once it knows where it listens (its /brokers/ids entry, or the
    controller's first UpdateMetadata). CreateTopics sent before is answered too (see
    test_create_topics_at_start.py): this only spares librdkafka a few metadata refreshes."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout_s
    waiting = list(ports)
    while waiting:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{waiting[0]}"})
        if admin.list_topics(timeout=10).controller_id >= 0:
            waiting.pop(0)
            continue
        assert time.monotonic() < deadline, f"broker on port {waiting[0]} names no controller"
        time.sleep(0.2)
