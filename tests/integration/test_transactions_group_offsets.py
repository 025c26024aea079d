"""TxnOffsetCommit on a real 3-broker cluster, driven on the wire.

The test plays the transactional producer and the transaction coordinator (being built beside
this): a producer id from InitProducerId without a transactional id, TxnOffsetCommit to the
group's coordinator, then WriteTxnMarkers (commit or abort) to the leader of the group's
`__consumer_offsets` partition. OffsetFetch shows the offsets only once the commit marker is
written, never after an abort, answers UNSTABLE_OFFSET_COMMIT to require_stable meanwhile, and a
coordinator that moves (its broker restarted) rebuilds the same state from the log."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from epochlog.broker.harness import RawClient
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.cluster import LocalCluster

OFFSETS_TOPIC = "__consumer_offsets"
GROUP = "txn-group"
TOPIC = "input"
DEADLINE_S = 60  # a failure bound only: every wait below ends as soon as its answer is right
RETRIABLE = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("txn-groups"),
        3,
        broker_config={"offsets.topic.num.partitions": 1},  # every group on partition 0
    )
    local.start()
    yield local
    local.close()


def client_to(cluster: LocalCluster, broker_id: int) -> RawClient:
    return RawClient("127.0.0.1", cluster.brokers[broker_id].port)


def running_broker(cluster: LocalCluster) -> int:
    return next(b for b, p in cluster.brokers.items() if p.is_running())


def coordinator(cluster: LocalCluster) -> int:
    """The broker that coordinates GROUP (FindCoordinator, retried while it is being chosen)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        with client_to(cluster, running_broker(cluster)) as client:
            response = client.request(
                ApiKey.FIND_COORDINATOR, 3, m.FindCoordinatorRequest(key=GROUP, key_type=0)
            )
        if response.error_code == ErrorCode.NONE and cluster.brokers[response.node_id].is_running():
            return response.node_id
        time.sleep(0.1)
    raise AssertionError(f"no coordinator for {GROUP}")


