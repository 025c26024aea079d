"""`epochlog up --secure` (issue 21, item 4), started through the CLI as a user would.

One secure 3-broker cluster for the module in a tmp dir: SASL_SSL only, SCRAM-SHA-512, the ACL
authorizer with `admin` as super user, ZooKeeper locked down. Its printed `client.properties` is
mapped to each client's keys; confluent-kafka, kafka-python, aiokafka, kcat, our client and our
CLI create a topic, produce and consume as admin. A plaintext connection and a wrong password are
refused; `bob`, made with `epochlog users scram set`, gets nothing until `epochlog acls add`
grants it, and then on every broker; an unauthenticated ZooKeeper client may read what Kafka
lets the world read and nothing else; replication and the controller work with a broker killed.
Teardown runs `epochlog down`, then SIGKILLs by pid whatever cluster.json listed still alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from epochlog.client import Admin, Consumer, Producer
from epochlog.client.config import Role, load_config
from epochlog.client.connection import BrokerConnection
from epochlog.client.sasl import SaslAuthenticationError, SaslLogin
from epochlog.client.tls import client_ssl_context
from epochlog.config.broker import parse_properties
from epochlog.protocol import messages as m
from epochlog.protocol.api import encode_request
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.jaas import username_password

N = 20
BOB_PASSWORD = "bob-secret-1"


@dataclass(frozen=True)
class SecureUp:
    directory: Path
    bootstrap: str
    properties_file: Path
    properties: dict[str, str]

    @property
    def username(self) -> str:
        return username_password(self.properties["sasl.jaas.config"])[0]

    @property
    def password(self) -> str:
        return username_password(self.properties["sasl.jaas.config"])[1]

    @property
    def ca(self) -> str:
        return self.properties["ssl.truststore.location"]

    def ports(self) -> list[int]:
        return [int(item.rsplit(":", 1)[1]) for item in self.bootstrap.split(",")]

    def state(self) -> dict[str, Any]:
        return json.loads((self.directory / "cluster.json").read_text())


def cli(
    *args: str, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "epochlog", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )


def _pids(directory: Path) -> list[int]:
    path = directory / "cluster.json"
    if not path.exists():
        return []
    state = json.loads(path.read_text())
    pids = [b["pid"] for b in state["brokers"].values() if b.get("pid")]
    return pids + ([state["zookeeper_pid"]] if state.get("zookeeper_pid") else [])


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for init to reap it (the CLI that started it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureUp]:
    directory = tmp_path_factory.mktemp("secure-up")
    started = cli("up", "--secure", "--brokers", "3", "--dir", str(directory))
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        lines = started.stdout.splitlines()
        bootstrap = next(x for x in lines if x.startswith("bootstrap servers:")).split(": ")[1]
        props_line = next(x for x in lines if x.startswith("client config"))
        properties_file = Path(props_line.rsplit(": ", 1)[1].strip())
        properties = parse_properties(properties_file.read_text(), str(properties_file))
        yield SecureUp(directory, bootstrap.strip(), properties_file, properties)
    finally:
        pids = _pids(directory)
        stopped = cli("down", "--dir", str(directory))
        survivors = [pid for pid in pids if _alive(pid)]
        for pid in survivors:  # whatever `down` left behind, by pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # after the cleanup: `down` works on a secure cluster and leaves nothing running
        assert stopped.returncode == 0 and "cluster stopped" in stopped.stdout, stopped.stderr
        assert not survivors, f"still running after down: {survivors}"


# ----------------------------------------------------------------------------- client settings


def librdkafka(up: SecureUp, user: str | None = None, password: str | None = None) -> dict:
    """client.properties in librdkafka's keys (kcat takes the same as -X)."""
    return {
        "bootstrap.servers": up.bootstrap,
        "security.protocol": up.properties["security.protocol"],
        "sasl.mechanism": up.properties["sasl.mechanism"],
        "sasl.username": user or up.username,
        "sasl.password": password or up.password,
        "ssl.ca.location": up.ca,
    }


def python_client(
    up: SecureUp, user: str | None = None, password: str | None = None, aio: bool = False
) -> dict:
    """client.properties in kafka-python's (or aiokafka's) keys."""
    conf: dict[str, Any] = {
        "bootstrap_servers": up.bootstrap,
        "security_protocol": up.properties["security.protocol"],
        "sasl_mechanism": up.properties["sasl.mechanism"],
        "sasl_plain_username": user or up.username,
        "sasl_plain_password": password or up.password,
    }
    if aio:
        from aiokafka.helpers import create_ssl_context

        conf["ssl_context"] = create_ssl_context(cafile=up.ca)
    else:
        conf["ssl_cafile"] = up.ca
    return conf


