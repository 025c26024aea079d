"""The proxy's TLS settings: upstream client keys (`--command-config`), its own TLS listener
(`--listen SSL://...` with `--listener-config`), each bad setting's error naming its key, and a
TLS client served through a TLS proxy in process."""

from __future__ import annotations

import argparse
import ssl
from pathlib import Path

import pytest
from test_proxy_server import NamedClusterBroker

from epochlog.cli.common import CommandError, command_config_settings
from epochlog.cli.proxy_cmd import (
    ProxyCommandError,
    add_proxy_parser,
    listen_security_protocol,
    listener_context,
    upstream_settings,
)
from epochlog.client.config import Role, load_config
from epochlog.client.network import NetworkClient
from epochlog.config.broker import ConfigError
from epochlog.proxy import ProxyServer, UpstreamConfigError, upstream_security
from epochlog.security.certs import CertificateAuthority, IssuedCertificate
from epochlog.security.tls import TlsSettings


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("proxy-ca"))


@pytest.fixture(scope="module")
def proxy_cert(ca: CertificateAuthority) -> IssuedCertificate:
    return ca.issue("proxy")


def properties(path: Path, **values: str) -> str:
    path.write_text("".join(f"{k.replace('_', '.')}={v}\n" for k, v in values.items()))
    return str(path)


# ------------------------------------------------------------------------------ upstream


def test_plaintext_upstream_has_no_tls() -> None:
    security = upstream_security({}, "h:9092")
    assert security.ssl_context is None and security.security_protocol == "PLAINTEXT"
    assert security.client_id == "epochlog-proxy"


def test_ssl_upstream_verifies_the_brokers_with_the_given_ca(ca: CertificateAuthority) -> None:
    security = upstream_security(
        {"security.protocol": "SSL", "ssl.ca.location": str(ca.ca_file), "client.id": "px"},
        "h:9093",
    )
    assert security.security_protocol == "SSL" and security.client_id == "px"
    assert security.ssl_context is not None
    assert security.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert security.ssl_context.check_hostname


def test_java_truststore_keys_work_upstream_and_jks_is_refused_naming_the_key(
    ca: CertificateAuthority,
) -> None:
    java = {"security.protocol": "SSL", "ssl.truststore.location": str(ca.ca_file)}
    assert upstream_security(java, "h:9093").uses_tls
    with pytest.raises(UpstreamConfigError, match="'ssl.truststore.type'.*JKS"):
        upstream_security({**java, "ssl.truststore.type": "JKS"}, "h:9093")
    with pytest.raises(UpstreamConfigError, match="'ssl.ca.location'.*no file"):
        upstream_security({"security.protocol": "SSL", "ssl.ca.location": "/nope.pem"}, "h:1")


def test_command_config_keeps_admin_keys_and_refuses_unknown_ones(tmp_path: Path) -> None:
    good = properties(
        tmp_path / "good.properties", security_protocol="SSL", linger_ms="5", client_id="px"
    )
    # linger.ms is a producer's key: left out, as Kafka's tools do with a shared file
    assert command_config_settings(good, Role.ADMIN) == {
        "security.protocol": "SSL",
        "client.id": "px",
    }
    bad = properties(tmp_path / "bad.properties", ssl_truststore_locaton="/x.pem")
    with pytest.raises(CommandError, match="'ssl.truststore.locaton' is not a client config"):
        upstream_settings(bad, "h:9093")
    not_pem = properties(
        tmp_path / "not-pem.properties", security_protocol="SSL", ssl_keystore_location=bad
    )
    with pytest.raises(ProxyCommandError, match=r"--command-config .*'ssl.keystore.location'"):
        upstream_settings(not_pem, "h:9093")


# ------------------------------------------------------------------------------ listener


def test_listen_protocol_is_kafkas_listener_prefix() -> None:
    assert listen_security_protocol("127.0.0.1:9092") == "PLAINTEXT"
    assert listen_security_protocol("PLAINTEXT://127.0.0.1:9092") == "PLAINTEXT"
    assert listen_security_protocol("ssl://127.0.0.1:9093") == "SSL"
    with pytest.raises(ProxyCommandError, match="SASL_SSL is not one of PLAINTEXT, SSL"):
        listen_security_protocol("SASL_SSL://127.0.0.1:9093")


def test_listener_config_makes_a_server_context(
    tmp_path: Path, ca: CertificateAuthority, proxy_cert: IssuedCertificate
) -> None:
    path = properties(
        tmp_path / "listener.properties",
        ssl_keystore_location=str(proxy_cert.keystore),
        ssl_truststore_location=str(ca.ca_file),
        ssl_client_auth="required",
    )
    context = listener_context("SSL", path)
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED
    assert listener_context("PLAINTEXT", None) is None


def test_bad_listener_settings_are_refused_naming_the_key(
    tmp_path: Path, proxy_cert: IssuedCertificate
) -> None:
    with pytest.raises(ProxyCommandError, match="needs a keystore"):
        listener_context("SSL", None)
    with pytest.raises(ProxyCommandError, match="--listener-config is for a TLS listener"):
        listener_context("PLAINTEXT", properties(tmp_path / "p.properties", ssl_client_auth="none"))
    not_ssl = properties(tmp_path / "l.properties", listeners="SSL://:1")
    with pytest.raises(ProxyCommandError, match="'listeners' is not an ssl.* listener key"):
        listener_context("SSL", not_ssl)
    no_truststore = properties(
        tmp_path / "t.properties",
        ssl_keystore_location=str(proxy_cert.keystore),
        ssl_client_auth="required",
    )
    with pytest.raises(ProxyCommandError, match="ssl.client.auth: required needs a truststore"):
        listener_context("SSL", no_truststore)
    with pytest.raises(ConfigError, match="ssl.client.auth"):
        TlsSettings.from_ssl_keys("PROXY", {"ssl.client.auth": "sometimes"})


def test_proxy_parser_takes_the_security_options() -> None:
    parser = argparse.ArgumentParser()
    add_proxy_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "proxy",
            "--listen",
            "SSL://127.0.0.1:9093",
            "--upstream",
            "h:9093",
            "--command-config",
            "up.properties",
            "--listener-config",
            "listener.properties",
        ]
    )
    assert (args.command_config, args.listener_config) == ("up.properties", "listener.properties")


# ------------------------------------------------------------------------------ in process


async def test_a_tls_client_is_served_through_a_tls_listener(
    tmp_path: Path, ca: CertificateAuthority, proxy_cert: IssuedCertificate
) -> None:
    """Bootstrap and node listeners both serve TLS; the client checks the proxy's certificate
    against the host it is told (127.0.0.1, in the certificate's SANs)."""
    broker = await NamedClusterBroker().start()
    listener = listener_context(
        "SSL", properties(tmp_path / "l.properties", ssl_keystore_location=str(proxy_cert.keystore))
    )
    proxy = await ProxyServer(
        ("127.0.0.1", 0), [("127.0.0.1", broker.port)], listener_ssl=listener
    ).start()
    config = load_config(
        Role.ADMIN,
        {
            "bootstrap.servers": f"127.0.0.1:{proxy.listen_port}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca.ca_file),
        },
    )
    net = NetworkClient(config)
    try:
        cluster = await net.update_metadata(5000)
        assert cluster.cluster_id == "one"
        assert cluster.brokers[4].port == proxy.node_ports[4]
        conn = await net.ready(4)  # the node listener, over TLS too
        assert conn.connected
        assert proxy.status()["listener_security_protocol"] == "SSL"
    finally:
        await net.close()
        await proxy.close()
        await broker.stop()
