"""Client quotas on a 2-broker cluster: AlterClientQuotas / DescribeClientQuotas as kafka-python
encodes them (its own codec of Kafka's JSON; neither kafka-python, confluent-kafka nor aiokafka
has a public client-quota admin call), epochlog's admin client and `epochlog configs`, stored
in Kafka's znodes; and byte rates enforced on confluent-kafka producers and consumers, which
report the broker's throttle_time_ms in their statistics.

The brokers keep 3 quota windows of 1 s (quota.window.num=3, Kafka's default is 11) so the
burst a quota allows before throttling (2 windows' worth) is small and each run takes seconds.
Quotas are altered through the broker that does not lead the topic: the leader enforces them
only through the change notification.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)

from epochlog.client import Admin, KafkaError
from epochlog.client.admin_quotas import QuotaFilter
from epochlog.node.local_cluster import LocalCluster
from epochlog.zk.session import close_client, connect

QUOTA = 50 * 1024  # bytes per second
RECORD = b"x" * 1000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("client-quotas"), 2, broker_config={"quota.window.num": 3}
    )
    local.start()
    yield local
    local.close()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as client:
        yield client


@pytest.fixture(scope="module")
def kp_admin(cluster: LocalCluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield client
    client.close()


def kp_send(kp: KafkaAdminClient, request: Any, node_id: int) -> Any:
    deadline = time.monotonic() + 30
    # A broker its metadata does not list yet (just after the cluster started): ask again.
    while kp._manager.cluster.broker_metadata(node_id) is None:
        assert time.monotonic() < deadline, f"kafka-python never learned broker {node_id}"
        kp._manager.run(kp._manager.cluster.refresh_metadata)
        time.sleep(0.1)

    async def send() -> Any:  # run by kafka-python's own event loop
        return await kp._manager.send(request, node_id=node_id)

    return kp._manager.run(send)


def kp_alter(
    kp: KafkaAdminClient,
    node_id: int,
    entity: list[tuple[str, str | None]],
    ops: dict[str, float | None],
    validate_only: bool = False,
) -> Any:
    R = AlterClientQuotasRequest
    request = R(
        entries=[
            R.EntryData(
                entity=[R.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=[
                    R.EntryData.OpData(key=k, value=v or 0.0, remove=v is None)
                    for k, v in ops.items()
                ],
            )
        ],
        validate_only=validate_only,
    )
    return kp_send(kp, request, node_id)


def kp_describe(
    kp: KafkaAdminClient, node_id: int, components: list[tuple[str, int, str | None]], strict: bool
) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    R = DescribeClientQuotasRequest
    request = R(
        components=[
            R.ComponentData(entity_type=t, match_type=mt, match=m) for t, mt, m in components
        ],
        strict=strict,
    )
    response = kp_send(kp, request, node_id)
    assert response.error_code == 0, response.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


def znode(cluster: LocalCluster, path: str) -> Any:
    client = connect(cluster.zk_connect or "", session_timeout_ms=4000)
    try:
        data, _ = client.get(path)
        return json.loads(data)
    finally:
        close_client(client)


def change_notifications(cluster: LocalCluster) -> list[str]:
    client = connect(cluster.zk_connect or "", session_timeout_ms=4000)
    try:
        return [
            json.loads(client.get(f"/config/changes/{c}")[0])["entity_path"]
            for c in sorted(client.get_children("/config/changes"))
        ]
    finally:
        close_client(client)


def changes_applied(cluster: LocalCluster, entity_path: str) -> list[int]:
    """How many changes of the entity each broker has applied: it logs each one it handles."""
    line = f": {entity_path} = "
    return [b.log_path.read_text(errors="replace").count(line) for b in cluster.brokers.values()]


def applied_everywhere(cluster: LocalCluster, entity_path: str, change: Callable[[], Any]) -> Any:
    """Make the change, then wait until every broker has applied it: a broker enforces a quota
    once its change notification arrives, a few hundred milliseconds after the write."""
    before = changes_applied(cluster, entity_path)
    result = change()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        after = changes_applied(cluster, entity_path)
        if all(a > b for a, b in zip(after, before, strict=True)):
            return result
        time.sleep(0.05)
    raise AssertionError(f"{entity_path}: not applied by every broker ({before} -> {after})")


def leader_of(cluster: LocalCluster, topic: str) -> int:
    probe = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "probe"})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            partitions = probe.list_topics(topic, timeout=10).topics[topic].partitions
            if partitions and partitions[0].leader >= 0:
                return int(partitions[0].leader)
            time.sleep(0.2)
        raise AssertionError(f"{topic} has no leader")
    finally:
        probe.close()


def make_topic(cluster: LocalCluster, admin: Admin, name: str) -> tuple[int, int]:
    """`name` with one partition on one replica: (its leader, the other broker)."""
    admin.create_topic(name, 1, 1)
    leader = leader_of(cluster, name)
    return leader, next(b for b in cluster.brokers if b != leader)


class Throttles:
    """The largest throttle time librdkafka's statistics reported for any broker."""

    def __init__(self) -> None:
        self.max_ms = 0

    def __call__(self, stats_json: str) -> None:
        stats = json.loads(stats_json)
        for broker in stats.get("brokers", {}).values():
            self.max_ms = max(self.max_ms, int(broker.get("throttle", {}).get("max", 0)))


