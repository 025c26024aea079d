"""Log compaction on real brokers with real clients (issue 15, item 1).

- RF 3, confluent-kafka acks=all idempotent producer: after the cleaners ran, every replica's
  files hold each key's last value (a tombstoned key is gone after delete.retention.ms), nothing
  below its cleaner checkpoint twice, and a consumer from offset 0 folds to the same values; a
  follower whose disk was wiped fetches from offsets compaction removed and gets the next
  records; keyless records are refused with Kafka's error.
- Every client the README names (confluent-kafka, kafka-python, aiokafka, kcat) produces to a
  compacted topic and reads it back from the beginning once it was cleaned (holes in offsets,
  producers' empty last batches).
- Slow: a million updates over 10,000 keys, a broker killed with SIGKILL while a `.cleaned`
  segment is being written; every replica then keeps exactly the last value of each key.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import confluent_kafka as ck
import pytest

from epochlog.cli.commands import read_status
from epochlog.client import Admin
from epochlog.protocol.records import decode_batches
from epochlog.storage.checkpoint import OffsetCheckpointFile
from epochlog.testing.cluster import LocalCluster

TOPIC = "state"
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "32768",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "2000",
}


def wait_until(predicate, timeout_s: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout_s, f"timed out after {timeout_s} s: {what}"
        time.sleep(0.25)
    return time.monotonic() - started


def start_cluster(tmp_path: Path, zk_hosts: str, brokers: int = 3, **config) -> LocalCluster:
    cluster = LocalCluster(
        tmp_path / "cluster",
        brokers,
        zookeeper=zk_hosts,
        broker_config={"log.cleaner.backoff.ms": 200, "replica.lag.time.max.ms": 5000, **config},
        zk_session_timeout_ms=3000,
    )
    cluster.start()
    return cluster


def in_sync(cluster: LocalCluster, topic: str, partitions: int, replicas: int) -> bool:
    found = [p for p in read_status(cluster.zk_connect)["partitions"] if p["topic"] == topic]
    return len(found) == partitions and all(len(p["isr"]) == replicas for p in found)


def partition_dir(cluster: LocalCluster, broker_id: int, topic: str, partition: int) -> Path:
    return cluster.brokers[broker_id].directory / "logs" / f"{topic}-{partition}"


def cleaner_checkpoint(cluster: LocalCluster, broker_id: int) -> dict[tuple[str, int], int]:
    path = cluster.brokers[broker_id].directory / "logs" / "cleaner-offset-checkpoint"
    return OffsetCheckpointFile(path).read()


def replica_records(directory: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in a partition dir's segment files, read from disk."""
    records = []
    for path in sorted(directory.glob("*.log")):
        for batch in decode_batches(path.read_bytes()):
            records.extend((r.offset, r.key, r.value) for r in batch.records)
    return records


def assert_compacted(records, expected: dict[bytes, bytes | None], checkpoint: int, where: str):
    """Folding the log gives each key's last value (tombstoned keys absent or None); below the
    cleaner's checkpoint no key appears twice; offsets increase."""
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), f"{where}: offsets do not increase"
    folded = {key: value for _, key, value in records}
    live = {key: value for key, value in expected.items() if value is not None}
    assert {k: v for k, v in folded.items() if v is not None} == live, f"{where}: values differ"
    cleaned = [key for offset, key, _ in records if offset < checkpoint]
    assert len(cleaned) == len(set(cleaned)), f"{where}: a key appears twice below {checkpoint}"


def produce_updates(
    bootstrap: str,
    topic: str,
    updates: int,
    keys: int,
    tombstone_every: int = 0,
    prefix: bytes = b"key",
    random_values: bool = False,
) -> dict[int, dict[bytes, bytes | None]]:
    """acks=all idempotent updates, key i % keys; the last update of every `tombstone_every`-th
    key is a tombstone. Returns partition -> key -> last value, from the delivery reports."""
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": "lz4",
            "batch.size": 16384,  # below the topics' segment.bytes
        }
    )
    last: dict[int, dict[bytes, tuple[int, bytes | None]]] = {}
    errors = []

    def delivered(err, msg) -> None:
        if err is not None:
            errors.append(err)
            return
        seen = last.setdefault(msg.partition(), {})
        previous = seen.get(msg.key())
        if previous is None or previous[0] < msg.offset():
            seen[msg.key()] = (msg.offset(), msg.value())

    for i in range(updates):
        key = prefix + b"-%06d" % (i % keys)
        value: bytes | None = b"%09d-" % i + (os.urandom(90) if random_values else b"v" * 90)
        if tombstone_every and i >= updates - keys and (i % keys) % tombstone_every == 0:
            value = None
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    assert not errors, errors[:5]
    return {p: {k: v for k, (_, v) in seen.items()} for p, seen in last.items()}


