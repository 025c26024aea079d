"""TLS listeners (issue 21): every client produces and consumes over SSL, brokers replicate over
TLS, a listener that requires client certificates turns away a client without one, and
plaintext or garbage on a TLS port closes only that connection.

One 3-broker cluster for the module. Beside the harness's PLAINTEXT listener each broker has
`SSL` (client certificates requested; the inter-broker listener, so replica fetchers, the
AlterPartition manager and the controller's channel all connect with TLS, each broker showing
its own certificate) and `MTLS` (an SSL listener whose `listener.name.mtls.ssl.client.auth` is
required). One CA signs the brokers' certificate (SAN localhost, 127.0.0.1) and the clients'.
`ssl.principal.mapping.rules` maps `CN=<name>,OU=clients,...` to the lower-cased name.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator

import confluent_kafka as ck
import pytest
from cryptography.x509.oid import NameOID

from epochlog.client import Admin, Consumer, KafkaError, Producer
from epochlog.security.certs import CertificateAuthority, IssuedCertificate
from epochlog.testing.cluster import LocalCluster

MAPPING_RULES = "RULE:^CN=([^,]+),OU=clients.*$/$1/L,DEFAULT"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("tls-ca"))


@pytest.fixture(scope="module")
def alice(ca: CertificateAuthority) -> IssuedCertificate:
    return ca.issue(
        "Alice",
        attributes=(
            (NameOID.ORGANIZATIONAL_UNIT_NAME, "clients"),
            (NameOID.ORGANIZATION_NAME, "epochlog"),
        ),
    )


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, ca: CertificateAuthority
) -> Iterator[LocalCluster]:
    broker_cert = ca.issue("broker", attributes=((NameOID.ORGANIZATION_NAME, "epochlog"),))
    local = LocalCluster(
        tmp_path_factory.mktemp("tls"),
        3,
        extra_listeners=("SSL", "MTLS"),
        broker_config={
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
            "inter.broker.listener.name": "SSL",
            "ssl.keystore.location": str(broker_cert.keystore),
            "ssl.truststore.location": str(ca.ca_file),
            "ssl.client.auth": "requested",
            "listener.name.mtls.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": MAPPING_RULES,
            "offsets.topic.num.partitions": 3,
            "group.initial.rebalance.delay.ms": 0,
        },
    )
    local.start()
    yield local
    local.close()


def until(what: str, check: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f} s"
        time.sleep(0.2)


def create_topic(cluster: LocalCluster, name: str, partitions: int = 1) -> None:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(name, partitions, 3, configs={"min.insync.replicas": "2"})


        def led() -> bool:
            try:
                return all(p.leader >= 0 for p in admin.describe_topics([name])[name].partitions)
            except KafkaError:  # not in this broker's metadata yet
                return False

        until(f"leaders for {name}", led)


def confluent_ssl(cluster: LocalCluster, ca: CertificateAuthority, **extra: str) -> dict[str, str]:
    return {
        "bootstrap.servers": cluster.listener_bootstrap("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.ca_file),
        **extra,
    }


def confluent_read(config: dict[str, str], topic: str, count: int) -> list[bytes]:
    consumer = ck.Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    got: list[bytes] = []
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while len(got) < count:
            assert time.monotonic() < deadline, f"read {len(got)} of {count} from {topic}"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


def values(name: str, count: int, size: int = 0) -> list[bytes]:
    return [f"{name}-{i:05d}".encode().ljust(size, b".") for i in range(count)]


# ------------------------------------------------------------------------------ clients


def test_confluent_kafka_produces_and_consumes_over_ssl_including_large_fetches(
    cluster: LocalCluster, ca: CertificateAuthority
) -> None:
    """Fetch answers above 64 KiB carry file slices: over TLS they go through the transport."""
    create_topic(cluster, "tls-confluent")
    sent = values("confluent", 400, size=2000)  # 800 KB: fetch answers far past 64 KiB
    producer = ck.Producer(confluent_ssl(cluster, ca, acks="all"))
    for value in sent:
        producer.produce("tls-confluent", value, partition=0)
    assert producer.flush(60) == 0
    assert confluent_read(confluent_ssl(cluster, ca), "tls-confluent", len(sent)) == sent


def test_kafka_python_produces_and_consumes_over_ssl(
    cluster: LocalCluster, ca: CertificateAuthority
) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    create_topic(cluster, "tls-kafka-python")
    common = {
        "bootstrap_servers": cluster.listener_bootstrap("SSL"),
        "security_protocol": "SSL",
        "ssl_cafile": str(ca.ca_file),
    }
    sent = values("kafka-python", 50)
    producer = KafkaProducer(acks="all", **common)
    try:
        for value in sent:
            producer.send("tls-kafka-python", value, partition=0)
        producer.flush(60)
    finally:
        producer.close()
    consumer = KafkaConsumer(auto_offset_reset="earliest", consumer_timeout_ms=60000, **common)
    try:
        consumer.assign([TopicPartition("tls-kafka-python", 0)])
        got: list[bytes] = []
        for record in consumer:
            got.append(record.value)
            if len(got) == len(sent):
                break
    finally:
        consumer.close()
    assert got == sent


def test_aiokafka_produces_and_consumes_over_ssl(
    cluster: LocalCluster, ca: CertificateAuthority
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    create_topic(cluster, "tls-aiokafka")
    sent = values("aiokafka", 50)

    async def roundtrip() -> list[bytes]:
        common = {
            "bootstrap_servers": cluster.listener_bootstrap("SSL"),
            "security_protocol": "SSL",
            "ssl_context": create_ssl_context(cafile=str(ca.ca_file)),
        }
        producer = AIOKafkaProducer(acks="all", **common)
        await producer.start()
        try:
            for value in sent:
                await producer.send_and_wait("tls-aiokafka", value, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(auto_offset_reset="earliest", **common)
        await consumer.start()
        got: list[bytes] = []
        try:
            consumer.assign([TopicPartition("tls-aiokafka", 0)])
            async with asyncio.timeout(60):
                while len(got) < len(sent):
                    record = await consumer.getone()
                    got.append(record.value)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(roundtrip()) == sent


def test_kcat_produces_and_consumes_over_ssl(
    cluster: LocalCluster, ca: CertificateAuthority, alice: IssuedCertificate
) -> None:
    create_topic(cluster, "tls-kcat")
    common = [
        "kcat",
        "-b",
        cluster.listener_bootstrap("MTLS"),  # with a client certificate, on the required listener
        "-X",
        "security.protocol=ssl",
        "-X",
        f"ssl.ca.location={ca.ca_file}",
        "-X",
        f"ssl.certificate.location={alice.certificate}",
        "-X",
        f"ssl.key.location={alice.key}",
        "-t",
        "tls-kcat",
    ]
    lines = [f"kcat-{i}" for i in range(30)]
    subprocess.run(
        [*common, "-P", "-p", "0"],
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        timeout=60,
    )
    out = subprocess.run(
        [*common, "-C", "-p", "0", "-o", "beginning", "-c", str(len(lines)), "-e"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.split() == lines


def test_epochlog_client_produces_and_consumes_over_ssl_with_java_pem_keys(
    cluster: LocalCluster, ca: CertificateAuthority, alice: IssuedCertificate
) -> None:
    create_topic(cluster, "tls-epochlog")
    config = {
        "bootstrap.servers": cluster.listener_bootstrap("MTLS"),
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.ca_file),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(alice.keystore),
    }
    sent = values("epochlog", 200, size=1000)
    with Producer(config) as producer:
        offsets = [producer.send("tls-epochlog", v, partition=0) for v in sent]
        assert [f.result(60).offset for f in offsets] == list(range(len(sent)))
    with Consumer({**config, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([("tls-epochlog", 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(sent):
            assert time.monotonic() < deadline, f"read {len(got)} of {len(sent)}"
            got += [r.value for r in consumer.poll(0.2)]
    assert got == sent


# ----------------------------------------------------------------------- client certificates


def test_required_client_auth_refuses_a_client_without_a_certificate_and_serves_others(
    cluster: LocalCluster, ca: CertificateAuthority, alice: IssuedCertificate
) -> None:
    create_topic(cluster, "tls-mtls")
    mtls = cluster.listener_bootstrap("MTLS")
    anonymous = ck.Producer(
        {**confluent_ssl(cluster, ca), "bootstrap.servers": mtls, "message.timeout.ms": 5000}
    )
    with pytest.raises(ck.KafkaException):
        anonymous.list_topics(timeout=5)
    failures: list[object] = []
    anonymous.produce("tls-mtls", b"never", on_delivery=lambda err, _: failures.append(err))
    anonymous.flush(30)
    assert len(failures) == 1 and failures[0] is not None  # nothing was written
    with_cert = confluent_ssl(
        cluster,
        ca,
        **{
            "bootstrap.servers": mtls,
            "ssl.certificate.location": str(alice.certificate),
            "ssl.key.location": str(alice.key),
        },
    )
    producer = ck.Producer({**with_cert, "acks": "all"})
    producer.produce("tls-mtls", b"with-a-certificate", partition=0)
    assert producer.flush(60) == 0
    assert confluent_read(with_cert, "tls-mtls", 1) == [b"with-a-certificate"]


def test_the_certificate_principal_is_mapped_and_logged(
    cluster: LocalCluster, ca: CertificateAuthority, alice: IssuedCertificate
) -> None:
    """alice's subject CN=Alice,OU=clients,O=epochlog maps to User:alice (the RULE), the
    brokers' own CN=broker,O=epochlog stays whole (DEFAULT); both seen in broker 1's log."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    logger = "epochlog.broker.server"
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.BROKER_LOGGER, "1", {logger: "DEBUG"})]
        )
        broker_1 = f"127.0.0.1:{cluster.brokers[1].extra_ports['MTLS']}"
        config = {
            "bootstrap.servers": broker_1,
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca.ca_file),
            "ssl.certificate.location": str(alice.certificate),
            "ssl.key.location": str(alice.key),
        }
        with Admin(config) as client:
            assert client.describe_cluster().brokers
        until(
            "alice's principal in broker 1's log",
            lambda: "principal User:alice " in cluster.output_tail(1, 400),
        )
        # a fresh inter-broker connection to broker 1 shows the brokers' own principal
        cluster.kill_broker(2)
        cluster.start_broker(2)
        until(
            "a broker's principal in broker 1's log",
            lambda: "principal User:CN=broker,O=epochlog " in cluster.output_tail(1, 2000),
        )
    finally:
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.BROKER_LOGGER, "1", {logger: ("DELETE", None)})]
        )
        admin.close()


