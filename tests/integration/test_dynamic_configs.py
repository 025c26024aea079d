"""Dynamic configs through real clients' admin APIs: DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs from confluent-kafka, kafka-python and aiokafka against one 3-broker
cluster, and each change seen by every broker without a restart.

Topics have 3 partitions on 3 replicas, so their leaders are spread over the brokers: a change
that shows on every partition's produce answer has reached every leader."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from epochlog.client import Admin
from epochlog.client.admin_configs import AlterOp, ConfigOp
from epochlog.client.admin_configs import ConfigResource as EResource
from epochlog.client.admin_configs import ResourceType as EType
from epochlog.testing.cluster import LocalCluster
from tests.integration.interop import wait_until_brokers_name_the_controller

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # Retention runs every half second, so a lowered retention.ms shows at once.
    local = LocalCluster(
        tmp_path_factory.mktemp("dynamic-configs"),
        3,
        broker_config={"log.retention.check.interval.ms": 500},
    )
    local.start()
    wait_until_brokers_name_the_controller([b.port for b in local.brokers.values()])
    yield local
    local.close()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def create_topic(admin: AdminClient, name: str, config: dict[str, str] | None = None) -> None:
    futures = admin.create_topics([NewTopic(name, PARTITIONS, 3, config=config or {})])
    futures[name].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # every partition has a leader
        topic = admin.list_topics(name, timeout=10).topics[name]
        if len(topic.partitions) == PARTITIONS and all(
            p.leader >= 0 for p in topic.partitions.values()
        ):
            return
        time.sleep(0.2)
    raise AssertionError(f"{name} has no leaders")


def describe(admin: AdminClient, kind: object, name: str) -> dict[str, ck.admin.ConfigEntry]:
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(30)


def produce_errors(cluster: LocalCluster, topic: str, size: int, **conf: object) -> list[str]:
    """The delivery error of one record of `size` bytes to each partition ("" when delivered)."""
    producer = ck.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "message.max.bytes": 10_000_000,
            "retries": 0,
            "linger.ms": 0,
            **conf,
        }
    )
    results: dict[int, str] = {}

    def report(err: ck.KafkaError | None, msg: ck.Message) -> None:
        results[msg.partition()] = "" if err is None else err.name()

    for p in range(PARTITIONS):
        producer.produce(topic, b"x" * size, partition=p, on_delivery=report)
    assert producer.flush(30) == 0
    return [results[p] for p in range(PARTITIONS)]


def until(what: str, check: Callable[[], bool], timeout_s: float = 30) -> None:
    """Wait for a change to reach every broker (a ZooKeeper watch away)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"never saw: {what}")


def test_describe_topic_shows_overrides_and_broker_defaults_with_sources(
    admin: AdminClient,
) -> None:
    create_topic(admin, "described", {"retention.ms": "3600000"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "described")
    configs = admin.describe_configs([resource])[resource].result(30)
    retention = configs["retention.ms"]
    assert retention.value == "3600000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert [s.name for s in retention.synonyms.values()][:2] == [
        "retention.ms",
        "log.retention.hours",
    ]
    segment = configs["segment.bytes"]
    assert segment.value == str(1024**3)
    assert segment.source == ConfigSource.DEFAULT_CONFIG.value
    assert not segment.is_read_only