def until_served(cluster: LocalCluster, send: Any) -> tuple[int, Any]:
    """Call send(client of the coordinator) until its errors are not the coordinator moving or
    loading; returns (coordinator id, response)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        broker = coordinator(cluster)
        with client_to(cluster, broker) as client:
            response, errors = send(client)
        if not set(errors) & RETRIABLE:
            return broker, response
        time.sleep(0.1)
    raise AssertionError("the coordinator never served the request")


def producer_id(cluster: LocalCluster) -> int:
    with client_to(cluster, running_broker(cluster)) as client:
        response = client.request(
            ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(transactional_id=None)
        )
    assert response.error_code == ErrorCode.NONE
    return response.producer_id


def txn_offset_commit(
    cluster: LocalCluster, pid: int, offsets: dict[int, int], version: int = 3, epoch: int = 0
) -> dict[int, ErrorCode]:
    R = m.TxnOffsetCommitRequest
    request = R(
        transactional_id="txn-app",
        group_id=GROUP,
        producer_id=pid,
        producer_epoch=epoch,
        topics=[
            R.TxnOffsetCommitRequestTopic(
                name=TOPIC,
                partitions=[
                    R.TxnOffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata="m"
                    )
                    for p, o in offsets.items()
                ],
            )
        ],
    )

    def send(client: RawClient) -> tuple[dict[int, ErrorCode], list[ErrorCode]]:
        response = client.request(ApiKey.TXN_OFFSET_COMMIT, version, request)
        errors = {p.partition_index: ErrorCode(p.error_code) for p in response.topics[0].partitions}
        return errors, list(errors.values())

    return until_served(cluster, send)[1]


def fetch(cluster: LocalCluster, require_stable: bool) -> dict[int, tuple[int, ErrorCode]]:
    R = m.OffsetFetchRequest
    request = R(
        group_id=GROUP,
        topics=[R.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0, 1])],
        require_stable=require_stable,
    )

    def send(client: RawClient) -> tuple[dict[int, tuple[int, ErrorCode]], list[ErrorCode]]:
        response = client.request(ApiKey.OFFSET_FETCH, 7, request)
        found = {
            p.partition_index: (p.committed_offset, ErrorCode(p.error_code))
            for p in response.topics[0].partitions
        }
        return found, [ErrorCode(response.error_code)]

    return until_served(cluster, send)[1]


def write_marker(cluster: LocalCluster, pid: int, commit: bool, epoch: int = 0) -> ErrorCode:
    """The transaction coordinator's marker to the offsets partition's leader (the group's
    coordinator)."""
    R = m.WriteTxnMarkersRequest
    request = R(
        markers=[
            R.WritableTxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=commit,
                topics=[R.WritableTxnMarkerTopic(name=OFFSETS_TOPIC, partition_indexes=[0])],
                coordinator_epoch=0,
            )
        ]
    )
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        with client_to(cluster, coordinator(cluster)) as client:
            response = client.request(ApiKey.WRITE_TXN_MARKERS, 1, request)
        error = ErrorCode(response.markers[0].topics[0].partitions[0].error_code)
        if error is not ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return error
        time.sleep(0.1)
    raise AssertionError("no leader took the marker")


NONE = ErrorCode.NONE
UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT


def test_offsets_of_a_transaction_count_from_its_commit_marker_and_survive_a_restart(
    cluster: LocalCluster,
) -> None:
    pid = producer_id(cluster)

    # 1. committed by the marker
    assert txn_offset_commit(cluster, pid, {0: 10, 1: 20}) == {0: NONE, 1: NONE}
    assert fetch(cluster, require_stable=True) == {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
    assert fetch(cluster, require_stable=False) == {0: (-1, NONE), 1: (-1, NONE)}
    assert write_marker(cluster, pid, commit=True) is NONE
    assert fetch(cluster, require_stable=True) == {0: (10, NONE), 1: (20, NONE)}

    # 2. the same producer's next transaction, aborted: nothing changes (v2 this time)
    assert txn_offset_commit(cluster, pid, {0: 30}, version=2) == {0: NONE}
    assert fetch(cluster, require_stable=True)[0] == (-1, UNSTABLE)
    assert write_marker(cluster, pid, commit=False) is NONE
    assert fetch(cluster, require_stable=True) == {0: (10, NONE), 1: (20, NONE)}

    # 3. a transaction left open while its coordinator's broker restarts
    assert txn_offset_commit(cluster, pid, {0: 40}) == {0: NONE}
    first = coordinator(cluster)
    cluster.stop_broker(first)
    cluster.start_broker(first)
    assert fetch(cluster, require_stable=True) == {0: (-1, UNSTABLE), 1: (20, NONE)}
    assert fetch(cluster, require_stable=False) == {0: (10, NONE), 1: (20, NONE)}
    assert write_marker(cluster, pid, commit=True) is NONE
    assert fetch(cluster, require_stable=True) == {0: (40, NONE), 1: (20, NONE)}

    # 4. and a coordinator killed -9 afterwards: its successor reads the same log
    second = coordinator(cluster)
    cluster.kill_broker(second)
    try:
        assert fetch(cluster, require_stable=True) == {0: (40, NONE), 1: (20, NONE)}
    finally:
        cluster.start_broker(second)


def test_a_member_checked_commit_and_a_fenced_producer_epoch(cluster: LocalCluster) -> None:
    pid = producer_id(cluster)
    R = m.TxnOffsetCommitRequest
    request = R(
        transactional_id="txn-member",
        group_id="no-such-group",
        producer_id=pid,
        producer_epoch=0,
        generation_id=5,
        member_id="m-1",
        topics=[
            R.TxnOffsetCommitRequestTopic(
                name=TOPIC,
                partitions=[
                    R.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)
                ],
            )
        ],
    )

    def send(client: RawClient) -> tuple[ErrorCode, list[ErrorCode]]:
        response = client.request(ApiKey.TXN_OFFSET_COMMIT, 3, request)
        error = ErrorCode(response.topics[0].partitions[0].error_code)
        return error, [error]

    # a generation for a group that does not exist (KIP-447's member fields, v3)
    assert until_served(cluster, send)[1] is ErrorCode.ILLEGAL_GENERATION

    # an older producer epoch than the offsets partition has seen is fenced, and nothing of
    # it is pending afterwards
    other = producer_id(cluster)
    assert txn_offset_commit(cluster, other, {5: 1}, epoch=1) == {5: NONE}
    assert write_marker(cluster, other, commit=True, epoch=1) is NONE
    assert txn_offset_commit(cluster, other, {5: 2}, epoch=0) == {
        5: ErrorCode.INVALID_PRODUCER_EPOCH
    }
    R2 = m.OffsetFetchRequest
    stable = R2(
        group_id=GROUP,
        topics=[R2.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[5])],
        require_stable=True,
    )
    with client_to(cluster, coordinator(cluster)) as client:
        answer = client.request(ApiKey.OFFSET_FETCH, 7, stable).topics[0].partitions[0]
    assert (answer.committed_offset, answer.error_code) == (1, ErrorCode.NONE)
