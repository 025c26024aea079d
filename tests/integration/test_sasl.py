"""SASL (issue 21): real clients log in to a 3-broker cluster with PLAIN and SCRAM.

One cluster for the module: each broker has PLAINTEXT (the harness's), SASL_PLAINTEXT (PLAIN
users from the listener's JAAS config, SCRAM users from ZooKeeper) and REAUTH, a second
SASL_PLAINTEXT listener whose sessions last 5 s (listener.name.reauth.connections.max.reauth.ms)
for the KIP-368 tests. SCRAM users are made with `epochlog users scram set`, as an operator
would. One more cluster, in its own test, runs inter-broker traffic on SASL.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

from epochlog.cli.main import main as epochlog_main
from epochlog.client import Admin, Consumer, Producer
from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import ConnectionFailedError
from epochlog.client.sasl import SaslAuthenticationError, SaslLogin
from epochlog.protocol import messages as m
from epochlog.protocol.api import encode_request
from epochlog.protocol.errors import ErrorCode
from epochlog.security.certs import CertificateAuthority
from epochlog.testing.cluster import LocalCluster

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" '
    'user_alice="alice-secret";'
)
SASL_CONFIG = {
    "listener.security.protocol.map": (
        "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    ),
    "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.reauth.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.reauth.connections.max.reauth.ms": 5000,  # margin for a loaded machine
}
# user, password per mechanism: PLAIN from the JAAS config, SCRAM users set in the fixture
USERS = {
    "PLAIN": ("alice", "alice-secret"),
    "SCRAM-SHA-256": ("carol", "carol-secret"),
    "SCRAM-SHA-512": ("dave", "dave-secret"),
}
MECHANISMS = tuple(USERS)
N = 20


def cli(*args: str) -> int:
    return epochlog_main(list(args))


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("sasl-ca"))


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, ca: CertificateAuthority
) -> Iterator[LocalCluster]:
    broker_cert = ca.issue("broker")
    local = LocalCluster(
        tmp_path_factory.mktemp("sasl"),
        3,
        extra_listeners=("SASL_PLAINTEXT", "REAUTH", "SASL_SSL"),
        broker_config={
            **SASL_CONFIG,
            "ssl.keystore.location": str(broker_cert.keystore),
            "ssl.truststore.location": str(ca.ca_file),
        },
    )
    local.start()
    try:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            user, password = USERS[mechanism]
            assert cli(
                "users", "scram", "set", "--user", user, "--mechanism", mechanism,
                "--password", password, "--bootstrap-server", local.bootstrap_servers,
            ) == 0  # fmt: skip
        yield local
    finally:
        local.close()


def new_topic(cluster: LocalCluster, name: str, partitions: int = 2) -> str:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(name, partitions, 3)
    return name


def values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(N)]


def librdkafka_conf(bootstrap: str, mechanism: str, ca: str | None = None) -> dict[str, object]:
    """librdkafka's keys (ours takes them too); with `ca`, SASL_SSL trusting that CA file."""
    user, password = USERS[mechanism]
    tls = {"security.protocol": "SASL_SSL", "ssl.ca.location": ca} if ca else {}
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        **tls,
    }


def python_client_conf(
    bootstrap: str, mechanism: str, ca: str | None = None, aiokafka: bool = False
) -> dict[str, object]:
    """kafka-python's and aiokafka's keys; with `ca`, SASL_SSL trusting that CA file."""
    user, password = USERS[mechanism]
    tls: dict[str, object] = {}
    if ca and aiokafka:
        from aiokafka.helpers import create_ssl_context

        tls = {"security_protocol": "SASL_SSL", "ssl_context": create_ssl_context(cafile=ca)}
    elif ca:
        tls = {"security_protocol": "SASL_SSL", "ssl_cafile": ca}
    return {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        **tls,
    }