def produce(cluster: LocalCluster, topic: str, client_id: str, count: int) -> tuple[float, int]:
    """(bytes per second until the last delivery, the largest throttle time reported)."""
    throttles = Throttles()
    producer = ck.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "client.id": client_id,
            "batch.size": 10_000,  # ~10 records a request, so the rate shows request by request
            "linger.ms": 1,
            "acks": 1,
            "statistics.interval.ms": 200,
            "stats_cb": throttles,
        }
    )
    start = time.monotonic()
    for _ in range(count):
        producer.produce(topic, RECORD)
        producer.poll(0)
    assert producer.flush(120) == 0
    elapsed = time.monotonic() - start
    # let one more statistics interval report the last throttle
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        producer.poll(0.1)
    return count * len(RECORD) / elapsed, throttles.max_ms


def consume(cluster: LocalCluster, topic: str, client_id: str, count: int) -> tuple[float, int]:
    throttles = Throttles()
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "client.id": client_id,
            "group.id": f"g-{client_id}",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": throttles,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        received = 0
        start = time.monotonic()
        deadline = start + 120
        while received < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received += 1
        elapsed = time.monotonic() - start
        assert received == count
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            consumer.poll(0.1)
        return count * len(RECORD) / elapsed, throttles.max_ms
    finally:
        consumer.close()


def test_quotas_are_altered_and_described_as_kafka_stores_them(
    cluster: LocalCluster, kp_admin: KafkaAdminClient
) -> None:
    one, two = sorted(cluster.brokers)
    answer = kp_alter(kp_admin, one, [("client-id", "kp app")], {"producer_byte_rate": 1024.0})
    assert answer.entries[0].error_code == 0
    answer = kp_alter(
        kp_admin,
        one,
        [("user", "alice"), ("client-id", None)],
        {"request_percentage": 12.5, "consumer_byte_rate": 2048.0},
    )
    assert answer.entries[0].error_code == 0
    answer = kp_alter(kp_admin, one, [("user", None)], {"consumer_byte_rate": 4096.0})
    assert answer.entries[0].error_code == 0

    assert znode(cluster, "/config/clients/kp%20app") == {
        "version": 1,
        "config": {"producer_byte_rate": "1024"},
    }
    assert znode(cluster, "/config/users/alice/clients/<default>")["config"] == {
        "request_percentage": "12.5",
        "consumer_byte_rate": "2048",
    }
    assert {"clients/kp%20app", "users/alice/clients/<default>", "users/<default>"} <= set(
        change_notifications(cluster)
    )

    # Read back through the other broker, with each match type.
    assert kp_describe(kp_admin, two, [("client-id", 0, "kp app")], strict=True) == {
        (("client-id", "kp app"),): {"producer_byte_rate": 1024.0}
    }
    assert kp_describe(kp_admin, two, [("user", 1, None)], strict=True) == {
        (("user", None),): {"consumer_byte_rate": 4096.0}
    }
    assert kp_describe(kp_admin, two, [("user", 2, None)], strict=False) == {
        (("user", None),): {"consumer_byte_rate": 4096.0},
        (("user", "alice"), ("client-id", None)): {
            "request_percentage": 12.5,
            "consumer_byte_rate": 2048.0,
        },
    }

    # Removal: the entity disappears from describe once it holds no quota.
    answer = kp_alter(kp_admin, two, [("client-id", "kp app")], {"producer_byte_rate": None})
    assert answer.entries[0].error_code == 0
    assert kp_describe(kp_admin, one, [("client-id", 0, "kp app")], strict=True) == {}
    for entity, key in (
        ([("user", "alice"), ("client-id", None)], "request_percentage"),
        ([("user", "alice"), ("client-id", None)], "consumer_byte_rate"),
        ([("user", None)], "consumer_byte_rate"),
    ):
        assert kp_alter(kp_admin, one, entity, {key: None}).entries[0].error_code == 0
    assert kp_describe(kp_admin, one, [], strict=False) == {}


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([("client-id", "x")], {"producer_bytes_rate": 5.0}, "Invalid configuration key"),
        ([("client-id", "x")], {"producer_byte_rate": 10.5}, "must be a LONG value"),
        ([("client-id", "x")], {"consumer_byte_rate": -5.0}, "must be positive"),
        ([("topic", "x")], {"producer_byte_rate": 5.0}, "Unhandled client quota entity type"),
        ([("user", "")], {"producer_byte_rate": 5.0}, "Empty user not supported"),
    ],
)
def test_bad_alterations_are_invalid_request_and_change_nothing(
    cluster: LocalCluster,
    kp_admin: KafkaAdminClient,
    entity: list[tuple[str, str | None]],
    ops: dict[str, float | None],
    message: str,
) -> None:
    answer = kp_alter(kp_admin, min(cluster.brokers), entity, ops).entries[0]
    assert answer.error_code == 42  # INVALID_REQUEST
    assert message in answer.error_message
    assert kp_describe(kp_admin, min(cluster.brokers), [], strict=False) == {}


