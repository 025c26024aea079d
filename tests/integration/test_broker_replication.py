"""Replication between in-process brokers, the test playing the controller (no ZooKeeper):
followers copy the leader byte for byte, the ISR grows through AlterPartition with the
followers' fetch epochs (KIP-903), acks=all waits for the ISR, lagging followers are shrunk out,
INELIGIBLE_REPLICA reverts the leader's maximal ISR, divergent followers truncate by leader
epoch, and a restarted follower starts from its checkpointed HW."""

from __future__ import annotations

import concurrent.futures
import time

import pytest

from epochlog.broker.replication_harness import TOPIC, ReplicationCluster, batch, wait_until
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, decode_response, encode_request
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import decode_batches


@pytest.fixture
def make_cluster(tmp_path):
    clusters = []

    def make(broker_ids=(1, 2), **config):
        cluster = ReplicationCluster(tmp_path, tuple(broker_ids), **config)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()


def caught_up(cluster, *followers, leader=1):
    leo = cluster.leo(leader)
    return all(cluster.leo(f) == leo for f in followers)


def test_followers_replicate_byte_for_byte_and_join_the_isr_with_their_fetch_epochs(
    make_cluster,
):
    cluster = make_cluster((1, 2, 3))
    cluster.assign(leader=1, leader_epoch=0, isr=[1], replicas=[1, 2, 3])
    for i in range(5):
        assert cluster.produce(1, batch(3, b"x%d-" % i), acks=1).error_code == ErrorCode.NONE
    wait_until(lambda: cluster.isr(1) == (1, 2, 3) or cluster.isr(1) == (1, 3, 2), what="ISR")
    wait_until(lambda: caught_up(cluster, 2, 3), what="followers")
    leader_bytes = cluster.log_bytes(1)
    assert len(decode_batches(leader_bytes)) == 5
    assert cluster.log_bytes(2) == leader_bytes
    assert cluster.log_bytes(3) == leader_bytes
    # One change in flight at a time: two AlterPartitions, each naming the leader with its own
    # broker epoch and the follower with the epoch it fetched with.
    requests = cluster.controller.isrs_with_epochs()
    assert len(requests) == 2
    assert requests[0][0] == (1, 1001)
    assert {requests[0][1], requests[1][2]} == {(2, 1002), (3, 1003)}
    assert [b.broker_epoch for b in cluster.controller.requests] == [1001, 1001]
    assert [b.broker_id for b in cluster.controller.requests] == [1, 1]
    # The HW reaches every replica: the leader's from the ISR, the followers' from the leader.
    wait_until(lambda: {cluster.hw(b) for b in (1, 2, 3)} == {15}, what="HW 15 everywhere")


