"""Dynamic configs' pure decisions (config/dynamic.py) and the change-notification znodes."""

from __future__ import annotations

import pytest

from epochlog.config.broker import BrokerConfig
from epochlog.config.dynamic import (
    AlterOp,
    BrokerLayers,
    ConfigChange,
    ConfigRequestError,
    ConfigSource,
    ConfigType,
    broker_alter,
    broker_resource,
    describe_broker,
    describe_topic,
    topic_alter,
)
from epochlog.protocol.errors import ErrorCode
from epochlog.zk.config_changes import decode_config_change, encode_config_change

STATIC = BrokerConfig({"broker.id": 1, "zookeeper.connect": "zk:2181", "log.retention.hours": 24})


def layers(
    default: dict[str, str] | None = None, own: dict[str, str] | None = None
) -> BrokerLayers:
    return BrokerLayers(STATIC, dict(default or {}), dict(own or {}))


def by_name(entries: list) -> dict:
    return {e.name: e for e in entries}


def test_topic_value_falls_back_through_broker_synonyms_in_kafkas_order() -> None:
    entries = by_name(describe_topic({}, layers(), include_synonyms=True))
    retention = entries["retention.ms"]
    assert retention.value == str(24 * 3_600_000)
    assert retention.source is ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.name, s.source) for s in retention.synonyms] == [
        ("log.retention.hours", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG),
    ]
    assert entries["cleanup.policy"].config_type is ConfigType.LIST


def test_topic_override_comes_first_then_dynamic_broker_layers() -> None:
    entries = by_name(
        describe_topic(
            {"retention.ms": "1000"},
            layers({"log.retention.ms": "5000"}, {"log.retention.ms": "7000"}),
            include_synonyms=True,
        )
    )
    retention = entries["retention.ms"]
    assert retention.value == "1000"
    assert [s.source for s in retention.synonyms][:3] == [
        ConfigSource.TOPIC_CONFIG,
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ]
    # without synonyms asked for, none are sent
    assert describe_topic({}, layers(), keys=["retention.ms"])[0].synonyms == ()


def test_broker_describe_marks_dynamic_keys_and_default_resource_lists_only_its_own() -> None:
    own = by_name(describe_broker(layers({"message.max.bytes": "3000"}), per_broker=True))
    assert (
        own["broker.id"].read_only and own["broker.id"].source is ConfigSource.STATIC_BROKER_CONFIG
    )
    assert not own["message.max.bytes"].read_only
    assert own["message.max.bytes"].value == "3000"
    assert own["message.max.bytes"].source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    default = describe_broker(layers({"message.max.bytes": "3000"}), per_broker=False)
    assert [(e.name, e.value) for e in default] == [("message.max.bytes", "3000")]


def test_effective_broker_config_takes_per_broker_over_default_over_static() -> None:
    merged = layers({"log.retention.ms": "5000"}, {"log.retention.ms": "7000"}).effective()
    assert merged.retention_ms == 7000
    assert layers({"log.retention.ms": "5000"}).effective().retention_ms == 5000
    assert layers().effective().retention_ms == 24 * 3_600_000


def test_incremental_append_and_subtract_on_cleanup_policy() -> None:
    appended = topic_alter(
        "t", {}, [ConfigChange("cleanup.policy", "compact", AlterOp.APPEND)], incremental=True
    )
    assert appended == {"cleanup.policy": "delete,compact"}
    subtracted = topic_alter(
        "t",
        appended,
        [ConfigChange("cleanup.policy", "delete", AlterOp.SUBTRACT)],
        incremental=True,
    )
    assert subtracted == {"cleanup.policy": "compact"}
    deleted = topic_alter(
        "t", subtracted, [ConfigChange("cleanup.policy", None, AlterOp.DELETE)], incremental=True
    )
    assert deleted == {}


def test_append_to_a_non_list_key_is_invalid_config() -> None:
    with pytest.raises(ConfigRequestError) as raised:
        topic_alter("t", {}, [ConfigChange("retention.ms", "1", AlterOp.APPEND)], incremental=True)
    assert raised.value.error is ErrorCode.INVALID_CONFIG
    assert "retention.ms" in str(raised.value)