def test_validate_only_writes_nothing(cluster: LocalCluster, admin: Admin) -> None:
    entity = (("client-id", "validated"),)
    admin.alter_client_quotas({entity: {"producer_byte_rate": 100.0}}, validate_only=True)
    assert admin.describe_client_quotas([QuotaFilter.exact("client-id", "validated")]) == {}
    with pytest.raises(KafkaError, match="producer_byte_rate must be a LONG value"):
        admin.alter_client_quotas({entity: {"producer_byte_rate": 0.5}}, validate_only=True)


def test_a_producer_over_its_quota_is_throttled_and_others_are_not(
    cluster: LocalCluster, admin: Admin, kp_admin: KafkaAdminClient
) -> None:
    leader, other = make_topic(cluster, admin, "quota-produce")
    answer = applied_everywhere(
        cluster,
        "clients/slow-writer",
        lambda: kp_alter(
            kp_admin, other, [("client-id", "slow-writer")], {"producer_byte_rate": QUOTA}
        ),
    )
    assert answer.entries[0].error_code == 0

    rate, throttle_ms = produce(cluster, "quota-produce", "slow-writer", 500)
    assert throttle_ms > 0
    assert rate < 2 * QUOTA, f"{rate / 1024:.0f} KB/s under a {QUOTA // 1024} KB/s quota"

    # Another client, never under a quota, produces at full speed.
    removal = {(("client-id", "slow-writer"),): {"producer_byte_rate": None}}
    applied_everywhere(cluster, "clients/slow-writer", lambda: admin.alter_client_quotas(removal))
    free_rate, free_throttle_ms = produce(cluster, "quota-produce", "free-writer", 500)
    assert free_throttle_ms == 0
    assert free_rate > 2 * QUOTA

    _, throttle_ms = produce(cluster, "quota-produce", "slow-writer", 500)
    assert throttle_ms == 0


def test_an_old_producer_under_a_user_and_client_quota_gets_delayed_answers(
    cluster: LocalCluster, admin: Admin
) -> None:
    """kafka-python pinned to Kafka 1.0 sends Produce v5, whose clients do not hold back by
    themselves: the broker delays each throttled answer. The quota is set for the user every
    unauthenticated connection has, ANONYMOUS, with this client id."""
    make_topic(cluster, admin, "quota-old-produce")
    entity = (("user", "ANONYMOUS"), ("client-id", "old-writer"))
    applied_everywhere(
        cluster,
        "users/ANONYMOUS/clients/old-writer",
        lambda: admin.alter_client_quotas({entity: {"producer_byte_rate": QUOTA}}),
    )
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        client_id="old-writer",
        api_version=(1, 0),
        acks=1,
        batch_size=10_000,
        linger_ms=1,
    )
    try:
        start = time.monotonic()
        for _ in range(400):
            producer.send("quota-old-produce", RECORD)
        producer.flush(120)
        rate = 400 * len(RECORD) / (time.monotonic() - start)
        throttle_max = max(
            (
                value
                for group in producer.metrics().values()
                for name, value in group.items()
                if name == "throttle-time-max" and isinstance(value, float | int)
            ),
            default=0,
        )
    finally:
        producer.close()
        admin.alter_client_quotas({entity: {"producer_byte_rate": None}})
    assert throttle_max > 0
    assert rate < 2 * QUOTA, f"{rate / 1024:.0f} KB/s under a {QUOTA // 1024} KB/s quota"


