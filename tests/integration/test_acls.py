"""ACLs on a real 3-broker cluster with the authorizer on (`authorizer.class.name` Kafka's
AclAuthorizer), driven by confluent-kafka, kafka-python, aiokafka, epochlog's admin client and
`epochlog acls`.

Until TLS/SASL land every connection is User:ANONYMOUS, brokers included, so the brokers cannot
be told apart from clients: the cluster runs with `allow.everyone.if.no.acl.found=true` and the
tests put ACLs on User:ANONYMOUS for the resources they test (a resource with any ACL is closed
to everyone its ACLs do not allow). The Cluster resource never gets an ACL that takes
ClusterAction away, so replication and the controller keep working, which the first test
checks. Every test removes the ACLs it made."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from epochlog.cli.main import main as epochlog_main
from epochlog.client import Admin, KafkaError
from epochlog.client.admin_acls import AclSpec
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, decode_response, encode_request
from epochlog.testing.cluster import LocalCluster
from epochlog.zk.session import close_client, connect

ANON = "User:ANONYMOUS"
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30
EVERYTHING = AclSpec(pattern_type="Any", host=None)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("acls"),
        3,
        broker_config={
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": True,
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 3,
            "group.min.session.timeout.ms": 1000,
        },
    )
    local.start()
    yield local
    local.close()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as client:
        yield client


@pytest.fixture(autouse=True)
def no_acls_left(admin: Admin) -> Iterator[None]:
    yield
    admin.delete_acls([EVERYTHING])


def make_topic(cluster: LocalCluster, admin: Admin, name: str, records: int = 10) -> None:
    admin.create_topic(name, 1, 3)
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(records):
        producer.produce(name, f"{name}-{i}".encode())
    assert producer.flush(30) == 0


def raw_request(port: int, api_key: int, version: int, body: Any) -> Any:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode_request(api_key, version, 1, "acl-test", body))
        size = struct.unpack(">i", _read(sock, 4))[0]
        return decode_response(api_key, version, _read(sock, size))[1]


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "broker closed the connection"
        data += chunk
    return data


def fetch_error(port: int, topic: str) -> int:
    """The error a consumer Fetch of partition 0 gets from the broker at `port` (a follower
    answers NOT_LEADER_OR_FOLLOWER, after the authorization check)."""
    R = m.FetchRequest
    body = R(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=[
            R.FetchTopic(
                topic=topic,
                partitions=[
                    R.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)
                ],
            )
        ],
    )
    response = raw_request(port, ApiKey.FETCH, 12, body)
    return response.responses[0].partitions[0].error_code


def wait_until(condition: Any, what: str, timeout_s: float = 15.0) -> float:
    """Seconds until `condition()` held (a failure bound, not a timed assertion)."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout_s, f"not within {timeout_s}s: {what}"
        time.sleep(0.02)
    return time.monotonic() - start


def anonymous(resource_type: str, name: str, operation: str, permission: str,
              pattern: str = "Literal") -> AclSpec:  # fmt: skip
    return AclSpec(resource_type, name, pattern, ANON, "*", operation, permission)


def test_replication_and_the_controller_keep_working_with_the_authorizer_on(cluster, admin):
    make_topic(cluster, admin, "replicated", records=50)
    wait_until(
        lambda: len(admin.describe_topics(["replicated"])["replicated"].partitions[0].isr) == 3,
        "all three replicas in the ISR",
    )
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "rep",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }  # fmt: skip
    )
    consumer.assign([ck.TopicPartition("replicated", 0, 0)])
    values = []
    while len(values) < 50:
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is None, msg and msg.error()
        values.append(msg.value())
    consumer.close()
    assert values[0] == b"replicated-0" and values[-1] == b"replicated-49"
    assert cluster.controller_id() in (1, 2, 3)