# ---------------------------------------------------------------------------- bad input


def _closed_by_peer(sock: socket.socket) -> bool:
    """Read until the broker closes the connection (True) or 20 s pass (False)."""
    sock.settimeout(20)
    try:
        while sock.recv(4096):
            pass
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return True


def test_plaintext_garbage_and_tls_on_plaintext_close_only_that_connection(
    cluster: LocalCluster, ca: CertificateAuthority
) -> None:
    broker = cluster.brokers[1]
    tls_port = broker.extra_ports["SSL"]
    # a plaintext Kafka client on the TLS port: ApiVersions v0 in the clear
    api_versions = bytes.fromhex("0000000e0012000000000001000474657374")
    with socket.create_connection(("127.0.0.1", tls_port)) as sock:
        sock.sendall(api_versions)
        assert _closed_by_peer(sock)
    # garbage bytes during the handshake
    with socket.create_connection(("127.0.0.1", tls_port)) as sock:
        sock.sendall(b"\x16\x03\x01\x00\x05garbage-garbage-garbage" * 20)
        assert _closed_by_peer(sock)
    # a TLS client on the PLAINTEXT port
    client = ssl.create_default_context(cafile=str(ca.ca_file))
    with socket.create_connection(("127.0.0.1", broker.port)) as raw:
        raw.settimeout(20)
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            client.wrap_socket(raw, server_hostname="127.0.0.1")
    until(
        "the handshake failures in broker 1's log",
        lambda: cluster.output_tail(1, 400).count("TLS handshake with") >= 2,
    )
    tail = cluster.output_tail(1, 400)
    assert "Traceback" not in tail
    assert broker.is_running()
    # the broker still serves TLS clients
    with Admin(
        {
            "bootstrap.servers": f"127.0.0.1:{tls_port}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca.ca_file),
        }
    ) as admin:
        assert {b.node_id for b in admin.describe_cluster().brokers} == {1, 2, 3}


