"""The broker's APIs over a socket, every served version, with our own codec as the client."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from epochlog.broker.collaborators import CollaboratorError
from epochlog.broker.harness import (
    BrokerThread,
    RawClient,
    become_leader,
    leader_and_isr_request,
    update_metadata_request,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, encode_request
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder, decode_batches

TOPIC = "proto"
PORTS: dict[int, int] = {}


class FakeCreator:
    def __init__(self) -> None:
        self.created: list[str] = []

    async def create_topic(self, name: str) -> None:
        if name == "refused-topic":
            raise CollaboratorError(ErrorCode.INVALID_REPLICATION_FACTOR, "not enough brokers")
        self.created.append(name)


class FakeController:
    def __init__(self) -> None:
        self.active = False

    @property
    def is_active(self) -> bool:
        return self.active

    async def create_topics(self, request, version):
        R = m.CreateTopicsResponse
        return R(topics=[R.CreatableTopicResult(name=t.name, error_code=0) for t in request.topics])

    async def delete_topics(self, request, version):
        return m.DeleteTopicsResponse()

    async def controlled_shutdown(self, request, version):
        return m.ControlledShutdownResponse(error_code=0)

    async def alter_partition(self, request, version):
        return m.AlterPartitionResponse(error_code=0)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    creator, controller = FakeCreator(), FakeController()
    thread = BrokerThread(
        {
            "broker.id": 1,
            "zookeeper.connect": "unused:2181",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path_factory.mktemp("broker")),
        },
        cluster_id="test-cluster",
        auto_creator=creator,
        controller=controller,
    ).start()
    with RawClient("127.0.0.1", thread.port) as client:
        topic_id, _, _ = become_leader(
            client, broker_id=1, port=thread.port, topic=TOPIC, partitions=2, leader_epoch=3
        )
    yield thread, topic_id, creator, controller
    thread.stop()


@pytest.fixture
def client(env):
    with RawClient("127.0.0.1", env[0].port) as c:
        yield c


def build_batch(n: int, ts: int = 1_700_000_000_000, pid=-1, seq=-1, tag="r") -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)
    for i in range(n):
        b.append(ts + i, f"{tag}{i}".encode(), f"value-{tag}{i}".encode(), [("h", b"1")])
    return b.build()


def produce_body(records, partition=0, acks=-1, topic=TOPIC, timeout_ms=5000):
    P = m.ProduceRequest
    return P(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            P.TopicProduceData(
                name=topic,
                partition_data=[P.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )


def produce(client, records, partition=0, acks=-1, version=9, topic=TOPIC, timeout_ms=5000):
    body = produce_body(records, partition, acks, topic, timeout_ms)
    return client.request(ApiKey.PRODUCE, version, body).responses[0].partition_responses[0]


def fetch(
    client,
    version,
    partitions,
    topic_id=None,
    topic=TOPIC,
    max_wait_ms=0,
    min_bytes=1,
    isolation=0,
    replica_id=-1,
    replica_epoch=-1,
):
    F = m.FetchRequest
    body = F(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        isolation_level=isolation,
        topics=[
            F.FetchTopic(
                topic=topic,
                topic_id=topic_id or uuid.UUID(int=0),
                partitions=[
                    F.FetchPartition(
                        partition=p,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                        last_fetched_epoch=last_epoch,
                    )
                    for p, offset, last_epoch in partitions
                ],
            )
        ],
    )
    if version >= 15:
        body.replica_state = F.ReplicaState(replica_id=replica_id, replica_epoch=replica_epoch)
    else:
        body.replica_id = replica_id
    return client.request(ApiKey.FETCH, version, body)


def list_offsets(client, version, timestamp, partition=0, epoch=-1, replica_id=-1):
    L = m.ListOffsetsRequest
    body = L(
        replica_id=replica_id,
        topics=[
            L.ListOffsetsTopic(
                name=TOPIC,
                partitions=[
                    L.ListOffsetsPartition(
                        partition_index=partition, timestamp=timestamp, current_leader_epoch=epoch
                    )
                ],
            )
        ],
    )
    return client.request(ApiKey.LIST_OFFSETS, version, body).topics[0].partitions[0]


# ---------------------------------------------------------------------- ApiVersions


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_advertises_exactly_the_served_ranges(client, version):
    body = m.ApiVersionsRequest(client_software_name="epochlog-test", client_software_version="1")
    response = client.request(ApiKey.API_VERSIONS, version, body)
    assert response.error_code == 0
    assert {(k.api_key, k.min_version, k.max_version) for k in response.api_keys} == {
        (api.key, api.min_version, api.max_version) for api in APIS.values()
    }


# ------------------------------------------------------------------------- Metadata


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_every_version_lists_brokers_and_topic(env, client, version):
    broker, topic_id, _, _ = env
    body = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)])
    response = client.request(ApiKey.METADATA, version, body)
    assert [(b.node_id, b.port) for b in response.brokers] == [(1, broker.port)]
    (topic,) = response.topics
    assert topic.error_code == 0 and topic.name == TOPIC
    assert [(p.partition_index, p.leader_id, p.isr_nodes) for p in topic.partitions] == [
        (0, 1, [1]),
        (1, 1, [1]),
    ]
    if version >= 2:
        assert response.cluster_id == "test-cluster"
    if version >= 7:
        assert topic.partitions[0].leader_epoch == 3
    if version >= 10:
        assert topic.topic_id == topic_id
    if version >= 13:
        assert response.error_code == 0


def test_metadata_lists_every_live_broker_and_flags_a_dead_leader(env, client):
    broker, *_ = env
    update = update_metadata_request(
        brokers={1: ("127.0.0.1", broker.port), 2: ("10.0.0.2", 9092), 3: ("10.0.0.3", 9093)},
        topic="led-by-dead",
        topic_id=uuid.uuid4(),
        assignment={0: [4, 1]},
        leader_epoch=1,
        controller_id=3,
        controller_epoch=1,
    )
    assert client.request(ApiKey.UPDATE_METADATA, 7, update).error_code == 0
    response = client.request(ApiKey.METADATA, 12, m.MetadataRequest(topics=None))
    assert [b.node_id for b in response.brokers] == [1, 2, 3]
    assert response.controller_id == 3
    (dead,) = [t for t in response.topics if t.name == "led-by-dead"]
    assert dead.partitions[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert dead.partitions[0].leader_id == -1
    described = client.request(ApiKey.DESCRIBE_CLUSTER, 1, m.DescribeClusterRequest())
    assert described.error_code == 0 and described.cluster_id == "test-cluster"
    assert [b.broker_id for b in described.brokers] == [1, 2, 3] and described.controller_id == 3
    # Restore the broker list for the other tests.
    update.live_brokers = update.live_brokers[:1]
    update.topic_states = []
    client.request(ApiKey.UPDATE_METADATA, 7, update)


def test_metadata_unknown_invalid_and_auto_created_topics(env, client):
    _, _, creator, _ = env
    T = m.MetadataRequest.MetadataRequestTopic

    def ask(name, allow, version=9):
        body = m.MetadataRequest(topics=[T(name=name)], allow_auto_topic_creation=allow)
        return client.request(ApiKey.METADATA, version, body).topics[0].error_code

    assert ask("no-such-topic", allow=False) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ask("bad name!", allow=True) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert ask("fresh-topic", allow=True) == ErrorCode.LEADER_NOT_AVAILABLE
    assert ask("refused-topic", allow=True) == ErrorCode.INVALID_REPLICATION_FACTOR
    assert creator.created == ["fresh-topic"]
    assert ask("fresh-topic-v3", allow=True, version=3) == ErrorCode.LEADER_NOT_AVAILABLE
    assert creator.created == ["fresh-topic", "fresh-topic-v3"]


def test_metadata_v12_looks_topics_up_by_id(env, client):
    _, topic_id, _, _ = env
    T = m.MetadataRequest.MetadataRequestTopic
    body = m.MetadataRequest(
        topics=[T(name=None, topic_id=topic_id), T(name=None, topic_id=uuid.uuid4())]
    )
    known, unknown = client.request(ApiKey.METADATA, 12, body).topics
    assert known.name == TOPIC and known.error_code == 0
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_ID and unknown.name is None


# ---------------------------------------------------------------- Produce and Fetch


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_every_version_then_fetch_every_version(env, client, version):
    broker, topic_id, _, _ = env
    result = produce(client, build_batch(3, tag=f"v{version}-"), partition=1, version=version)
    assert result.error_code == 0
    base = result.base_offset
    for fetch_version in range(4, 17):
        response = fetch(
            client,
            fetch_version,
            [(1, base, -1)],
            topic_id=topic_id if fetch_version >= 13 else None,
        )
        assert response.error_code == 0 and response.session_id == 0
        data = response.responses[0].partitions[0]
        assert data.error_code == 0
        assert data.high_watermark == data.last_stable_offset == base + 3
        records = [r for b in decode_batches(bytes(data.records)) for r in b.records]
        assert [r.key for r in records[:3]] == [f"v{version}-{i}".encode() for i in range(3)]
        assert records[0].offset == base and records[0].headers[0].value == b"1"


def test_fetch_by_unknown_topic_id_is_unknown_topic_id(client):
    response = fetch(client, 13, [(0, 0, -1)], topic_id=uuid.uuid4())
    assert response.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_read_committed_fetch_gets_lso_equal_hw_and_no_aborted_transactions(client):
    produce(client, build_batch(1))
    data = fetch(client, 11, [(0, 0, -1)], isolation=1).responses[0].partitions[0]
    assert data.last_stable_offset == data.high_watermark
    assert data.aborted_transactions == []


def test_long_poll_waits_for_max_wait_then_answers_empty(client):
    end = produce(client, build_batch(1)).base_offset + 1
    started = time.monotonic()
    data = fetch(client, 12, [(0, end, -1)], max_wait_ms=300).responses[0].partitions[0]
    assert 0.25 < time.monotonic() - started < 2
    assert data.error_code == 0 and len(bytes(data.records)) == 0


def test_long_poll_returns_as_soon_as_a_record_arrives(env, client):
    broker = env[0]
    end = produce(client, build_batch(1)).base_offset + 1

    def later():
        time.sleep(0.2)
        with RawClient("127.0.0.1", broker.port) as other:
            produce(other, build_batch(2, tag="late"))

    threading.Thread(target=later).start()
    started = time.monotonic()
    data = fetch(client, 12, [(0, end, -1)], max_wait_ms=10_000).responses[0].partitions[0]
    assert time.monotonic() - started < 5
    keys = [r.key for b in decode_batches(bytes(data.records)) for r in b.records]
    assert keys == [b"late0", b"late1"]


# --------------------------------------------------------------------- idempotence


def test_retried_idempotent_batch_is_answered_with_its_original_offset(client):
    init = client.request(
        ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(transactional_id=None)
    )
    assert init.error_code == 0 and init.producer_epoch == 0
    records = build_batch(3, pid=init.producer_id, seq=0, tag="idem")
    first = produce(client, records, partition=0)
    again = produce(client, records, partition=0)
    assert first.error_code == again.error_code == 0
    assert again.base_offset == first.base_offset
    assert list_offsets(client, 7, -1).offset == first.base_offset + 3
    gap = produce(client, build_batch(1, pid=init.producer_id, seq=9), partition=0)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_init_producer_id_with_a_transactional_id_needs_a_transaction_coordinator(client):
    # this broker runs none (no ZooKeeper): the client is told to look for one again
    response = client.request(
        ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(transactional_id="tx")
    )
    assert response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


# ----------------------------------------------------------- ListOffsets and epochs


@pytest.mark.parametrize("version", range(1, 9))
def test_list_offsets_every_version(client, version):
    ts = 1_900_000_000_000 + version * 1000
    base = produce(client, build_batch(3, ts=ts), partition=1).base_offset
    latest = list_offsets(client, version, -1, partition=1)
    assert latest.error_code == 0 and latest.offset == base + 3
    assert list_offsets(client, version, -2, partition=1).offset == 0
    by_time = list_offsets(client, version, ts + 1, partition=1)
    assert (by_time.offset, by_time.timestamp) == (base + 1, ts + 1)
    if version >= 4:
        assert latest.leader_epoch == 3
        fenced = list_offsets(client, version, -1, partition=1, epoch=2)
        assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert list_offsets(client, version, -1, 1, epoch=4).error_code == (
            ErrorCode.UNKNOWN_LEADER_EPOCH
        )
    if version >= 7:
        newest = list_offsets(client, version, -3, partition=1)
        assert (newest.offset, newest.timestamp) == (base + 2, ts + 2)


@pytest.mark.parametrize("version", range(2, 5))
def test_offset_for_leader_epoch(client, version):
    end = produce(client, build_batch(1)).base_offset + 1
    E = m.OffsetForLeaderEpochRequest
    body = E(
        replica_id=-1,
        topics=[
            E.OffsetForLeaderTopic(
                topic=TOPIC,
                partitions=[
                    E.OffsetForLeaderPartition(partition=0, current_leader_epoch=3, leader_epoch=3),
                    E.OffsetForLeaderPartition(partition=1, current_leader_epoch=2, leader_epoch=3),
                ],
            )
        ],
    )
    current, fenced = (
        client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body).topics[0].partitions
    )
    assert (current.error_code, current.leader_epoch, current.end_offset) == (0, 3, end)
    assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH


# ----------------------------------------------------------------- controller APIs


def test_controller_apis_answer_not_controller_unless_the_gateway_is_active(env, client):
    _, _, _, controller = env
    C = m.CreateTopicsRequest
    body = C(topics=[C.CreatableTopic(name="x", num_partitions=1, replication_factor=1)])
    response = client.request(ApiKey.CREATE_TOPICS, 7, body)
    assert response.topics[0].error_code == ErrorCode.NOT_CONTROLLER
    deleted = client.request(ApiKey.DELETE_TOPICS, 5, m.DeleteTopicsRequest(topic_names=["x"]))
    assert deleted.responses[0].error_code == ErrorCode.NOT_CONTROLLER
    shutdown = client.request(
        ApiKey.CONTROLLED_SHUTDOWN, 3, m.ControlledShutdownRequest(broker_id=1, broker_epoch=5)
    )
    assert shutdown.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert client.request(ApiKey.ALTER_PARTITION, 3, m.AlterPartitionRequest()).error_code == (
        ErrorCode.NOT_CONTROLLER
    )
    controller.active = True
    try:
        assert client.request(ApiKey.CREATE_TOPICS, 7, body).topics[0].error_code == 0
    finally:
        controller.active = False


# ------------------------------------------------------------------ acks and the ISR


def make_replicated(client, leader_epoch):
    request = leader_and_isr_request(
        topic="replicated",
        topic_id=REPLICATED_ID,
        assignment={0: [1, 2]},
        leader_epoch=leader_epoch,
        controller_id=1,
        controller_epoch=1,
    )
    response = client.request(ApiKey.LEADER_AND_ISR, 6, request)
    assert response.topics[0].partition_errors[0].error_code == 0


REPLICATED_ID = uuid.uuid4()


def follower_fetch(port, offset, last_epoch=-1, delay=0.0):
    time.sleep(delay)
    with RawClient("127.0.0.1", port) as follower:
        response = fetch(
            follower,
            15,
            [(0, offset, last_epoch)],
            topic_id=REPLICATED_ID,
            replica_id=2,
            replica_epoch=9,
        )
        return response.responses[0].partitions[0]


def test_acks_all_waits_for_the_isr_follower_and_fetches_detect_divergence(env, client):
    broker, *_ = env
    make_replicated(client, leader_epoch=0)
    # The follower has not fetched: the HW cannot pass the append.
    late = produce(client, build_batch(2), topic="replicated", timeout_ms=100)
    assert late.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert follower_fetch(broker.port, 2).high_watermark == 2
    # Now the follower fetches while the producer waits: acks=all completes at its fetch.
    threading.Thread(target=follower_fetch, args=(broker.port, 4, 0, 0.2)).start()
    started = time.monotonic()
    result = produce(client, build_batch(2), topic="replicated")
    assert result.error_code == 0 and result.base_offset == 2
    assert time.monotonic() - started < 4
    # A new leader epoch starts at offset 4; the follower claims epoch 1 data up to 7.
    make_replicated(client, leader_epoch=2)
    threading.Thread(target=follower_fetch, args=(broker.port, 6, 2, 0.2)).start()
    assert produce(client, build_batch(2), topic="replicated").error_code == 0
    diverged = follower_fetch(broker.port, 7, last_epoch=1)
    assert diverged.error_code == 0 and len(bytes(diverged.records)) == 0
    assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, 4)
    in_step = follower_fetch(broker.port, 6, last_epoch=2)
    assert in_step.diverging_epoch.epoch == -1 and in_step.high_watermark == 6


def test_pipelined_requests_are_answered_in_order_up_to_an_unsupported_one_which_closes(env):
    # The request loop writes the answers of one step together: the order must not change. A
    # version we do not serve closes the connection as Kafka does, after the answers before it.
    thread = env[0]
    frames = []
    for correlation in range(1, 61):
        if correlation == 30:  # Metadata v99
            body = m.MetadataRequest(topics=[])
            frame = bytearray(encode_request(ApiKey.METADATA, 4, correlation, "p", body))
            frame[6:8] = (99).to_bytes(2, "big")
            frames.append(bytes(frame))
        elif correlation % 2:
            body = m.ApiVersionsRequest()
            frames.append(encode_request(ApiKey.API_VERSIONS, 3, correlation, "p", body))
        else:
            body = m.MetadataRequest(topics=[])
            frames.append(encode_request(ApiKey.METADATA, 12, correlation, "p", body))
    with RawClient("127.0.0.1", thread.port) as client:
        client.send_bytes(b"".join(frames))
        seen = [int.from_bytes(client.read_frame()[:4], "big") for _ in range(29)]
        assert client.is_closed()
    assert seen == list(range(1, 30))


def produce_frame(correlation: int, records: bytes, acks: int, partition: int = 1) -> bytes:
    body = produce_body(records, partition, acks)
    return encode_request(ApiKey.PRODUCE, 9, correlation, "p", body)


@pytest.mark.parametrize("one_write", [True, False], ids=["one-write", "frame-by-frame"])
def test_produces_mixed_with_other_requests_are_answered_and_appended_in_order(env, one_write):
    # Produces are appended at once and answered without holding the connection (acks=0: no
    # answer); other requests between them still get their answers in request order, and the
    # records are appended in request order, whether the frames come in one read or one by one.
    thread = env[0]
    with RawClient("127.0.0.1", thread.port) as client:
        start = list_offsets(client, 7, -1, partition=1).offset
        frames, answered, produced = [], [], []
        for correlation in range(1, 41):
            kind = correlation % 4
            if kind == 0:
                frames.append(
                    encode_request(ApiKey.METADATA, 12, correlation, "p", m.MetadataRequest())
                )
                answered.append(correlation)
            else:
                acks = (-1, 1, 0)[kind - 1]
                frames.append(
                    produce_frame(correlation, build_batch(1, tag=f"c{correlation}"), acks)
                )
                produced.append(correlation)
                if acks:
                    answered.append(correlation)
        seen: dict[int, bytes] = {}
        if one_write:
            client.send_bytes(b"".join(frames))
            for _ in answered:
                frame = client.read_frame()
                seen[int.from_bytes(frame[:4], "big")] = frame
        else:
            for frame in frames:
                client.send_bytes(frame)
                correlation = int.from_bytes(frame[8:12], "big")
                if correlation in answered:
                    reply = client.read_frame()
                    seen[int.from_bytes(reply[:4], "big")] = reply
        assert list(seen) == answered
        # The acks=0 produces wrote too: the log holds every produce, in request order.
        end = start + len(produced)
        deadline = time.monotonic() + 5
        while list_offsets(client, 7, -1, partition=1).offset < end:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        records = fetch(client, 12, [(1, start, -1)]).responses[0].partitions[0].records
    keys = [r.key for b in decode_batches(bytes(records)) for r in b.records][: len(produced)]
    assert keys == [f"c{c}0".encode() for c in produced]