def test_deny_read_refuses_every_client_and_deny_wins_over_allow(cluster, admin):
    make_topic(cluster, admin, "secret")
    # All allows Describe (clients need the topic's metadata); the Deny of Read wins over it.
    # (A Deny alone would close Describe too: the topic has ACLs now, none allowing it.)
    admin.create_acls(
        [anonymous("Topic", "secret", "All", "Allow"), anonymous("Topic", "secret", "Read", "Deny")]
    )
    ports = [b.port for b in cluster.brokers.values()]
    wait_until(
        lambda: all(fetch_error(p, "secret") == TOPIC_AUTHORIZATION_FAILED for p in ports),
        "every broker refuses",
    )
    # confluent-kafka
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "ck-secret",
            "enable.auto.commit": False,
        }  # fmt: skip
    )
    consumer.assign([ck.TopicPartition("secret", 0, 0)])
    msg = consumer.poll(15)
    consumer.close()
    assert msg is not None and msg.error() is not None
    assert msg.error().code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    # kafka-python
    import kafka
    from kafka.errors import TopicAuthorizationFailedError

    kp = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False)
    kp.assign([kafka.TopicPartition("secret", 0)])
    kp.seek(kafka.TopicPartition("secret", 0), 0)
    with pytest.raises(TopicAuthorizationFailedError):
        for _ in range(20):
            kp.poll(timeout_ms=500)
    kp.close()

    # aiokafka
    async def aiokafka_read() -> None:
        import aiokafka

        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False
        )
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition("secret", 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            await asyncio.wait_for(consumer.getone(), 15)
        finally:
            await consumer.stop()

    from aiokafka.errors import TopicAuthorizationFailedError as AioTopicAuthorizationFailed

    with pytest.raises(AioTopicAuthorizationFailed):
        asyncio.run(aiokafka_read())
    # without the Deny the Allow holds: a grant, measured until every broker has it
    removed = admin.delete_acls([anonymous("Topic", "secret", "Read", "Deny")])
    assert removed == [anonymous("Topic", "secret", "Read", "Deny")]
    took = wait_until(
        lambda: all(fetch_error(p, "secret") != TOPIC_AUTHORIZATION_FAILED for p in ports),
        "the grant reaches every broker",
    )
    print(f"grant in force on all 3 brokers {took * 1000:.0f} ms after DeleteAcls answered")
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "ck-secret",
            "enable.auto.commit": False,
        }  # fmt: skip
    )
    consumer.assign([ck.TopicPartition("secret", 0, 0)])
    msg = consumer.poll(15)
    consumer.close()
    assert msg is not None and msg.error() is None and msg.value() == b"secret-0"


def test_metadata_hides_topics_the_principal_may_not_describe(cluster, admin):
    make_topic(cluster, admin, "hidden", records=1)
    make_topic(cluster, admin, "visible", records=1)
    admin.create_acls([anonymous("Topic", "hidden", "Describe", "Deny")])
    ck_admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    wait_until(lambda: "hidden" not in ck_admin.list_topics(timeout=10).topics, "hidden")
    listed = ck_admin.list_topics(timeout=10).topics
    assert "visible" in listed
    named = ck_admin.list_topics(topic="hidden", timeout=10).topics["hidden"]
    assert named.error is not None
    assert named.error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_group_join_and_commit_refused_without_read_on_the_group(cluster, admin):
    make_topic(cluster, admin, "grouped", records=1)
    admin.create_acls(
        [
            anonymous("Group", "locked-", "All", "Allow", "Prefixed"),  # FindCoordinator works
            anonymous("Group", "locked-", "Read", "Deny", "Prefixed"),
        ]
    )
    wait_until(lambda: len(admin.describe_acls(EVERYTHING)) == 2, "the ACLs")
    time.sleep(0.5)  # every broker follows within a ZooKeeper round trip
    joiner = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "locked-join",
            "session.timeout.ms": 6000,
        }  # fmt: skip
    )
    joiner.subscribe(["grouped"])
    errors = []
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        msg = joiner.poll(1)
        if msg is not None and msg.error() is not None:
            errors.append(msg.error().code())
    joiner.close()
    assert errors == [ck.KafkaError.GROUP_AUTHORIZATION_FAILED]
    committer = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "locked-commit",
            "enable.auto.commit": False,
        }  # fmt: skip
    )
    with pytest.raises(ck.KafkaException) as failure:
        committer.commit(offsets=[ck.TopicPartition("grouped", 0, 1)], asynchronous=False)
    committer.close()
    assert failure.value.args[0].code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED


