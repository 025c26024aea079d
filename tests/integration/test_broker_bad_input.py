"""Bad input to an in-process broker: each bad request gets a clear error or closes only its own
connection, changes nothing, and a bystander connection keeps being served throughout. A request
of an API or version the broker does not serve closes its connection, as Kafka's does; only
ApiVersions is answered (UNSUPPORTED_VERSION, so the client can ask again lower)."""

from __future__ import annotations

import logging
import random
import socket
import struct
import uuid

import pytest

from epochlog.broker.harness import (
    LEADER_AND_ISR_VERSION,
    BrokerThread,
    RawClient,
    become_leader,
    leader_and_isr_request,
    update_metadata_request,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, decode_response, encode_request
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder

MAX_REQUEST = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    thread = BrokerThread(
        {
            "broker.id": 1,
            "zookeeper.connect": "unused:2181",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path_factory.mktemp("broker")),
            "socket.request.max.bytes": MAX_REQUEST,
        }
    ).start()
    with RawClient("127.0.0.1", thread.port) as client:
        become_leader(client, broker_id=1, port=thread.port, topic="t", partitions=1)
    yield thread
    thread.stop()


@pytest.fixture
def client(broker):
    with RawClient("127.0.0.1", broker.port) as c:
        yield c


@pytest.fixture
def bystander(broker):
    """A connection open across the whole test that must keep working."""
    with RawClient("127.0.0.1", broker.port) as c:
        assert_serves(c)
        yield c
        assert_serves(c)


def assert_serves(c: RawClient) -> None:
    response = c.request(
        ApiKey.API_VERSIONS,
        3,
        m.ApiVersionsRequest(client_software_name="test", client_software_version="1.0"),
    )
    assert response.error_code == 0


def batch(n=1, value_size=10) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(n):
        builder.append(1_700_000_000_000 + i, b"k", b"v" * value_size)
    return builder.build()


