"""The broker's SASL gate (one connection's Kafka requests to the session machine and back)
and the client's login settings, without sockets."""

from __future__ import annotations

import pytest

from epochlog.broker.sasl_gate import SaslGate
from epochlog.client.config import Role, load_config
from epochlog.client.errors import ConfigError
from epochlog.client.sasl import login_from_config, reauth_delay_s
from epochlog.config.sasl import ListenerSasl
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request, decode_request, encode_request
from epochlog.protocol.codec import Message
from epochlog.protocol.errors import ErrorCode
from epochlog.security.principal import KafkaPrincipal
from epochlog.security.scram_credentials import ScramCredentialCache


def request(api_key: int, version: int, body: Message) -> Request:
    return decode_request(encode_request(api_key, version, 7, "test", body)[4:])


def gate(reauth_ms: int = 0) -> SaslGate:
    settings = ListenerSasl("SASL_PLAINTEXT", ("PLAIN",), {"alice": "pw"}, reauth_ms)
    return SaslGate(settings, ScramCredentialCache())


def handshake(version: int = 1, mechanism: str = "PLAIN") -> Request:
    return request(17, version, m.SaslHandshakeRequest(mechanism=mechanism))


def authenticate(token: bytes, version: int = 2) -> Request:
    return request(36, version, m.SaslAuthenticateRequest(auth_bytes=token))


METADATA = request(3, 1, m.MetadataRequest(topics=[]))


def test_gate_lets_api_versions_through_and_closes_on_anything_else() -> None:
    g = gate()
    api_versions = request(
        18, 3, m.ApiVersionsRequest(client_software_name="x", client_software_version="1")
    )
    assert g.on_request(api_versions) is None  # the server answers it as usual
    answer = g.on_request(METADATA)
    assert answer is not None and answer.body is None and answer.close


def test_gate_authenticates_and_then_steps_aside() -> None:
    g = gate()
    shaken = g.on_request(handshake())
    assert shaken is not None and shaken.close is None
    assert shaken.body.error_code == ErrorCode.NONE and shaken.body.mechanisms == ["PLAIN"]
    done = g.on_request(authenticate(b"\x00alice\x00pw"))
    assert done is not None and done.close is None
    assert done.principal == KafkaPrincipal.user("alice")
    assert done.body.session_lifetime_ms == 0
    assert not g.intercepting  # the server's hot path no longer asks the gate


def test_gate_answers_a_failure_then_closes() -> None:
    g = gate()
    g.on_request(handshake())
    failed = g.on_request(authenticate(b"\x00alice\x00nope"))
    assert failed is not None and failed.close
    assert failed.body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert failed.body.error_message == "Authentication failed: Invalid username or password"


def test_gate_refuses_an_unknown_mechanism() -> None:
    answer = gate().on_request(handshake(mechanism="GSSAPI"))
    assert answer is not None and answer.close
    assert answer.body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM


def test_gate_with_session_lifetime_keeps_watching_and_allows_reauthentication() -> None:
    g = gate(reauth_ms=60000)
    g.on_request(handshake())
    done = g.on_request(authenticate(b"\x00alice\x00pw"))
    assert done is not None and done.body.session_lifetime_ms == 60000
    assert g.intercepting  # to close the connection once the session expired
    assert g.on_request(METADATA) is None
    again = g.on_request(handshake())
    assert again is not None and again.close is None
    renewed = g.on_request(authenticate(b"\x00alice\x00pw"))
    assert renewed is not None and renewed.principal == KafkaPrincipal.user("alice")


def test_v0_handshake_switches_to_bare_tokens() -> None:
    g = gate()
    g.on_request(handshake(version=0))
    assert g.raw_tokens
    token, outcome = g.on_raw_token(b"\x00alice\x00pw")
    assert token == b"" and outcome.principal == KafkaPrincipal.user("alice")
    assert not g.raw_tokens
    g = gate()
    g.on_request(handshake(version=0))
    token, outcome = g.on_raw_token(b"\x00alice\x00bad")
    assert token is None and outcome.close


def test_client_login_from_librdkafka_and_java_keys() -> None:
    config = load_config(
        Role.PRODUCER,
        {
            "bootstrap.servers": "h:1",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "u",
            "sasl.password": "secret",
        },
    )
    login = login_from_config(config)
    assert login is not None and (login.mechanism, login.username) == ("SCRAM-SHA-512", "u")
    assert "secret" not in repr(config) and "secret" not in repr(login)
    java = load_config(
        Role.ADMIN,
        {
            "bootstrap.servers": "h:1",
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="j" password="p";',
        },
    )
    login = login_from_config(java)
    assert login is not None and (login.username, login.password) == ("j", "p")
    assert login_from_config(load_config(Role.ADMIN, {"bootstrap.servers": "h:1"})) is None


def test_client_login_errors_name_the_key() -> None:
    base = {"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT"}
    with pytest.raises(ConfigError, match="sasl.mechanism"):
        login_from_config(load_config(Role.ADMIN, {**base, "sasl.username": "u"}))  # GSSAPI
    with pytest.raises(ConfigError, match="sasl.username"):
        login_from_config(load_config(Role.ADMIN, {**base, "sasl.mechanism": "PLAIN"}))
    with pytest.raises(ConfigError, match="sasl.jaas.config"):
        login_from_config(load_config(Role.ADMIN, {**base, "sasl.jaas.config": "nonsense"}))


def test_reauthentication_comes_at_85_to_95_percent_of_the_session() -> None:
    assert reauth_delay_s(0) is None
    delays = [reauth_delay_s(10000) for _ in range(200)]
    assert all(d is not None and 8.5 <= d <= 9.5 for d in delays)
