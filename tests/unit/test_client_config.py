"""Client config: Kafka's names and defaults; every bad key is an error that names it."""

from __future__ import annotations

import pytest

from epochlog.client.config import Role, load_config
from epochlog.client.errors import ConfigError

BS = {"bootstrap.servers": "localhost:9092"}


def load(role: Role, **extra: object) -> dict:
    return dict(load_config(role, {**BS, **{k.replace("_", "."): v for k, v in extra.items()}}))


def test_defaults_are_kafkas() -> None:
    p = load_config(Role.PRODUCER, BS)
    assert p["acks"] == -1
    assert p["linger.ms"] == 5
    assert p["batch.size"] == 16384
    assert p["compression.type"] == "none"
    assert p["enable.idempotence"] is True
    assert p["delivery.timeout.ms"] == 120000
    assert p["max.in.flight.requests.per.connection"] == 5
    assert p["max.request.size"] == 1048576
    assert p["retries"] == 2**31 - 1
    assert p["request.timeout.ms"] == 30000
    assert p["reconnect.backoff.ms"] == 50
    assert p["reconnect.backoff.max.ms"] == 1000
    assert p["socket.connection.setup.timeout.ms"] == 10000
    assert p["socket.connection.setup.timeout.max.ms"] == 30000
    assert p["metadata.max.age.ms"] == 300000
    assert p["metadata.recovery.strategy"] == "rebootstrap"
    assert p["metadata.recovery.rebootstrap.trigger.ms"] == 300000
    assert p["retry.backoff.ms"] == 100
    c = load_config(Role.CONSUMER, BS)
    assert c["fetch.min.bytes"] == 1
    assert c["fetch.max.wait.ms"] == 500
    assert c["fetch.max.bytes"] == 52428800
    assert c["max.partition.fetch.bytes"] == 1048576
    assert c["auto.offset.reset"] == "latest"
    assert c["isolation.level"] == "read_uncommitted"


def test_bootstrap_servers_parse_into_host_port_pairs() -> None:
    c = load_config(Role.ADMIN, {"bootstrap.servers": "a:1, b:2,[::1]:3,PLAINTEXT://c:4"})
    assert c["bootstrap.servers"] == (("a", 1), ("b", 2), ("::1", 3), ("c", 4))


def test_strings_from_a_properties_file_are_parsed() -> None:
    p = load(Role.PRODUCER, linger_ms="10", enable_idempotence="false", acks="1")
    assert p["linger.ms"] == 10
    assert p["enable.idempotence"] is False
    assert p["acks"] == 1
    assert load(Role.PRODUCER, acks="all")["acks"] == -1
    assert load(Role.PRODUCER, compression_type="ZSTD")["compression.type"] == "zstd"


@pytest.mark.parametrize(
    ("role", "key", "value", "says"),
    [
        (Role.PRODUCER, "linger.msec", 5, "unknown config key"),
        (Role.PRODUCER, "linger.ms", "soon", "expected an integer"),
        (Role.PRODUCER, "linger.ms", True, "expected an integer"),
        (Role.PRODUCER, "linger.ms", -1, "below the minimum 0"),
        (Role.PRODUCER, "batch.size", 2**31, "above the maximum"),
        (Role.PRODUCER, "compression.type", "brotli", "expected one of none, gzip"),
        (Role.PRODUCER, "acks", 2, "expected all, -1, 0 or 1"),
        (Role.PRODUCER, "enable.idempotence", "yes", "expected true or false"),
        (Role.PRODUCER, "max.in.flight.requests.per.connection", 0, "below the minimum 1"),
        (Role.PRODUCER, "fetch.min.bytes", 1, "a consumer config, not valid for a producer"),
        (Role.CONSUMER, "acks", 1, "a producer config, not valid for a consumer"),
        (Role.CONSUMER, "auto.offset.reset", "smallest", "expected one of earliest, latest"),
        (Role.CONSUMER, "isolation.level", "serializable", "expected one of read_uncommitted"),
        (Role.ADMIN, "metadata.recovery.strategy", "sometimes", "expected one of rebootstrap"),
        (Role.ADMIN, "bootstrap.servers", "localhost", "is not host:port"),
        (Role.ADMIN, "bootstrap.servers", "localhost:99999", "outside 1-65535"),
        (Role.ADMIN, "bootstrap.servers", "", "no servers given"),
        (Role.ADMIN, "client.id", 7, "expected a string"),
    ],
)
def test_a_bad_key_or_value_is_an_error_naming_the_key(
    role: Role, key: str, value: object, says: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(role, {**BS, key: value})
    assert info.value.key == key
    assert key in str(info.value)
    assert says in str(info.value)


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        load_config(Role.CONSUMER, {})


def test_explicit_idempotence_refuses_conflicting_settings() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Role.PRODUCER, {**BS, "enable.idempotence": True, "acks": 1})
    assert info.value.key == "acks"
    with pytest.raises(ConfigError) as info:
        load_config(Role.PRODUCER, {**BS, "enable.idempotence": True, "retries": 0})
    assert info.value.key == "retries"
    with pytest.raises(ConfigError) as info:
        load_config(
            Role.PRODUCER,
            {**BS, "enable.idempotence": True, "max.in.flight.requests.per.connection": 6},
        )
    assert info.value.key == "max.in.flight.requests.per.connection"


