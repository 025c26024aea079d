"""A broker process refuses what it does not serve as Kafka's broker does: the connection is
closed (the client sees EOF) and the broker logs one line naming the API, version, client id and
the range it serves; only ApiVersions is answered, with UNSUPPORTED_VERSION. Other connections
are served throughout.

Real clients: kafka-python pinned to `api_version=(0, 10, 1)` sends Produce v2 and Fetch v3, both
below our range. Before, it reported "Unable to decode response" for the produce and read an
empty fetch answer without an error; now both see a dropped connection, and an unpinned
kafka-python on the same broker produces and reads as usual.

One single-broker cluster (real ZooKeeper, a broker process) for the module.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaConnectionError

from epochlog.broker.harness import RawClient
from epochlog.client import Admin
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, decode_response, encode_request
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.cluster import LocalCluster

TOPIC = "refusals"
PINNED = (0, 10, 1)  # kafka-python's table for it: Produce v2, Fetch v3, Metadata v2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path_factory.mktemp("unserved"), 1)
    local.start()
    with Admin({"bootstrap.servers": local.bootstrap_servers}) as admin:
        admin.create_topic(TOPIC, partitions=1, replication_factor=1)
    yield local
    local.close()


@pytest.fixture
def port(cluster: LocalCluster) -> int:
    return cluster.brokers[1].port


@pytest.fixture
def bystander(port: int) -> Iterator[RawClient]:
    """A connection open across the whole test that must keep being served."""
    with RawClient("127.0.0.1", port) as client:
        assert_serves(client)
        yield client
        assert_serves(client)


def assert_serves(client: RawClient) -> None:
    request = m.ApiVersionsRequest(client_software_name="test", client_software_version="1")
    assert client.request(ApiKey.API_VERSIONS, 3, request).error_code == 0


def broker_log(cluster: LocalCluster) -> str:
    return Path(cluster.brokers[1].log_path).read_text(errors="replace")


def wait_for_log_line(cluster: LocalCluster, *parts: str, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        for line in broker_log(cluster).splitlines():
            if all(part in line for part in parts):
                return line
        assert time.monotonic() < deadline, f"no broker log line with {parts}"
        time.sleep(0.1)


def request_frame(api_key: int, version: int, client_id: str) -> bytes:
    """A request frame of any key and version: a Metadata v4 request's bytes under that header."""
    raw = bytearray(encode_request(ApiKey.METADATA, 4, 1, client_id, m.MetadataRequest()))
    struct.pack_into(">hh", raw, 4, api_key, version)
    return bytes(raw)


@pytest.mark.parametrize(
    ("api_key", "version", "named"),
    [
        (ApiKey.FETCH, 3, "Fetch (key 1) v3"),
        (57, 0, "API key 57 v0"),
        (68, 0, "API key 68 v0"),
        (ApiKey.METADATA, APIS[ApiKey.METADATA].max_version + 1, "Metadata (key 3) v"),
        (ApiKey.PRODUCE, APIS[ApiKey.PRODUCE].max_version + 1, "Produce (key 0) v"),
    ],
    ids=["fetch-v3", "key-57", "key-68", "metadata-max+1", "produce-max+1"],
)
def test_a_raw_request_we_do_not_serve_gets_eof_and_one_log_line(
    cluster: LocalCluster, port: int, bystander: RawClient, api_key: int, version: int, named: str
) -> None:
    client_id = f"raw-{api_key}-{version}"
    with RawClient("127.0.0.1", port) as client:
        client.send_bytes(request_frame(api_key, version, client_id))
        assert client.is_closed()
    line = wait_for_log_line(cluster, named, f"client id '{client_id}'")
    assert "closing connection from 127.0.0.1:" in line
    if api_key in APIS:
        api = APIS[api_key]
        assert f"serves (v{api.min_version}-{api.max_version})" in line


def test_api_versions_above_our_range_is_still_answered(port: int, bystander: RawClient) -> None:
    with RawClient("127.0.0.1", port) as client:
        client.send_bytes(struct.pack(">ihhih", 10, ApiKey.API_VERSIONS, 99, 5, -1))
        correlation, body = decode_response(ApiKey.API_VERSIONS, 0, client.read_frame())
        assert (correlation, body.error_code) == (5, ErrorCode.UNSUPPORTED_VERSION)
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
            (18, 0, APIS[ApiKey.API_VERSIONS].max_version)
        ]
        assert_serves(client)


def test_kafka_python_pinned_below_our_produce_range_sees_the_connection_dropped(
    cluster: LocalCluster, bystander: RawClient
) -> None:
    pinned = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        api_version=PINNED,
        client_id="pinned-producer",
        retries=0,
    )
    try:
        with pytest.raises(KafkaConnectionError):
            pinned.send(TOPIC, b"never").get(timeout=30)
    finally:
        pinned.close()
    line = wait_for_log_line(cluster, "Produce (key 0) v2", "client id 'pinned-producer'")
    assert "serves (v3-" in line

    current = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        written = current.send(TOPIC, b"served").get(timeout=30)
    finally:
        current.close()
    reader = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, consumer_timeout_ms=30000)
    try:
        reader.assign([TopicPartition(TOPIC, 0)])
        reader.seek(TopicPartition(TOPIC, 0), written.offset)
        assert next(reader).value == b"served"
    finally:
        reader.close()


def test_kafka_python_pinned_below_our_fetch_range_reads_nothing_and_is_refused(
    cluster: LocalCluster, bystander: RawClient
) -> None:
    pinned = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        api_version=PINNED,
        client_id="pinned-consumer",
    )
    try:
        pinned.assign([TopicPartition(TOPIC, 0)])
        pinned.seek_to_beginning()
        deadline = time.monotonic() + 30
        while "client id 'pinned-consumer'" not in broker_log(cluster):
            assert pinned.poll(timeout_ms=200) == {}
            assert time.monotonic() < deadline, "the pinned consumer's Fetch v3 never arrived"
        assert pinned.poll(timeout_ms=200) == {}
    finally:
        pinned.close()
    line = wait_for_log_line(cluster, "client id 'pinned-consumer'")
    assert "Fetch (key 1) v3" in line and "serves (v4-" in line
