"""KIP-227 fetch sessions over a socket: full and incremental fetches, session errors, and real
consumers (kafka-python opens sessions; librdkafka and aiokafka fetch without one) reading while
sessions are open. An in-process broker, no ZooKeeper (as test_broker_clients)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from epochlog.broker.harness import BrokerThread, RawClient, become_leader
from epochlog.broker.replication_harness import ReplicationCluster, batch, wait_until
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder
from tests.integration.interop import (
    assert_same,
    confluent_consume,
    confluent_produce,
    kafka_python_round_trip,
    records,
)

TOPIC = "sessions"
F = m.FetchRequest


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    thread = BrokerThread(
        {
            "broker.id": 1,
            "zookeeper.connect": "unused:2181",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path_factory.mktemp("broker")),
        }
    ).start()
    yield thread
    thread.stop()


def make_topic(port: int, topic: str, partitions: int) -> uuid.UUID:
    with RawClient("127.0.0.1", port) as client:
        topic_id, update, leader = become_leader(
            client,
            broker_id=1,
            port=port,
            topic=topic,
            partitions=partitions,
            leader_epoch=0,
            topic_id=uuid.uuid5(uuid.NAMESPACE_URL, topic),
        )
    assert update.error_code == 0 and leader.error_code == 0
    return topic_id


def produce(client: RawClient, partition: int, n: int, topic: str = TOPIC) -> None:
    builder = RecordBatchBuilder()
    for i in range(n):
        builder.append(1_700_000_000_000 + i, b"k", f"v{i}".encode())
    P = m.ProduceRequest
    body = P(
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            P.TopicProduceData(
                name=topic,
                partition_data=[P.PartitionProduceData(index=partition, records=builder.build())],
            )
        ],
    )
    answer = client.request(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]
    assert answer.error_code == 0


def session_fetch(
    client: RawClient,
    session_id: int,
    epoch: int,
    offsets: dict[int, int],
    forgotten: list[int] | None = None,
    version: int = 12,
    topic_id: uuid.UUID | None = None,
) -> Any:
    """A consumer's Fetch in a session: TOPIC by name, or (v13+) the topic `topic_id`."""
    named = {"topic_id": topic_id} if topic_id is not None else {"topic": TOPIC}
    body = F(
        max_wait_ms=0,
        min_bytes=1,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            F.FetchTopic(
                **named,
                partitions=[
                    F.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                    for p, o in offsets.items()
                ],
            )
        ]
        if offsets
        else [],
        forgotten_topics_data=[F.ForgottenTopic(topic=TOPIC, partitions=forgotten)]
        if forgotten
        else [],
    )
    body.replica_id = -1
    return client.request(ApiKey.FETCH, version, body)