def test_acks_all_waits_for_a_paused_follower_until_it_catches_up(make_cluster):
    cluster = make_cluster()
    cluster.assign(leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
    assert cluster.produce(1, batch()).error_code == ErrorCode.NONE
    wait_until(lambda: caught_up(cluster, 2))
    cluster.faults([{"api": "FETCH", "source": 2, "action": "hold"}])
    time.sleep(0.3)  # the follower's fetch in flight returns; the next one is held
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        produce = pool.submit(cluster.produce, 1, batch(), -1, 10000)
        time.sleep(0.6)
        assert not produce.done()
        assert cluster.hw(1) == 2
        cluster.faults([])
        answer = produce.result(10)
    assert answer.error_code == ErrorCode.NONE
    assert answer.base_offset == 2
    assert cluster.hw(1) == 4 and cluster.leo(2) == 4
    assert cluster.controller.requests == []  # the ISR never changed


@pytest.mark.parametrize("min_isr", [1, 2])
def test_a_lagging_follower_is_shrunk_out_and_joins_again(make_cluster, min_isr):
    cluster = make_cluster(**{"replica.lag.time.max.ms": 600, "min.insync.replicas": min_isr})
    cluster.assign(leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
    assert cluster.produce(1, batch()).error_code == ErrorCode.NONE
    wait_until(lambda: caught_up(cluster, 2))
    cluster.faults([{"api": "FETCH", "source": 2, "action": "hold"}])
    started = time.monotonic()
    answer = cluster.produce(1, batch(), -1, 10000)
    waited = time.monotonic() - started
    # The produce completes only once the ISR shrank (> replica.lag.time.max.ms later).
    assert waited > 0.3
    assert cluster.isr(1) == (1,)
    assert cluster.controller.isrs_with_epochs()[0] == [(1, 1001)]
    if min_isr == 1:
        assert answer.error_code == ErrorCode.NONE
    else:
        assert answer.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        refused = cluster.produce(1, batch())
        assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    cluster.faults([])
    wait_until(lambda: cluster.isr(1) == (1, 2), what="the follower back in the ISR")
    assert cluster.controller.isrs_with_epochs()[1] == [(1, 1001), (2, 1002)]
    assert cluster.partition(1, lambda p: p.partition_epoch) == 2
    assert cluster.produce(1, batch()).error_code == ErrorCode.NONE


def test_not_enough_replicas_until_the_follower_joins(make_cluster):
    cluster = make_cluster(**{"min.insync.replicas": 2})
    cluster.leader_and_isr(1, leader=1, leader_epoch=0, isr=[1], replicas=[1, 2])
    refused = cluster.produce(1, batch())
    assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert cluster.leo(1) == 0  # nothing was written
    assert cluster.produce(1, batch(), acks=1).error_code == ErrorCode.NONE
    assert cluster.hw(1) == 0  # frozen while the ISR is below min.insync.replicas
    cluster.leader_and_isr(2, leader=1, leader_epoch=0, isr=[1], replicas=[1, 2])
    wait_until(lambda: cluster.isr(1) == (1, 2), what="ISR [1, 2]")
    wait_until(lambda: cluster.hw(1) == 2, what="HW after the expansion")
    assert cluster.produce(1, batch()).error_code == ErrorCode.NONE


def test_ineligible_replica_makes_the_leader_revert_its_maximal_isr(make_cluster):
    cluster = make_cluster()
    cluster.controller.ineligible = True
    cluster.assign(leader=1, leader_epoch=0, isr=[1], replicas=[1, 2])
    wait_until(lambda: cluster.controller.requests, what="an AlterPartition")
    assert cluster.controller.isrs_with_epochs()[0] == [(1, 1001), (2, 1002)]
    # The controller knows a newer generation of broker 2 than the one fetching: the leader
    # learns it from UpdateMetadata and stops proposing broker 2.
    cluster.update_metadata(1, leader=1, leader_epoch=0, isr=[1], replicas=[1, 2], epochs={2: 2002})
    time.sleep(0.3)
    sent = len(cluster.controller.requests)
    time.sleep(0.5)
    assert len(cluster.controller.requests) == sent
    assert cluster.isr(1) == (1,)
    assert cluster.maximal_isr(1) == (1,)
    assert cluster.partition(1, lambda p: p.pending_isr) is None
    # Without broker 2 in the (maximal) ISR acks=all needs the leader only.
    assert cluster.produce(1, batch(), timeout_ms=2000).error_code == ErrorCode.NONE


@pytest.mark.parametrize("kip903", [True, False])
def test_a_follower_fetching_with_a_stale_broker_epoch_joins_only_without_kip903(
    make_cluster, kip903
):
    cluster = make_cluster(**{"epochlog.test.kip903.enabled": kip903})
    cluster.leader_and_isr(1, leader=1, leader_epoch=0, isr=[1], replicas=[1, 2])
    # The controller has seen broker 2 register again (epoch 2002); the broker still fetches
    # with the epoch it had (1002).
    cluster.update_metadata(1, leader=1, leader_epoch=0, isr=[1], replicas=[1, 2], epochs={2: 2002})
    assert cluster.produce(1, batch(), acks=1).error_code == ErrorCode.NONE
    cluster.leader_and_isr(2, leader=1, leader_epoch=0, isr=[1], replicas=[1, 2])
    wait_until(lambda: caught_up(cluster, 2))
    if kip903:
        time.sleep(0.5)
        assert cluster.controller.requests == []
        assert cluster.isr(1) == (1,)
    else:
        wait_until(lambda: cluster.isr(1) == (1, 2))
        assert cluster.controller.isrs_with_epochs() == [[(1, -1), (2, -1)]]


@pytest.mark.parametrize("fetch_version", [16, 11], ids=["diverging-epoch", "offsets-for-epoch"])
def test_a_follower_with_a_divergent_tail_truncates_to_the_leader(make_cluster, fetch_version):
    cluster = make_cluster()
    cluster.brokers[2].broker.fetcher_manager.max_fetch_version = fetch_version
    # Epoch 0: both replicas hold two batches.
    cluster.assign(leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
    cluster.produce(1, batch(1, b"a"))
    cluster.produce(1, batch(1, b"b"))
    wait_until(lambda: caught_up(cluster, 2) and cluster.hw(2) == 2)
    # Epoch 1: broker 2 leads alone (broker 1 is not told) and writes a tail nobody copies.
    cluster.leader_and_isr(2, leader=2, leader_epoch=1, isr=[2], replicas=[1, 2])
    cluster.produce(2, batch(1, b"lost1"), acks=1)
    cluster.produce(2, batch(1, b"lost2"), acks=1)
    assert cluster.leo(2) == 4
    # Epoch 2: broker 1 leads and writes its own; broker 2 follows and must drop its tail.
    cluster.leader_and_isr(1, leader=1, leader_epoch=2, isr=[1], replicas=[1, 2])
    cluster.produce(1, batch(1, b"c"), acks=1)
    cluster.leader_and_isr(2, leader=1, leader_epoch=2, isr=[1], replicas=[1, 2])
    wait_until(lambda: cluster.log_bytes(2) == cluster.log_bytes(1), what="identical logs")
    values = [r.value for b in decode_batches(cluster.log_bytes(2)) for r in b.records]
    assert values == [b"a0", b"b0", b"c0"]
    assert cluster.partition(2, lambda p: p.log.leader_epoch_cache.entries) == [(0, 0), (2, 2)]
    if fetch_version >= 15:
        wait_until(lambda: cluster.isr(1) == (1, 2))
    else:
        # Fetch < 15 carries no broker epoch: with KIP-903 such a follower never joins.
        time.sleep(0.3)
        assert cluster.isr(1) == (1,)


def test_a_restarted_follower_starts_from_its_checkpointed_high_watermark(make_cluster):
    cluster = make_cluster()
    cluster.assign(leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
    for _ in range(3):
        assert cluster.produce(1, batch()).error_code == ErrorCode.NONE
    wait_until(lambda: cluster.hw(2) == 6, what="follower HW")
    cluster.stop_broker(2)  # clean shutdown writes the HW checkpoint, followers included
    checkpoint = cluster.root / "broker-2" / "replication-offset-checkpoint"
    assert checkpoint.read_text().split("\n")[2] == "r 0 6"
    cluster.faults([{"api": "FETCH", "source": 2, "action": "hold"}])
    cluster.epochs[2] = 3002  # a new generation
    cluster.start_broker(2)
    cluster.leader_and_isr(2, leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
    assert cluster.hw(2) == 6 and cluster.leo(2) == 6
    cluster.faults([])


def test_a_follower_behind_the_leaders_log_start_restarts_its_log_there(make_cluster):
    cluster = make_cluster()
    cluster.leader_and_isr(1, leader=1, leader_epoch=0, isr=[1], replicas=[1, 2])
    # The leader's log starts at 100 (retention removed the rest, say).
    cluster.partition(1, lambda p: p.log.truncate_fully_and_start_at(100))
    cluster.partition(1, lambda p: setattr(p, "high_watermark", 100))
    assert cluster.produce(1, batch(), acks=1).base_offset == 100
    cluster.leader_and_isr(2, leader=1, leader_epoch=0, isr=[1], replicas=[1, 2])
    wait_until(lambda: caught_up(cluster, 2), what="the follower past the leader's start")
    assert cluster.partition(2, lambda p: p.log_start_offset) == 100
    assert cluster.log_bytes(2) == cluster.log_bytes(1)
    wait_until(lambda: cluster.isr(1) == (1, 2))


def test_produces_on_one_connection_wait_for_replication_together_and_answer_in_order(
    make_cluster,
):
    cluster = make_cluster()
    cluster.assign(leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
    assert cluster.produce(1, batch()).error_code == ErrorCode.NONE
    wait_until(lambda: caught_up(cluster, 2))
    cluster.faults([{"api": "FETCH", "source": 2, "action": "hold"}])
    time.sleep(0.3)  # the follower's fetch in flight returns; the next one is held
    P = m.ProduceRequest
    frames = [
        encode_request(
            ApiKey.PRODUCE,
            9,
            correlation,
            "p",
            P(
                acks=-1,
                timeout_ms=10000,
                topic_data=[
                    P.TopicProduceData(
                        name=TOPIC,
                        partition_data=[P.PartitionProduceData(index=0, records=batch())],
                    )
                ],
            ),
        )
        for correlation in range(1, 6)
    ]
    frames.append(encode_request(ApiKey.METADATA, 12, 6, "p", m.MetadataRequest(topics=[])))
    with cluster.client(1) as client:
        client.send_bytes(b"".join(frames))
        # All five are appended while the first still waits for the follower.
        wait_until(lambda: cluster.leo(1) == 12, what="every produce appended")
        assert cluster.hw(1) == 2
        cluster.faults([])
        answers = [client.read_frame() for _ in frames]
    correlations = [int.from_bytes(a[:4], "big") for a in answers]
    assert correlations == [1, 2, 3, 4, 5, 6]
    offsets = [
        decode_response(ApiKey.PRODUCE, 9, a)[1].responses[0].partition_responses[0].base_offset
        for a in answers[:5]
    ]
    assert offsets == [2, 4, 6, 8, 10]
    assert cluster.hw(1) == 12
