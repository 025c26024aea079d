# ruff: noqa: F811 - pytest fixtures imported from tls_fixtures are parameters here
"""`epochlog proxy` with TLS (issue 21, item 5): in front of a TLS cluster, plaintext to the
proxy and TLS upstream (a client certificate from the proxy's --command-config where the
broker requires one), and TLS on both sides (--listen SSL:// with --listener-config).

The proxy runs as a process started through the CLI, as a user would run it. Clients:
confluent-kafka and kafka-python on both proxies, our client on the TLS one. Plaintext and
garbage on the TLS proxy's port close only that connection; it keeps serving.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

from epochlog.client import Consumer, Producer
from epochlog.processes import spawn
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, encode_request
from epochlog.security.certs import CertificateAuthority, IssuedCertificate
from epochlog.testing.cluster import LocalCluster
from epochlog.zk.launcher import free_port
from tests.integration.tls_fixtures import (  # noqa: F401 - fixtures
    PLAIN_USERS,
    ca,
    client_cert,
    create_topic,
    tls_cluster,
)


class ProxyProcess:
    """`epochlog proxy` in a process of its own, stopped by `stop()`."""

    def __init__(self, directory: Path, upstream: str, listen_protocol: str, *args: str) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.control = str(directory / f"proxy-{self.port}.sock")
        self.log = directory / f"proxy-{self.port}.out"
        command = [
            sys.executable,
            "-m",
            "epochlog",
            "proxy",
            "--listen",
            f"{listen_protocol}://{self.bootstrap}",
            "--upstream",
            upstream,
            "--control",
            self.control,
            *args,
        ]
        with open(self.log, "wb") as out:
            self.process = spawn(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + 30
        while not os.path.exists(self.control):
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "the proxy did not start"
            time.sleep(0.05)

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


def write_properties(path: Path, values: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return str(path)


@pytest.fixture(scope="module")
def plain_to_tls_proxy(
    tls_cluster: LocalCluster,
    ca: CertificateAuthority,
    client_cert: IssuedCertificate,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ProxyProcess]:
    """Plaintext to clients; upstream the MTLS listener with Java's PEM store keys."""
    directory = tmp_path_factory.mktemp("proxy-plain")
    upstream = write_properties(
        directory / "upstream.properties",
        {
            "security.protocol": "SSL",
            "ssl.truststore.location": str(ca.ca_file),
            "ssl.truststore.type": "PEM",
            "ssl.keystore.location": str(client_cert.keystore),
            "ssl.keystore.type": "PEM",
        },
    )
    proxy = ProxyProcess(
        directory,
        tls_cluster.listener_bootstrap("MTLS"),
        "PLAINTEXT",
        "--command-config",
        upstream,
    )
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def tls_proxy(
    tls_cluster: LocalCluster,
    ca: CertificateAuthority,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ProxyProcess]:
    """TLS to clients (its own certificate) and to the SSL listener (librdkafka's keys)."""
    directory = tmp_path_factory.mktemp("proxy-tls")
    proxy_cert = ca.issue("proxy")
    upstream = write_properties(
        directory / "upstream.properties",
        {"security.protocol": "SSL", "ssl.ca.location": str(ca.ca_file)},
    )
    listener = write_properties(
        directory / "listener.properties", {"ssl.keystore.location": str(proxy_cert.keystore)}
    )
    proxy = ProxyProcess(
        directory,
        tls_cluster.listener_bootstrap("SSL"),
        "SSL",
        "--command-config",
        upstream,
        "--listener-config",
        listener,
    )
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def sasl_proxy(
    tls_cluster: LocalCluster,
    ca: CertificateAuthority,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ProxyProcess]:
    """TLS to clients, SASL_SSL upstream: the proxy's own Metadata probes log in as admin;
    clients' SASL exchanges pass through to the broker."""
    directory = tmp_path_factory.mktemp("proxy-sasl")
    proxy_cert = ca.issue("proxy")
    upstream = write_properties(
        directory / "upstream.properties",
        {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(ca.ca_file),
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": PLAIN_USERS["admin"],
        },
    )
    listener = write_properties(
        directory / "listener.properties", {"ssl.keystore.location": str(proxy_cert.keystore)}
    )
    proxy = ProxyProcess(
        directory,
        tls_cluster.listener_bootstrap("SASL_SSL"),
        "SSL",
        "--command-config",
        upstream,
        "--listener-config",
        listener,
    )
    yield proxy
    proxy.stop()


def values(name: str, count: int) -> list[bytes]:
    return [f"{name}-{i:04d}".encode() for i in range(count)]


def confluent_round_trip(config: dict[str, str], topic: str, sent: list[bytes]) -> list[bytes]:
    producer = ck.Producer({**config, "acks": "all"})
    for value in sent:
        producer.produce(topic, value, partition=0)
    assert producer.flush(60) == 0
    consumer = ck.Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    got: list[bytes] = []
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while len(got) < len(sent):
            assert time.monotonic() < deadline, f"read {len(got)} of {len(sent)} from {topic}"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


def kafka_python_round_trip(common: dict[str, str], topic: str, sent: list[bytes]) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(acks="all", **common)
    try:
        for value in sent:
            producer.send(topic, value, partition=0)
        producer.flush(60)
    finally:
        producer.close()
    consumer = KafkaConsumer(auto_offset_reset="earliest", consumer_timeout_ms=60000, **common)
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        for record in consumer:
            got.append(record.value)
            if len(got) == len(sent):
                break
    finally:
        consumer.close()
    return got


