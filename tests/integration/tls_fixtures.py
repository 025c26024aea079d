"""A one-broker TLS cluster for the tests of TLS clients (the proxy, Spark): one CA, the
broker's certificate (SAN localhost, 127.0.0.1) and a client certificate it signs.

Beside the harness's PLAINTEXT listener the broker has `SSL` (no client certificate asked),
`MTLS` (`listener.name.mtls.ssl.client.auth=required`) and `SASL_SSL` (PLAIN, users in
`PLAIN_USERS`); the clients under test use those.
Test modules import the fixtures they use (`from tests.integration.tls_fixtures import ...`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from cryptography.x509.oid import NameOID

from epochlog.client import Admin, KafkaError
from epochlog.security.certs import CertificateAuthority, IssuedCertificate
from epochlog.testing.cluster import LocalCluster

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{user}="{password}"' for user, password in PLAIN_USERS.items())
    + ";"
)


def plain_jaas_login(user: str) -> str:
    """Java's sasl.jaas.config for a client logging in as `user` with PLAIN."""
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{PLAIN_USERS[user]}";'
    )


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("tls-clients-ca"))


@pytest.fixture(scope="module")
def client_cert(ca: CertificateAuthority) -> IssuedCertificate:
    return ca.issue("client", attributes=((NameOID.ORGANIZATION_NAME, "epochlog"),))


@pytest.fixture(scope="module")
def tls_cluster(
    tmp_path_factory: pytest.TempPathFactory, ca: CertificateAuthority
) -> Iterator[LocalCluster]:
    broker_cert = ca.issue("broker", attributes=((NameOID.ORGANIZATION_NAME, "epochlog"),))
    cluster = LocalCluster(
        tmp_path_factory.mktemp("tls-clients"),
        1,
        extra_listeners=("SSL", "MTLS", "SASL_SSL"),
        broker_config={
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL"
            ),
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "ssl.keystore.location": str(broker_cert.keystore),
            "ssl.truststore.location": str(ca.ca_file),
            "listener.name.mtls.ssl.client.auth": "required",
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.num.partitions": 1,
            "default.replication.factor": 1,
            "group.initial.rebalance.delay.ms": 0,
        },
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


def create_topic(cluster: LocalCluster, name: str, partitions: int = 1) -> str:
    """`name` with `partitions` partitions, each with a leader (over the PLAINTEXT listener)."""
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(name, partitions, 1)
        deadline = time.monotonic() + 30
        while True:
            try:
                parts = admin.describe_topics([name])[name].partitions
                if len(parts) == partitions and all(p.leader >= 0 for p in parts):
                    return name
            except KafkaError:  # not in the broker's metadata yet
                pass
            assert time.monotonic() < deadline, f"no leaders for {name}"
            time.sleep(0.1)
