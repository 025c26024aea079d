"""SASL's sans-I/O core: SCRAM math against RFC 7677, the server mechanisms and the session
machine, JAAS parsing, Kafka's credential strings and the /config/users znode."""

from __future__ import annotations

import base64

import pytest

from epochlog.config.broker import BrokerConfig, ConfigError
from epochlog.config.sasl import inter_broker_login, listener_sasl
from epochlog.protocol import scram
from epochlog.protocol.jaas import parse_jaas_config, username_password
from epochlog.security.principal import KafkaPrincipal
from epochlog.security.sasl import (
    PLAIN_FAILURE,
    AuthenticationFailed,
    PlainServer,
    SaslSession,
    SaslStateError,
    ScramServer,
    SessionState,
)
from epochlog.security.scram_credentials import (
    CredentialChange,
    ScramCredential,
    ScramCredentialCache,
    apply_changes,
    check_change,
    parse_user_znode,
    user_znode_json,
)

# RFC 7677 §3: user "user", password "pencil"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> ScramCredential:
    return ScramCredential.from_password(scram.SCRAM_SHA_256, "pencil", 4096, RFC_SALT)


def test_scram_client_reproduces_rfc7677_exchange() -> None:
    client = scram.ScramClient(scram.SCRAM_SHA_256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first() == RFC_CLIENT_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)  # raises if the server signature did not match


def test_scram_server_reproduces_rfc7677_exchange() -> None:
    server = ScramServer(
        scram.SCRAM_SHA_256, lambda user, mech: rfc_credential(), nonce=RFC_SERVER_NONCE
    )
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.principal == KafkaPrincipal.user("user")


def test_client_refuses_a_wrong_server_signature() -> None:
    client = scram.ScramClient(scram.SCRAM_SHA_256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    client.first()
    client.final(RFC_SERVER_FIRST)
    with pytest.raises(scram.ScramFormatError, match="signature"):
        client.verify(b"v=" + base64.b64encode(b"\x00" * 32))


def exchange(
    server: ScramServer, mech: scram.ScramMechanism, user: str, password: str
) -> scram.ScramClient:
    client = scram.ScramClient(mech, user, password)
    client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    return client


@pytest.mark.parametrize("mech", [scram.SCRAM_SHA_256, scram.SCRAM_SHA_512])
def test_scram_round_trip_and_wrong_password(mech: scram.ScramMechanism) -> None:
    credential = ScramCredential.from_password(mech, "alice-secret", 4096)
    lookup = {("alice", mech.name): credential}.get

    def find(user: str, name: str) -> ScramCredential | None:
        return lookup((user, name))

    server = ScramServer(mech, find)
    exchange(server, mech, "alice", "alice-secret")
    assert server.principal == KafkaPrincipal.user("alice")
    wrong = ScramServer(mech, find)
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        exchange(wrong, mech, "alice", "nope")
    assert not wrong.complete


def test_scram_unknown_user_fails_with_the_same_message_as_a_wrong_password() -> None:
    server = ScramServer(scram.SCRAM_SHA_256, lambda user, mech: None)
    with pytest.raises(AuthenticationFailed) as failed:
        server.evaluate(b"n,,n=mallory,r=abcdef")
    assert str(failed.value) == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )


def test_scram_server_refuses_a_final_message_with_another_nonce() -> None:
    server = ScramServer(scram.SCRAM_SHA_256, lambda user, mech: rfc_credential())
    server.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed):
        server.evaluate(RFC_CLIENT_FINAL)  # its nonce is the RFC server's, not this one's


def test_scram_server_refuses_replayed_messages() -> None:
    server = ScramServer(
        scram.SCRAM_SHA_256, lambda user, mech: rfc_credential(), nonce=RFC_SERVER_NONCE
    )
    server.evaluate(RFC_CLIENT_FIRST)
    server.evaluate(RFC_CLIENT_FINAL)
    with pytest.raises(AuthenticationFailed):
        server.evaluate(RFC_CLIENT_FINAL)
    first_again = ScramServer(scram.SCRAM_SHA_256, lambda user, mech: rfc_credential())
    first_again.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed):
        first_again.evaluate(RFC_CLIENT_FIRST)  # a client-first where the final belongs


