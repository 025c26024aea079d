"""The web console against a cluster whose clients must use TLS with a client certificate
(`ssl.client.auth=required` on the listener the console is given), configured only through a
client.properties file passed as `--command-config`, read over HTTP as a browser would.

The cluster's harness keeps its PLAINTEXT listener (it makes the topic and the records); the
console only ever sees the MTLS listener. A second console with the same file minus the
keystore must fail to read the cluster (502), so the first one's pages prove the certificate
was used. Each console is its own process, stopped by its pid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.x509.oid import NameOID

from epochlog.processes import spawn
from epochlog.security.certs import CertificateAuthority, IssuedCertificate
from epochlog.testing.cluster import LocalCluster
from epochlog.zk.launcher import free_port

TOPIC = "console-tls"
GROUP = "console-tls-group"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("console-tls-ca"))


@pytest.fixture(scope="module")
def operator(ca: CertificateAuthority) -> IssuedCertificate:
    return ca.issue("operator", attributes=((NameOID.ORGANIZATION_NAME, "epochlog"),))


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, ca: CertificateAuthority
) -> Iterator[LocalCluster]:
    broker_cert = ca.issue("broker", attributes=((NameOID.ORGANIZATION_NAME, "epochlog"),))
    local = LocalCluster(
        tmp_path_factory.mktemp("console-tls"),
        3,
        extra_listeners=("MTLS",),
        broker_config={
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MTLS:SSL",
            "ssl.keystore.location": str(broker_cert.keystore),
            "ssl.truststore.location": str(ca.ca_file),
            "ssl.client.auth": "required",
            "offsets.topic.num.partitions": 3,
            "group.initial.rebalance.delay.ms": 0,
        },
    )
    local.start()
    try:
        yield local
    finally:
        local.close()


@pytest.fixture(scope="module")
def records(cluster: LocalCluster) -> None:
    """A topic with JSON records and a group 3 records behind, made over PLAINTEXT."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(5):
        producer.produce(TOPIC, value=json.dumps({"secure": True, "n": i}).encode(), partition=0)
    assert producer.flush(30) == 0
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP})
    try:
        consumer.commit(offsets=[ck.TopicPartition(TOPIC, 0, 2)], asynchronous=False)
    finally:
        consumer.close()


def properties(path: Path, entries: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in entries.items()))
    return path


@contextmanager
def console(cluster: LocalCluster, command_config: Path) -> Iterator[str]:
    port = free_port()
    process = spawn(
        [
            sys.executable,
            "-m",
            "epochlog",
            "console",
            "--bootstrap-server",
            cluster.listener_bootstrap("MTLS"),
            "--command-config",
            str(command_config),
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        announced = process.stdout.readline().decode() if process.stdout else ""
        assert f"console at {url}/" in announced, announced
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def test_the_console_reads_a_mutual_tls_cluster_through_its_command_config(
    cluster: LocalCluster,
    ca: CertificateAuthority,
    operator: IssuedCertificate,
    records: None,
    tmp_path: Path,
) -> None:
    config = properties(
        tmp_path / "client.properties",
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.ca_file),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(operator.keystore),
        },
    )
    with console(cluster, config) as url:
        status, overview = get(url + "/")
        assert status == 200, overview
        epochs = cluster.zk_state()["brokers"]
        for broker_id, epoch in epochs.items():
            assert str(epoch) in overview, f"broker {broker_id}'s epoch {epoch} not shown"
        # every endpoint the console was told of is the MTLS listener's
        mtls_ports = {hp.rsplit(":", 1)[1] for hp in cluster.listener_bootstrap("MTLS").split(",")}
        assert any(port in overview for port in mtls_ports), overview

        status, topics = get(url + "/topics")
        assert status == 200 and TOPIC in topics

        status, messages = get(url + f"/topics/{TOPIC}/messages?partition=0&offset=3")
        assert status == 200, messages
        assert "&quot;n&quot;: 3" in messages or '"n": 3' in messages, messages

        status, group = get(url + f"/groups/{GROUP}")
        assert status == 200, group
        assert '<b id="total-lag">3</b>' in group, group  # log end 5, committed 2


def test_without_its_client_certificate_the_console_cannot_read_the_cluster(
    cluster: LocalCluster, ca: CertificateAuthority, tmp_path: Path
) -> None:
    config = properties(
        tmp_path / "no-certificate.properties",
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.ca_file),
            "request.timeout.ms": "5000",
            "default.api.timeout.ms": "5000",
        },
    )
    with console(cluster, config) as url:
        status, page = get(url + "/")
    assert status == 502, page