def ours(up: SecureUp) -> dict[str, Any]:
    """client.properties as it is (our client takes Kafka's Java keys)."""
    return {"bootstrap.servers": up.bootstrap, **up.properties}


def values(topic: str) -> list[bytes]:
    return [f"{topic}-{i}".encode() for i in range(N)]


# ----------------------------------------------------------------------------- admin round trips


def confluent_trip(up: SecureUp, topic: str) -> list[bytes]:
    conf = librdkafka(up)
    admin = AdminClient(conf)  # kept: a collected client cancels its futures
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    producer = ck.Producer(conf)
    for value in values(topic):
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = ck.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def kafka_python_trip(up: SecureUp, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    conf = python_client(up)
    admin = KafkaAdminClient(**conf)
    admin.create_topics([KNewTopic(topic, 1, 3)])
    admin.close()
    producer = KafkaProducer(**conf, acks="all")
    for value in values(topic):
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, **conf, group_id=f"g-{topic}", auto_offset_reset="earliest")
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < N and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    consumer.close()
    return got


def aiokafka_trip(up: SecureUp, topic: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as ANewTopic

    conf = python_client(up, aio=True)

    async def run() -> list[bytes]:
        admin = AIOKafkaAdminClient(**conf)
        await admin.start()
        try:
            await admin.create_topics([ANewTopic(topic, 1, 3)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(**conf, acks="all")
        await producer.start()
        try:
            for value in values(topic):
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, **conf, group_id=f"g-{topic}", auto_offset_reset="earliest"
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < N and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def kcat_trip(up: SecureUp, topic: str) -> list[bytes]:
    """kcat creates no topics: as admin its produce auto-creates it (Create on the Cluster)."""
    security: list[str] = []
    for key, value in librdkafka(up).items():
        if key != "bootstrap.servers":
            security += ["-X", f"{key}={value}"]
    produced = subprocess.run(
        ["kcat", "-b", up.bootstrap, *security, "-P", "-t", topic],
        input=b"\n".join(values(topic)) + b"\n",
        capture_output=True,
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", up.bootstrap, *security, "-C", "-t", topic, "-o", "beginning", "-e",
         "-q", "-c", str(N)],
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    return consumed.stdout.splitlines()


def epochlog_trip(up: SecureUp, topic: str) -> list[bytes]:
    conf = ours(up)
    with Admin(conf) as admin:
        admin.create_topic(topic, 1, 3)
    with Producer({**conf, "acks": "all"}) as producer:
        for future in [producer.send(topic, value) for value in values(topic)]:
            future.result(30)
    got: list[bytes] = []
    with Consumer({**conf, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(topic, 0)])
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(0.5) if r.value is not None)
    return got


TRIPS = {
    "confluent": confluent_trip,
    "kafka-python": kafka_python_trip,
    "aiokafka": aiokafka_trip,
    "kcat": kcat_trip,
    "epochlog": epochlog_trip,
}


@pytest.mark.parametrize("client", list(TRIPS))
def test_admin_creates_produces_and_consumes_with_every_client(
    secure: SecureUp, client: str
) -> None:
    topic = f"admin-{client}"
    assert sorted(TRIPS[client](secure, topic)) == sorted(values(topic))


def test_cli_works_with_command_config_and_by_itself_through_dir(secure: SecureUp) -> None:
    by_dir = ["--dir", str(secure.directory)]
    explicit = [
        "--bootstrap-server",
        secure.bootstrap,
        "--command-config",
        str(secure.properties_file),
    ]
    created = cli("topics", "create", "--topic", "cli-t", "--replication-factor", "3", *explicit)
    assert created.returncode == 0, created.stderr
    produced = cli("produce", "cli-t", *by_dir, stdin="one\ntwo\n")
    assert produced.returncode == 0, produced.stderr
    consumed = cli("consume", "cli-t", "--from-beginning", "--max-messages", "2", *explicit)
    assert consumed.stdout.split() == ["one", "two"], consumed.stderr
    listed = cli("topics", "list", *by_dir)
    assert "cli-t" in listed.stdout.split(), listed.stderr
    status = cli("status", "--json", *by_dir)
    assert status.returncode == 0, status.stderr
    brokers = json.loads(status.stdout)["brokers"]
    assert [e for b in brokers for e in b["endpoints"]] == [
        f"SASL_SSL://127.0.0.1:{port}" for port in secure.ports()
    ]  # SASL_SSL alone: no PLAINTEXT listener


def test_console_and_broker_stop_start_bounce_work_on_the_secure_cluster(
    secure: SecureUp,
) -> None:
    """`console --dir` logs in with client.properties; `broker stop` runs a controlled
    shutdown, which goes to the controller over the SASL_SSL inter-broker listener."""
    import urllib.request

    by_dir = ["--dir", str(secure.directory)]
    created = cli("topics", "create", "--topic", "console-t", *by_dir)
    assert created.returncode == 0, created.stderr
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    console = subprocess.Popen(
        [sys.executable, "-m", "epochlog", "console", "--port", str(port), *by_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert console.stdout is not None
        banner = console.stdout.readline()  # printed once the port is bound
        assert f"http://127.0.0.1:{port}/" in banner, banner
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/topics", timeout=60) as page:
            assert "console-t" in page.read().decode()
    finally:
        console.send_signal(signal.SIGTERM)
        try:
            console.wait(30)
        except subprocess.TimeoutExpired:
            console.kill()
            console.wait()
    # stop answers 1 and says so when the controlled shutdown did not complete
    stopped = cli("broker", "stop", "3", *by_dir)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "broker 3: stop done" in stopped.stdout
    started = cli("broker", "start", "3", *by_dir)
    assert started.returncode == 0, started.stdout + started.stderr
    bounced = cli("broker", "bounce", "2", *by_dir)
    assert bounced.returncode == 0, bounced.stdout + bounced.stderr


# ----------------------------------------------------------------------------- refusals


def test_plaintext_connection_to_a_broker_port_is_closed(secure: SecureUp) -> None:
    request = encode_request(18, 0, 1, "plaintext-probe", m.ApiVersionsRequest())
    with socket.create_connection(("127.0.0.1", secure.ports()[0]), timeout=30) as sock:
        sock.sendall(request)
        received = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(4096):
                received += chunk
    # nothing that parses as an ApiVersions answer: at most a TLS alert, then the close
    assert not received or received[0] == 0x15


def test_wrong_password_gets_sasl_authentication_failed(secure: SecureUp) -> None:
    with (
        Admin(
            {
                **ours(secure),
                "sasl.jaas.config": secure.properties["sasl.jaas.config"].replace(
                    secure.password, "wrong-password"
                ),
            }
        ) as admin,
        pytest.raises(SaslAuthenticationError) as refused,
    ):
        admin.list_topics()
    assert refused.value.code is ErrorCode.SASL_AUTHENTICATION_FAILED
    # librdkafka reports it through error_cb, as _AUTHENTICATION with the broker's words
    errors: list[Any] = []
    conf = {**librdkafka(secure, password="wrong-password"), "error_cb": errors.append}
    producer = ck.Producer(conf)
    deadline = time.monotonic() + 30
    while not any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, errors
        producer.poll(0.5)
    refusal = next(e for e in errors if e.code() == ck.KafkaError._AUTHENTICATION)
    assert "invalid credentials" in refusal.str()
    producer.flush(0)


def test_zookeeper_is_locked_down(secure: SecureUp) -> None:
    anonymous = KazooClient(hosts=secure.state()["zookeeper"])
    anonymous.start(timeout=15)
    try:
        assert sorted(anonymous.get_children("/brokers/ids")) == ["1", "2", "3"]
        anonymous.get("/brokers/ids/1")  # world-readable, as in Kafka
        with pytest.raises(NoAuthError):
            anonymous.create("/brokers/ids/99", b"{}")
        with pytest.raises(NoAuthError):
            anonymous.set("/controller", b"{}")
        with pytest.raises(NoAuthError):
            anonymous.get("/config/users/admin")
        with pytest.raises(NoAuthError):
            anonymous.delete("/brokers/ids/1")
    finally:
        anonymous.stop()
        anonymous.close()


# ----------------------------------------------------------------------------- bob and ACLs


def describe_from(up: SecureUp, port: int, topic: str, login: SaslLogin) -> int:
    """The error Metadata for `topic` gets from the broker at `port` as `login`."""

    async def ask() -> int:
        connection = BrokerConnection(
            "127.0.0.1",
            port,
            request_timeout_ms=10000,
            sasl=login,
            ssl_context=client_ssl_context(load_config(Role.ADMIN, ours(up))),
        )
        await asyncio.wait_for(connection.connect(), 15)
        try:
            response = await connection.send(
                m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)]),
                version=4,
            )
            return response.topics[0].error_code
        finally:
            await connection.close()

    return asyncio.run(ask())


def test_bob_gets_nothing_without_acls_then_what_they_grant(secure: SecureUp) -> None:
    by_dir = ["--dir", str(secure.directory)]
    made = cli("users", "scram", "set", "--user", "bob", "--mechanism", "SCRAM-SHA-512",
               "--password", BOB_PASSWORD, *by_dir)  # fmt: skip
    assert made.returncode == 0, made.stderr
    topic, group = "bobs-topic", "bobs-group"
    created = cli("topics", "create", "--topic", topic, "--replication-factor", "3", *by_dir)
    assert created.returncode == 0, created.stderr
    produced = cli("produce", topic, *by_dir, stdin="\n".join(f"r{i}" for i in range(5)) + "\n")
    assert produced.returncode == 0, produced.stderr

    bob = librdkafka(secure, "bob", BOB_PASSWORD)
    # he logs in (Metadata answers) but sees no topic, and a named one is refused
    bob_admin = AdminClient(bob)
    listed = bob_admin.list_topics(timeout=30)
    assert topic not in listed.topics and len(listed.brokers) == 3
    named = bob_admin.list_topics(topic=topic, timeout=30).topics[topic]
    assert named.error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    # write
    producer = ck.Producer({**bob, "message.timeout.ms": 10000})
    errors: list[Any] = []
    producer.produce(topic, b"x", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(30)
    assert [e.code() for e in errors] == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # read, join a group, commit
    consumer = ck.Consumer({**bob, "group.id": group, "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[int] = []
    deadline = time.monotonic() + 30
    while not seen and time.monotonic() < deadline:
        msg = consumer.poll(1)
        if msg is not None and msg.error() is not None:
            seen.append(msg.error().code())
    assert seen[:1] == [ck.KafkaError.GROUP_AUTHORIZATION_FAILED]  # no group for him
    with pytest.raises(ck.KafkaException):  # no coordinator for him either: no commit
        consumer.commit(offsets=[ck.TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()
    # kafka-python: the same refusals
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
    from kafka.structs import OffsetAndMetadata

    kp = python_client(secure, "bob", BOB_PASSWORD)
    kp_producer = KafkaProducer(**kp, max_block_ms=10000)
    with pytest.raises(TopicAuthorizationFailedError):
        kp_producer.send(topic, b"x").get(timeout=30)
    kp_producer.close()
    kp_consumer = KafkaConsumer(**kp, group_id=None, enable_auto_commit=False)
    assert topic not in kp_consumer.topics()  # Metadata leaves it out
    assert not kp_consumer.partitions_for_topic(topic)  # so no partition to read from
    kp_consumer.close()
    kp_member = KafkaConsumer(topic, **kp, group_id=group, enable_auto_commit=False)
    with pytest.raises(GroupAuthorizationFailedError):  # joining the group to read
        kp_member.poll(timeout_ms=10000)
    with pytest.raises(GroupAuthorizationFailedError):
        kp_member.commit({TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
    kp_member.close()

    # grant, then every broker answers bob's Metadata for the topic
    login = SaslLogin("SCRAM-SHA-512", "bob", BOB_PASSWORD)
    for grant in (
        ["--consumer", "--topic", topic, "--group", group],
        ["--producer", "--topic", topic],
    ):
        added = cli("acls", "add", "--allow-principal", "User:bob", *grant, *by_dir)
        assert added.returncode == 0, added.stderr
    granted_at = time.monotonic()
    pending = set(secure.ports())
    while pending and time.monotonic() - granted_at < 15:
        pending = {p for p in pending if describe_from(secure, p, topic, login) != 0}
    took = time.monotonic() - granted_at
    assert not pending, f"brokers on ports {pending} still refuse bob"
    print(f"bob's grant in force on all 3 brokers {took * 1000:.0f} ms after `acls add` ended")

    producer = ck.Producer(bob)
    delivered: list[Any] = []
    producer.produce(topic, b"from-bob", on_delivery=lambda e, _m: delivered.append(e))
    assert producer.flush(30) == 0 and delivered == [None]
    member = ck.Consumer({**bob, "group.id": group, "auto.offset.reset": "earliest",
                          "enable.auto.commit": False})  # fmt: skip
    member.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 6 and time.monotonic() < deadline:
        msg = member.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    member.commit(asynchronous=False)
    member.close()
    assert sorted(got) == sorted([f"r{i}".encode() for i in range(5)] + [b"from-bob"])
    kp_consumer = KafkaConsumer(topic, **kp, group_id=f"{group}", auto_offset_reset="earliest")
    assert topic in kp_consumer.topics()
    kp_consumer.close()


# ----------------------------------------------------------------------------- replication


def test_replication_and_controller_survive_a_killed_leader(secure: SecureUp) -> None:
    by_dir = ["--dir", str(secure.directory)]
    topic = "replicated"
    created = cli(
        "topics", "create", "--topic", topic, "--partitions", "1", "--replication-factor", "3",
        "--config", "min.insync.replicas=2", *by_dir,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    conf = {**librdkafka(secure), "acks": "all", "enable.idempotence": True}
    producer = ck.Producer(conf)
    acknowledged: list[bytes] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acknowledged.append(msg.value())

    def status() -> dict[str, Any]:
        result = cli("status", "--json", *by_dir)
        assert result.returncode == 0, result.stderr
        return next(p for p in json.loads(result.stdout)["partitions"] if p["topic"] == topic)

    for i in range(100):
        producer.produce(topic, f"before-{i}".encode(), on_delivery=delivered)
    assert producer.flush(30) == 0
    leader = status()["leader"]
    killed = cli("broker", "kill", str(leader), *by_dir)
    assert killed.returncode == 0, killed.stderr
    for i in range(100):
        producer.produce(topic, f"after-{i}".encode(), on_delivery=delivered)
    assert producer.flush(60) == 0
    moved = status()
    assert moved["leader"] not in (leader, -1)  # the controller elected another
    started = cli("broker", "start", str(leader), *by_dir)
    assert started.returncode == 0, started.stderr
    deadline = time.monotonic() + 60
    while len(status()["isr"]) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert sorted(status()["isr"]) == [1, 2, 3]
    consumer = ck.Consumer({**librdkafka(secure), "group.id": "replicated-check",
                            "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([topic])
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(got) < len(acknowledged) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.add(msg.value())
    consumer.close()
    assert len(acknowledged) == 200
    assert set(acknowledged) <= got


# ----------------------------------------------------------------------------- last: the tree


def test_every_znode_the_cluster_made_carries_kafkas_secure_acl(secure: SecureUp) -> None:
    """Last, after every other test wrote what it writes (users, ACLs, notifications, topic
    changes, restarts): walk the whole tree with the brokers' ZooKeeper login. The world may
    read (sensitive paths: not even that), never write; only ZooKeeper's own /zookeeper is
    left as it is."""
    from kazoo.security import Permissions

    from epochlog.node.secure_cluster import SecureCluster
    from epochlog.zk.security import is_sensitive_path

    login = SecureCluster.load(secure.directory)
    assert login is not None
    client = KazooClient(hosts=secure.state()["zookeeper"], auth_data=login.zk_login.auth_data)
    client.start(timeout=15)
    try:
        checked: dict[str, list[Any]] = {}
        pending = ["/"]
        while pending:
            path = pending.pop()
            children = client.get_children(path)
            pending += [f"{path.rstrip('/')}/{child}" for child in children]
            if path != "/" and not path.startswith("/zookeeper"):
                checked[path] = client.get_acls(path)[0]
        for made in ("/config/users/admin", "/config/users/bob", "/brokers/topics/replicated",
                     "/kafka-acl/Topic/bobs-topic", "/config/topics/cli-t"):  # fmt: skip
            assert made in checked, made
        for path, acls in checked.items():
            world = [a.perms for a in acls if a.id.scheme == "world"]
            expected = [] if is_sensitive_path(path) else [Permissions.READ]
            assert world == expected, (path, acls)
            owners = [a.id.id.split(":")[0] for a in acls if a.id.scheme == "digest"]
            assert owners == ["broker"], (path, acls)
    finally:
        client.stop()
        client.close()