# ------------------------------------------------------------------------------ replication


def test_replication_over_tls_loses_nothing_when_a_broker_is_killed(
    cluster: LocalCluster, ca: CertificateAuthority
) -> None:
    topic = "tls-replication"
    create_topic(cluster, topic)
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        leader = admin.describe_topics([topic])[topic].partitions[0].leader
    victim = next(b for b in (1, 2, 3) if b != leader)
    producer = ck.Producer(confluent_ssl(cluster, ca, acks="all", **{"enable.idempotence": "true"}))
    acked: list[bytes] = []

    def delivered(err: object, message: ck.Message) -> None:
        if err is None:
            acked.append(message.value())

    first = values("before", 300)
    for value in first:
        producer.produce(topic, value, partition=0, on_delivery=delivered)
    assert producer.flush(60) == 0
    cluster.kill_broker(victim)
    second = values("during", 300)
    for value in second:
        producer.produce(topic, value, partition=0, on_delivery=delivered)
    assert producer.flush(60) == 0
    cluster.start_broker(victim)
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        until(
            f"broker {victim} back in the ISR (it fetches over TLS)",
            lambda: sorted(admin.describe_topics([topic])[topic].partitions[0].isr) == [1, 2, 3],
            timeout_s=90,
        )
    assert acked == first + second
    assert confluent_read(confluent_ssl(cluster, ca), topic, len(acked)) == acked
