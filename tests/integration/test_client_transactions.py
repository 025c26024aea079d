"""epochlog.client's transactional producer end to end, against librdkafka's mock cluster and
three epochlog brokers (the `bootstrap` fixture's two parameters; every test of that part takes
only a bootstrap string).

The mock (3 brokers, topics auto-created with 4 partitions) is started once for the module from
`/work/shared/tools/librdkafka_mock_cluster.py` and stopped by its pid; the epochlog brokers
auto-create topics with 4 partitions too. What the mock does not do, and so what the tests at
the end check on epochlog's brokers only: its Fetch responses list no aborted transactions
(librdkafka's own read_committed consumer reads aborted records from it); it hands out a new
producer id on every InitProducerId instead of bumping the epoch, so it fences nobody; it
answers TxnOffsetCommit without storing the offsets (confluent-kafka's own
send_offsets_to_transaction leaves none committed there). Its control batches carry CRC 0,
hence `check.crcs=false` in the consumers here (librdkafka's default too), and its group APIs
take only the versions librdkafka's consumer sends (`MOCK_GROUP_VERSIONS`).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from epochlog.client import (
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
    TransactionAbortedError,
    TransactionStateError,
    connection,
)
from epochlog.processes import spawn
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import wait_until_brokers_name_the_controller

MOCK_TOOL = "/work/shared/tools/librdkafka_mock_cluster.py"
PARTITIONS = 4  # the mock auto-creates topics with 4 partitions
DEADLINE_S = 60  # a failure bound only: reads stop as soon as they have what they wait for
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "consume_transform_produce.py"
CONSUMER_BASE = {"check.crcs": False, "auto.offset.reset": "earliest"}


# librdkafka's mock advertises JoinGroup v6 and SyncGroup v4 but closes the connection on them
# (its own consumer sends v5 and v3): the group client is held to those against the mock.
MOCK_GROUP_VERSIONS = {ApiKey.JOIN_GROUP: 5, ApiKey.SYNC_GROUP: 3}


@pytest.fixture(scope="module", params=["librdkafka-mock", "epochlog"])
def bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "epochlog":
        yield request.getfixturevalue("epochlog_servers")
        return
    with pytest.MonkeyPatch.context() as patch:
        ours = connection.our_versions

        def held(api_key: int) -> tuple[int, int]:
            low, high = ours(api_key)
            return low, min(high, MOCK_GROUP_VERSIONS.get(api_key, high))

        patch.setattr(connection, "our_versions", held)
        yield from mock_cluster()


@pytest.fixture(scope="module")
def epochlog_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Three epochlog brokers whose auto-created topics have the mock's 4 partitions."""
    cluster = LocalCluster(
        tmp_path_factory.mktemp("client-txn"), 3, broker_config={"num.partitions": PARTITIONS}
    )
    cluster.start()
    try:
        wait_until_brokers_name_the_controller([b.port for b in cluster.brokers.values()])
        yield cluster.bootstrap_servers
    finally:
        cluster.close()