def confluent_round_trip(
    bootstrap: str, mechanism: str, topic: str, ca: str | None = None
) -> list[bytes]:
    conf = librdkafka_conf(bootstrap, mechanism, ca)
    producer = ck.Producer(conf)
    errors: list[object] = []
    for value in values(topic):
        producer.produce(
            topic, value, partition=0, on_delivery=lambda e, _m: e and errors.append(e)
        )
    assert producer.flush(30) == 0 and errors == []
    consumer = ck.Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def kafka_python_round_trip(
    bootstrap: str, mechanism: str, topic: str, ca: str | None = None
) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    conf = python_client_conf(bootstrap, mechanism, ca)
    producer = KafkaProducer(**conf)
    for value in values(topic):
        producer.send(topic, value, partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(**conf, group_id=None, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    consumer.close()
    return got


def aiokafka_round_trip(
    bootstrap: str, mechanism: str, topic: str, ca: str | None = None
) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    conf = python_client_conf(bootstrap, mechanism, ca, aiokafka=True)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**conf, acks="all")
        await producer.start()
        try:
            for value in values(topic):
                await producer.send_and_wait(topic, value, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**conf, group_id=None, enable_auto_commit=False)
        await consumer.start()
        got: list[bytes] = []
        try:
            part = TopicPartition(topic, 0)
            consumer.assign([part])
            await consumer.seek_to_beginning(part)
            deadline = time.monotonic() + 30
            while len(got) < N and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def kcat_round_trip(
    bootstrap: str, mechanism: str, topic: str, ca: str | None = None
) -> list[bytes]:
    user, password = USERS[mechanism]
    protocol = "SASL_SSL" if ca else "SASL_PLAINTEXT"
    security = [
        "-X", f"security.protocol={protocol}", "-X", f"sasl.mechanisms={mechanism}",
        "-X", f"sasl.username={user}", "-X", f"sasl.password={password}",
        *(["-X", f"ssl.ca.location={ca}"] if ca else []),
    ]  # fmt: skip
    produced = subprocess.run(
        ["kcat", "-b", bootstrap, *security, "-P", "-t", topic, "-p", "0"],
        input=b"\n".join(values(topic)) + b"\n",
        capture_output=True,
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", bootstrap, *security, "-C", "-t", topic, "-p", "0", "-o", "beginning",
         "-e", "-q"],
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    return consumed.stdout.splitlines()


def epochlog_round_trip(
    bootstrap: str, mechanism: str, topic: str, ca: str | None = None
) -> list[bytes]:
    conf = librdkafka_conf(bootstrap, mechanism, ca)
    with Producer(conf) as producer:
        futures = [producer.send(topic, value, partition=0) for value in values(topic)]
        for future in futures:
            future.result(30)
    got: list[bytes] = []
    with Consumer({**conf, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(topic, 0)])
        deadline = time.monotonic() + 30
        while len(got) < N and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(0.5) if r.value is not None)
    return got


CLIENTS = {
    "confluent": confluent_round_trip,
    "kafka-python": kafka_python_round_trip,
    "aiokafka": aiokafka_round_trip,
    "kcat": kcat_round_trip,
    "epochlog": epochlog_round_trip,
}


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_produces_and_consumes_over_sasl(
    cluster: LocalCluster, client: str, mechanism: str
) -> None:
    topic = new_topic(cluster, f"sasl-{client}-{mechanism}".lower())
    got = CLIENTS[client](cluster.listener_bootstrap("SASL_PLAINTEXT"), mechanism, topic)
    assert got == values(topic)


def endpoints(cluster: LocalCluster, listener: str = "SASL_PLAINTEXT") -> list[tuple[str, int]]:
    items = cluster.listener_bootstrap(listener).split(",")
    return [(item.rsplit(":", 1)[0], int(item.rsplit(":", 1)[1])) for item in items]


async def login(host: str, port: int, sasl: SaslLogin | None) -> BrokerConnection:
    connection = BrokerConnection(host, port, request_timeout_ms=10000, sasl=sasl)
    await asyncio.wait_for(connection.connect(), 15)
    return connection


async def metadata_works(connection: BrokerConnection) -> bool:
    response = await connection.send(m.MetadataRequest(topics=[]), version=1)
    return len(response.brokers) == 3


