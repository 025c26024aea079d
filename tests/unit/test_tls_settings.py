"""TLS settings -> SSL contexts: Kafka's ssl.* keys, listener overrides, PEM stores only, and a
clear error naming the key for each bad setting."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest

from epochlog.config.broker import BrokerConfig, ConfigError
from epochlog.security.certs import CertificateAuthority
from epochlog.security.tls import (
    TlsSettings,
    client_context,
    inter_broker_client_context,
    listener_tls,
    openssl_cipher_name,
    principal_mapper,
    server_context,
)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("ca"))


def config(**values: Any) -> BrokerConfig:
    base = {
        "broker.id": 1,
        "zookeeper.connect": "127.0.0.1:2181",
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
    }
    return BrokerConfig({**base, **{k.replace("_", "."): v for k, v in values.items()}})


def settings(values: dict[str, Any], listener: str = "SSL") -> TlsSettings:
    base = {
        "broker.id": 1,
        "zookeeper.connect": "127.0.0.1:2181",
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
    }
    return TlsSettings.for_listener(BrokerConfig({**base, **values}), listener)


def test_keystore_file_and_truststore_make_a_server_context(ca: CertificateAuthority) -> None:
    broker = ca.issue("broker-1")
    context = server_context(
        settings(
            {
                "ssl.keystore.location": str(broker.keystore),
                "ssl.truststore.location": str(ca.ca_file),
                "ssl.client.auth": "required",
            }
        )
    )
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_inline_pem_keystore_and_truststore_load(ca: CertificateAuthority) -> None:
    broker = ca.issue("broker-inline")
    context = server_context(
        settings(
            {
                "ssl.keystore.key": broker.key.read_text(),
                "ssl.keystore.certificate.chain": broker.certificate.read_text(),
                "ssl.truststore.certificates": ca.ca_file.read_text(),
                "ssl.client.auth": "requested",
            }
        )
    )
    assert context.verify_mode == ssl.CERT_OPTIONAL


def test_encrypted_key_needs_its_password(ca: CertificateAuthority) -> None:
    broker = ca.issue("broker-secret", password="s3cret")
    ok = settings({"ssl.keystore.location": str(broker.keystore), "ssl.key.password": "s3cret"})
    assert isinstance(server_context(ok), ssl.SSLContext)
    wrong = settings({"ssl.keystore.location": str(broker.keystore), "ssl.key.password": "nope"})
    with pytest.raises(ConfigError, match=r"ssl.keystore.location.*ssl.key.password"):
        server_context(wrong)


def test_listener_prefixed_key_overrides_the_plain_one_on_that_listener_only() -> None:
    c = config(
        **{
            "ssl.client.auth": "none",
            "listener.name.ssl.ssl.client.auth": "required",
        }
    )
    assert TlsSettings.for_listener(c, "SSL")["ssl.client.auth"] == "required"
    assert TlsSettings.for_listener(c, "SSL").key("ssl.client.auth") == (
        "listener.name.ssl.ssl.client.auth"
    )
    assert TlsSettings.for_listener(c, "PLAINTEXT")["ssl.client.auth"] == "none"


def test_an_unknown_listener_scoped_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="listener.name.ssl.ssl.clientauth"):
        config(**{"listener.name.ssl.ssl.clientauth": "required"})
    with pytest.raises(ConfigError, match="listener.name.ssl.log.dirs"):
        config(**{"listener.name.ssl.log.dirs": "/tmp/x"})


def test_listener_scoped_value_is_validated_like_the_plain_key() -> None:
    with pytest.raises(ConfigError, match="listener.name.ssl.ssl.client.auth"):
        config(**{"listener.name.ssl.ssl.client.auth": "sometimes"})


@pytest.mark.parametrize(
    ("key", "store"),
    [("ssl.keystore.type", "JKS"), ("ssl.truststore.type", "PKCS12")],
)
def test_jks_and_pkcs12_are_refused_naming_the_key(
    ca: CertificateAuthority, key: str, store: str
) -> None:
    broker = ca.issue("broker-jks")
    s = settings(
        {
            "ssl.keystore.location": str(broker.keystore),
            "ssl.truststore.location": str(ca.ca_file),
            key: store,
        }
    )
    with pytest.raises(ConfigError, match=rf"{key}: {store} stores are not read; PEM"):
        server_context(s)


def test_bad_settings_name_their_key(ca: CertificateAuthority, tmp_path: Path) -> None:
    broker = ca.issue("broker-bad")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a pem file\n")
    cases = [
        ({}, "needs a keystore"),
        ({"ssl.keystore.location": str(tmp_path / "absent.pem")}, "ssl.keystore.location: no file"),
        ({"ssl.keystore.location": str(garbage)}, "ssl.keystore.location: cannot load"),
        ({"ssl.keystore.key": broker.key.read_text()}, "needs ssl.keystore.certificate.chain"),
        (
            {"ssl.keystore.location": str(broker.keystore), "ssl.keystore.password": "x"},
            "ssl.keystore.password: cannot be given with a PEM keystore",
        ),
        (
            {"ssl.keystore.location": str(broker.keystore), "ssl.client.auth": "required"},
            "ssl.client.auth: required needs a truststore",
        ),
        (
            {
                "ssl.keystore.location": str(broker.keystore),
                "ssl.truststore.location": str(garbage),
            },
            "ssl.truststore.location: no PEM certificates load",
        ),
        (
            {"ssl.keystore.location": str(broker.keystore), "ssl.enabled.protocols": "TLSv1.1"},
            "ssl.enabled.protocols: TLSv1.1",
        ),
        (
            {"ssl.keystore.location": str(broker.keystore), "ssl.protocol": "SSLv3"},
            "ssl.protocol: 'SSLv3'",
        ),
        (
            {"ssl.keystore.location": str(broker.keystore), "ssl.cipher.suites": "TLS_NOPE"},
            "ssl.cipher.suites: 'TLS_NOPE'",
        ),
    ]
    for values, message in cases:
        with pytest.raises(ConfigError, match=message):
            server_context(settings(values))


def test_enabled_protocols_bound_the_versions(ca: CertificateAuthority) -> None:
    broker = ca.issue("broker-13")
    context = server_context(
        settings(
            {"ssl.keystore.location": str(broker.keystore), "ssl.enabled.protocols": "TLSv1.3"}
        )
    )
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_3


def test_iana_cipher_suite_names_are_understood(ca: CertificateAuthority) -> None:
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256") == (
        "ECDHE-ECDSA-AES128-GCM-SHA256"
    )
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256") == (
        "ECDHE-RSA-CHACHA20-POLY1305"
    )
    assert openssl_cipher_name("TLS_RSA_WITH_AES_256_GCM_SHA384") == "AES256-GCM-SHA384"
    broker = ca.issue("broker-ciphers")
    context = server_context(
        settings(
            {
                "ssl.keystore.location": str(broker.keystore),
                "ssl.cipher.suites": (
                    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256"
                ),
            }
        )
    )
    tls12 = [c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES128-GCM-SHA256"]


def test_inter_broker_context_only_for_a_tls_inter_broker_listener(
    ca: CertificateAuthority,
) -> None:
    broker = ca.issue("broker-ib")
    plain = config()
    assert inter_broker_client_context(plain) is None
    tls = config(
        **{
            "inter.broker.listener.name": "SSL",
            "ssl.keystore.location": str(broker.keystore),
            "ssl.truststore.location": str(ca.ca_file),
        }
    )
    context = inter_broker_client_context(tls)
    assert context is not None
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert set(listener_tls(tls)) == {"SSL"}


def test_endpoint_identification_can_be_turned_off(ca: CertificateAuthority) -> None:
    context = client_context(
        settings(
            {
                "ssl.truststore.location": str(ca.ca_file),
                "ssl.endpoint.identification.algorithm": "",
            }
        )
    )
    assert not context.check_hostname
    with pytest.raises(ConfigError, match="ssl.endpoint.identification.algorithm"):
        client_context(settings({"ssl.endpoint.identification.algorithm": "ldap"}))


def test_bad_mapping_rules_are_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules: Invalid rule"):
        principal_mapper(settings({"ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/X"}))


def test_a_context_pair_completes_a_handshake_in_memory(ca: CertificateAuthority) -> None:
    """Server and client contexts from these settings agree (no sockets: memory BIOs)."""
    broker = ca.issue("broker-hs")
    client_cert = ca.issue("alice")
    server = server_context(
        settings(
            {
                "ssl.keystore.location": str(broker.keystore),
                "ssl.truststore.location": str(ca.ca_file),
                "ssl.client.auth": "required",
            }
        )
    )
    client = client_context(
        settings(
            {
                "ssl.keystore.location": str(client_cert.keystore),
                "ssl.truststore.location": str(ca.ca_file),
            }
        )
    )
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    s = server.wrap_bio(s_in, s_out, server_side=True)
    c = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    done = {"s": False, "c": False}
    for _ in range(10):
        for name, obj in (("c", c), ("s", s)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            break
    assert all(done.values())
    assert s.getpeercert(binary_form=True)
