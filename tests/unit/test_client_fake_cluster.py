"""Producer, consumer and admin against a fake cluster: leader and controller moves, retries,
timeouts, and the admin requests the librdkafka mock does not serve.

`FakeCluster` is a few brokers on loopback sharing one in-memory log per partition, built from
epochlog.protocol's server side. Tests move a partition's leader (bumping its epoch) or the
controller and check that the clients rediscover them through metadata, as Kafka's clients do on
NOT_LEADER_OR_FOLLOWER and NOT_CONTROLLER.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

import pytest

from epochlog.client import (
    AsyncAdmin,
    AsyncConsumer,
    AsyncProducer,
    ClientError,
    DeliveryTimeoutError,
    KafkaError,
    MessageTooLargeError,
    NewTopic,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, decode_request, encode_response
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import decode_batches, parse_batch_header, stamp_batch

TOPIC = "t"
TOPIC_ID = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
E = ErrorCode


class FakeCluster:
    def __init__(self, brokers: int = 2, partitions: int = 1) -> None:
        self.ids = list(range(1, brokers + 1))
        self.leader = {p: 1 for p in range(partitions)}
        self.epoch = {p: 0 for p in range(partitions)}
        self.logs: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.ports: dict[int, int] = {}
        self.servers: list[asyncio.base_events.Server] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.requests: list[tuple[int, int]] = []  # (node, api key)
        self.produce_errors: list[int] = []  # errors to answer the next Produce requests with
        self.controller = 1
        self.hidden_apis: set[int] = set()  # left out of ApiVersions
        self.topics_created: list[tuple[str, int, int, dict]] = []
        self.topics_deleted: list[str] = []

    async def start(self) -> FakeCluster:
        for node in self.ids:
            server = await asyncio.start_server(
                lambda r, w, node=node: self.serve(node, r, w), "127.0.0.1", 0
            )
            self.ports[node] = server.sockets[0].getsockname()[1]
            self.servers.append(server)
        return self

    async def stop(self) -> None:
        for w in self.writers:
            w.close()
        for server in self.servers:
            server.close()
            await server.wait_closed()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.ports[1]}"

    def move_leader(self, partition: int, to: int) -> None:
        self.leader[partition] = to
        self.epoch[partition] += 1

    def end_offset(self, p: int) -> int:
        return sum(parse_batch_header(b).records_count for b in self.logs[p])

    async def serve(self, node: int, reader: Any, writer: Any) -> None:
        self.writers.append(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                request = decode_request(frame)
                self.requests.append((node, request.api_key))
                body = getattr(self, f"on_{request.api_key}")(
                    node, request.body, request.api_version
                )
                if body is not None:
                    writer.write(
                        encode_response(
                            request.api_key, request.api_version, request.correlation_id, body
                        )
                    )
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    def on_18(self, node: int, req: Any, v: int) -> Any:  # ApiVersions
        keys = [
            m.ApiVersionsResponse.ApiVersion(
                api_key=a.key, min_version=a.min_version, max_version=a.max_version
            )
            for a in APIS.values()
            if a.key not in self.hidden_apis
        ]
        return m.ApiVersionsResponse(api_keys=keys)

    def on_3(self, node: int, req: Any, v: int) -> Any:  # Metadata
        R = m.MetadataResponse
        parts = [
            R.MetadataResponsePartition(
                partition_index=p,
                leader_id=self.leader[p],
                leader_epoch=self.epoch[p],
                replica_nodes=self.ids,
                isr_nodes=self.ids,
            )
            for p in self.leader
        ]
        return R(
            brokers=[
                R.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=self.ports[n])
                for n in self.ids
            ],
            controller_id=self.controller,
            cluster_id="fake",
            topics=[R.MetadataResponseTopic(name=TOPIC, topic_id=TOPIC_ID, partitions=parts)],
        )

    def on_19(self, node: int, req: Any, v: int) -> Any:  # CreateTopics
        R = m.CreateTopicsResponse
        results = []
        for t in req.topics:
            if node != self.controller:
                code = E.NOT_CONTROLLER
            elif t.name == TOPIC or t.name in [c[0] for c in self.topics_created]:
                code = E.TOPIC_ALREADY_EXISTS
            else:
                code = E.NONE
                configs = {c.name: c.value for c in t.configs}
                self.topics_created.append(
                    (t.name, t.num_partitions, t.replication_factor, configs)
                )
            results.append(R.CreatableTopicResult(name=t.name, error_code=code))
        return R(topics=results)

    def on_20(self, node: int, req: Any, v: int) -> Any:  # DeleteTopics
        R = m.DeleteTopicsResponse
        names = [t.name for t in req.topics] if v >= 6 else list(req.topic_names)
        results = []
        for name in names:
            code = E.NOT_CONTROLLER if node != self.controller else E.NONE
            if code is E.NONE:
                self.topics_deleted.append(name)
            results.append(R.DeletableTopicResult(name=name, error_code=code))
        return R(responses=results)

    def on_60(self, node: int, req: Any, v: int) -> Any:  # DescribeCluster
        R = m.DescribeClusterResponse
        brokers = [
            R.DescribeClusterBroker(broker_id=n, host="127.0.0.1", port=self.ports[n])
            for n in self.ids
        ]
        return R(cluster_id="fake", controller_id=self.controller, brokers=brokers)

    def on_22(self, node: int, req: Any, v: int) -> Any:  # InitProducerId
        return m.InitProducerIdResponse(producer_id=77, producer_epoch=0)

    def on_0(self, node: int, req: Any, v: int) -> Any:  # Produce
        R = m.ProduceResponse
        out = []
        for t in req.topic_data:
            results = []
            for pd in t.partition_data:
                p = pd.index
                if self.produce_errors:
                    code, base = self.produce_errors.pop(0), -1
                elif self.leader.get(p) != node:
                    code, base = E.NOT_LEADER_OR_FOLLOWER, -1
                else:
                    code, base = E.NONE, self.end_offset(p)
                    batch = bytearray(pd.records)
                    stamp_batch(batch, 0, base, self.epoch[p])
                    self.logs[p].append(bytes(batch))
                results.append(
                    R.PartitionProduceResponse(index=p, error_code=code, base_offset=base)
                )
            out.append(R.TopicProduceResponse(name=t.name, partition_responses=results))
        return None if req.acks == 0 else R(responses=out)

    def on_1(self, node: int, req: Any, v: int) -> Any:  # Fetch
        R = m.FetchResponse
        out = []
        for t in req.topics:
            parts = []
            for fp in t.partitions:
                p = fp.partition
                if self.leader.get(p) != node:
                    parts.append(
                        R.PartitionData(partition_index=p, error_code=E.NOT_LEADER_OR_FOLLOWER)
                    )
                    continue
                data = b"".join(
                    b for b in self.logs[p] if parse_batch_header(b).next_offset > fp.fetch_offset
                )
                parts.append(
                    R.PartitionData(
                        partition_index=p, high_watermark=self.end_offset(p), records=data
                    )
                )
            out.append(
                R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=parts)
            )
        return R(responses=out)

    def on_2(self, node: int, req: Any, v: int) -> Any:  # ListOffsets
        R = m.ListOffsetsResponse
        out = []
        for t in req.topics:
            parts = []
            for lp in t.partitions:
                p = lp.partition_index
                offset, ts = -1, -1
                if lp.timestamp == -2:
                    offset = 0
                elif lp.timestamp == -1:
                    offset = self.end_offset(p)
                else:
                    for batch in decode_batches(b"".join(self.logs[p])):
                        for r in batch.records:
                            if offset < 0 and r.timestamp >= lp.timestamp:
                                offset, ts = r.offset, r.timestamp
                parts.append(
                    R.ListOffsetsPartitionResponse(partition_index=p, offset=offset, timestamp=ts)
                )
            out.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return R(topics=out)


@pytest.fixture
async def cluster():
    c = await FakeCluster().start()
    yield c
    await c.stop()


def config(cluster: FakeCluster, **extra: Any) -> dict:
    return {
        "bootstrap.servers": cluster.bootstrap,
        "retry.backoff.ms": 20,
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


def producer_config(cluster: FakeCluster, **extra: Any) -> dict:
    return config(cluster, linger_ms=0, **extra)


@pytest.mark.parametrize("idempotent", [True, False])
async def test_the_producer_follows_a_leader_change(cluster: FakeCluster, idempotent) -> None:
    async with AsyncProducer(producer_config(cluster, enable_idempotence=idempotent)) as producer:
        first = await producer.send_and_wait(TOPIC, b"a", partition=0)
        cluster.move_leader(0, to=2)
        second = await producer.send_and_wait(TOPIC, b"b", partition=0)
    assert (first.offset, second.offset) == (0, 1)
    produces = [node for node, key in cluster.requests if key == ApiKey.PRODUCE]
    # the second record is refused by the old leader (maybe more than once, while metadata is
    # being refreshed), then retried on the new one
    assert produces[:2] == [1, 1] and produces[-1] == 2 and set(produces[2:-1]) <= {1}
    headers = [parse_batch_header(b) for b in cluster.logs[0]]
    if idempotent:
        assert [(h.producer_id, h.base_sequence) for h in headers] == [(77, 0), (77, 1)]
    else:
        assert [h.producer_id for h in headers] == [-1, -1]


async def test_the_consumer_follows_a_leader_change(cluster: FakeCluster) -> None:
    async with AsyncProducer(producer_config(cluster)) as producer:
        for i in range(3):
            await producer.send_and_wait(TOPIC, b"%d" % i, partition=0)
        async with AsyncConsumer(config(cluster, auto_offset_reset="earliest")) as consumer:
            consumer.assign([(TOPIC, 0)])
            got = await consumer.poll(5)
            assert [r.value for r in got] == [b"0", b"1", b"2"]
            cluster.move_leader(0, to=2)
            await producer.send_and_wait(TOPIC, b"3", partition=0)
            got = await consumer.poll(5)
            assert [(r.offset, r.value) for r in got] == [(3, b"3")]
    fetches = [node for node, key in cluster.requests if key == ApiKey.FETCH]
    assert fetches[0] == 1 and fetches[-1] == 2


async def test_offsets_for_times_finds_the_first_record_at_or_after_a_timestamp(
    cluster: FakeCluster,
) -> None:
    async with AsyncProducer(producer_config(cluster)) as producer:
        for i in range(5):
            await producer.send_and_wait(TOPIC, b"v", partition=0, timestamp=1000 + 10 * i)
    async with AsyncConsumer(config(cluster)) as consumer:
        tp = (TOPIC, 0)
        found = await consumer.offsets_for_times({tp: 1015})
        assert found[tp] is not None and (found[tp].offset, found[tp].timestamp) == (2, 1020)
        assert (await consumer.offsets_for_times({tp: 5000}))[tp] is None


async def test_an_unacknowledged_record_fails_after_delivery_timeout(cluster: FakeCluster) -> None:
    cluster.move_leader(0, to=-1)  # no leader, ever
    settings = producer_config(cluster, request_timeout_ms=100, delivery_timeout_ms=300)
    async with AsyncProducer(settings) as producer:
        future = await producer.send(TOPIC, b"lost", partition=0)
        with pytest.raises(DeliveryTimeoutError, match="delivery.timeout.ms=300"):
            await asyncio.wait_for(future, 5)


async def test_a_batch_the_broker_finds_too_large_fails_clearly(cluster: FakeCluster) -> None:
    cluster.produce_errors = [E.MESSAGE_TOO_LARGE]
    async with AsyncProducer(producer_config(cluster)) as producer:
        with pytest.raises(MessageTooLargeError, match="MESSAGE_TOO_LARGE"):
            await producer.send_and_wait(TOPIC, b"big", partition=0)
        assert (await producer.send_and_wait(TOPIC, b"small", partition=0)).offset == 0


async def test_retriable_errors_are_retried_until_they_clear(cluster: FakeCluster) -> None:
    cluster.produce_errors = [E.NOT_ENOUGH_REPLICAS, E.REQUEST_TIMED_OUT]
    async with AsyncProducer(producer_config(cluster)) as producer:
        md = await producer.send_and_wait(TOPIC, b"v", partition=0)
    assert md.offset == 0
    assert [key for _, key in cluster.requests].count(ApiKey.PRODUCE) == 3


async def test_a_duplicate_sequence_counts_as_delivered(cluster: FakeCluster) -> None:
    cluster.produce_errors = [E.DUPLICATE_SEQUENCE_NUMBER]
    async with AsyncProducer(producer_config(cluster)) as producer:
        md = await producer.send_and_wait(TOPIC, b"v", partition=0)
        assert md.offset == -1  # written before; where is unknown
        assert (await producer.send_and_wait(TOPIC, b"w", partition=0)).offset == 0


async def test_unknown_producer_id_gets_a_new_id_and_restarts_sequences(
    cluster: FakeCluster,
) -> None:
    cluster.produce_errors = [E.UNKNOWN_PRODUCER_ID]
    async with AsyncProducer(producer_config(cluster)) as producer:
        await producer.send_and_wait(TOPIC, b"v", partition=0)
        await producer.send_and_wait(TOPIC, b"w", partition=0)
    assert [key for _, key in cluster.requests].count(ApiKey.INIT_PRODUCER_ID) == 2
    assert [parse_batch_header(b).base_sequence for b in cluster.logs[0]] == [0, 1]


async def test_create_topics_goes_to_the_controller_and_follows_it(cluster: FakeCluster) -> None:
    cluster.controller = 2
    async with AsyncAdmin(config(cluster)) as admin:
        await admin.create_topic("a", 3, 2, {"cleanup.policy": "compact"})
        creates = [node for node, key in cluster.requests if key == ApiKey.CREATE_TOPICS]
        assert creates == [2]
        await admin.describe_cluster()  # metadata now says broker 2 is the controller
        cluster.controller = 1  # moves; broker 2 answers NOT_CONTROLLER until we refresh
        results = await admin.create_topics([NewTopic("b", 1, 1), NewTopic(TOPIC, 1, 1)])
        assert results["b"] is None
        assert isinstance(results[TOPIC], KafkaError)
        assert results[TOPIC].code is E.TOPIC_ALREADY_EXISTS
        with pytest.raises(KafkaError, match="TOPIC_ALREADY_EXISTS"):
            await admin.create_topic("a", 1, 1)
    assert cluster.topics_created[:2] == [
        ("a", 3, 2, {"cleanup.policy": "compact"}),
        ("b", 1, 1, {}),
    ]
    creates = [node for node, key in cluster.requests if key == ApiKey.CREATE_TOPICS]
    assert creates[:2] == [2, 2] and creates[-1] == 1


async def test_delete_topics_goes_to_the_controller(cluster: FakeCluster) -> None:
    cluster.controller = 2
    async with AsyncAdmin(config(cluster)) as admin:
        assert await admin.delete_topics(["x", "y"]) == {"x": None, "y": None}
    assert cluster.topics_deleted == ["x", "y"]


async def test_admin_describes_topics_and_the_cluster(cluster: FakeCluster) -> None:
    async with AsyncAdmin(config(cluster)) as admin:
        assert await admin.list_topics() == [TOPIC]
        description = (await admin.describe_topics([TOPIC]))[TOPIC]
        assert description.topic_id == TOPIC_ID
        assert [(p.partition, p.leader, p.replicas) for p in description.partitions] == [
            (0, 1, (1, 2))
        ]
        with pytest.raises(KafkaError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            await admin.describe_topics(["nope"])
        cluster.controller = 2
        described = await admin.describe_cluster()
    assert (described.cluster_id, described.controller_id) == ("fake", 2)
    assert [(b.node_id, b.port) for b in described.brokers] == [
        (n, cluster.ports[n]) for n in cluster.ids
    ]


async def test_idempotence_against_a_broker_without_init_producer_id_fails_clearly(
    cluster: FakeCluster,
) -> None:
    cluster.hidden_apis.add(ApiKey.INIT_PRODUCER_ID)
    async with AsyncProducer(producer_config(cluster)) as producer:
        # the producer asks for its id at start: the first send fails at once if the answer
        # came first, else its future fails
        with pytest.raises(ClientError, match="idempotent producer not supported"):
            future = await producer.send(TOPIC, b"v", partition=0)
            await asyncio.wait_for(future, 5)
        with pytest.raises(ClientError, match="idempotent producer not supported"):
            await producer.send(TOPIC, b"w", partition=0)
    async with AsyncProducer(producer_config(cluster, enable_idempotence=False)) as producer:
        assert (await producer.send_and_wait(TOPIC, b"v", partition=0)).offset == 0
