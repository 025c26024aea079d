"""listener.security.protocol.map, inter.broker.listener.name and security.inter.broker.protocol,
resolved as Kafka resolves them; a principal's text form."""

from __future__ import annotations

import pytest

from epochlog.config.broker import BrokerConfig, ConfigError
from epochlog.security.principal import ANONYMOUS, KafkaPrincipal


def config(**values: object) -> BrokerConfig:
    return BrokerConfig({"broker.id": 1, "zookeeper.connect": "z:2181", **values})


def test_kafka_default_map_names_the_four_protocols() -> None:
    c = config(listeners="PLAINTEXT://:1,SASL_SSL://:2")
    assert c.security_protocol("PLAINTEXT") == "PLAINTEXT"
    assert c.security_protocol("SASL_SSL") == "SASL_SSL"
    assert c.inter_broker_listener == "PLAINTEXT"


def test_custom_listener_names_need_the_map() -> None:
    c = config(listeners="CLIENTS://:1,REPLICATION://:2")
    with pytest.raises(ConfigError, match="no security protocol defined for listener CLIENTS"):
        c.security_protocol("CLIENTS")
    mapped = config(
        listeners="CLIENTS://:1,REPLICATION://:2",
        **{
            "listener.security.protocol.map": "CLIENTS:SASL_SSL,REPLICATION:SSL",
            "inter.broker.listener.name": "replication",
        },
    )
    assert mapped.security_protocol("CLIENTS") == "SASL_SSL"
    assert mapped.inter_broker_listener == "REPLICATION"


def test_inter_broker_listener_by_protocol_else_first() -> None:
    by_protocol = config(
        listeners="PLAINTEXT://:1,SSL://:2", **{"security.inter.broker.protocol": "SSL"}
    )
    assert by_protocol.inter_broker_listener == "SSL"
    assert config(listeners="SSL://:2,PLAINTEXT://:1").inter_broker_listener == "SSL"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"listener.security.protocol.map": "A:TLS"}, "not LISTENER:PROTOCOL"),
        ({"inter.broker.listener.name": "NOPE"}, "'NOPE' is not a listener"),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
            "only one of",
        ),
        ({"security.inter.broker.protocol": "SSL"}, "no listener has it"),
    ],
)
def test_bad_security_settings_name_what_is_wrong(values: dict, message: str) -> None:
    c = config(listeners="PLAINTEXT://:1", **values)
    with pytest.raises(ConfigError, match=message):
        c.security_protocol("PLAINTEXT")
        c.inter_broker_listener  # noqa: B018 (the property raises)


def test_principal_text_form() -> None:
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert KafkaPrincipal.parse("User:CN=a,O=b") == KafkaPrincipal("User", "CN=a,O=b")
    with pytest.raises(ValueError, match="not a principal"):
        KafkaPrincipal.parse("alice")
