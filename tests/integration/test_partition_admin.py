"""CreatePartitions, DeleteRecords and ElectLeaders against real brokers, from the admin APIs of
confluent-kafka, kafka-python, aiokafka and epochlog, and from `epochlog topics alter`,
`epochlog records delete` and `epochlog leaders elect`.

One 3-broker cluster for the module (small segments, so DeleteRecords has whole segments to
delete). Each test has its own topics. The tests that kill or stop brokers start them again and
wait until every partition they touched is back in full ISR, so the next test finds the cluster
whole."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewPartitions as CkNewPartitions

from epochlog.cli.main import main as epochlog_main
from epochlog.client import (
    Admin,
    ElectionType,
    NewPartitions,
    NewTopic,
    TopicPartition,
)
from epochlog.protocol.errors import ErrorCode
from epochlog.storage.checkpoint import OffsetCheckpointFile
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import wait_until_brokers_name_the_controller

SEGMENT_BYTES = 2048


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("partition-admin"),
        3,
        broker_config={"auto.leader.rebalance.enable": "false"},
    )
    local.start()
    wait_until_brokers_name_the_controller([b.port for b in local.brokers.values()])
    yield local
    local.close()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as client:
        yield client


def wait_until(predicate: Callable[[], bool], timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what or "condition not reached"
        time.sleep(0.2)


def produce(cluster: LocalCluster, topic: str, partition: int, count: int) -> None:
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"{topic}-{partition}-{i}".encode() * 8, partition=partition)
        if i % 10 == 9:
            producer.flush(30)  # small batches: several segments of SEGMENT_BYTES
    assert producer.flush(30) == 0


def partition_state(admin: Admin, topic: str, partition: int) -> tuple[int, tuple[int, ...]]:
    """(leader, isr) as the brokers' metadata says."""
    info = admin.describe_topics([topic])[topic].partitions[partition]
    return info.leader, tuple(info.isr)


