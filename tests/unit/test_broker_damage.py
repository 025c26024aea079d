"""A damaged log costs its own partition, never the whole LeaderAndIsr, and is never served
(issue 14, item 2), on real log dirs without sockets.

The damage is what the issue's user found: a batch header in the middle of a segment with a bad
magic, left there while the broker was cleanly down (so the clean open does not look), or
written under a running leader.
"""

from __future__ import annotations

from epochlog.broker.reads import FetchParams, PartitionFetch, read_from_local_log
from epochlog.protocol.errors import ErrorCode
from epochlog.storage.layout import partition_dir_name
from tests.unit.test_broker_replica_manager import batch, lai, make_rm

MAGIC_BYTE = 16
PARTITIONS = {0: [1, 2], 1: [1, 2], 2: [1, 2]}
AS_FOLLOWER = {p: [2, 1] for p in PARTITIONS}
CONSUMER = FetchParams(-1, -1, 0, min_bytes=1, max_bytes=10**6, isolation_level=0)


def fill(rm, batches=200) -> None:
    """Lead every partition and append `batches` batches of two records to each (as leader)."""
    rm.apply_leader_and_isr(lai(PARTITIONS, isr=[1]), 6)
    for p in PARTITIONS:
        partition = rm.get_partition("t", p)
        for _ in range(batches):
            partition.log.append_as_leader(batch(), 0, 1000)
        partition.high_watermark = partition.log_end_offset


def damage_batch(tmp_path, p: int, index: int) -> int:
    """Give the `index`th batch of partition p a bad magic; returns its base offset."""
    path = tmp_path / partition_dir_name("t", p) / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    position, base = 0, 0
    for _ in range(index):
        length = int.from_bytes(data[position + 8 : position + 12], "big")
        position += 12 + length
        base += 2
    data[position + MAGIC_BYTE] = 0xFD  # magic -3, as in the issue
    path.write_bytes(bytes(data))
    return base


def restart(rm, tmp_path, epoch):
    rm.log_manager.shutdown()
    return make_rm(tmp_path, epoch=epoch)


def test_a_damaged_header_fails_only_its_partition_and_a_would_be_leader_refuses_to_lead(
    tmp_path,
):
    rm = make_rm(tmp_path)
    fill(rm)
    rm = restart(rm, tmp_path, 200)
    cut_at = damage_batch(tmp_path, 1, 40)
    results = rm.apply_leader_and_isr(lai(PARTITIONS, leader_epoch=1), 6)
    assert [r[3] for r in results] == [
        ErrorCode.NONE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NONE,
    ]
    assert rm.get_partition("t", 0).is_leader and rm.get_partition("t", 2).is_leader
    damaged = rm.get_partition("t", 1)
    assert not damaged.is_leader
    assert damaged.log_end_offset == cut_at  # cut before the damaged batch
    assert damaged.high_watermark <= cut_at
    (fetched,) = read_from_local_log(rm, CONSUMER, [PartitionFetch("t", 1, 0, 10**6)])
    assert fetched.error is ErrorCode.KAFKA_STORAGE_ERROR and len(fetched.records) == 0
    # Asked to lead again at the same or a later epoch: still refused.
    results = rm.apply_leader_and_isr(lai({1: [1, 2]}, leader_epoch=2), 6)
    assert results[0][3] is ErrorCode.KAFKA_STORAGE_ERROR
    # Made a follower: it takes the role and fetches the rest from the new leader.
    results = rm.apply_leader_and_isr(lai({1: [2, 1]}, leader_epoch=3), 6)
    assert results[0][3] is ErrorCode.NONE
    assert damaged.storage_damage is None and damaged.leader_id == 2


def test_a_damaged_follower_is_cut_and_follows_like_every_other_partition(tmp_path):
    rm = make_rm(tmp_path)
    fill(rm)
    rm = restart(rm, tmp_path, 200)
    cut_at = damage_batch(tmp_path, 2, 7)
    followed = []
    rm.on_become_follower = lambda partitions: followed.extend(p.index for p in partitions)
    results = rm.apply_leader_and_isr(lai(AS_FOLLOWER, leader_epoch=1), 6)
    assert [r[3] for r in results] == [ErrorCode.NONE] * 3
    assert sorted(followed) == [0, 1, 2]
    assert rm.get_partition("t", 2).log_end_offset == cut_at
    assert rm.get_partition("t", 2).storage_damage is None
    assert rm.get_partition("t", 0).log_end_offset == 400


def test_a_leader_whose_read_meets_damage_answers_storage_error_and_gives_up_leadership(
    tmp_path,
):
    rm = make_rm(tmp_path)
    fill(rm)
    events = []
    rm.on_storage_event = lambda: events.append("resend my LeaderAndIsr")
    cut_at = damage_batch(tmp_path, 0, 100)  # under the running leader
    request = PartitionFetch("t", 0, cut_at + 1, 10**6)
    (fetched,) = read_from_local_log(rm, CONSUMER, [request, PartitionFetch("t", 1, 0, 100)])[:1]
    assert fetched.error is ErrorCode.KAFKA_STORAGE_ERROR and len(fetched.records) == 0
    partition = rm.get_partition("t", 0)
    assert not partition.is_leader and events == ["resend my LeaderAndIsr"]
    assert partition.log_end_offset == cut_at
    # The other partitions of the same fetch are served.
    (other,) = read_from_local_log(rm, CONSUMER, [PartitionFetch("t", 1, 0, 100)])
    assert other.error is ErrorCode.NONE and len(other.records) > 0
    # The controller's resent LeaderAndIsr (same epoch, still naming it leader) is refused...
    results = rm.apply_leader_and_isr(lai({0: [1, 2]}, leader_epoch=0), 6)
    assert results[0][3] is ErrorCode.KAFKA_STORAGE_ERROR
    # ...and the one that makes it a follower is taken.
    results = rm.apply_leader_and_isr(lai({0: [2, 1]}, leader_epoch=1), 6)
    assert results[0][3] is ErrorCode.NONE and partition.leader_id == 2