def mock_cluster() -> Iterator[str]:
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


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def read_values(
    bootstrap: str, topic: str, until: set[bytes], isolation: str = "read_committed"
) -> tuple[list[bytes], Consumer]:
    """Every value of `topic` (all partitions, from the start) once all of `until` arrived; the
    consumer is returned open, so its positions can be checked (the caller closes it)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "isolation.level": isolation, **CONSUMER_BASE}
    )
    consumer.assign([(topic, p) for p in range(PARTITIONS)])
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while not until <= set(values) and time.monotonic() < deadline:
        values.extend(r.value or b"" for r in consumer.poll(0.5))
    return values, consumer


def transactional_producer(bootstrap: str, **extra: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": unique("tx"), "linger.ms": 5, **extra}
    )
    producer.init_transactions(timeout=DEADLINE_S)
    return producer


def test_a_committed_transaction_is_read_and_the_consumer_steps_over_its_markers(
    bootstrap: str,
) -> None:
    topic = unique("txn-commit")
    with transactional_producer(bootstrap) as producer:
        producer.begin_transaction()
        futures = [producer.send(topic, b"v%d" % i, partition=i % 2) for i in range(10)]
        producer.commit_transaction(timeout=DEADLINE_S)
        # the commit flushed every record first: all acknowledged, none pending
        offsets = sorted((f.result(0).partition, f.result(0).offset) for f in futures)
    assert offsets == [(p, o) for p in (0, 1) for o in range(5)]
    values, consumer = read_values(bootstrap, topic, {b"v%d" % i for i in range(10)})
    try:
        assert sorted(values) == sorted(b"v%d" % i for i in range(10))
        # each partition holds 5 records and a commit marker; the position is past the marker
        for p in (0, 1):
            deadline = time.monotonic() + DEADLINE_S
            while consumer.position((topic, p)) < 6 and time.monotonic() < deadline:
                consumer.poll(0.2)
            assert consumer.position((topic, p)) == 6
        ends = consumer.end_offsets([(topic, 0), (topic, 1)])
        assert ends == {TopicPartition(topic, 0): 6, TopicPartition(topic, 1): 6}
    finally:
        consumer.close()


def test_abort_then_commit_again_with_the_same_producer(bootstrap: str) -> None:
    topic = unique("txn-abort")
    with transactional_producer(bootstrap) as producer:
        producer.begin_transaction()
        sent = [producer.send(topic, b"aborted-%d" % i, partition=0) for i in range(3)]
        producer.flush()
        assert all(f.result(0).offset >= 0 for f in sent)  # written, then aborted
        producer.abort_transaction(timeout=DEADLINE_S)
        producer.begin_transaction()
        producer.send(topic, b"kept", partition=0)
        producer.commit_transaction(timeout=DEADLINE_S)
    # the aborted records are in the log (read_uncommitted sees them), then the abort marker
    values, consumer = read_values(bootstrap, topic, {b"kept"}, isolation="read_uncommitted")
    try:
        assert values == [b"aborted-0", b"aborted-1", b"aborted-2", b"kept"]
        assert consumer.end_offsets([(topic, 0)]) == {TopicPartition(topic, 0): 6}
    finally:
        consumer.close()


def test_records_queued_at_abort_are_dropped_not_sent(bootstrap: str) -> None:
    topic = unique("txn-drop")
    with transactional_producer(bootstrap, **{"linger.ms": 60000, "batch.size": 1 << 20}) as p:
        p.begin_transaction()
        held = p.send(topic, b"never", partition=0)  # lingers: not sent before the abort
        p.abort_transaction(timeout=DEADLINE_S)
        with pytest.raises(TransactionAbortedError, match="aborted before the record was sent"):
            held.result(DEADLINE_S)
        p.begin_transaction()
        p.send(topic, b"after", partition=0)
        p.commit_transaction(timeout=DEADLINE_S)
    values, consumer = read_values(bootstrap, topic, {b"after"}, isolation="read_uncommitted")
    consumer.close()
    assert values == [b"after"]


def test_calls_out_of_order_are_refused_and_change_nothing(bootstrap: str) -> None:
    topic = unique("txn-order")
    with Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tx")}) as p:
        with pytest.raises(TransactionStateError, match="UNINITIALIZED"):
            p.begin_transaction()
        p.init_transactions(timeout=DEADLINE_S)
        with pytest.raises(TransactionStateError, match="cannot send in state READY"):
            p.send(topic, b"outside", partition=0)
        with pytest.raises(TransactionStateError, match="commit a transaction in state READY"):
            p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"inside", partition=0)
        p.commit_transaction(timeout=DEADLINE_S)
    values, consumer = read_values(bootstrap, topic, {b"inside"})
    consumer.close()
    assert values == [b"inside"]
    plain = Producer({"bootstrap.servers": bootstrap})
    try:
        with pytest.raises(TransactionStateError, match="transactional.id"):
            plain.init_transactions()
    finally:
        plain.close()


def test_a_group_members_offsets_go_with_the_transaction(bootstrap: str) -> None:
    topic, group = unique("txn-offsets"), unique("group")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            **CONSUMER_BASE,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while consumer.generation_id < 0 and time.monotonic() < deadline:
            consumer.poll(0.2)  # joins the group: a generation and a member id
        metadata = consumer.group_metadata()
        assert metadata.group_id == group and metadata.generation_id >= 0 and metadata.member_id
        with transactional_producer(bootstrap) as producer:
            producer.begin_transaction()
            producer.send(topic, b"x", partition=0)
            # AddOffsetsToTxn to the transaction coordinator, TxnOffsetCommit v3 (member id
            # and generation) to the group's coordinator, then EndTxn
            producer.send_offsets_to_transaction({(topic, 0): 1}, metadata, timeout=DEADLINE_S)
            producer.commit_transaction(timeout=DEADLINE_S)
            producer.begin_transaction()
            producer.send(topic, b"y", partition=0)
            producer.send_offsets_to_transaction({(topic, 0): 2}, metadata, timeout=DEADLINE_S)
            producer.abort_transaction(timeout=DEADLINE_S)
            with pytest.raises(ValueError, match="must be an int >= 0"):
                producer.begin_transaction()
                producer.send_offsets_to_transaction({(topic, 0): -5}, metadata)
            producer.abort_transaction(timeout=DEADLINE_S)
    finally:
        consumer.close()
    values, reader = read_values(bootstrap, topic, {b"x"}, isolation="read_uncommitted")
    reader.close()
    assert values[0] == b"x"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("consume_transform_produce", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_consume_transform_produce_example_is_exactly_once(bootstrap: str) -> None:
    source, sink, group = unique("words"), unique("upper-words"), unique("upper")
    words = [b"word-%d" % i for i in range(60)]
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i, word in enumerate(words):
            producer.send(source, word, partition=i % PARTITIONS)
        producer.flush()
    example = load_example()
    committed = example.run(
        bootstrap,
        source,
        sink,
        group,
        unique("upper-tx"),
        stop_after_idle_polls=3,
        consumer_config={"check.crcs": False},
    )
    assert committed == len(words)
    values, consumer = read_values(bootstrap, sink, {w.upper() for w in words})
    consumer.close()
    assert sorted(values) == sorted(w.upper() for w in words)  # each exactly once


# ---------------------------------------------------------------------------------------------
# What the mock cannot show (see the module docstring), on epochlog's brokers.


def test_a_read_committed_consumer_never_sees_an_aborted_transaction(
    epochlog_servers: str,
) -> None:
    topic = unique("txn-aborted")
    with transactional_producer(epochlog_servers) as producer:
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, b"aborted-%d" % i, partition=0)
        producer.flush()
        producer.abort_transaction(timeout=DEADLINE_S)
        producer.begin_transaction()
        producer.send(topic, b"kept", partition=0)
        producer.commit_transaction(timeout=DEADLINE_S)
    values, consumer = read_values(epochlog_servers, topic, {b"kept"})
    try:
        assert values == [b"kept"]
        assert consumer.position((topic, 0)) == 6  # 3 aborted, ABORT, kept, COMMIT
    finally:
        consumer.close()


def test_offsets_sent_to_a_transaction_count_only_when_it_commits(epochlog_servers: str) -> None:
    topic, group = unique("txn-offsets"), unique("group")
    consumer = Consumer(
        {
            "bootstrap.servers": epochlog_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            **CONSUMER_BASE,
        }
    )
    tp = TopicPartition(topic, 0)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while consumer.generation_id < 0 and time.monotonic() < deadline:
            consumer.poll(0.2)
        metadata = consumer.group_metadata()
        with transactional_producer(epochlog_servers) as producer:
            producer.begin_transaction()
            producer.send(topic, b"x", partition=0)
            producer.send_offsets_to_transaction({(topic, 0): 5}, metadata, timeout=DEADLINE_S)
            producer.commit_transaction(timeout=DEADLINE_S)
            assert consumer.committed([tp])[tp].offset == 5  # type: ignore[union-attr]
            producer.begin_transaction()
            producer.send(topic, b"y", partition=0)
            producer.send_offsets_to_transaction({(topic, 0): 9}, metadata, timeout=DEADLINE_S)
            producer.abort_transaction(timeout=DEADLINE_S)
            assert consumer.committed([tp])[tp].offset == 5  # type: ignore[union-attr]
    finally:
        consumer.close()


def test_a_second_producer_with_the_same_id_fences_the_first(epochlog_servers: str) -> None:
    topic, txn_id = unique("txn-fence"), unique("tx")
    config = {"bootstrap.servers": epochlog_servers, "transactional.id": txn_id}
    with Producer(config) as zombie, Producer(config) as successor:
        zombie.init_transactions(timeout=DEADLINE_S)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0).result(DEADLINE_S)
        successor.init_transactions(timeout=DEADLINE_S)  # aborts the zombie's transaction
        with pytest.raises(KafkaError) as fenced:
            zombie.commit_transaction(timeout=DEADLINE_S)
        assert fenced.value.code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
        with pytest.raises(TransactionStateError, match="FATAL_ERROR"):
            zombie.begin_transaction()
        successor.begin_transaction()
        successor.send(topic, b"successor", partition=0)
        successor.commit_transaction(timeout=DEADLINE_S)
    values, consumer = read_values(epochlog_servers, topic, {b"successor"})
    consumer.close()
    assert values == [b"successor"]


def test_the_example_resumes_from_the_offsets_it_committed(epochlog_servers: str) -> None:
    source, sink, group = unique("words"), unique("upper-words"), unique("upper")
    words = [b"word-%d" % i for i in range(40)]
    with Producer({"bootstrap.servers": epochlog_servers}) as producer:
        for i, word in enumerate(words[:20]):
            producer.send(source, word, partition=i % PARTITIONS)
        producer.flush()
    example = load_example()
    assert example.run(epochlog_servers, source, sink, group, "up-1", stop_after_idle_polls=2) == 20
    with Producer({"bootstrap.servers": epochlog_servers}) as producer:
        for i, word in enumerate(words[20:]):
            producer.send(source, word, partition=i % PARTITIONS)
        producer.flush()
    # a restart (same transactional id) reads on from the committed offsets: the second half
    assert example.run(epochlog_servers, source, sink, group, "up-1", stop_after_idle_polls=2) == 20
    values, consumer = read_values(epochlog_servers, sink, {w.upper() for w in words})
    consumer.close()
    assert sorted(values) == sorted(w.upper() for w in words)
