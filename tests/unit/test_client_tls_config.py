"""The client's TLS settings: security.protocol, librdkafka's and Java's PEM keys, and errors
naming the key."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest

from epochlog.client.config import Role, load_config
from epochlog.client.errors import ConfigError
from epochlog.client.tls import client_ssl_context
from epochlog.security.certs import CertificateAuthority


def context(**values: Any) -> ssl.SSLContext | None:
    raw = {
        "bootstrap.servers": "localhost:9093",
        **{k.replace("_", "."): v for k, v in values.items()},
    }
    return client_ssl_context(load_config(Role.PRODUCER, raw))


def test_plaintext_has_no_context() -> None:
    assert context() is None


def test_librdkafka_and_java_keys_make_a_verifying_context(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path)
    alice = ca.issue("alice")
    librdkafka = context(
        **{
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca.ca_file),
            "ssl.certificate.location": str(alice.certificate),
            "ssl.key.location": str(alice.key),
        }
    )
    assert librdkafka is not None and librdkafka.check_hostname
    java = context(
        **{
            "security.protocol": "ssl",
            "ssl.truststore.location": str(ca.ca_file),
            "ssl.truststore.type": "PEM",
            "ssl.keystore.location": str(alice.keystore),
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert java is not None and not java.check_hostname
    assert java.verify_mode == ssl.CERT_REQUIRED


def test_bad_settings_name_their_key(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path)
    secret = ca.issue("secret", password="pw")
    cases = [
        (
            {"ssl.truststore.location": str(ca.ca_file), "ssl.truststore.type": "JKS"},
            "ssl.truststore.type",
        ),
        ({"ssl.ca.location": str(tmp_path / "absent.pem")}, "ssl.ca.location"),
        ({"ssl.key.location": str(secret.key)}, "ssl.key.location"),
        (
            {"ssl.keystore.location": str(secret.keystore), "ssl.key.password": "wrong"},
            "ssl.keystore.location",
        ),
    ]
    for values, key in cases:
        with pytest.raises(ConfigError, match=key):
            context(**{"security.protocol": "SSL", **values})
    with pytest.raises(ConfigError, match="security.protocol"):
        context(**{"security.protocol": "TLS"})
