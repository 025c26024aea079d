"""Two of KIP-380's motivating failures, played on in-process brokers with the test as the
controller (it can hold a request across a bounce exactly where the story needs it):

- a broker that bounces during controlled shutdown processes its previous generation's
  StopReplica for a follower replica, leaving that replica offline while the others serve;
- the first LeaderAndIsr a restarted broker processes comes from before its startup, the broker
  overwrites its high-watermark checkpoint, and the next restart truncates committed records
  away (KAFKA-7235).

Each runs with the mechanism off (test-only settings) to show the damage, and on to show none.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from epochlog.broker.harness import RawClient
from epochlog.broker.replication_harness import (
    CONTROLLER_EPOCH,
    CONTROLLER_ID,
    TOPIC,
    ReplicationCluster,
    batch,
    wait_until,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder
from epochlog.storage import PartitionLog
from epochlog.storage.checkpoint import OffsetCheckpointFile

KIP380 = "epochlog.test.kip380.enabled"
HW_GUARD = "epochlog.test.hw.checkpoint.guard.enabled"


def stop_replica(cluster: ReplicationCluster, to: int, broker_epoch: int, leader_epoch: int) -> int:
    """StopReplica v3 (delete=false) for the test partition, as controlled shutdown sends it to
    a follower; returns the top-level error code."""
    R = m.StopReplicaRequest
    body = R(
        controller_id=CONTROLLER_ID,
        controller_epoch=CONTROLLER_EPOCH,
        broker_epoch=broker_epoch,
        topic_states=[
            R.StopReplicaTopicState(
                topic_name=TOPIC,
                partition_states=[
                    R.StopReplicaPartitionState(
                        partition_index=0, leader_epoch=leader_epoch, delete_partition=False
                    )
                ],
            )
        ],
    )
    with cluster.client(to) as client:
        return client.request(ApiKey.STOP_REPLICA, 3, body).error_code


@pytest.mark.parametrize("kip380", [True, False], ids=["kip380-on", "kip380-off"])
def test_a_stale_stop_replica_after_a_bounce_leaves_the_follower_offline(tmp_path, kip380):
    cluster = ReplicationCluster(tmp_path, (1, 2), **{KIP380: str(kip380).lower()})
    try:
        cluster.assign(leader=1, leader_epoch=5, isr=[1, 2], replicas=[1, 2])
        assert cluster.produce(1, batch()).error_code == ErrorCode.NONE
        wait_until(lambda: cluster.leo(2) == 2, what="the follower caught up")
        # Broker 2 shuts down in a controlled way: the controller answers its ControlledShutdown
        # and queues StopReplica(delete=false) for generation 1002; the broker is gone before it
        # arrives, comes back as generation 3002 and is made a follower again.
        old_generation = cluster.epochs[2]
        cluster.stop_broker(2)
        cluster.epochs[2] = 3002
        cluster.start_broker(2)
        cluster.leader_and_isr(2, leader=1, leader_epoch=5, isr=[1, 2], replicas=[1, 2])
        wait_until(lambda: cluster.leo(2) == 2, what="the restarted follower fetching")
        # Now the old generation's StopReplica reaches the new process.
        error = stop_replica(cluster, 2, old_generation, leader_epoch=5)
        for _ in range(3):
            assert cluster.produce(1, batch(), acks=1).error_code == ErrorCode.NONE
        if kip380:
            assert error == ErrorCode.STALE_BROKER_EPOCH
            wait_until(lambda: cluster.leo(2) == 8, what="the follower still replicating")
        else:
            assert error == ErrorCode.NONE
            # The damage: the replica stopped, the leader and its other replicas carry on.
            time.sleep(1.0)
            assert cluster.leo(1) == 8
            assert cluster.partition(2, lambda p: p) is None  # no longer hosted: offline
            broker = cluster.brokers[2].broker
            assert broker is not None
            fetcher = cluster.brokers[2].run(lambda: broker.fetcher_manager.fetcher_of((TOPIC, 0)))
            assert fetcher is None
            assert len(cluster.log_bytes(2)) < len(cluster.log_bytes(1))
    finally:
        cluster.close()


def write_epochless_log(directory: Path, records: int, hw: int) -> None:
    """A broker's log of TOPIC-0 whose batches carry no leader epoch (written before epochs
    existed, say), with its high watermark checkpointed at `hw`."""
    log = PartitionLog.open(directory / f"{TOPIC}-0")
    for base in range(0, records, 2):
        builder = RecordBatchBuilder(base_offset=base)
        for i in range(2):
            builder.append(1_700_000_000_000 + base + i, b"k", b"v%d" % (base + i))
        log.append_as_follower(builder.build())
    assert log.leader_epoch_cache.latest_epoch is None
    log.close()
    OffsetCheckpointFile(directory / "replication-offset-checkpoint").write({(TOPIC, 0): hw})


def stale_leader_and_isr(port: int, broker_epoch: int) -> int:
    """A LeaderAndIsr from the broker's previous generation naming only another partition;
    returns its top-level error code."""
    R = m.LeaderAndIsrRequest
    body = R(
        controller_id=CONTROLLER_ID,
        controller_epoch=CONTROLLER_EPOCH,
        broker_epoch=broker_epoch,
        type=0,
        topic_states=[
            R.LeaderAndIsrTopicState(
                topic_name="other",
                topic_id=uuid.uuid4(),
                partition_states=[
                    R.LeaderAndIsrPartitionState(
                        partition_index=0,
                        controller_epoch=CONTROLLER_EPOCH,
                        leader=2,
                        leader_epoch=0,
                        isr=[2],
                        partition_epoch=0,
                        replicas=[2],
                        is_new=True,
                    )
                ],
            )
        ],
        live_leaders=[],
    )
    with RawClient("127.0.0.1", port) as client:
        return client.request(ApiKey.LEADER_AND_ISR, 6, body).error_code


@pytest.mark.parametrize(
    ("kip380", "hw_guard"),
    [(True, True), (False, True), (True, False)],
    ids=["both-on", "kip380-off", "hw-guard-off"],
)
def test_a_leader_and_isr_from_before_startup_erases_the_hw_and_truncates_committed_records(
    tmp_path, kip380, hw_guard
):
    settings = {
        KIP380: str(kip380).lower(),
        HW_GUARD: str(hw_guard).lower(),
        "replica.high.watermark.checkpoint.interval.ms": 50,
    }
    for broker_id in (1, 2):
        write_epochless_log(tmp_path / f"broker-{broker_id}", records=6, hw=6)
    cluster = ReplicationCluster(tmp_path, (1, 2), **settings)
    try:
        # Broker 2 restarts as generation 3002; the first LeaderAndIsr it gets was sent to its
        # previous generation before the restart, and names only another partition.
        cluster.stop_broker(2)
        cluster.epochs[2] = 3002
        cluster.start_broker(2)
        error = stale_leader_and_isr(cluster.brokers[2].port, broker_epoch=1002)
        assert error == (ErrorCode.STALE_BROKER_EPOCH if kip380 else ErrorCode.NONE)
        time.sleep(0.5)  # several HW checkpoint intervals
        cluster.stop_broker(2)  # and a restart before the controller's real LeaderAndIsr
        checkpoint = OffsetCheckpointFile(tmp_path / "broker-2" / "replication-offset-checkpoint")
        hw_on_disk = checkpoint.read().get((TOPIC, 0))
        # The leader goes away for good; broker 2 cannot fetch from it any more.
        cluster.faults([{"api": "FETCH", "source": 2, "action": "hold"}])
        cluster.epochs[2] = 4002
        cluster.start_broker(2)
        cluster.leader_and_isr(2, leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
        time.sleep(0.5)  # the fetcher's first pass: truncation, if any, happens before fetching
        cluster.stop_broker(1)
        cluster.leader_and_isr(2, leader=2, leader_epoch=1, isr=[2], replicas=[1, 2])
        if kip380 and hw_guard:
            assert hw_on_disk == 6
            assert cluster.leo(2) == 6  # every committed record survives on the new leader
        else:
            # The damage: the checkpoint lost the partition's HW, the restarted broker truncated
            # its epoch-less log to that HW, and the committed records are gone with it.
            assert hw_on_disk is None
            assert cluster.leo(2) == 0
    finally:
        cluster.faults([])
        cluster.close()