def test_describe_broker_marks_static_configs_read_only(
    admin: AdminClient, cluster: LocalCluster
) -> None:
    configs = describe(admin, ConfigResource.Type.BROKER, "1")
    assert configs["broker.id"].value == "1"
    assert configs["broker.id"].is_read_only
    assert configs["broker.id"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert not configs["log.retention.ms"].is_read_only
    assert configs["zookeeper.connect"].source == ConfigSource.STATIC_BROKER_CONFIG.value


def test_lowered_max_message_bytes_refuses_large_produce_on_every_leader(
    admin: AdminClient, cluster: LocalCluster
) -> None:
    create_topic(admin, "small-records")
    assert produce_errors(cluster, "small-records", 5000) == [""] * PARTITIONS
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "small-records",
        incremental_configs=[
            ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert describe(admin, ConfigResource.Type.TOPIC, "small-records")[
        "max.message.bytes"
    ].value == ("2000")
    until(
        "MSG_SIZE_TOO_LARGE from every leader",
        lambda: (
            produce_errors(cluster, "small-records", 5000) == ["MSG_SIZE_TOO_LARGE"] * PARTITIONS
        ),
    )
    assert produce_errors(cluster, "small-records", 1000) == [""] * PARTITIONS


def test_bad_value_is_invalid_config_and_changes_nothing(admin: AdminClient) -> None:
    create_topic(admin, "bad-values", {"retention.ms": "60000"})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "bad-values",
        incremental_configs=[
            ConfigEntry("retention.ms", "120000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.bytes", "lots", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    with pytest.raises(ck.KafkaException) as raised:
        admin.incremental_alter_configs([resource])[resource].result(30)
    error = raised.value.args[0]
    assert error.code() == ck.KafkaError.INVALID_CONFIG
    assert "segment.bytes" in error.str() and "lots" in error.str()
    unknown = ConfigResource(
        ConfigResource.Type.TOPIC,
        "bad-values",
        incremental_configs=[
            ConfigEntry("retention.mss", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(ck.KafkaException) as raised:
        admin.incremental_alter_configs([unknown])[unknown].result(30)
    assert raised.value.args[0].code() == ck.KafkaError.INVALID_CONFIG
    assert "retention.mss" in raised.value.args[0].str()
    assert describe(admin, ConfigResource.Type.TOPIC, "bad-values")["retention.ms"].value == (
        "60000"
    )


def test_validate_only_changes_nothing(admin: AdminClient) -> None:
    create_topic(admin, "validated")
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "validated",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)
        ],
    )
    admin.incremental_alter_configs([resource], validate_only=True)[resource].result(30)
    configs = describe(admin, ConfigResource.Type.TOPIC, "validated")
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    admin.incremental_alter_configs([resource])[resource].result(30)
    configs = describe(admin, ConfigResource.Type.TOPIC, "validated")
    assert configs["cleanup.policy"].value == "delete,compact"


def test_unknown_topic_and_static_broker_config_are_refused(admin: AdminClient) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, "no-such-topic")
    with pytest.raises(ck.KafkaException) as raised:
        admin.describe_configs([resource])[resource].result(30)
    assert raised.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
    static = ConfigResource(
        ConfigResource.Type.BROKER,
        "2",
        incremental_configs=[
            ConfigEntry("log.dirs", "/tmp/x", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(ck.KafkaException) as raised:
        admin.incremental_alter_configs([static])[static].result(30)
    assert raised.value.args[0].code() == ck.KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically" in raised.value.args[0].str()
    assert describe(admin, ConfigResource.Type.BROKER, "2")["log.dirs"].value != "/tmp/x"


def test_cluster_default_broker_config_reaches_every_broker(
    admin: AdminClient, cluster: LocalCluster
) -> None:
    create_topic(admin, "broker-default")
    # confluent-kafka and kafka-python take no "" broker resource: epochlog's admin client does
    default = EResource(EType.BROKER, "")
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as ours:
        ours.incremental_alter_configs({default: [ConfigOp("message.max.bytes", "3000")]})
    try:
        until(
            "every leader refusing 5000 bytes",
            lambda: (
                produce_errors(cluster, "broker-default", 5000)
                == ["MSG_SIZE_TOO_LARGE"] * PARTITIONS
            ),
        )
        for broker in ("1", "2", "3"):
            entry = describe(admin, ConfigResource.Type.BROKER, broker)["message.max.bytes"]
            assert (entry.value, entry.source) == (
                "3000",
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
            )
        topic_entry = describe(admin, ConfigResource.Type.TOPIC, "broker-default")[
            "max.message.bytes"
        ]
        assert topic_entry.value == "3000"
    finally:
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as ours:
            ours.incremental_alter_configs(
                {default: [ConfigOp("message.max.bytes", None, AlterOp.DELETE)]}
            )
    until(
        "every leader taking 5000 bytes again",
        lambda: produce_errors(cluster, "broker-default", 5000) == [""] * PARTITIONS,
    )


def test_kafka_python_alter_configs_raises_min_insync_replicas(
    admin: AdminClient, cluster: LocalCluster
) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType

    create_topic(admin, "isr-guard", {"retention.ms": "600000"})
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        described = client.describe_configs(
            [KpResource(ConfigResourceType.TOPIC, "isr-guard")], config_filter="all"
        )
        entries = described["topic"]["isr-guard"]
        assert entries["retention.ms"]["value"] == "600000"
        assert entries["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert entries["min.insync.replicas"]["value"] == "1"
        broker = client.describe_configs(
            [KpResource(ConfigResourceType.BROKER, "3")], config_filter="all"
        )
        assert broker["broker"]["3"]["broker.id"]["value"] == "3"
        # AlterConfigs replaces the whole set; kafka-python sends the keys already set with it
        answer = client.alter_configs(
            [KpResource(ConfigResourceType.TOPIC, "isr-guard", {"min.insync.replicas": "4"})],
            incremental=False,
            raise_on_unknown=False,
        )
        assert "isr-guard" in answer["topic"]
    finally:
        client.close()
    configs = describe(admin, ConfigResource.Type.TOPIC, "isr-guard")
    assert configs["min.insync.replicas"].value == "4"
    assert configs["retention.ms"].value == "600000"
    until(
        "NOT_ENOUGH_REPLICAS from every leader",
        lambda: (
            produce_errors(cluster, "isr-guard", 10, acks="all")
            == ["NOT_ENOUGH_REPLICAS"] * PARTITIONS
        ),
    )
    assert produce_errors(cluster, "isr-guard", 10, acks=1) == [""] * PARTITIONS


def test_aiokafka_describes_and_alters_configs(admin: AdminClient, cluster: LocalCluster) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AioResource
    from aiokafka.admin.config_resource import ConfigResourceType as AioType

    create_topic(admin, "aio-configs", {"segment.ms": "600000"})

    async def run() -> tuple[dict[str, str], dict[str, str], int]:
        client = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await client.start()
        try:
            answer = await client.alter_configs(
                [AioResource(AioType.TOPIC, "aio-configs", {"retention.ms": "7200000"})]
            )
            topic = await client.describe_configs([AioResource(AioType.TOPIC, "aio-configs")])
            broker = await client.describe_configs([AioResource(AioType.BROKER, "2")])
        finally:
            await client.close()
        return (
            {c[0]: c[1] for c in topic[0].resources[0][4]},
            {c[0]: c[1] for c in broker[0].resources[0][4]},
            answer[0].resources[0][0],
        )

    topic, broker, error = asyncio.run(run())
    assert error == 0
    assert topic["retention.ms"] == "7200000"
    # AlterConfigs replaces the whole set: segment.ms is back to the broker's default
    assert topic["segment.ms"] == str(7 * 24 * 3_600_000)
    assert broker["broker.id"] == "2"


def test_cli_alters_and_describes_with_kafka_configs_vocabulary(
    admin: AdminClient, cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    from epochlog.cli.main import main as epochlog_main

    create_topic(admin, "cli-configs")
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
    base = ["--entity-type", "topics", "--entity-name", "cli-configs"]
    add = ["--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]"]
    assert epochlog_main(["configs", "alter", *base, *add, *bootstrap]) == 0
    configs = describe(admin, ConfigResource.Type.TOPIC, "cli-configs")
    assert (configs["retention.ms"].value, configs["cleanup.policy"].value) == (
        "60000",
        "compact,delete",
    )
    capsys.readouterr()
    assert epochlog_main(["configs", "describe", *base, *bootstrap]) == 0
    shown = capsys.readouterr().out
    assert "retention.ms" in shown and "segment.bytes" not in shown
    delete = ["--delete-config", "retention.ms"]
    assert epochlog_main(["configs", "alter", *base, *delete, *bootstrap]) == 0
    assert describe(admin, ConfigResource.Type.TOPIC, "cli-configs")["retention.ms"].source == (
        ConfigSource.DEFAULT_CONFIG.value
    )
    bad = ["--add-config", "retention.ms=soon"]
    assert epochlog_main(["configs", "alter", *base, *bad, *bootstrap]) == 2


def test_kafka_python_describes_and_changes_a_brokers_log_levels(cluster: LocalCluster) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType

    logger = "epochlog.broker.server"
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:

        def levels() -> dict[str, str]:
            resource = KpResource(ConfigResourceType.BROKER_LOGGER, "2")
            described = client.describe_configs([resource], config_filter="all")
            return {k: v["value"] for k, v in described["broker_logger"]["2"].items()}

        before = levels()
        assert before["root"] == "INFO" and before[logger] == "INFO"
        client.alter_configs([KpResource(ConfigResourceType.BROKER_LOGGER, "2", {logger: "DEBUG"})])
        assert levels()[logger] == "DEBUG"
        # Broker 2's log shows what only DEBUG logs: each request it serves.
        until(
            "DEBUG lines from broker 2's server",
            lambda: bool(levels()) and " DEBUG " in cluster.output_tail(2, 50),
        )
        client.alter_configs(
            [KpResource(ConfigResourceType.BROKER_LOGGER, "2", {logger: ("DELETE", None)})]
        )
        assert levels()[logger] == "INFO"
        refused = client.alter_configs(
            [KpResource(ConfigResourceType.BROKER_LOGGER, "2", {"no.such.logger": "DEBUG"})],
            raise_on_unknown=False,
        )
        assert "does not exist" in str(refused)
    finally:
        client.close()


def test_cli_sets_a_brokers_log_level_with_kafka_configs_vocabulary(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    from epochlog.cli.main import main as epochlog_main

    base = ["--entity-type", "broker-loggers", "--entity-name", "3"]
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
    add = ["--add-config", "kazoo=ERROR"]
    assert epochlog_main(["configs", "alter", *base, *add, *bootstrap]) == 0
    capsys.readouterr()
    assert epochlog_main(["configs", "describe", *base, *bootstrap]) == 0
    shown = capsys.readouterr().out
    assert any("kazoo" in line and "ERROR" in line for line in shown.splitlines()), shown
    assert epochlog_main(["configs", "alter", *base, "--delete-config", "kazoo", *bootstrap]) == 0
    bad = ["--add-config", "kazoo=LOUD"]
    assert epochlog_main(["configs", "alter", *base, *bad, *bootstrap]) == 2


def set_topic_config(admin: AdminClient, topic: str, key: str, value: str) -> None:
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def low_watermarks(cluster: LocalCluster, topic: str) -> list[int]:
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "wm"})
    try:
        return [
            consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[0]
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def test_lowered_retention_ms_deletes_old_segments_on_every_leader(
    admin: AdminClient, cluster: LocalCluster
) -> None:
    create_topic(admin, "short-lived", {"segment.bytes": "4096"})
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
    for _ in range(60):  # about ten segments per partition
        for p in range(PARTITIONS):
            producer.produce("short-lived", b"x" * 500, partition=p)
        producer.flush(30)
    assert low_watermarks(cluster, "short-lived") == [0] * PARTITIONS
    set_topic_config(admin, "short-lived", "retention.ms", "1")
    until(
        "old segments deleted on every leader",
        lambda: all(low > 0 for low in low_watermarks(cluster, "short-lived")),
    )


def leader_and_isr(admin: AdminClient, topic: str) -> tuple[int, list[int]]:
    partition = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    return partition.leader, sorted(partition.isrs)


def test_enabling_unclean_election_elects_an_offline_partition_at_once(
    admin: AdminClient, cluster: LocalCluster
) -> None:
    # Last in the module: it stops two brokers (and starts them again).
    futures = admin.create_topics([NewTopic("unclean", 1, replica_assignment=[[1, 2]])])
    futures["unclean"].result(30)
    until("a leader for unclean-0", lambda: leader_and_isr(admin, "unclean")[0] == 1)
    cluster.kill_broker(2)
    until("broker 2 out of the ISR", lambda: leader_and_isr(admin, "unclean") == (1, [1]))
    cluster.kill_broker(1)
    until("unclean-0 offline", lambda: leader_and_isr(admin, "unclean")[0] == -1)
    cluster.start_broker(2)
    # Broker 2 is back but not in the ISR: without unclean election it may not lead.
    assert leader_and_isr(admin, "unclean")[0] == -1
    set_topic_config(admin, "unclean", "unclean.leader.election.enable", "true")
    until("broker 2 elected uncleanly", lambda: leader_and_isr(admin, "unclean")[0] == 2)
    cluster.start_broker(1)
