"""The data source's security options: Spark's `kafka.security.protocol` and `kafka.ssl.*`
(Java's PEM stores, librdkafka's files) reach every client the source and sink make, and a bad
one fails at load naming the option as the user wrote it. No Spark, no cluster."""

from __future__ import annotations

import pytest

from epochlog.client.config import Role
from epochlog.security.certs import CertificateAuthority, IssuedCertificate
from epochlog.spark.clients import consumer_settings
from epochlog.spark.options import (
    OptionError,
    parse_sink_options,
    parse_source_options,
    role_settings,
)

BOOT = {"kafka.bootstrap.servers": "localhost:9093"}


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("spark-ca"))


@pytest.fixture(scope="module")
def client_cert(ca: CertificateAuthority) -> IssuedCertificate:
    return ca.issue("spark")


def java_ssl(ca: CertificateAuthority, client_cert: IssuedCertificate) -> dict[str, str]:
    return {
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": str(ca.ca_file),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.keystore.location": str(client_cert.keystore),
        "kafka.ssl.keystore.type": "PEM",
    }


SECURITY_KEYS = {
    "security.protocol",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.keystore.location",
    "ssl.keystore.type",
}


def test_java_style_ssl_options_reach_the_source_and_sink_clients(
    ca: CertificateAuthority, client_cert: IssuedCertificate
) -> None:
    options = {**BOOT, **java_ssl(ca, client_cert), "subscribe": "t"}
    source = parse_source_options(options, streaming=True)
    for settings in (
        consumer_settings(source.client),  # executors' fetchers and the driver's consumer
        role_settings(source.client, Role.ADMIN),  # the driver's lookups
    ):
        assert set(settings) >= SECURITY_KEYS
        assert settings["ssl.truststore.location"] == str(ca.ca_file)
    sink = parse_sink_options(
        {**BOOT, **java_ssl(ca, client_cert), "topic": "t"}, {"value": "binary"}, streaming=False
    )
    assert set(role_settings(sink.client, Role.PRODUCER)) >= SECURITY_KEYS


def test_librdkafka_style_ssl_options_pass_too(
    ca: CertificateAuthority, client_cert: IssuedCertificate
) -> None:
    options = {
        **BOOT,
        "subscribe": "t",
        "kafka.security.protocol": "ssl",
        "kafka.ssl.ca.location": str(ca.ca_file),
        "kafka.ssl.certificate.location": str(client_cert.certificate),
        "kafka.ssl.key.location": str(client_cert.key),
    }
    client = parse_source_options(options, streaming=False).client
    assert client["ssl.key.location"] == str(client_cert.key)


def test_a_jks_truststore_fails_at_load_naming_the_option(
    ca: CertificateAuthority, client_cert: IssuedCertificate
) -> None:
    options = {**BOOT, **java_ssl(ca, client_cert), "subscribe": "t"}
    options["kafka.ssl.truststore.type"] = "JKS"
    with pytest.raises(
        OptionError, match=r"option kafka\.ssl.truststore.type: JKS stores are not read"
    ):
        parse_source_options(options, streaming=True)


def test_a_missing_file_fails_at_load_naming_the_option(
    ca: CertificateAuthority, client_cert: IssuedCertificate
) -> None:
    options = {**BOOT, **java_ssl(ca, client_cert), "topic": "t"}
    options["kafka.ssl.keystore.location"] = "/nowhere/spark.pem"
    with pytest.raises(OptionError, match=r"option kafka\.ssl.keystore.location: no file /nowhere"):
        parse_sink_options(options, {"value": "binary"}, streaming=False)
    bare = {**BOOT, "subscribe": "t", "security.protocol": "SSL", "ssl.ca.location": "/nowhere"}
    with pytest.raises(OptionError, match=r"option ssl\.ca.location: no file"):
        parse_source_options(bare, streaming=True)