def test_scram_usernames_are_escaped() -> None:
    message = scram.ClientFirstMessage("a=b,c", "nonce")
    assert message.encode() == b"n,,n=a=3Db=2Cc,r=nonce"
    assert scram.ClientFirstMessage.parse(message.encode()).username == "a=b,c"


def test_plain_accepts_the_configured_user_only() -> None:
    users = {"alice": "alice-secret"}
    good = PlainServer(users)
    assert good.evaluate(b"\x00alice\x00alice-secret") == b""
    assert good.principal == KafkaPrincipal.user("alice")
    for token in (b"\x00alice\x00wrong", b"\x00bob\x00alice-secret"):
        with pytest.raises(AuthenticationFailed, match=PLAIN_FAILURE):
            PlainServer(users).evaluate(token)
    with pytest.raises(AuthenticationFailed, match="authorization id"):
        PlainServer(users).evaluate(b"bob\x00alice\x00alice-secret")
    with pytest.raises(AuthenticationFailed, match="expected 3 tokens"):
        PlainServer(users).evaluate(b"alice")
    with pytest.raises(AuthenticationFailed):
        good.evaluate(b"\x00alice\x00alice-secret")  # replayed on a spent mechanism


def new_session(reauth_ms: int = 0) -> SaslSession:
    return SaslSession(
        ("PLAIN", "SCRAM-SHA-256"), {"alice": "pw", "bob": "pw2"}, lambda u, m: None, reauth_ms
    )


def test_session_serves_only_api_versions_and_handshake_before_authentication() -> None:
    session = new_session()
    session.check(18, 0)
    session.check(17, 0)
    for api_key in (0, 1, 3, 36):
        with pytest.raises(SaslStateError):
            session.check(api_key, 0)


def test_session_handshake_authenticate_and_expiry() -> None:
    session = new_session(reauth_ms=1000)
    assert session.handshake("PLAIN")
    with pytest.raises(SaslStateError):
        session.check(3, 0)  # still authenticating
    result = session.authenticate(b"\x00alice\x00pw", now_ms=5000)
    assert result.principal == KafkaPrincipal.user("alice")
    assert result.session_lifetime_ms == 1000
    session.check(0, 5999)
    with pytest.raises(SaslStateError, match="expired"):
        session.check(0, 6000)
    session.check(17, 6000)  # a re-authentication may begin on an expired session


def test_session_reauthentication_keeps_the_principal() -> None:
    session = new_session(reauth_ms=1000)
    session.handshake("PLAIN")
    session.authenticate(b"\x00alice\x00pw", now_ms=0)
    assert session.handshake("PLAIN")
    session.authenticate(b"\x00alice\x00pw", now_ms=900)
    assert session.expires_at_ms == 1900 and session.authenticated
    session.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed, match="Cannot change principals"):
        session.authenticate(b"\x00bob\x00pw2", now_ms=1000)
    assert session.state is SessionState.FAILED


def test_session_refuses_another_mechanism_on_reauthentication_and_unknown_ones() -> None:
    session = new_session()
    assert not session.handshake("GSSAPI")
    session = new_session()
    session.handshake("PLAIN")
    session.authenticate(b"\x00alice\x00pw", now_ms=0)
    assert not session.handshake("SCRAM-SHA-256")


def test_jaas_config_parses_kafkas_syntax() -> None:
    text = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="a \\"quoted\\" secret" user_bob=bare;'
    )
    (entry,) = parse_jaas_config(text)
    assert entry.control_flag == "required"
    assert entry.plain_users == {
        "admin": "admin-secret",
        "alice": 'a "quoted" secret',
        "bob": "bare",
    }
    assert username_password(text) == ("admin", "admin-secret")