def consume_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list]:
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    ends = {
        p: consumer.get_watermark_offsets(ck.TopicPartition(topic, p), 10)[1]
        for p in range(partitions)
    }
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list] = {p: [] for p in range(partitions)}
    done = {p for p, end in ends.items() if end == 0}
    deadline = time.monotonic() + 120
    while len(done) < partitions:
        assert time.monotonic() < deadline, "could not read the compacted topic to its end"
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
        if msg.offset() >= ends[msg.partition()] - 1:
            done.add(msg.partition())
    consumer.close()
    return got


def replicas_cleaned(cluster, brokers, topic, partitions, expected) -> bool:
    """Every replica cleaned past most of its log and its tombstones are gone."""
    for broker_id in brokers:
        checkpoints = cleaner_checkpoint(cluster, broker_id)
        for p in range(partitions):
            records = replica_records(partition_dir(cluster, broker_id, topic, p))
            if checkpoints.get((topic, p), 0) < records[-1][0] * 0.8:
                return False
            if any(v is None for _, _, v in records):
                return False
    return True


def test_a_compacted_topic_keeps_each_keys_last_value_on_every_replica(tmp_path, zk_hosts):
    cluster = start_cluster(tmp_path, zk_hosts)
    try:
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topic(TOPIC, 2, 3, COMPACTED)
        wait_until(lambda: in_sync(cluster, TOPIC, 2, 3), 30, "the ISRs to fill")

        # Keyless records are refused with Kafka's error and message.
        keyless = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "retries": 0})
        errors = []
        keyless.produce(
            TOPIC, value=b"no key", partition=0, on_delivery=lambda e, m: errors.append(e)
        )
        keyless.flush(10)
        assert errors and errors[0].code() == ck.KafkaError.INVALID_RECORD, errors

        expected = produce_updates(cluster.bootstrap_servers, TOPIC, 30_000, 1000, 10)
        # Then enough other records that the tombstones leave the active segment (never cleaned).
        filler = produce_updates(
            cluster.bootstrap_servers, TOPIC, 1500, 50, prefix=b"filler", random_values=True
        )
        for p in range(2):
            expected[p].update(filler[p])
        wait_until(
            lambda: replicas_cleaned(cluster, [1, 2, 3], TOPIC, 2, expected),
            90,
            "every replica to clean and drop its tombstones",
        )
        for broker_id in (1, 2, 3):
            checkpoints = cleaner_checkpoint(cluster, broker_id)
            for p in range(2):
                records = replica_records(partition_dir(cluster, broker_id, TOPIC, p))
                assert len(records) < 15_000 / 2
                assert_compacted(
                    records, expected[p], checkpoints[(TOPIC, p)], f"broker {broker_id} p{p}"
                )
        read = consume_all(cluster.bootstrap_servers, TOPIC, 2)
        for p in range(2):
            assert_compacted(read[p], expected[p], 0, f"consumer p{p}")

        # A follower with an empty disk fetches from offset 0, which compaction removed, and
        # gets the next records: it rejoins the ISR with the compacted log.
        cluster.kill_broker(3)
        shutil.rmtree(cluster.brokers[3].directory / "logs")
        cluster.start_broker(3)
        wait_until(lambda: in_sync(cluster, TOPIC, 2, 3), 60, "broker 3 back in every ISR")
        for p in range(2):
            wait_until(
                lambda p=p: (
                    replica_records(partition_dir(cluster, 3, TOPIC, p))[-1:]
                    == replica_records(partition_dir(cluster, 1, TOPIC, p))[-1:]
                ),
                30,
                "broker 3 to catch up",
            )
            assert_compacted(
                replica_records(partition_dir(cluster, 3, TOPIC, p)), expected[p], 0, "broker 3"
            )
    finally:
        cluster.close()