def answered(response: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def test_an_incremental_fetch_answers_only_partitions_that_changed(broker):
    make_topic(broker.port, TOPIC, 3)
    with RawClient("127.0.0.1", broker.port) as client:
        produce(client, 0, 2)
        full = session_fetch(client, 0, 0, {0: 0, 1: 0, 2: 0})
        session_id = full.session_id
        assert full.error_code == 0 and session_id != 0
        assert set(answered(full)) == {0, 1, 2} and answered(full)[0].records
        # Partition 0 moves on to offset 2; nothing else changed: an empty answer.
        nothing = session_fetch(client, session_id, 1, {0: 2})
        assert (nothing.error_code, nothing.session_id, answered(nothing)) == (0, session_id, {})
        produce(client, 1, 3)
        one = session_fetch(client, session_id, 2, {})
        assert set(answered(one)) == {1}
        assert answered(one)[1].high_watermark == 3 and answered(one)[1].records
        # Forgetting partition 1 leaves 0 and 2 in the session; then a session error.
        assert answered(session_fetch(client, session_id, 3, {}, forgotten=[1])) == {}
        stale = session_fetch(client, session_id, 3, {})
        assert stale.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        assert (stale.session_id, stale.responses) == (0, [])
        unknown = session_fetch(client, session_id + 1, 1, {})
        assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # The error changed nothing: epoch 4 still works; epoch -1 closes the session.
        produce(client, 2, 1)
        assert set(answered(session_fetch(client, session_id, 4, {}))) == {2}
        closed = session_fetch(client, session_id, -1, {0: 2})
        assert closed.session_id == 0 and set(answered(closed)) == {0}
        gone = session_fetch(client, session_id, 5, {})
        assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_fetch_below_v7_or_without_a_session_gets_session_id_0(broker):
    make_topic(broker.port, TOPIC, 3)
    with RawClient("127.0.0.1", broker.port) as client:
        assert session_fetch(client, 0, -1, {0: 0}).session_id == 0
        assert session_fetch(client, 0, 0, {0: 0}, version=6).session_id == 0


def test_kafka_python_consumes_through_fetch_sessions(broker):
    topic = "sessions-kafka-python"
    make_topic(broker.port, topic, 2)
    items = records(topic, 300)
    sessions = broker.broker.services.fetch_sessions
    before = len(sessions)
    offsets, got = kafka_python_round_trip(broker.bootstrap, topic, items, 2)
    assert sorted(offsets) == sorted(list(range(150)) * 2)
    assert_same(got, items)
    assert len(sessions) > before  # its consumer opened a session (and left it to expire)


def test_confluent_kafka_consumes_while_sessions_are_open(broker):
    topic = "sessions-confluent"
    make_topic(broker.port, topic, 2)
    with RawClient("127.0.0.1", broker.port) as client:
        opened = session_fetch(client, 0, 0, {0: 0, 1: 0})
        assert opened.session_id != 0
        items = records(topic, 200)
        confluent_produce(broker.bootstrap, topic, items)
        assert_same(confluent_consume(broker.bootstrap, topic, 2, len(items)), items)
        # The raw session is untouched by the other consumer's sessionless fetches.
        assert session_fetch(client, opened.session_id, 1, {}).error_code == 0


def test_followers_fetch_incrementally_and_replicate_byte_for_byte(tmp_path):
    cluster = ReplicationCluster(tmp_path, (1, 2, 3))
    try:
        cluster.assign(leader=1, leader_epoch=0, isr=[1], replicas=[1, 2, 3])
        for i in range(5):
            assert cluster.produce(1, batch(3, b"s%d-" % i), acks=1).error_code == 0
        wait_until(lambda: sorted(cluster.isr(1)) == [1, 2, 3], what="ISR")
        wait_until(lambda: cluster.leo(2) == cluster.leo(3) == cluster.leo(1), what="followers")
        assert cluster.log_bytes(2) == cluster.log_bytes(1) == cluster.log_bytes(3)
        leader_sessions = cluster.brokers[1].broker.services.fetch_sessions

        def incremental(broker_id: int) -> bool:
            fetchers = cluster.brokers[broker_id].broker.fetcher_manager.fetchers.values()
            return any(
                f.session.session_id != 0
                and f.session.epoch > 1
                and leader_sessions.get(f.session.session_id) is not None
                for f in fetchers
            )

        wait_until(lambda: incremental(2) and incremental(3), what="incremental sessions")
        follower_sessions = [
            leader_sessions.get(f.session.session_id)
            for b in (2, 3)
            for f in cluster.brokers[b].broker.fetcher_manager.fetchers.values()
        ]
        assert all(s is not None and s.privileged for s in follower_sessions)
        # More records still reach both followers through their sessions.
        assert cluster.produce(1, batch(2, b"late-"), acks=-1).error_code == 0
        wait_until(lambda: cluster.hw(2) == cluster.hw(3) == cluster.leo(1) == 17, what="HW 17")
    finally:
        cluster.close()


def test_a_topic_learned_after_the_session_began_is_served_by_its_id(broker):
    """A follower's first Fetch (by topic id, v13+) can reach a leader just before the
    LeaderAndIsr that tells it the topic: that partition is UNKNOWN_TOPIC_ID then, and must be
    served once the topic is known, by the same session (a session that cached the name as
    unknown answered UNKNOWN_TOPIC_ID forever, and the follower never rejoined the ISR)."""
    topic = "learned-late"
    topic_id = uuid.uuid5(uuid.NAMESPACE_URL, topic)
    with RawClient("127.0.0.1", broker.port) as client:
        first = session_fetch(client, 0, 0, {0: 0}, version=13, topic_id=topic_id)
        assert answered(first)[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        session_id = first.session_id
        assert session_id != 0
        assert make_topic(broker.port, topic, 1) == topic_id
        produce(client, 0, 1, topic=topic)
        # incremental, nothing resent
        later = session_fetch(client, session_id, 1, {}, version=13, topic_id=topic_id)
        assert later.error_code == 0 and later.session_id == session_id
        partition = answered(later)[0]
        assert partition.error_code == ErrorCode.NONE
        assert partition.high_watermark == 1 and partition.records
