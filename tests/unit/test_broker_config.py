"""server.properties: Kafka's names and defaults; unknown or malformed keys are named errors."""

from __future__ import annotations

import pytest

from epochlog.config.broker import BrokerConfig, ConfigError, Endpoint, parse_properties

BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig.from_dict(BASE)
    assert config["min.insync.replicas"] == 1
    assert config["replica.lag.time.max.ms"] == 30000
    assert config["unclean.leader.election.enable"] is False
    assert config["controlled.shutdown.max.retries"] == 3
    assert config.retention_ms == 168 * 3_600_000
    assert config.log_dirs == ["/tmp/kafka-logs"]


def test_properties_file_is_parsed(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# a comment\n"
        "broker.id=3\n"
        "zookeeper.connect = 127.0.0.1:2181\n"
        "listeners=PLAINTEXT://127.0.0.1:9093\n"
        "log.dirs=/data/a,/data/b\n"
        "log.retention.minutes: 5\n"
        "num.network.threads=3\n"  # Kafka's stock key: accepted, no effect
    )
    config = BrokerConfig.from_properties(path)
    assert config.broker_id == 3
    assert config.listeners == [Endpoint("PLAINTEXT", "127.0.0.1", 9093)]
    assert config.advertised_listeners == config.listeners
    assert config.log_dirs == ["/data/a", "/data/b"]
    assert config.retention_ms == 300_000


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError, match="'log.retention.hourz'"):
        BrokerConfig.from_dict({**BASE, "log.retention.hourz": "1"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("broker.id", "one"),
        ("min.insync.replicas", "0"),
        ("unclean.leader.election.enable", "yes"),
        ("log.message.timestamp.type", "WallClock"),
        ("num.partitions", str(2**40)),
    ],
)
def test_malformed_values_are_named(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        BrokerConfig.from_dict({**BASE, key: value})


def test_missing_required_key_is_named() -> None:
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        BrokerConfig.from_dict({"broker.id": "1"})


def test_bad_listener_is_named() -> None:
    config = BrokerConfig.from_dict({**BASE, "listeners": "127.0.0.1:9092"})
    with pytest.raises(ConfigError, match="listeners"):
        _ = config.listeners


def test_unparseable_line_names_file_and_line() -> None:
    with pytest.raises(ConfigError, match="server.properties:2"):
        parse_properties("broker.id=1\nthis line has no separator\n")


def test_decompression_bound_is_a_multiple_of_message_max_bytes() -> None:
    from epochlog.broker.broker import log_config_from

    default = log_config_from(BrokerConfig.from_dict(BASE))
    assert default.max_decompressed_bytes == 64 * 1048588
    config = BrokerConfig.from_dict(
        {
            **BASE,
            "message.max.bytes": "100000",
            "epochlog.message.max.decompressed.multiple": "8",
        }
    )
    assert log_config_from(config).max_decompressed_bytes == 800_000
    with pytest.raises(ConfigError, match="epochlog.message.max.decompressed.multiple"):
        BrokerConfig.from_dict({**BASE, "epochlog.message.max.decompressed.multiple": "0"})


def test_log_cleaner_keys_reach_the_cleaner_and_the_default_topic_config() -> None:
    from epochlog.broker.broker import cleaner_config_from, log_config_from

    defaults = BrokerConfig.from_dict({"broker.id": 1, "zookeeper.connect": "zk:2181"})
    assert cleaner_config_from(defaults).enable and not log_config_from(defaults).compact
    config = BrokerConfig.from_dict(
        {
            "broker.id": 1,
            "zookeeper.connect": "zk:2181",
            "log.cleanup.policy": "compact,delete",
            "log.cleaner.enable": "false",
            "log.cleaner.threads": "2",
            "log.cleaner.dedupe.buffer.size": "1048576",
            "log.cleaner.io.buffer.size": "65536",
            "log.cleaner.backoff.ms": "100",
            "log.cleaner.min.cleanable.ratio": "0.25",
            "log.cleaner.min.compaction.lag.ms": "10",
            "log.cleaner.max.compaction.lag.ms": "20",
            "log.cleaner.delete.retention.ms": "30",
            "log.cleaner.io.max.bytes.per.second": "1e9",  # accepted, no effect
        }
    )
    cleaner = cleaner_config_from(config)
    assert (cleaner.enable, cleaner.threads, cleaner.io_buffer_size, cleaner.backoff_ms) == (
        False,
        2,
        65536,
        100,
    )
    assert cleaner.max_map_entries == int(1048576 // 2 * 0.9) // 24
    log = log_config_from(config)
    assert log.compact and log.delete and log.min_cleanable_dirty_ratio == 0.25
    assert (log.min_compaction_lag_ms, log.max_compaction_lag_ms) == (10, 20)
    assert log.delete_retention_ms == 30
    for key, value in (("log.cleanup.policy", "shred"), ("log.cleaner.min.cleanable.ratio", "2")):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            BrokerConfig.from_dict({"broker.id": 1, "zookeeper.connect": "z", key: value})