def test_create_topics_refused_without_create(cluster, admin):
    admin.create_acls(
        [
            anonymous("Cluster", "kafka-cluster", "All", "Allow"),  # the brokers keep theirs
            anonymous("Cluster", "kafka-cluster", "Create", "Deny"),
            anonymous("Topic", "nocreate-", "Create", "Deny", "Prefixed"),
        ]
    )
    time.sleep(0.5)
    ck_admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = ck_admin.create_topics(
        [NewTopic("nocreate-1", 1, 1), NewTopic("maycreate-1", 1, 1)], operation_timeout=20
    )
    with pytest.raises(ck.KafkaException) as refused:
        futures["nocreate-1"].result(30)
    assert refused.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    futures["maycreate-1"].result(30)  # no ACL on that topic: allow.everyone.if.no.acl.found


def test_acl_apis_through_confluent_kafka_admin(cluster, admin):
    ck_admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            "ck-topic",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),  # fmt: skip
        AclBinding(
            ResourceType.GROUP,
            "ck-",
            ResourcePatternType.PREFIXED,
            "User:alice",
            "10.0.0.1",
            AclOperation.READ,
            AclPermissionType.DENY,
        ),  # fmt: skip
    ]
    for future in ck_admin.create_acls(bindings).values():
        assert future.result(15) is None
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    described = ck_admin.describe_acls(everything).result(15)
    assert sorted(map(str, described)) == sorted(map(str, bindings))
    # Kafka's znodes and JSON
    zk = connect(cluster.zk_connect, session_timeout_ms=6000)
    try:
        data, _ = zk.get("/kafka-acl/Topic/ck-topic")
        assert json.loads(data) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
             "host": "*"}]}  # fmt: skip
        assert zk.exists("/kafka-acl-extended/prefixed/Group/ck-")
        changes = zk.get_children("/kafka-acl-extended-changes")
        assert any(c.startswith("acl_changes_") for c in changes)
    finally:
        close_client(zk)
    # MATCH: the patterns that apply to group ck-x
    match = AclBindingFilter(ResourceType.GROUP, "ck-x", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    assert [b.name for b in ck_admin.describe_acls(match).result(15)] == ["ck-"]
    deleted = ck_admin.delete_acls([everything])[everything].result(15)
    assert sorted(map(str, deleted)) == sorted(map(str, bindings))
    assert ck_admin.describe_acls(everything).result(15) == []
    # a binding Kafka refuses: Write is no operation of a Group
    bad = AclBinding(ResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.WRITE, AclPermissionType.ALLOW)  # fmt: skip
    with pytest.raises(ck.KafkaException) as refused:
        ck_admin.create_acls([bad])[bad].result(15)
    assert refused.value.args[0].code() == ck.KafkaError.INVALID_REQUEST
    assert ck_admin.describe_acls(everything).result(15) == []


def test_acl_apis_through_kafka_python_admin(cluster):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType

    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        pattern = ResourcePattern(KpResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED)
        acl = ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, pattern)
        result = client.create_acls([acl])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        any_filter = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                               ResourcePatternFilter(KpResourceType.ANY, None,
                                                     ACLResourcePatternType.ANY))  # fmt: skip
        acls, error = client.describe_acls(any_filter)
        assert error.errno == 0 and acls == [acl]
        ((_, matched, error),) = client.delete_acls([any_filter])
        assert error.errno == 0 and matched == [acl]
        assert client.describe_acls(any_filter)[0] == []
    finally:
        client.close()


