"""Consumer groups with the real clients: subscribe, rebalance, commit, resume, admin.

One 3-broker cluster for the module (group.initial.rebalance.delay.ms 300 ms so joins are quick;
5 offsets partitions). Every test uses its own topic and group. What each client does is what
an application does: confluent-kafka (librdkafka), kafka-python, aiokafka and kcat subscribe
with a group id, read, commit, and a second consumer of the group starts where the first
committed."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from epochlog.client import Admin
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import wait_until_brokers_name_the_controller

PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("groups"),
        3,
        broker_config={
            "group.initial.rebalance.delay.ms": 300,
            "offsets.topic.num.partitions": 5,
            "group.min.session.timeout.ms": 1000,
        },
    )
    local.start()
    wait_until_brokers_name_the_controller([b.port for b in local.brokers.values()])
    yield local
    local.close()


def make_topic(cluster: LocalCluster, name: str, records: int = 40) -> list[bytes]:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(name, PARTITIONS, 3)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    values = [f"{name}-{i}".encode() for i in range(records)]
    for i, value in enumerate(values):
        producer.produce(name, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return values


def confluent_consumer(cluster: LocalCluster, group: str, **conf: object) -> ck.Consumer:
    return ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            **conf,
        }
    )


def poll_values(consumer: ck.Consumer, count: int, timeout_s: float = 30) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    return got


def test_confluent_kafka_subscribes_commits_and_a_new_member_resumes_there(cluster) -> None:
    values = make_topic(cluster, "ck-resume")
    first = confluent_consumer(cluster, "ck-resume-g")
    first.subscribe(["ck-resume"])
    assert sorted(poll_values(first, len(values))) == sorted(values)
    first.commit(asynchronous=False)
    committed = first.committed([ck.TopicPartition("ck-resume", p) for p in range(4)], 10)
    assert sum(tp.offset for tp in committed) == len(values)
    first.close()  # LeaveGroup
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(8):
        producer.produce("ck-resume", b"later-%d" % i, partition=i % PARTITIONS)
    producer.flush(10)
    second = confluent_consumer(cluster, "ck-resume-g")
    second.subscribe(["ck-resume"])
    assert sorted(poll_values(second, 8)) == sorted(b"later-%d" % i for i in range(8))
    assert poll_values(second, 1, timeout_s=2) == []  # nothing read twice
    second.close()


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_members_share_the_partitions_and_take_over_when_one_leaves(
    cluster, strategy
) -> None:
    topic = f"share-{strategy}"
    make_topic(cluster, topic, records=0)
    members = [
        confluent_consumer(cluster, f"{topic}-g", **{"partition.assignment.strategy": strategy})
        for _ in range(3)
    ]
    for member in members:
        member.subscribe([topic])

    def assignments() -> list[set[int]]:
        for member in members:
            member.poll(0.1)
        return [{tp.partition for tp in member.assignment()} for member in members]

    deadline = time.monotonic() + 30
    while True:
        owned = assignments()
        if all(owned) and sum(len(o) for o in owned) == PARTITIONS:
            break
        assert time.monotonic() < deadline, f"not all assigned: {owned}"
    assert set().union(*owned) == set(range(PARTITIONS))
    members.pop().close()
    deadline = time.monotonic() + 30
    while True:
        owned = assignments()
        if sum(len(o) for o in owned) == PARTITIONS and set().union(*owned) == set(
            range(PARTITIONS)
        ):
            break
        assert time.monotonic() < deadline, f"the leaver's partitions were not taken: {owned}"
    for member in members:
        member.close()


def test_a_static_member_restarting_keeps_its_partitions_without_a_rebalance(cluster) -> None:
    make_topic(cluster, "static", records=0)
    conf = {"group.instance.id": "instance-a", "session.timeout.ms": 10000}
    first = confluent_consumer(cluster, "static-g", **conf)
    first.subscribe(["static"])
    deadline = time.monotonic() + 30
    while not first.assignment():
        first.poll(0.2)
        assert time.monotonic() < deadline
    before = describe(cluster, "static-g")
    first.close()  # a static member's close does not leave the group
    second = confluent_consumer(cluster, "static-g", **conf)
    second.subscribe(["static"])
    deadline = time.monotonic() + 30
    while not second.assignment():
        second.poll(0.2)
        assert time.monotonic() < deadline
    after = describe(cluster, "static-g")
    assert {tp.partition for tp in second.assignment()} == set(range(PARTITIONS))
    assert before.state.name == after.state.name == "STABLE"
    assert [m.group_instance_id for m in after.members] == ["instance-a"]
    second.close()


def describe(cluster: LocalCluster, group: str):  # noqa: ANN201 - confluent's type
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    return admin.describe_consumer_groups([group])[group].result(timeout=10)


def test_assign_consumers_commit_under_a_group_without_joining(cluster) -> None:
    values = make_topic(cluster, "assigned")
    consumer = confluent_consumer(cluster, "assigned-g")
    consumer.assign([ck.TopicPartition("assigned", p, 0) for p in range(PARTITIONS)])
    assert len(poll_values(consumer, len(values))) == len(values)
    consumer.commit(asynchronous=False)
    consumer.close()
    again = confluent_consumer(cluster, "assigned-g")
    committed = again.committed([ck.TopicPartition("assigned", p) for p in range(PARTITIONS)], 10)
    assert [tp.offset for tp in committed] == [len(values) // PARTITIONS] * PARTITIONS
    again.close()


def test_kafka_python_subscribes_commits_and_resumes(cluster) -> None:
    from kafka import KafkaConsumer, TopicPartition

    values = make_topic(cluster, "kp")
    for api_version in (None, (2, 5, 0)):  # negotiated, and pinned as users often do
        group = f"kp-g-{api_version}"
        consumer = KafkaConsumer(
            "kp",
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=15000,
            api_version=api_version,
        )
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == len(values):
                break
        assert sorted(got) == sorted(values)
        consumer.commit()
        total = sum(consumer.committed(TopicPartition("kp", p)) for p in range(PARTITIONS))
        assert total == len(values)
        consumer.close()


def test_aiokafka_subscribes_and_commits(cluster) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    values = make_topic(cluster, "aio")

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            "aio",
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="aio-g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            got = []
            async with asyncio.timeout(30):
                async for message in consumer:
                    got.append(message.value)
                    if len(got) == len(values):
                        break
            assert sorted(got) == sorted(values)
            await consumer.commit()
            committed = [await consumer.committed(TopicPartition("aio", p)) for p in range(4)]
            assert sum(committed) == len(values)
        finally:
            await consumer.stop()

    asyncio.run(run())


def test_kcat_consumes_as_a_group_member(cluster) -> None:
    values = make_topic(cluster, "kcat-g-topic")
    out = subprocess.run(
        [
            "kcat",
            "-b",
            cluster.bootstrap_servers,
            "-G",
            "kcat-g",
            "-X",
            "auto.offset.reset=earliest",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%s\\n",
            "kcat-g-topic",
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert sorted(out.stdout.split()) == sorted(values)
    committed = confluent_consumer(cluster, "kcat-g").committed(
        [ck.TopicPartition("kcat-g-topic", p) for p in range(PARTITIONS)], 10
    )
    assert sum(tp.offset for tp in committed) == len(values)  # kcat auto-commits


def test_the_admin_api_lists_describes_and_deletes_groups(cluster) -> None:
    make_topic(cluster, "adm", records=4)
    consumer = confluent_consumer(cluster, "adm-g")
    consumer.subscribe(["adm"])
    poll_values(consumer, 4)
    consumer.commit(asynchronous=False)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    listed = admin.list_consumer_groups().result(timeout=10)
    assert "adm-g" in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups(["adm-g"])["adm-g"].result(timeout=10)
    assert described.state.name == "STABLE" and len(described.members) == 1
    offsets = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions("adm-g")])
    partitions = offsets["adm-g"].result(timeout=10).topic_partitions
    assert sum(tp.offset for tp in partitions) == 4
    with pytest.raises(ck.KafkaException, match="NON_EMPTY_GROUP"):
        admin.delete_consumer_groups(["adm-g"])["adm-g"].result(timeout=10)
    consumer.close()
    admin.delete_consumer_groups(["adm-g"])["adm-g"].result(timeout=10)
    listed = admin.list_consumer_groups().result(timeout=10)
    assert "adm-g" not in {g.group_id for g in listed.valid}


def test_kafka_python_admin_manages_topics_and_reads_groups(cluster) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    make_topic(cluster, "kp-admin", records=4)
    consumer = confluent_consumer(cluster, "kp-admin-g")
    consumer.subscribe(["kp-admin"])
    poll_values(consumer, 4)
    consumer.commit(asynchronous=False)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_topics([NewTopic("kp-admin-new", 2, 3)])
        assert "kp-admin-new" in admin.list_topics()
        assert "kp-admin-g" in {g["group_id"] for g in admin.list_groups()}
        group = admin.describe_groups(["kp-admin-g"])["kp-admin-g"]
        assert group["group_state"] == "Stable" and len(group["members"]) == 1
        assignment = group["members"][0]["member_assignment"]["assigned_partitions"]
        assert assignment == [{"topic": "kp-admin", "partitions": list(range(PARTITIONS))}]
        offsets = admin.list_group_offsets({"kp-admin-g": None})["kp-admin-g"]
        assert sum(meta.offset for meta in offsets.values()) == 4
        admin.delete_topics(["kp-admin-new"])
    finally:
        admin.close()
        consumer.close()


def test_aiokafka_admin_manages_topics_and_reads_groups(cluster) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    make_topic(cluster, "aio-admin", records=4)
    consumer = confluent_consumer(cluster, "aio-admin-g")
    consumer.subscribe(["aio-admin"])
    poll_values(consumer, 4)
    consumer.commit(asynchronous=False)

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic("aio-admin-new", 2, 3)])
            assert "aio-admin-new" in await admin.list_topics()
            groups = await admin.list_consumer_groups()
            assert "aio-admin-g" in {g[0] for g in groups}
            offsets = await admin.list_consumer_group_offsets("aio-admin-g")
            assert sum(meta.offset for meta in offsets.values()) == 4
            await admin.delete_topics(["aio-admin-new"])
        finally:
            await admin.close()

    try:
        asyncio.run(run())
    finally:
        consumer.close()