@pytest.mark.parametrize(
    "text, problem",
    [
        ('org.x.Module required username="a"', "does not end in ;"),
        ('org.x.Module username="a";', "control flag"),
        ("org.x.Module required username;", "key=value"),
        ("", "no login module"),
    ],
)
def test_jaas_config_errors_name_the_problem(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_jaas_config(text)


def test_credential_string_round_trips_in_kafkas_format() -> None:
    credential = rfc_credential()
    text = credential.to_string()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.parse(text) == credential
    with pytest.raises(ValueError, match="missing server_key"):
        ScramCredential.parse("salt=AA==,stored_key=AA==,iterations=4096")
    with pytest.raises(ValueError, match="below the minimum 4096"):
        ScramCredential.from_password(scram.SCRAM_SHA_512, "pw", 1000)


def test_user_znode_json_and_the_credential_cache() -> None:
    credential = rfc_credential()
    data = user_znode_json({"SCRAM-SHA-256": credential.to_string(), "producer_byte_rate": "10"})
    assert data.startswith(b'{"version":1,"config":{"SCRAM-SHA-256":"salt=')
    config = parse_user_znode(data)
    cache = ScramCredentialCache()
    cache.update_user("user", config)
    assert cache.lookup("user", "SCRAM-SHA-256") == credential
    assert cache.lookup("user", "SCRAM-SHA-512") is None
    cache.update_user("user", {"producer_byte_rate": "10"})
    assert cache.lookup("user", "SCRAM-SHA-256") is None
    with pytest.raises(ValueError, match="not JSON"):
        parse_user_znode(b"{nope")


def test_alter_changes_are_checked_as_kafka_checks_them() -> None:
    salted = scram.SCRAM_SHA_256.salted_password("pw", b"salt", 4096)
    assert check_change(CredentialChange("", 1, 4096, b"s", salted)) == (
        93,
        "Username must not be empty",
    )
    assert check_change(CredentialChange("u", 7, 4096, b"s", salted))[0] == 33  # type: ignore[index]
    assert check_change(CredentialChange("u", 1, 100, b"s", salted)) == (93, "Too few iterations")
    assert check_change(CredentialChange("u", 1, 20000, b"s", salted)) == (
        93,
        "Too many iterations",
    )
    config = apply_changes(
        {"producer_byte_rate": "5"}, [CredentialChange("u", 1, 4096, b"salt", salted)]
    )
    assert ScramCredential.parse(config["SCRAM-SHA-256"]).iterations == 4096
    assert config["producer_byte_rate"] == "5"
    assert apply_changes(config, [CredentialChange("u", 1)]) == {"producer_byte_rate": "5"}


def sasl_config(**extra: object) -> BrokerConfig:
    return BrokerConfig.from_dict(
        {
            "broker.id": 0,
            "zookeeper.connect": "127.0.0.1:2181",
            "listeners": ["PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"],
            **extra,
        }
    )


def test_listener_settings_come_from_listener_prefixed_keys() -> None:
    config = sasl_config(
        **{
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="admin" password="admin-pw" user_admin="admin-pw";'
            ),
            "connections.max.reauth.ms": 5000,
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
        }
    )
    settings = listener_sasl(config, "SASL_PLAINTEXT")
    assert settings.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert settings.plain_users == {"admin": "admin-pw"}
    assert settings.reauth_ms == 5000
    login = inter_broker_login(config)
    assert login is not None and (login.username, login.password) == ("admin", "admin-pw")


def test_listener_settings_refuse_what_cannot_work() -> None:
    with pytest.raises(ConfigError, match="GSSAPI"):
        listener_sasl(sasl_config(), "SASL_PLAINTEXT")  # Kafka's default mechanism
    with pytest.raises(ConfigError, match="PlainLoginModule"):
        listener_sasl(sasl_config(**{"sasl.enabled.mechanisms": "PLAIN"}), "SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="unknown broker config key"):
        sasl_config(**{"listener.name.sasl_plaintext.no.such.key": "1"})


def test_scram_server_accepts_librdkafka_doubled_nonce_as_kafka_does() -> None:
    """librdkafka < 2.6 (kcat's 2.0.2) sends its nonce again before the server's combined one;
    Kafka 3.8.1+ checks endsWith, and so do we. The proof covers the message as sent."""
    server = ScramServer(scram.SCRAM_SHA_256, lambda user, mech: rfc_credential())
    client_first = scram.ClientFirstMessage("user", RFC_CLIENT_NONCE)
    server_first = scram.ServerFirstMessage.parse(server.evaluate(client_first.encode()))
    doubled = RFC_CLIENT_NONCE + server_first.nonce
    without_proof = scram.ClientFinalMessage("biws", doubled, b"").without_proof
    message = scram.auth_message(client_first, server_first, without_proof)
    salted = scram.SCRAM_SHA_256.salted_password("pencil", RFC_SALT, 4096)
    proof = scram.SCRAM_SHA_256.client_proof(salted, message)
    server.evaluate(scram.ClientFinalMessage("biws", doubled, proof).encode())
    assert server.principal == KafkaPrincipal.user("user")