def fetch_error_at(cluster: LocalCluster, topic: str, partition: int, offset: int) -> int | None:
    """What a confluent-kafka consumer gets fetching `offset` with auto.offset.reset=error:
    None if it reads a record there, else the error code (an out-of-range offset gives
    _AUTO_OFFSET_RESET)."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"probe-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is None:
                assert msg.offset() == offset
                return None
            return msg.error().code()
        raise AssertionError(f"no answer fetching {topic}-{partition} at {offset}")
    finally:
        consumer.close()


def log_files(cluster: LocalCluster, broker_id: int, topic: str, partition: int) -> list[str]:
    directory = cluster.brokers[broker_id].directory / "logs" / f"{topic}-{partition}"
    return sorted(p.name for p in directory.glob("*.log"))


def cli(capsys: pytest.CaptureFixture[str], cluster: LocalCluster, *args: str) -> tuple[int, str]:
    """`epochlog ARGS --bootstrap-server ...` in-process: (exit code, stdout + stderr)."""
    capsys.readouterr()
    code = epochlog_main([*args, "--bootstrap-server", cluster.bootstrap_servers])
    out, err = capsys.readouterr()
    return code, out + " ".join(err.split())


# ------------------------------------------------------------------------ CreatePartitions


def test_confluent_create_partitions_grows_the_topic_for_metadata_and_produce(
    cluster: LocalCluster, admin: Admin
) -> None:
    admin.create_topic("grow-ck", 2, 3)
    ck_admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    checked = ck_admin.create_partitions([CkNewPartitions("grow-ck", 4)], validate_only=True)
    checked["grow-ck"].result(30)
    assert len(admin.describe_topics(["grow-ck"])["grow-ck"].partitions) == 2

    futures = ck_admin.create_partitions(
        [CkNewPartitions("grow-ck", 4, replica_assignment=[[3, 1, 2], [2, 3, 1]])]
    )
    futures["grow-ck"].result(30)
    wait_until(lambda: len(admin.describe_topics(["grow-ck"])["grow-ck"].partitions) == 4)
    parts = admin.describe_topics(["grow-ck"])["grow-ck"].partitions
    assert [p.replicas for p in parts[2:]] == [(3, 1, 2), (2, 3, 1)]
    wait_until(lambda: partition_state(admin, "grow-ck", 3) == (2, (2, 3, 1)), what="ISR of p3")

    # Every broker's metadata has the new partitions (librdkafka asks each in turn).
    for broker in cluster.brokers.values():
        single = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
        topic = single.list_topics("grow-ck", timeout=10).topics["grow-ck"]
        assert sorted(topic.partitions) == [0, 1, 2, 3]

    produce(cluster, "grow-ck", 3, 20)
    assert admin.log_end_offsets([("grow-ck", 3)])[TopicPartition("grow-ck", 3)] == 20

    errors = {
        "shrink": CkNewPartitions("grow-ck", 3),
        "same": CkNewPartitions("grow-ck", 4),
        "unknown broker": CkNewPartitions("grow-ck", 5, replica_assignment=[[1, 2, 9]]),
        "factor": CkNewPartitions("grow-ck", 5, replica_assignment=[[1, 2]]),
        "duplicate": CkNewPartitions("grow-ck", 5, replica_assignment=[[1, 1, 2]]),
        "count": CkNewPartitions("grow-ck", 6, replica_assignment=[[1, 2, 3]]),
        "no topic": CkNewPartitions("no-such-topic", 3),
    }
    expected = {
        "shrink": ck.KafkaError.INVALID_PARTITIONS,
        "same": ck.KafkaError.INVALID_PARTITIONS,
        "unknown broker": ck.KafkaError.INVALID_REPLICA_ASSIGNMENT,
        "factor": ck.KafkaError.INVALID_REPLICA_ASSIGNMENT,
        "duplicate": ck.KafkaError.INVALID_REPLICA_ASSIGNMENT,
        "count": ck.KafkaError.INVALID_REPLICA_ASSIGNMENT,
        "no topic": ck.KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
    for case, spec in errors.items():
        future = ck_admin.create_partitions([spec])[spec.topic]
        with pytest.raises(ck.KafkaException) as raised:
            future.result(30)
        assert raised.value.args[0].code() == expected[case], case
    assert len(admin.describe_topics(["grow-ck"])["grow-ck"].partitions) == 4


def test_kafka_python_and_aiokafka_create_partitions(cluster: LocalCluster, admin: Admin) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewPartitions as AioNewPartitions
    from kafka.admin import KafkaAdminClient

    admin.create_topic("grow-kp", 1, 2)
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        kp.create_partitions({"grow-kp": 3})
        with pytest.raises(Exception, match="InvalidPartitions"):
            kp.create_partitions({"grow-kp": 2})
    finally:
        kp.close()
    wait_until(lambda: len(admin.describe_topics(["grow-kp"])["grow-kp"].partitions) == 3)

    async def aio() -> None:
        client = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await client.start()
        try:
            await client.create_partitions({"grow-kp": AioNewPartitions(5, [[1, 2], [2, 3]])})
        finally:
            await client.close()

    asyncio.run(aio())
    wait_until(lambda: len(admin.describe_topics(["grow-kp"])["grow-kp"].partitions) == 5)
    parts = admin.describe_topics(["grow-kp"])["grow-kp"].partitions
    assert [p.replicas for p in parts[3:]] == [(1, 2), (2, 3)]


def test_epochlog_create_partitions_and_topics_alter(
    cluster: LocalCluster, admin: Admin, capsys: pytest.CaptureFixture[str]
) -> None:
    admin.create_topic("grow-el", 1, 3)
    results = admin.create_partitions({"grow-el": 2, "missing-el": 2})
    assert results["grow-el"] is None
    missing = results["missing-el"]
    assert missing is not None and missing.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    invalid = admin.create_partitions({"grow-el": NewPartitions(3, [[1, 2, 3], [2, 3, 1]])})
    error = invalid["grow-el"]
    assert error is not None and error.code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "Increasing the number of partitions by 1 but 2 assignments" in str(error)

    # kafka-topics' vocabulary: the assignment lists every partition; the new ones are used.
    code, out = cli(
        capsys,
        cluster,
        "topics",
        "alter",
        "--topic",
        "grow-el",
        "--partitions",
        "4",
        "--replica-assignment",
        "1:2:3,2:3:1,3:2:1,2:1:3",
    )
    assert code == 0, out
    assert "grow-el now has 4 partitions" in out
    wait_until(lambda: len(admin.describe_topics(["grow-el"])["grow-el"].partitions) == 4)
    parts = admin.describe_topics(["grow-el"])["grow-el"].partitions
    assert [p.replicas for p in parts[2:]] == [(3, 2, 1), (2, 1, 3)]

    code, out = cli(capsys, cluster, "topics", "alter", "--topic", "grow-el", "--partitions", "2")
    assert code == 2 and "INVALID_PARTITIONS" in out
    code, out = cli(
        capsys,
        cluster,
        "topics",
        "alter",
        "--topic",
        "grow-el",
        "--partitions",
        "5",
        "--replica-assignment",
        "1:2:3,2:x",
    )
    assert code == 2 and "partition 1's replicas '2:x'" in out
    assert len(admin.describe_topics(["grow-el"])["grow-el"].partitions) == 4


# --------------------------------------------------------------------------- DeleteRecords


def test_confluent_delete_records_moves_the_log_start_and_deletes_segments(
    cluster: LocalCluster, admin: Admin
) -> None:
    admin.create_topic("del-ck", 2, 3, {"segment.bytes": str(SEGMENT_BYTES)})
    produce(cluster, "del-ck", 0, 60)
    produce(cluster, "del-ck", 1, 10)
    before = {b: log_files(cluster, b, "del-ck", 0) for b in cluster.brokers}
    assert all(len(files) > 3 for files in before.values()), before

    ck_admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = ck_admin.delete_records(
        [ck.TopicPartition("del-ck", 0, 40), ck.TopicPartition("del-ck", 1, -1)]
    )
    low = {tp.partition: f.result(30).low_watermark for tp, f in futures.items()}
    assert low == {0: 40, 1: 10}

    starts = admin.log_start_offsets([("del-ck", 0), ("del-ck", 1)])
    assert starts == {TopicPartition("del-ck", 0): 40, TopicPartition("del-ck", 1): 10}
    assert fetch_error_at(cluster, "del-ck", 0, 39) == ck.KafkaError._AUTO_OFFSET_RESET
    assert fetch_error_at(cluster, "del-ck", 0, 40) is None

    # Every replica followed (the answer waited for them) and dropped whole segments below 40.
    for broker_id in cluster.brokers:
        files = log_files(cluster, broker_id, "del-ck", 0)
        assert len(files) < len(before[broker_id]), (broker_id, files)
        assert int(files[0].removesuffix(".log")) <= 40

    beyond = ck_admin.delete_records([ck.TopicPartition("del-ck", 0, 61)])
    with pytest.raises(ck.KafkaException) as raised:
        next(iter(beyond.values())).result(30)
    assert raised.value.args[0].code() == ck.KafkaError.OFFSET_OUT_OF_RANGE
    assert admin.log_start_offsets([("del-ck", 0)])[TopicPartition("del-ck", 0)] == 40


def test_kafka_python_aiokafka_and_epochlog_delete_records(
    cluster: LocalCluster, admin: Admin, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.structs import TopicPartition as AioTopicPartition
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient

    admin.create_topic("del-many", 4, 2)
    for p in range(4):
        produce(cluster, "del-many", p, 10)

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        answer = kp.delete_records({KpTopicPartition("del-many", 0): 3})
    finally:
        kp.close()
    assert answer[KpTopicPartition("del-many", 0)]["low_watermark"] == 3

    async def aio() -> dict[AioTopicPartition, int]:
        client = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await client.start()
        try:
            return await client.delete_records(
                {AioTopicPartition("del-many", 1): RecordsToDelete(before_offset=4)}
            )
        finally:
            await client.close()

    assert asyncio.run(aio()) == {AioTopicPartition("del-many", 1): 4}

    results = admin.delete_records({("del-many", 2): 5, ("del-many", 3): 11})
    assert results[TopicPartition("del-many", 2)].low_watermark == 5
    beyond = results[TopicPartition("del-many", 3)].error
    assert beyond is not None and beyond.code is ErrorCode.OFFSET_OUT_OF_RANGE

    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": "del-many", "partition": 3, "offset": 6},
                    {"topic": "del-many", "partition": 0, "offset": -1},
                ],
                "version": 1,
            }
        )
    )
    code, out = cli(capsys, cluster, "records", "delete", "--offset-json-file", str(offsets))
    assert code == 0, out
    assert "partition: del-many-3\tlow_watermark: 6" in out
    assert "partition: del-many-0\tlow_watermark: 10" in out

    offsets.write_text('{"partitions": [{"topic": "del-many", "partition": 1}], "version": 1}')
    code, out = cli(capsys, cluster, "records", "delete", "--offset-json-file", str(offsets))
    assert code == 2 and "partitions[0] needs 'offset'" in out
    starts = admin.log_start_offsets([("del-many", p) for p in range(4)])
    assert [starts[TopicPartition("del-many", p)] for p in range(4)] == [10, 4, 5, 6]


def test_delete_records_survives_a_leader_kill(cluster: LocalCluster, admin: Admin) -> None:
    admin.create_topic("del-failover", 1, 3)
    produce(cluster, "del-failover", 0, 30)
    wait_until(lambda: len(partition_state(admin, "del-failover", 0)[1]) == 3)
    deleted = admin.delete_records({("del-failover", 0): 12})
    assert deleted[TopicPartition("del-failover", 0)].low_watermark == 12
    old_leader, _ = partition_state(admin, "del-failover", 0)

    cluster.kill_broker(old_leader)
    try:
        wait_until(
            lambda: partition_state(admin, "del-failover", 0)[0] not in (old_leader, -1),
            what="a new leader",
        )
        new_leader, _ = partition_state(admin, "del-failover", 0)
        assert admin.log_start_offsets([("del-failover", 0)]) == {
            TopicPartition("del-failover", 0): 12
        }
        assert fetch_error_at(cluster, "del-failover", 0, 11) == ck.KafkaError._AUTO_OFFSET_RESET
        assert fetch_error_at(cluster, "del-failover", 0, 12) is None
        # The new leader moves it further, and answers once the remaining follower has it.
        moved = admin.delete_records({("del-failover", 0): 20})
        assert moved[TopicPartition("del-failover", 0)].low_watermark == 20
        assert new_leader != old_leader
    finally:
        cluster.start_broker(old_leader)
    wait_until(lambda: len(partition_state(admin, "del-failover", 0)[1]) == 3, 60, "full ISR")


def test_delete_records_survives_a_restart_through_the_checkpoint(
    cluster: LocalCluster, admin: Admin
) -> None:
    # One replica: nobody else can tell the restarted broker where its log starts.
    admin.create_topics([NewTopic("del-restart", replica_assignment={0: [2]})])
    wait_until(lambda: partition_state(admin, "del-restart", 0)[0] == 2)
    produce(cluster, "del-restart", 0, 25)
    answer = admin.delete_records({("del-restart", 0): 17})
    assert answer[TopicPartition("del-restart", 0)].low_watermark == 17
    checkpoint = cluster.brokers[2].directory / "logs" / "log-start-offset-checkpoint"
    wait_until(lambda: OffsetCheckpointFile(checkpoint).read().get(("del-restart", 0)) == 17)

    cluster.kill_broker(2)  # no clean shutdown: only the checkpoint written at the delete
    cluster.start_broker(2)
    wait_until(lambda: partition_state(admin, "del-restart", 0)[0] == 2, 60, "broker 2 leads")
    assert admin.log_start_offsets([("del-restart", 0)]) == {TopicPartition("del-restart", 0): 17}
    assert fetch_error_at(cluster, "del-restart", 0, 16) == ck.KafkaError._AUTO_OFFSET_RESET
    assert fetch_error_at(cluster, "del-restart", 0, 17) is None


# ---------------------------------------------------------------------------- ElectLeaders


def test_preferred_election_from_confluent_kafka_and_kafka_python(
    cluster: LocalCluster, admin: Admin, capsys: pytest.CaptureFixture[str]
) -> None:
    from kafka.admin import KafkaAdminClient

    admin.create_topics([NewTopic("elect-pref", replica_assignment={0: [1, 2, 3], 1: [1, 3, 2]})])
    wait_until(lambda: partition_state(admin, "elect-pref", 0) == (1, (1, 2, 3)))
    wait_until(lambda: len(partition_state(admin, "elect-pref", 1)[1]) == 3)
    cluster.stop_broker(1)  # controlled shutdown: leadership moves to 2 and 3
    cluster.start_broker(1)
    wait_until(
        lambda: all(len(partition_state(admin, "elect-pref", p)[1]) == 3 for p in (0, 1)),
        60,
        "broker 1 back in both ISRs",
    )
    assert partition_state(admin, "elect-pref", 0)[0] != 1

    ck_admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    result = ck_admin.elect_leaders(
        ck.ElectionType.PREFERRED,
        [ck.TopicPartition("elect-pref", 0), ck.TopicPartition("elect-pref", 7)],
    ).result(30)
    errors = {tp.partition: (e.code() if e is not None else None) for tp, e in result.items()}
    assert errors == {0: None, 7: ck.KafkaError.UNKNOWN_TOPIC_OR_PART}
    wait_until(lambda: partition_state(admin, "elect-pref", 0)[0] == 1)

    again = ck_admin.elect_leaders(
        ck.ElectionType.PREFERRED, [ck.TopicPartition("elect-pref", 0)]
    ).result(30)
    assert [e.code() for e in again.values()] == [ck.KafkaError.ELECTION_NOT_NEEDED]

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        kp.elect_leaders(0, {"elect-pref": [1]})  # ELECTION_NOT_NEEDED is ignored by kafka-python
    finally:
        kp.close()
    wait_until(lambda: partition_state(admin, "elect-pref", 1)[0] == 1)

    code, out = cli(
        capsys, cluster, "leaders", "elect", "--election-type", "preferred", "--topic", "elect-pref"
    )
    assert code == 0, out
    assert "Valid replica already elected for partitions elect-pref-0, elect-pref-1" in out
    assert "2 of 2 partitions are led by their preferred replica" in out


def test_unclean_election_from_the_cli_and_epochlog_admin(
    cluster: LocalCluster, admin: Admin, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two brokers that are not the controller, so killing them moves no controller.
    controller = cluster.controller_id()
    first, second = [b for b in sorted(cluster.brokers) if b != controller][:2]
    admin.create_topics([NewTopic("elect-unclean", replica_assignment={0: [first, second]})])
    wait_until(lambda: partition_state(admin, "elect-unclean", 0) == (first, (first, second)))
    produce(cluster, "elect-unclean", 0, 5)
    try:
        cluster.kill_broker(second)  # the follower leaves the ISR ...
        wait_until(lambda: partition_state(admin, "elect-unclean", 0)[1] == (first,), 30, "ISR")
        cluster.kill_broker(first)  # ... then the last ISR member dies: no leader
        wait_until(lambda: partition_state(admin, "elect-unclean", 0)[0] == -1, 30, "leaderless")
        cluster.start_broker(second)
        time.sleep(1)
        assert partition_state(admin, "elect-unclean", 0)[0] == -1  # not in the ISR

        preferred = admin.elect_leaders(ElectionType.PREFERRED, [("elect-unclean", 0)])
        error = preferred[TopicPartition("elect-unclean", 0)]
        assert error is not None and error.code is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE

        code, out = cli(
            capsys,
            cluster,
            "leaders",
            "elect",
            "--election-type",
            "unclean",
            "--topic",
            "elect-unclean",
            "--partition",
            "0",
        )
        assert code == 0, out
        assert (
            "Successfully completed leader election (UNCLEAN) for partitions elect-unclean-0" in out
        )
        wait_until(lambda: partition_state(admin, "elect-unclean", 0) == (second, (second,)))
        again = admin.elect_leaders(ElectionType.UNCLEAN, [("elect-unclean", 0)])
        not_needed = again[TopicPartition("elect-unclean", 0)]
        assert not_needed is not None and not_needed.code is ErrorCode.ELECTION_NOT_NEEDED
        ck_admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        from_ck = ck_admin.elect_leaders(
            ck.ElectionType.UNCLEAN, [ck.TopicPartition("elect-unclean", 0)]
        ).result(30)
        assert [e.code() for e in from_ck.values()] == [ck.KafkaError.ELECTION_NOT_NEEDED]
    finally:
        for broker_id in (first, second):
            if not cluster.brokers[broker_id].is_running():
                cluster.start_broker(broker_id)
    wait_until(lambda: len(partition_state(admin, "elect-unclean", 0)[1]) == 2, 60, "ISR back")


def test_leaders_elect_refuses_bad_input(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = cli(capsys, cluster, "leaders", "elect", "--election-type", "preferred")
    assert code == 2 and "exactly one of --topic, --all-topic-partitions" in out
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, out = cli(
        capsys,
        cluster,
        "leaders",
        "elect",
        "--election-type",
        "preferred",
        "--path-to-json-file",
        str(bad),
    )
    assert code == 2 and "is not JSON" in out


def test_elect_leaders_of_every_partition(
    cluster: LocalCluster, admin: Admin, capsys: pytest.CaptureFixture[str]
) -> None:
    short: list[str] = []

    def whole() -> bool:
        topics = admin.describe_topics(admin.list_topics(include_internal=True))
        short[:] = [
            f"{t.name}-{p.partition} leader {p.leader} replicas {p.replicas} isr {p.isr}"
            for t in topics.values()
            for p in t.partitions
            if len(p.isr) != len(p.replicas)
        ]
        return not short

    try:
        wait_until(whole, 90)
    except AssertionError:
        raise AssertionError(f"not in full ISR after 90 s: {short}") from None
    code, out = cli(
        capsys,
        cluster,
        "leaders",
        "elect",
        "--election-type",
        "preferred",
        "--all-topic-partitions",
    )
    assert code == 0, out
    # Every partition is led by its preferred replica now: nothing is left to elect, and an
    # election of all partitions leaves out those that needed none.
    assert admin.elect_leaders(ElectionType.PREFERRED) == {}
    topics = admin.describe_topics(admin.list_topics(include_internal=True))
    assert all(p.leader == p.replicas[0] for t in topics.values() for p in t.partitions)