def test_user_set_with_the_cli_logs_in_on_every_broker(cluster: LocalCluster) -> None:
    assert cli(
        "users", "scram", "set", "--user", "erin", "--mechanism", "SCRAM-SHA-256",
        "--password", "erin-secret", "--iterations", "8192",
        "--bootstrap-server", cluster.bootstrap_servers,
    ) == 0  # fmt: skip
    set_at = time.monotonic()
    erin = SaslLogin("SCRAM-SHA-256", "erin", "erin-secret")

    async def first_login(host: str, port: int) -> float:
        deadline = time.monotonic() + 15
        while True:
            try:
                connection = await login(host, port, erin)
            except SaslAuthenticationError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.02)
                continue
            assert await metadata_works(connection)
            await connection.close()
            return time.monotonic() - set_at

    async def everywhere() -> list[float]:
        return await asyncio.gather(*(first_login(h, p) for h, p in endpoints(cluster)))

    delays = asyncio.run(everywhere())
    print(f"erin logged in on every broker, after {[f'{d * 1000:.0f} ms' for d in delays]}")
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        described = admin.describe_user_scram_credentials(["erin"])
    assert [(i.mechanism, i.iterations) for i in described["erin"]] == [("SCRAM-SHA-256", 8192)]


@pytest.mark.parametrize(
    "mechanism, user, password",
    [
        ("PLAIN", "alice", "wrong"),
        ("PLAIN", "mallory", "alice-secret"),
        ("SCRAM-SHA-512", "dave", "wrong"),
        ("SCRAM-SHA-512", "mallory", "dave-secret"),
    ],
)
def test_wrong_password_or_unknown_user_is_refused_and_others_are_served(
    cluster: LocalCluster, mechanism: str, user: str, password: str
) -> None:
    host, port = endpoints(cluster)[0]

    async def attempt() -> None:
        connection = BrokerConnection(
            host, port, request_timeout_ms=10000, sasl=SaslLogin(mechanism, user, password)
        )
        with pytest.raises(SaslAuthenticationError) as refused:
            await asyncio.wait_for(connection.connect(), 15)
        assert refused.value.code is ErrorCode.SASL_AUTHENTICATION_FAILED
        expected = (
            "Authentication failed: Invalid username or password"
            if mechanism == "PLAIN"
            else "Authentication failed during authentication due to invalid credentials "
            "with SASL mechanism SCRAM-SHA-512"
        )
        assert refused.value.broker_message == expected
        assert connection.closed
        good_user, good_password = USERS[mechanism]
        good = await login(host, port, SaslLogin(mechanism, good_user, good_password))
        assert await metadata_works(good)
        await good.close()

    asyncio.run(attempt())


def test_our_clients_surface_a_refused_login(cluster: LocalCluster) -> None:
    """As Kafka's clients raise SaslAuthenticationException: the error, not a timeout."""
    conf = {**librdkafka_conf(cluster.listener_bootstrap("SASL_PLAINTEXT"), "SCRAM-SHA-256")}
    conf["sasl.password"] = "wrong"
    with Admin(conf) as admin, pytest.raises(SaslAuthenticationError) as refused:
        admin.list_topics()
    assert refused.value.code is ErrorCode.SASL_AUTHENTICATION_FAILED
    with Producer(conf) as producer, pytest.raises(SaslAuthenticationError):
        producer.send("sasl-refused", b"x").result(60)