def test_default_idempotence_is_quietly_off_with_conflicting_settings() -> None:
    assert load(Role.PRODUCER, acks=1)["enable.idempotence"] is False
    assert load(Role.PRODUCER, acks=0)["enable.idempotence"] is False
    assert load(Role.PRODUCER)["enable.idempotence"] is True


def test_delivery_timeout_must_cover_linger_and_request_timeout() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Role.PRODUCER, {**BS, "delivery.timeout.ms": 1000})
    assert info.value.key == "delivery.timeout.ms"
    adjusted = load(Role.PRODUCER, request_timeout_ms=200000)
    assert adjusted["delivery.timeout.ms"] == 200005


def test_config_is_read_only_and_rejects_lookups_of_other_roles_keys() -> None:
    c = load_config(Role.CONSUMER, BS)
    with pytest.raises(ConfigError, match="linger.ms"):
        c["linger.ms"]
    with pytest.raises(TypeError):
        c["fetch.min.bytes"] = 5  # type: ignore[index]
    assert c.explicit == frozenset({"bootstrap.servers"})


BOOT = {"bootstrap.servers": "h:9092"}


def test_group_settings_have_javas_defaults() -> None:
    c = load_config(Role.CONSUMER, {**BS, "group.id": "g"})
    assert c["partition.assignment.strategy"] == ("range", "cooperative-sticky")
    assert (c["session.timeout.ms"], c["heartbeat.interval.ms"]) == (45000, 3000)
    assert (c["max.poll.interval.ms"], c["auto.commit.interval.ms"]) == (300000, 5000)
    assert c["enable.auto.commit"] is True and c["group.instance.id"] == ""


def test_assignors_take_kafkas_names_and_class_names() -> None:
    c = load_config(
        Role.CONSUMER,
        {
            **BS,
            "group.id": "g",
            "partition.assignment.strategy": "cooperative-sticky, "
            "org.apache.kafka.clients.consumer.RangeAssignor",
        },
    )
    assert c["partition.assignment.strategy"] == ("cooperative-sticky", "range")
    with pytest.raises(ConfigError, match="partition.assignment.strategy.*unknown assignor 'x'"):
        load_config(Role.CONSUMER, {**BS, "partition.assignment.strategy": "range,x"})


def test_group_settings_are_checked_as_kafka_checks_them() -> None:
    with pytest.raises(ConfigError, match="heartbeat.interval.ms"):
        load_config(
            Role.CONSUMER, {**BS, "session.timeout.ms": 3000, "heartbeat.interval.ms": 3000}
        )
    with pytest.raises(ConfigError, match="enable.auto.commit"):
        load_config(Role.CONSUMER, {**BS, "enable.auto.commit": True})
    with pytest.raises(ConfigError, match="group.instance.id"):
        load_config(Role.CONSUMER, {**BS, "group.instance.id": "i"})
    assert load_config(Role.CONSUMER, BOOT)["enable.auto.commit"] is False  # no group, no commits
    with pytest.raises(ConfigError, match="group.id.*not valid for a producer"):
        load_config(Role.PRODUCER, {**BS, "group.id": "g"})


def test_a_transactional_producer_is_idempotent_and_refuses_settings_that_are_not() -> None:
    c = load_config(
        Role.PRODUCER, {**BS, "transactional.id": "tx", "transaction.timeout.ms": "900"}
    )
    assert (c["transactional.id"], c["transaction.timeout.ms"]) == ("tx", 900)
    assert c["enable.idempotence"] is True
    assert load_config(Role.PRODUCER, BOOT)["transactional.id"] == ""  # none by default
    for extra, key in (
        ({"enable.idempotence": False}, "enable.idempotence"),
        ({"acks": 1}, "acks"),  # idempotence only on by default: still refused
        ({"retries": 0}, "retries"),
    ):
        with pytest.raises(ConfigError, match=f"{key}.*transactional producer"):
            load_config(Role.PRODUCER, {**BS, "transactional.id": "tx", **extra})
    with pytest.raises(ConfigError, match="transaction.timeout.ms"):
        load_config(Role.PRODUCER, {**BS, "transaction.timeout.ms": 0})
    with pytest.raises(ConfigError, match="transactional.id.*not valid for a consumer"):
        load_config(Role.CONSUMER, {**BS, "transactional.id": "tx"})