# ------------------------------------------------------------------------------ clients


def cleaned_on(cluster: LocalCluster, topic: str, at_least: int) -> bool:
    return cleaner_checkpoint(cluster, 1).get((topic, 0), 0) >= at_least


def expected_last(n: int, keys: int) -> dict[bytes, bytes]:
    return {b"k%d" % (i % keys): b"v%d" % i for i in range(n)}


def test_every_client_produces_to_and_reads_back_a_compacted_topic(tmp_path, zk_hosts):
    cluster = start_cluster(tmp_path, zk_hosts, brokers=1)
    bootstrap = cluster.bootstrap_servers
    configs = {**COMPACTED, "segment.bytes": "2048"}
    n, keys = 400, 10
    items = [(b"k%d" % (i % keys), b"v%d" % i) for i in range(n)]
    try:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            for client in ("confluent", "kafka-python", "aiokafka", "kcat", "epochlog"):
                admin.create_topic(f"c-{client}", 1, 1, configs)

        # confluent-kafka (librdkafka), idempotent
        producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for key, value in items:
            producer.produce("c-confluent", key=key, value=value, partition=0)
            producer.flush(10)  # one batch per record: many emptied batches
        assert producer.flush(30) == 0
        wait_until(lambda: cleaned_on(cluster, "c-confluent", n // 2), 30, "a clean")
        read = consume_all(bootstrap, "c-confluent", 1)[0]
        assert {k: v for _, k, v in read} == expected_last(n, keys) and len(read) < n

        # kafka-python (idempotent by default)
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        kp = KafkaProducer(bootstrap_servers=bootstrap)
        for key, value in items:
            kp.send("c-kafka-python", key=key, value=value, partition=0).get(10)
        kp.close()
        wait_until(lambda: cleaned_on(cluster, "c-kafka-python", n // 2), 30, "a clean")
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        tp = TopicPartition("c-kafka-python", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning()
        end = consumer.end_offsets([tp])[tp]
        got = []
        deadline = time.monotonic() + 30
        while (not got or got[-1][0] < end - 1) and time.monotonic() < deadline:
            for messages in consumer.poll(timeout_ms=500).values():
                got.extend((r.offset, r.key, r.value) for r in messages)
        consumer.close()
        assert {k: v for _, k, v in got} == expected_last(n, keys) and len(got) < n

        # aiokafka, idempotent
        import asyncio

        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.structs import TopicPartition as AioTP

        async def aio() -> list:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
            await producer.start()
            try:
                for key, value in items:
                    await producer.send_and_wait("c-aiokafka", value, key=key, partition=0)
            finally:
                await producer.stop()
            while not cleaned_on(cluster, "c-aiokafka", n // 2):
                await asyncio.sleep(0.25)
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
            await consumer.start()
            got = []
            try:
                tp = AioTP("c-aiokafka", 0)
                consumer.assign([tp])
                await consumer.seek_to_beginning(tp)
                end = (await consumer.end_offsets([tp]))[tp]
                deadline = time.monotonic() + 30
                while (not got or got[-1][0] < end - 1) and time.monotonic() < deadline:
                    for messages in (await consumer.getmany(timeout_ms=500)).values():
                        got.extend((r.offset, r.key, r.value) for r in messages)
            finally:
                await consumer.stop()
            return got

        got = asyncio.run(asyncio.wait_for(aio(), 90))
        assert {k: v for _, k, v in got} == expected_last(n, keys) and len(got) < n

        # kcat
        lines = "".join(f"{k.decode()}:{v.decode()}\n" for k, v in items)
        for start in range(0, len(lines.splitlines()), 40):  # several produce requests
            chunk = "".join(lines.splitlines(keepends=True)[start : start + 40])
            done = subprocess.run(
                ["kcat", "-b", bootstrap, "-P", "-t", "c-kcat", "-p", "0", "-K:"],
                input=chunk,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert done.returncode == 0, done.stderr
        wait_until(lambda: cleaned_on(cluster, "c-kcat", n // 2), 30, "a clean")
        consumed = subprocess.run(
            [
                "kcat",
                "-b",
                bootstrap,
                "-C",
                "-t",
                "c-kcat",
                "-p",
                "0",
                "-o",
                "beginning",
                "-e",
                "-J",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert consumed.returncode == 0, consumed.stderr
        got = [json.loads(line) for line in consumed.stdout.splitlines()]
        folded = {m["key"].encode(): m["payload"].encode() for m in got}
        assert folded == expected_last(n, keys) and len(got) < n
        # kcat's keyless produce is refused on a compacted topic
        refused = subprocess.run(
            ["kcat", "-b", bootstrap, "-P", "-t", "c-kcat", "-p", "0"],
            input="no key\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert refused.returncode != 0
        assert "failed to validate record" in refused.stderr  # librdkafka's INVALID_RECORD

        # epochlog's own client
        from epochlog.client import Consumer, Producer

        with Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as ours:
            for key, value in items:
                ours.send_and_wait("c-epochlog", value, key=key, partition=0)
            with pytest.raises(Exception, match="INVALID_RECORD|without key"):
                ours.send_and_wait("c-epochlog", b"no key", partition=0)
        wait_until(lambda: cleaned_on(cluster, "c-epochlog", n // 2), 30, "a clean")
        with Consumer({"bootstrap.servers": bootstrap}) as reader:
            reader.assign([("c-epochlog", 0)])
            reader.seek_to_beginning()
            end = reader.end_offsets([("c-epochlog", 0)])[("c-epochlog", 0)]
            got = []
            deadline = time.monotonic() + 30
            while (not got or got[-1][0] < end - 1) and time.monotonic() < deadline:
                got.extend((r.offset, r.key, r.value) for r in reader.poll(0.5))
        assert {k: v for _, k, v in got} == expected_last(n, keys) and len(got) < n
    finally:
        cluster.close()


# ------------------------------------------------------------------------- a million


@pytest.mark.slow
def test_a_million_updates_over_10000_keys_survive_a_broker_killed_mid_clean(tmp_path, zk_hosts):
    cluster = start_cluster(
        tmp_path,
        zk_hosts,
        # Each step of a pass waits, so a pass lasts long enough to be caught mid-way.
        **{"epochlog.test.cleaner.step.delay.ms": 400, "log.cleaner.backoff.ms": 500},
    )
    topic = "million"
    try:
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            admin.create_topic(
                topic,
                1,
                3,
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(4 << 20),
                    "min.cleanable.dirty.ratio": "0.3",
                },
            )
        wait_until(lambda: in_sync(cluster, topic, 1, 3), 30, "the ISR to fill")
        expected = produce_updates(cluster.bootstrap_servers, topic, 1_000_000, 10_000)[0]
        assert len(expected) == 10_000
        victim = 2
        directory = partition_dir(cluster, victim, topic, 0)
        wait_until(
            lambda: any(directory.glob("*.cleaned")), 120, f"broker {victim} to write a .cleaned"
        )
        cluster.kill_broker(victim)
        leftovers = sorted(p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap"))
        assert leftovers, "the kill came after the pass"
        cluster.start_broker(victim)
        wait_until(lambda: in_sync(cluster, topic, 1, 3), 120, f"broker {victim} back in the ISR")

        def all_clean() -> bool:
            for broker_id in (1, 2, 3):
                records = replica_records(partition_dir(cluster, broker_id, topic, 0))
                checkpoint = cleaner_checkpoint(cluster, broker_id).get((topic, 0), 0)
                if checkpoint < records[-1][0] * 0.9 or len(records) > 3 * 10_000 + 50_000:
                    return False
            return True

        wait_until(all_clean, 300, "every replica to clean")
        for broker_id in (1, 2, 3):
            records = replica_records(partition_dir(cluster, broker_id, topic, 0))
            checkpoint = cleaner_checkpoint(cluster, broker_id)[(topic, 0)]
            assert_compacted(records, expected, checkpoint, f"broker {broker_id}")
            assert not [
                p
                for p in partition_dir(cluster, broker_id, topic, 0).iterdir()
                if p.suffix in (".cleaned", ".swap", ".deleted")
            ]
        read = consume_all(cluster.bootstrap_servers, topic, 1)[0]
        assert_compacted(read, expected, 0, "consumer")
    finally:
        cluster.close()