def produce(records, topic="t", partition=0, acks=-1, transactional_id=None):
    P = m.ProduceRequest
    return P(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            P.TopicProduceData(
                name=topic,
                partition_data=[P.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )


def produce_error(client, records, version=9, **kw):
    response = client.request(ApiKey.PRODUCE, version, produce(records, **kw))
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


def log_end(client, topic="t", partition=0) -> int:
    L = m.ListOffsetsRequest
    response = client.request(
        ApiKey.LIST_OFFSETS,
        7,
        L(
            replica_id=1,  # as a follower: the log end offset
            topics=[
                L.ListOffsetsTopic(
                    name=topic,
                    partitions=[L.ListOffsetsPartition(partition_index=partition, timestamp=-1)],
                )
            ],
        ),
    )
    return response.topics[0].partitions[0].offset


# ------------------------------------------------------------------------- framing


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize(
    "payload",
    [
        # Produce v9 header followed by bytes that are no request at all
        struct.pack(">hhi", 0, 9, 1) + random.Random(7).randbytes(40),
        # six bytes: not even a header
        struct.pack(">hhh", 3, 9, 1),
        # Metadata v4 whose topic array claims 5 names and holds one
        struct.pack(">hhih", 3, 4, 1, -1) + struct.pack(">ih", 5, 1) + b"a" + b"\x01",
    ],
    ids=["garbage", "short-header", "truncated-body"],
)
def test_malformed_frames_close_only_their_connection(client, bystander, payload):
    client.send_bytes(frame(payload))
    assert client.is_closed()


@pytest.mark.parametrize("size", [-5, 0, 2**31 - 1, MAX_REQUEST + 1])
def test_absurd_frame_sizes_close_the_connection_at_once(client, bystander, size):
    client.send_bytes(struct.pack(">i", size) + b"\x00" * 8)
    assert client.is_closed(timeout=2)


def test_a_frame_cut_off_by_the_client_closes_quietly(client, bystander):
    client.send_bytes(struct.pack(">i", 100) + b"\x00" * 50)
    client.sock.shutdown(socket.SHUT_WR)
    assert client.is_closed()


def test_request_above_socket_request_max_bytes_closes(client, bystander):
    big = produce(batch(1, value_size=MAX_REQUEST))
    try:
        client.send_bytes(encode_request(ApiKey.PRODUCE, 9, 1, "x", big))
    except ConnectionError:
        return  # closed while we were still sending: refused without reading it all
    assert client.is_closed()


# -------------------------------------------------------------------- record checks


def test_flipped_crc_byte_is_corrupt_message_and_appends_nothing(client, bystander):
    before = log_end(client)
    raw = bytearray(batch(3))
    raw[-2] ^= 0x01
    assert produce_error(client, bytes(raw)) is ErrorCode.CORRUPT_MESSAGE
    assert log_end(client) == before


def test_record_above_message_max_bytes_is_message_too_large(client, bystander):
    before = log_end(client)
    assert produce_error(client, batch(1, value_size=1_100_000)) is ErrorCode.MESSAGE_TOO_LARGE
    assert log_end(client) == before


def test_two_batches_in_one_partition_are_invalid_record(client, bystander):
    assert produce_error(client, batch() + batch()) is ErrorCode.INVALID_RECORD


def test_invalid_acks_and_transactional_batches_without_an_id_are_refused(client, bystander):
    assert produce_error(client, batch(), acks=2) is ErrorCode.INVALID_REQUIRED_ACKS
    builder = RecordBatchBuilder(
        producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    builder.append(1_700_000_000_000, b"k", b"v")
    before = log_end(client)
    assert produce_error(client, builder.build()) is ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert log_end(client) == before


def test_acks_zero_failure_closes_the_connection(client, bystander):
    client.send_only(ApiKey.PRODUCE, 9, produce(batch(), topic="nope", acks=0))
    assert client.is_closed()


def test_acks_zero_success_gets_no_response(client, bystander):
    before = log_end(client)
    client.send_only(ApiKey.PRODUCE, 9, produce(batch(2), acks=0))
    assert_serves(client)  # the next response is for the next request
    assert log_end(client) == before + 2


# --------------------------------------------------------------------- partitions


def test_produce_to_a_partition_led_elsewhere_is_not_leader_or_follower(broker, client):
    update = update_metadata_request(
        brokers={1: ("127.0.0.1", broker.port), 2: ("127.0.0.1", 1)},
        topic="elsewhere",
        topic_id=uuid.uuid4(),
        assignment={0: [2]},
        leader_epoch=0,
        controller_id=1,
        controller_epoch=1,
    )
    assert client.request(ApiKey.UPDATE_METADATA, 7, update).error_code == 0
    response = client.request(ApiKey.PRODUCE, 10, produce(batch(), topic="elsewhere"))
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partition.current_leader.leader_id == 2  # KIP-951 hint
    assert [e.node_id for e in response.node_endpoints] == [2]
    assert produce_error(client, batch(), topic="unknown") is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# ------------------------------------------------------------------ API versions


def request_frame(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    """A request frame of any key and version: a served request's bytes under another header
    (the broker must refuse it from the header alone)."""
    raw = bytearray(encode_request(ApiKey.METADATA, 4, correlation_id, "raw", m.MetadataRequest()))
    struct.pack_into(">hh", raw, 4, api_key, version)
    return bytes(raw)


@pytest.mark.parametrize(
    ("api_key", "version", "named"),
    [
        (ApiKey.FETCH, 3, "Fetch (key 1) v3"),  # below our range
        (ApiKey.PRODUCE, 2, "Produce (key 0) v2"),
        (ApiKey.METADATA, 14, "Metadata (key 3) v14"),  # our max + 1
        (57, 0, "API key 57 v0"),  # UpdateFeatures, a Kafka API we do not serve
        (68, 1, "API key 68 v1"),  # ConsumerGroupHeartbeat
        (9999, 0, "API key 9999 v0"),  # no API at all
    ],
    ids=["fetch-v3", "produce-v2", "metadata-v14", "key-57", "key-68", "key-9999"],
)
def test_an_api_or_version_we_do_not_serve_closes_the_connection_and_is_logged(
    client, bystander, caplog, api_key, version, named
):
    with caplog.at_level(logging.WARNING, logger="epochlog.broker.server"):
        client.send_bytes(request_frame(api_key, version))
        assert client.is_closed()
    lines = [r.getMessage() for r in caplog.records if named in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]
    assert "client id 'raw'" in lines[0] and "closing connection from 127.0.0.1:" in lines[0]
    if api_key in APIS:
        api = APIS[api_key]
        assert f"serves (v{api.min_version}-{api.max_version})" in lines[0]


def test_answers_to_earlier_requests_go_out_before_the_close(client, bystander):
    request = m.ApiVersionsRequest(client_software_name="test", client_software_version="1")
    client.send_bytes(
        encode_request(ApiKey.API_VERSIONS, 3, 1, "raw", request)
        + encode_request(ApiKey.API_VERSIONS, 3, 2, "raw", request)
        + request_frame(ApiKey.FETCH, 3, correlation_id=3)
        + encode_request(ApiKey.API_VERSIONS, 3, 4, "raw", request)
    )
    for expected in (1, 2):
        correlation, body = decode_response(ApiKey.API_VERSIONS, 3, client.read_frame())
        assert (correlation, body.error_code) == (expected, 0)
    assert client.is_closed()  # and the request after the refused one is not answered


def test_api_versions_v99_gets_the_v0_body_listing_key_18(client):
    client.send_bytes(struct.pack(">ihhih", 10, 18, 99, 5, -1))
    correlation, body = decode_response(ApiKey.API_VERSIONS, 0, client.read_frame())
    assert correlation == 5 and body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]
    assert_serves(client)


def test_api_versions_v3_with_an_invalid_client_software_name_is_invalid_request(client):
    response = client.request(
        ApiKey.API_VERSIONS,
        3,
        m.ApiVersionsRequest(client_software_name="bad name!", client_software_version="1"),
    )
    assert response.error_code == ErrorCode.INVALID_REQUEST


# ------------------------------------------------------------- KIP-380 fencing


def test_leader_and_isr_from_an_old_generation_is_stale_and_applies_nothing(broker, client):
    broker.run(broker.broker.epoch_holder.set, 1000)
    request = leader_and_isr_request(
        topic="old-generation",
        topic_id=uuid.uuid4(),
        assignment={0: [1]},
        leader_epoch=0,
        controller_id=1,
        controller_epoch=5,
        broker_epoch=999,
    )
    response = client.request(ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, request)
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert response.topics[0].partition_errors[0].error_code == ErrorCode.STALE_BROKER_EPOCH
    assert broker.run(broker.broker.replica_manager.get_partition, "old-generation", 0) is None
    assert broker.run(broker.broker.log_manager.get_log, "old-generation", 0) is None
    # The same request for the current generation is applied.
    request.broker_epoch = 1000
    response = client.request(ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, request)
    assert response.error_code == 0
    assert broker.run(broker.broker.replica_manager.get_partition, "old-generation", 0)


def test_update_metadata_and_stop_replica_from_an_old_generation_are_stale(broker, client):
    broker.run(broker.broker.epoch_holder.set, 2000)
    update = update_metadata_request(
        brokers={1: ("127.0.0.1", broker.port), 7: ("10.0.0.7", 9092)},
        topic="t",
        topic_id=uuid.uuid4(),
        assignment={0: [1]},
        leader_epoch=0,
        controller_id=7,
        controller_epoch=5,
        broker_epoch=1999,
    )
    assert client.request(ApiKey.UPDATE_METADATA, 7, update).error_code == 77
    assert not broker.run(broker.broker.metadata_cache.is_alive, 7)
    S = m.StopReplicaRequest
    stop = S(
        controller_id=1,
        controller_epoch=5,
        broker_epoch=1999,
        topic_states=[
            S.StopReplicaTopicState(
                topic_name="t",
                partition_states=[
                    S.StopReplicaPartitionState(
                        partition_index=0, leader_epoch=-2, delete_partition=True
                    )
                ],
            )
        ],
    )
    response = client.request(ApiKey.STOP_REPLICA, 3, stop)
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert broker.run(broker.broker.replica_manager.get_partition, "t", 0) is not None


def test_control_request_from_an_older_controller_epoch_is_stale(broker, client):
    request = leader_and_isr_request(
        topic="t",
        topic_id=uuid.uuid4(),
        assignment={0: [1]},
        leader_epoch=9,
        controller_id=1,
        controller_epoch=0,
    )
    response = client.request(ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, request)
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