def test_refused_connection_is_closed_by_the_broker(cluster: LocalCluster) -> None:
    """After SASL_AUTHENTICATION_FAILED the broker answers nothing more: it closes. (The
    request after the failure is sent only once both answers are read: pipelined with them, it
    could still be unread when the broker closed, and the kernel then resets the connection,
    which may drop the answers before the client reads them.)"""
    host, port = endpoints(cluster)[1]

    async def read_frame(reader: asyncio.StreamReader) -> bytes:
        size = int.from_bytes(await reader.readexactly(4), "big")
        return await reader.readexactly(size)

    async def attempt() -> tuple[list[bytes], bytes]:
        reader, writer = await asyncio.open_connection(host, port)
        handshake = m.SaslHandshakeRequest(mechanism="PLAIN")
        authenticate = m.SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00wrong")
        for correlation, (request, key, version) in enumerate(
            [(handshake, 17, 1), (authenticate, 36, 1)]
        ):
            writer.write(encode_request(key, version, correlation, "probe", request))
        await writer.drain()
        frames = [await asyncio.wait_for(read_frame(reader), 15) for _ in range(2)]
        try:
            writer.write(encode_request(3, 1, 2, "probe", m.MetadataRequest(topics=[])))
            await writer.drain()
            rest = await asyncio.wait_for(reader.read(), 15)  # until the broker closes
        except ConnectionError:
            rest = b""  # closed already: the write or the read was reset
        writer.close()
        return frames, rest

    frames, rest = asyncio.run(attempt())
    assert rest == b""  # no answer to the request after the failure
    failed = m.SaslAuthenticateResponse.decode(frames[1][4:], 1)
    assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_request_before_authentication_closes_the_connection(cluster: LocalCluster) -> None:
    host, port = endpoints(cluster)[2]

    async def attempt() -> None:
        connection = await login(host, port, None)  # ApiVersions is served unauthenticated
        assert connection.api_versions[17] == (0, 1)
        assert connection.api_versions[36] == (0, 2)
        with pytest.raises(ConnectionFailedError):
            await connection.send(m.MetadataRequest(topics=[]), version=1)
        assert connection.closed

    asyncio.run(attempt())


def test_reauthentication_keeps_long_running_producers_working(cluster: LocalCluster) -> None:
    """Sessions on REAUTH last 5 s; both producers run 12 s on one connection per broker."""
    topic = new_topic(cluster, "sasl-reauth", partitions=3)
    bootstrap = cluster.listener_bootstrap("REAUTH")
    conf = librdkafka_conf(bootstrap, "SCRAM-SHA-256")
    librdkafka = ck.Producer({**conf, "linger.ms": 5})
    errors: list[object] = []
    with Producer(conf) as ours:
        sent = 0
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            librdkafka.produce(topic, b"rd", on_delivery=lambda e, _m: e and errors.append(e))
            ours.send(topic, b"ours").result(30)
            librdkafka.poll(0)
            sent += 1
            time.sleep(0.05)
        assert librdkafka.flush(30) == 0 and errors == []
        connections = list(ours._producer._net._conns.values())  # type: ignore[attr-defined]
        logins = [c._sasl_session.logins for c in connections]  # type: ignore[union-attr]
    # every connection logged in again at least once (one opened late has had less time)
    assert logins and min(logins) >= 2, logins
    closed_expired = 0
    for broker_id in cluster.brokers:
        log = Path(cluster.brokers[broker_id].log_path).read_text()
        closed_expired += log.count("SASL session expired")
    assert closed_expired == 0  # nobody was cut off: both clients re-authenticated in time
    with Consumer({"bootstrap.servers": cluster.bootstrap_servers}) as consumer:
        ends = consumer.end_offsets([(topic, p) for p in range(3)])
    assert sum(ends.values()) == 2 * sent


def test_expired_session_is_closed_at_its_next_request(cluster: LocalCluster) -> None:
    host, port = endpoints(cluster, "REAUTH")[0]

    async def attempt() -> None:
        connection = await login(host, port, SaslLogin("PLAIN", "alice", "alice-secret"))
        assert connection._sasl_session is not None
        connection._sasl_session.cancel()  # a client that does not re-authenticate
        assert await metadata_works(connection)
        await asyncio.sleep(5.2)
        with pytest.raises(ConnectionFailedError):
            await connection.send(m.MetadataRequest(topics=[]), version=1)

    asyncio.run(attempt())