def test_a_consumer_over_its_quota_is_throttled(cluster: LocalCluster, admin: Admin) -> None:
    make_topic(cluster, admin, "quota-consume")
    produce(cluster, "quota-consume", "filler", 300)
    quota = {(("client-id", "slow-reader"),): {"consumer_byte_rate": QUOTA}}
    applied_everywhere(cluster, "clients/slow-reader", lambda: admin.alter_client_quotas(quota))

    rate, throttle_ms = consume(cluster, "quota-consume", "slow-reader", 300)
    assert throttle_ms > 0
    assert rate < 2 * QUOTA, f"{rate / 1024:.0f} KB/s under a {QUOTA // 1024} KB/s quota"

    _, free_throttle_ms = consume(cluster, "quota-consume", "free-reader", 300)
    assert free_throttle_ms == 0
    admin.alter_client_quotas({(("client-id", "slow-reader"),): {"consumer_byte_rate": None}})


def test_cli_alters_and_describes_quotas_with_kafka_configs_vocabulary(
    cluster: LocalCluster, admin: Admin, capsys: pytest.CaptureFixture[str]
) -> None:
    from epochlog.cli.main import main as epochlog_main

    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
    user_default_client = [
        "--entity-type",
        "users",
        "--entity-name",
        "bob",
        "--entity-type",
        "clients",
        "--entity-default",
    ]
    add = ["--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"]
    assert epochlog_main(["configs", "alter", *user_default_client, *add, *bootstrap]) == 0
    assert admin.describe_client_quotas([QuotaFilter.exact("user", "bob")]) == {
        (("user", "bob"), ("client-id", None)): {
            "producer_byte_rate": 1048576.0,
            "consumer_byte_rate": 2097152.0,
        }
    }
    capsys.readouterr()
    assert epochlog_main(["configs", "describe", "--entity-type", "users", *bootstrap]) == 0
    assert "bob" not in capsys.readouterr().out  # strict: user entities alone
    describe = ["configs", "describe", *user_default_client, *bootstrap]
    assert epochlog_main(describe) == 0
    shown = capsys.readouterr().out
    assert "producer_byte_rate" in shown and "1048576" in shown
    delete = ["--delete-config", "producer_byte_rate,consumer_byte_rate"]
    assert epochlog_main(["configs", "alter", *user_default_client, *delete, *bootstrap]) == 0
    assert admin.describe_client_quotas([QuotaFilter.exact("user", "bob")]) == {}
    bad = ["--add-config", "producer_byte_rate=fast"]
    client = ["--entity-type", "clients", "--entity-name", "c"]
    assert epochlog_main(["configs", "alter", *client, *bad, *bootstrap]) == 2
    unknown = ["--add-config", "producer_bytes_rate=5"]
    assert epochlog_main(["configs", "alter", *client, *unknown, *bootstrap]) == 2
    errors = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert "producer_byte_rate=fast is not a number" in errors
    assert "Invalid configuration key producer_bytes_rate" in errors


def test_aiokafka_and_epochlog_producers_over_their_quota_are_held_to_it(
    cluster: LocalCluster, admin: Admin
) -> None:
    """Neither reads throttle_time_ms into anything a test can see; the broker's muting of
    the connection after each throttled answer holds them to the quota all the same, and
    every record is still acknowledged."""
    from aiokafka import AIOKafkaProducer

    from epochlog.client import Producer

    make_topic(cluster, admin, "quota-other-clients")
    quotas = {
        (("client-id", name),): {"producer_byte_rate": QUOTA}
        for name in ("aio-writer", "epochlog-writer")
    }
    for name in ("aio-writer", "epochlog-writer"):
        one = {(("client-id", name),): quotas[(("client-id", name),)]}
        applied_everywhere(
            cluster, f"clients/{name}", lambda one=one: admin.alter_client_quotas(one)
        )

    async def aiokafka_rate() -> float:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            client_id="aio-writer",
            acks=1,
            max_batch_size=10_000,
            linger_ms=1,
        )
        await producer.start()
        try:
            start = time.monotonic()
            sent = [await producer.send("quota-other-clients", RECORD) for _ in range(400)]
            await asyncio.gather(*sent)
            return 400 * len(RECORD) / (time.monotonic() - start)
        finally:
            await producer.stop()

    rate = asyncio.run(aiokafka_rate())
    assert rate < 2 * QUOTA, f"aiokafka: {rate / 1024:.0f} KB/s under {QUOTA // 1024} KB/s"

    config = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "client.id": "epochlog-writer",
        "acks": 1,
        "batch.size": 10_000,
        "linger.ms": 1,
    }
    with Producer(config) as producer:
        start = time.monotonic()
        futures = [producer.send("quota-other-clients", RECORD) for _ in range(400)]
        for future in futures:
            future.result(120)
        rate = 400 * len(RECORD) / (time.monotonic() - start)
    assert rate < 2 * QUOTA, f"epochlog: {rate / 1024:.0f} KB/s under {QUOTA // 1024} KB/s"
    admin.alter_client_quotas({entity: {"producer_byte_rate": None} for entity in quotas})