def test_alter_configs_replaces_the_whole_set() -> None:
    result = topic_alter(
        "t", {"segment.ms": "1000"}, [ConfigChange("retention.ms", "5")], incremental=False
    )
    assert result == {"retention.ms": "5"}


@pytest.mark.parametrize(
    ("changes", "error", "named"),
    [
        ([ConfigChange("retention.mss", "1")], ErrorCode.INVALID_CONFIG, "retention.mss"),
        ([ConfigChange("segment.bytes", "lots")], ErrorCode.INVALID_CONFIG, "lots"),
        ([ConfigChange("min.insync.replicas", "0")], ErrorCode.INVALID_CONFIG, "min.insync"),
        (
            [ConfigChange("retention.ms", "1"), ConfigChange("retention.ms", "2")],
            ErrorCode.INVALID_REQUEST,
            "duplicate",
        ),
        ([ConfigChange("retention.ms", None)], ErrorCode.INVALID_REQUEST, "Null value"),
    ],
)
def test_bad_topic_requests_name_what_is_wrong(
    changes: list[ConfigChange], error: ErrorCode, named: str
) -> None:
    with pytest.raises(ConfigRequestError) as raised:
        topic_alter("t", {}, changes, incremental=False)
    assert raised.value.error is error
    assert named in str(raised.value)


def test_unknown_operation_is_invalid_request() -> None:
    with pytest.raises(ConfigRequestError) as raised:
        topic_alter("t", {}, [ConfigChange("retention.ms", "1", 9)], incremental=True)
    assert raised.value.error is ErrorCode.INVALID_REQUEST


def test_static_broker_configs_cannot_change_dynamically() -> None:
    with pytest.raises(ConfigRequestError) as raised:
        broker_alter(
            {},
            [ConfigChange("log.dirs", "/x"), ConfigChange("message.max.bytes", "10")],
            incremental=True,
            layers=layers(),
            per_broker=True,
        )
    assert raised.value.error is ErrorCode.INVALID_REQUEST
    assert "Cannot update these configs dynamically: ['log.dirs']" in str(raised.value)


def test_broker_bad_value_is_invalid_request_naming_key_and_value() -> None:
    with pytest.raises(ConfigRequestError) as raised:
        broker_alter(
            {"log.retention.ms": "5"},
            [ConfigChange("message.max.bytes", "big")],
            incremental=True,
            layers=layers(),
            per_broker=False,
        )
    assert raised.value.error is ErrorCode.INVALID_REQUEST
    assert "message.max.bytes" in str(raised.value) and "big" in str(raised.value)


def test_broker_incremental_keeps_other_stored_keys() -> None:
    result = broker_alter(
        {"log.retention.ms": "5"},
        [ConfigChange("message.max.bytes", "3000")],
        incremental=True,
        layers=layers(),
        per_broker=False,
    )
    assert result == {"log.retention.ms": "5", "message.max.bytes": "3000"}


def test_broker_resource_names_this_broker_or_the_default() -> None:
    assert broker_resource("", 1) is False
    assert broker_resource("1", 1) is True
    for name in ("2", "one"):
        with pytest.raises(ConfigRequestError) as raised:
            broker_resource(name, 1)
        assert raised.value.error is ErrorCode.INVALID_REQUEST


def test_change_notification_is_kafkas_version_2_and_reads_version_1() -> None:
    data = encode_config_change("brokers/<default>")
    assert data == b'{"version":2,"entity_path":"brokers/<default>"}'
    assert decode_config_change(data, "/config/changes/x") == ("brokers", "<default>")
    v1 = b'{"version":1,"entity_type":"topics","entity_name":"t"}'
    assert decode_config_change(v1, "/config/changes/x") == ("topics", "t")


def test_flush_ms_follows_log_flush_interval_ms_else_the_flusher_interval() -> None:
    def flush_ms(**own: str) -> str | None:
        return by_name(describe_topic({}, layers(own=own), keys=["flush.ms"]))["flush.ms"].value

    assert flush_ms() == str(2**63 - 1)  # Kafka's default: no time-based flush
    assert flush_ms(**{"log.flush.interval.ms": "500"}) == "500"