def test_epochlog_acls_cli(cluster, admin, capsys):
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
    assert epochlog_main(["acls", "add", "--allow-principal", "User:carol", "--consumer",
                          "--topic", "orders", "--group", "billing", *bootstrap]) == 0  # fmt: skip
    made = sorted((b.resource_type, b.resource_name, b.operation) for b in admin.describe_acls())
    assert made == [
        ("Group", "billing", "Read"),
        ("Topic", "orders", "Describe"),
        ("Topic", "orders", "Read"),
    ]
    capsys.readouterr()
    assert epochlog_main(["acls", "list", "--topic", "orders", *bootstrap]) == 0
    listing = capsys.readouterr().out
    assert "Topic:orders" in listing and "User:carol" in listing and "Group:billing" not in listing
    assert epochlog_main(["acls", "remove", "--allow-principal", "User:carol", "--operation",
                          "Read", "--topic", "orders", *bootstrap]) == 0  # fmt: skip
    assert "removed: Allow User:carol Read" in capsys.readouterr().out
    assert sorted(b.resource_name for b in admin.describe_acls()) == ["billing", "orders"]
    assert epochlog_main(["acls", "add", "--operation", "Fly", "--allow-principal", "User:x",
                          "--topic", "t", *bootstrap]) == 2  # fmt: skip
    assert "unknown operation 'Fly'" in capsys.readouterr().err


def test_concurrent_changes_to_one_resource_all_land(cluster, admin):
    """Two writers adding ACLs to one resource at once (each from its own ZooKeeper session):
    the znode version makes a loser read again, so no addition is lost, and every broker's
    authorizer ends with all of them."""
    import threading

    from epochlog.security.acls import (
        AccessControlEntry,
        AclOperation,
        AclPermissionType,
        ResourcePattern,
        ResourceType,
    )
    from epochlog.zk.acls import read_pattern, update_pattern

    pattern = ResourcePattern(ResourceType.TOPIC, "contended")
    clients = [connect(cluster.zk_connect, session_timeout_ms=6000) for _ in range(2)]

    def add(client: Any, writer: int) -> None:
        for i in range(15):
            entry = AccessControlEntry(
                f"User:w{writer}-{i}", "*", AclOperation.READ, AclPermissionType.ALLOW
            )
            update_pattern(client, pattern, lambda current, e=entry: current | {e})

    try:
        threads = [threading.Thread(target=add, args=(c, n)) for n, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        entries, version = read_pattern(clients[0], pattern)
        assert len(entries) == 30 and version >= 29
    finally:
        for client in clients:
            close_client(client)
    request = m.DescribeAclsRequest(
        resource_type_filter=2,  # TOPIC
        resource_name_filter="contended",
        pattern_type_filter=3,  # LITERAL
        operation=1,  # ANY
        permission_type=1,  # ANY
    )

    def acls_on(port: int) -> int:
        response = raw_request(port, ApiKey.DESCRIBE_ACLS, 1, request)
        return sum(len(r.acls) for r in response.resources)

    for broker in cluster.brokers.values():  # each broker's own authorizer
        wait_until(
            lambda port=broker.port: acls_on(port) == 30, f"broker {broker.broker_id} has all 30"
        )


def test_a_deny_reaches_a_consumer_inside_a_fetch_session(cluster, admin):
    """kafka-python keeps a fetch session (KIP-227): its incremental fetches name no partition.
    A Deny added while it reads ends the session; the full fetch that follows is refused."""
    import kafka
    from kafka.errors import TopicAuthorizationFailedError

    make_topic(cluster, admin, "in-session", records=5)
    tp = kafka.TopicPartition("in-session", 0)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False
    )
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        read = 0
        while read < 5:
            read += sum(len(v) for v in consumer.poll(timeout_ms=1000).values())
        for _ in range(3):  # incremental fetches of the session, nothing new
            assert consumer.poll(timeout_ms=200) == {}
        admin.create_acls(
            [
                anonymous("Topic", "in-session", "All", "Allow"),
                anonymous("Topic", "in-session", "Read", "Deny"),
            ]
        )
        with pytest.raises(TopicAuthorizationFailedError):
            for _ in range(50):
                consumer.poll(timeout_ms=200)
    finally:
        consumer.close()