# ------------------------------------------------------------------------------ plaintext -> TLS


def test_confluent_kafka_through_a_plaintext_proxy_to_a_client_auth_tls_listener(
    tls_cluster: LocalCluster, plain_to_tls_proxy: ProxyProcess
) -> None:
    """The broker requires a client certificate: only the proxy has one, so every record
    went through the proxy's TLS upstream connections."""
    topic = create_topic(tls_cluster, "proxy-plain-confluent")
    sent = values("confluent", 100)
    got = confluent_round_trip({"bootstrap.servers": plain_to_tls_proxy.bootstrap}, topic, sent)
    assert got == sent
    assert "PLAINTEXT://127.0.0.1" in plain_to_tls_proxy.output()
    assert "(SSL, cluster" in plain_to_tls_proxy.output()


def test_kafka_python_through_a_plaintext_proxy_to_tls(
    tls_cluster: LocalCluster, plain_to_tls_proxy: ProxyProcess
) -> None:
    topic = create_topic(tls_cluster, "proxy-plain-kafka-python")
    sent = values("kafka-python", 50)
    got = kafka_python_round_trip({"bootstrap_servers": plain_to_tls_proxy.bootstrap}, topic, sent)
    assert got == sent


# ------------------------------------------------------------------------------ TLS -> TLS


def test_confluent_kafka_over_tls_to_a_tls_proxy(
    tls_cluster: LocalCluster, tls_proxy: ProxyProcess, ca: CertificateAuthority
) -> None:
    topic = create_topic(tls_cluster, "proxy-tls-confluent")
    sent = values("confluent", 100)
    config = {
        "bootstrap.servers": tls_proxy.bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.ca_file),
    }
    assert confluent_round_trip(config, topic, sent) == sent


def test_kafka_python_over_tls_to_a_tls_proxy(
    tls_cluster: LocalCluster, tls_proxy: ProxyProcess, ca: CertificateAuthority
) -> None:
    topic = create_topic(tls_cluster, "proxy-tls-kafka-python")
    sent = values("kafka-python", 50)
    common = {
        "bootstrap_servers": tls_proxy.bootstrap,
        "security_protocol": "SSL",
        "ssl_cafile": str(ca.ca_file),
    }
    assert kafka_python_round_trip(common, topic, sent) == sent


def test_epochlog_client_over_tls_to_a_tls_proxy(
    tls_cluster: LocalCluster, tls_proxy: ProxyProcess, ca: CertificateAuthority
) -> None:
    topic = create_topic(tls_cluster, "proxy-tls-epochlog")
    config = {
        "bootstrap.servers": tls_proxy.bootstrap,
        "security.protocol": "SSL",
        "ssl.truststore.location": str(ca.ca_file),
    }
    sent = values("epochlog", 50)
    with Producer(config) as producer:
        for future in [producer.send(topic, v, partition=0) for v in sent]:
            future.result(60)
    with Consumer({**config, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(sent):
            assert time.monotonic() < deadline, f"read {len(got)} of {len(sent)}"
            got.extend(r.value for r in consumer.poll(500))
    assert got == sent


def test_plaintext_and_garbage_on_the_tls_proxy_close_only_that_connection(
    tls_cluster: LocalCluster, tls_proxy: ProxyProcess, ca: CertificateAuthority
) -> None:
    metadata = encode_request(ApiKey.METADATA, 1, 1, "plain", m.MetadataRequest(topics=[]))
    for junk in (metadata, b"\x00" * 3 + b"garbage" * 50):
        with socket.create_connection(("127.0.0.1", tls_proxy.port), timeout=30) as sock:
            sock.sendall(junk)
            answer = sock.recv(65536)
            # EOF, or a TLS alert record (content type 21) before it: never a Kafka answer
            assert answer == b"" or answer[0] == 21, answer[:16]
    assert tls_proxy.process.poll() is None
    config = {
        "bootstrap.servers": tls_proxy.bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.ca_file),
    }
    topic = create_topic(tls_cluster, "proxy-tls-after-junk")
    assert confluent_round_trip(config, topic, [b"still served"]) == [b"still served"]


# ------------------------------------------------------------------------------ SASL through


def test_a_clients_sasl_login_passes_through_the_proxy_to_the_broker(
    tls_cluster: LocalCluster, sasl_proxy: ProxyProcess, ca: CertificateAuthority
) -> None:
    """alice logs in to the broker through the proxy (SASL_SSL to the proxy, which speaks TLS
    to the broker's SASL_SSL listener and forwards SaslHandshake/SaslAuthenticate); a wrong
    password gets an authentication error and nothing else."""
    topic = create_topic(tls_cluster, "proxy-sasl-confluent")
    config = {
        "bootstrap.servers": sasl_proxy.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca.ca_file),
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": PLAIN_USERS["alice"],
    }
    sent = values("sasl", 30)
    assert confluent_round_trip(config, topic, sent) == sent
    errors: list[ck.KafkaError] = []
    reports: list[ck.KafkaError | None] = []
    refused = ck.Producer(
        {**config, "sasl.password": "wrong", "error_cb": errors.append, "message.timeout.ms": 5000}
    )
    refused.produce(topic, b"never", partition=0, on_delivery=lambda e, _: reports.append(e))
    refused.flush(30)
    assert len(reports) == 1 and reports[0] is not None  # not delivered
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors), errors
    del refused