def test_deleted_credentials_stop_new_logins(cluster: LocalCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    assert cli(
        "users", "scram", "set", "--user", "frank", "--mechanism", "SCRAM-SHA-512",
        "--password", "frank-secret", "--bootstrap-server", bootstrap,
    ) == 0  # fmt: skip
    frank = SaslLogin("SCRAM-SHA-512", "frank", "frank-secret")
    host, port = endpoints(cluster)[0]

    async def until(logs_in: bool) -> None:
        deadline = time.monotonic() + 15
        while True:
            try:
                connection = await login(host, port, frank)
                await connection.close()
                outcome = True
            except SaslAuthenticationError as refused:
                assert refused.code is ErrorCode.SASL_AUTHENTICATION_FAILED
                outcome = False
            if outcome == logs_in:
                return
            assert time.monotonic() < deadline, f"frank still {'refused' if logs_in else 'in'}"
            await asyncio.sleep(0.05)

    asyncio.run(until(logs_in=True))
    assert cli(
        "users", "scram", "delete", "--user", "frank", "--mechanism", "SCRAM-SHA-512",
        "--bootstrap-server", bootstrap,
    ) == 0  # fmt: skip
    asyncio.run(until(logs_in=False))
    with Admin({"bootstrap.servers": bootstrap}) as admin, pytest.raises(Exception) as missing:
        admin.describe_user_scram_credentials(["frank"])
    assert "RESOURCE_NOT_FOUND" in str(missing.value)


@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_produces_and_consumes_over_sasl_ssl_with_scram(
    cluster: LocalCluster, ca: CertificateAuthority, client: str
) -> None:
    """SASL_SSL with SCRAM-SHA-512, each client trusting the cluster's CA."""
    topic = new_topic(cluster, f"sasl-ssl-scram-{client}")
    bootstrap = cluster.listener_bootstrap("SASL_SSL")
    got = CLIENTS[client](bootstrap, "SCRAM-SHA-512", topic, str(ca.ca_file))
    assert got == values(topic)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_sasl_ssl_logs_in_over_tls(
    cluster: LocalCluster, ca: CertificateAuthority, mechanism: str
) -> None:
    """SASL_SSL: TLS first (the broker's certificate checked against the CA), then the login."""
    topic = new_topic(cluster, f"sasl-ssl-{mechanism}".lower())
    conf = {
        **librdkafka_conf(cluster.listener_bootstrap("SASL_SSL"), mechanism),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca.ca_file),
    }
    producer = ck.Producer(conf)
    for value in values(topic):
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    got: list[bytes] = []
    with Consumer({**conf, "auto.offset.reset": "earliest"}) as consumer:  # ours, SASL_SSL
        consumer.assign([(topic, 0)])
        deadline = time.monotonic() + 30
        while len(got) < N and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(0.5) if r.value is not None)
    assert got == values(topic)
    command_config = Path(ca.ca_file).parent / f"admin-{mechanism}.properties"
    command_config.write_text(
        "".join(f"{k}={v}\n" for k, v in conf.items() if k != "bootstrap.servers")
    )
    assert cli(
        "users", "scram", "describe", "--user", "dave", "--command-config", str(command_config),
        "--bootstrap-server", cluster.listener_bootstrap("SASL_SSL"),
    ) == 0  # fmt: skip


def test_inter_broker_traffic_on_sasl(tmp_path: Path) -> None:
    """Controller requests, replica fetches and AlterPartition all go over SASL_PLAINTEXT
    (PLAIN, the broker's own username/password from the listener's JAAS config)."""
    config = {
        **SASL_CONFIG,
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
    }
    with LocalCluster(
        tmp_path, 3, extra_listeners=("SASL_PLAINTEXT",), broker_config=config
    ) as local:
        local.start()
        topic = new_topic(local, "replicated", partitions=1)
        bootstrap = local.listener_bootstrap("SASL_PLAINTEXT")
        # acks=all (librdkafka's default) on RF 3: answered once both followers fetched
        assert confluent_round_trip(bootstrap, "PLAIN", topic) == values(topic)
        logs = "".join(Path(b.log_path).read_text() for b in local.brokers.values())
        assert "SASL authentication failed" not in logs