# ------------------------------------------------------------------ brokers told apart by TLS


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str]]:
    """A second cluster as Kafka's operators run one: the brokers talk over an SSL listener
    with their certificate's principal, which alone is in `super.users`; nothing is open to
    everyone (allow.everyone.if.no.acl.found false). Clients on PLAINTEXT are User:ANONYMOUS."""
    from cryptography.x509.oid import NameOID

    from epochlog.security.certs import CertificateAuthority

    ca = CertificateAuthority.create(tmp_path_factory.mktemp("acl-ca"))
    broker_cert = ca.issue("broker", attributes=((NameOID.ORGANIZATION_NAME, "epochlog"),))
    broker_principal = f"User:{broker_cert.subject}"  # User:CN=broker,O=epochlog
    local = LocalCluster(
        tmp_path_factory.mktemp("acls-strict"),
        3,
        extra_listeners=("SSL",),
        broker_config={
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "inter.broker.listener.name": "SSL",
            "ssl.keystore.location": str(broker_cert.keystore),
            "ssl.truststore.location": str(ca.ca_file),
            "ssl.client.auth": "required",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": broker_principal,
            "offsets.topic.num.partitions": 3,
        },
    )
    local.start()
    yield local, broker_principal
    local.close()


def test_brokers_on_their_certificate_principal_clients_only_what_acls_allow(strict):
    from epochlog.security.acls import (
        CLUSTER_NAME,
        AccessControlEntry,
        AclOperation,
        AclPermissionType,
        ResourcePattern,
        ResourceType,
    )
    from epochlog.zk.acls import update_pattern

    cluster, _broker_principal = strict
    bootstrap = cluster.bootstrap_servers  # PLAINTEXT: User:ANONYMOUS
    ck_admin = AdminClient({"bootstrap.servers": bootstrap})
    # Nothing allowed yet: no topic can be created, no ACL either.
    refused = ck_admin.create_topics([NewTopic("strict-t", 1, 3)])["strict-t"]
    with pytest.raises(ck.KafkaException) as topic_refused:
        refused.result(30)
    assert topic_refused.value.args[0].code() in (
        ck.KafkaError.TOPIC_AUTHORIZATION_FAILED,
        ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    )
    grant = AclBinding(ResourceType.TOPIC, "strict-t", ResourcePatternType.LITERAL, ANON, "*",
                       AclOperation.ALL, AclPermissionType.ALLOW)  # fmt: skip
    with pytest.raises(ck.KafkaException) as acl_refused:
        ck_admin.create_acls([grant])[grant].result(15)
    assert acl_refused.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # The first ACLs go straight to ZooKeeper, as kafka-acls --authorizer-properties
    # zookeeper.connect=... writes them.
    zk = connect(cluster.zk_connect, session_timeout_ms=6000)
    try:
        admin_ops = {
            AccessControlEntry(ANON, "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CREATE)
        }
        update_pattern(
            zk,
            ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME),
            lambda current: current | admin_ops,
        )
    finally:
        close_client(zk)
    with Admin({"bootstrap.servers": bootstrap}) as admin:

        def bootstrapped() -> bool:
            try:
                return len(admin.describe_acls()) == 3
            except KafkaError:  # CLUSTER_AUTHORIZATION_FAILED until the change arrives
                return False

        wait_until(bootstrapped, "the bootstrap ACLs")
        admin.create_acls(
            [
                anonymous("Topic", "strict-t", "Write", "Allow"),
                anonymous("Topic", "strict-t", "Read", "Allow"),
                anonymous("Group", "strict-g", "Read", "Allow"),  # the consumer's group
            ]
        )
        admin.create_topic("strict-t", 1, 3)
        # Replication between brokers (User:CN=broker,O=epochlog, a super user) works
        wait_until(
            lambda: len(admin.describe_topics(["strict-t"])["strict-t"].partitions[0].isr) == 3,
            "all three replicas in the ISR",
        )
        admin.create_topic("other-t", 1, 3)  # Create on the Cluster: allowed
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce("strict-t", f"v{i}".encode())
    assert producer.flush(30) == 0
    failures: list[int] = []
    producer.produce("other-t", b"x", on_delivery=lambda err, _m: failures.append(err.code()))
    producer.flush(30)
    assert failures == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "strict-g", "enable.auto.commit": False}
    )
    consumer.assign([ck.TopicPartition("strict-t", 0, 0)])
    values = []
    while len(values) < 20:
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is None, msg and msg.error()
        values.append(msg.value())
    consumer.close()
    assert values[-1] == b"v19"
    # Metadata for all topics lists only what ANONYMOUS may describe
    assert set(ck_admin.list_topics(timeout=10).topics) == {"strict-t"}
