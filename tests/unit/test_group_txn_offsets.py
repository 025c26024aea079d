"""Offsets committed in a transaction (TxnOffsetCommit), in the group coordinator shard and its
runtime: pending per producer until the transaction's marker, committed by COMMIT, dropped by
ABORT, rebuilt the same way from the log, UNSTABLE_OFFSET_COMMIT for require_stable, and the
group deletion rules while a transaction is open."""

from __future__ import annotations

import asyncio

import pytest

from epochlog.coordinator.group.classic_group import CommittedOffset, GroupState
from epochlog.coordinator.group.operations import (
    GroupConfig,
    OffsetCommit,
    OffsetToCommit,
    TxnOffsetCommit,
)
from epochlog.coordinator.group.record_codec import ConsumerOffsetsCodec
from epochlog.coordinator.group.records import (
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    TxnMarkerRecord,
)
from epochlog.coordinator.group.runtime import GroupCoordinatorRuntime, TransactionalRecord
from epochlog.coordinator.group.shard import GroupCoordinatorShard
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode as E
from tests.unit.test_group_coordinator_runtime import (
    GROUP,
    MemoryPartitions,
    loaded_runtime,
)
from tests.unit.test_group_coordinator_shard import DELAY, Harness, commit, stable_group
from tests.unit.test_group_service import MemoryPartitions as ServicePartitions
from tests.unit.test_group_service import service

PID, OTHER_PID = 4000, 4001


def txn_commit(
    h: Harness,
    group: str,
    *offsets: tuple[str, int, int],
    pid: int = PID,
    generation: int = -1,
    member: str = "",
    instance: str | None = None,
) -> list[E]:
    request = TxnOffsetCommit(
        group,
        f"txn-{pid}",
        pid,
        0,
        generation,
        member,
        instance,
        [OffsetToCommit(t, p, o) for t, p, o in offsets],
    )
    results, effects = h.shard.commit_transactional_offsets(request, h.now)
    h.apply(effects)
    return [r.error for r in results]


def end_txn(h: Harness, committed: bool, pid: int = PID) -> None:
    """What the node reports once WriteTxnMarkers has written the marker."""
    marker = TxnMarkerRecord(pid, committed)
    h.log.append(marker)
    h.shard.replay(marker)


def offset(shard: GroupCoordinatorShard, group: str, topic: str = "t", partition: int = 0):
    return shard.fetch_offsets(group, [(topic, partition)])[0].offset


def stable(shard: GroupCoordinatorShard, group: str, topic: str = "t", partition: int = 0):
    fetched = shard.fetch_offsets(group, [(topic, partition)], require_stable=True)[0]
    return fetched.offset, fetched.error


def test_transactional_offsets_count_only_once_the_transaction_commits() -> None:
    h = Harness()
    assert txn_commit(h, "g", ("t", 0, 10), ("t", 1, 20)) == [E.NONE, E.NONE]
    records = [r for r in h.log if isinstance(r, OffsetCommitRecord)]
    assert [(r.producer_id, r.producer_epoch) for r in records] == [(PID, 0), (PID, 0)]
    assert offset(h.shard, "g") == -1  # pending: not the group's yet
    assert stable(h.shard, "g") == (-1, E.UNSTABLE_OFFSET_COMMIT)
    end_txn(h, committed=True)
    assert (offset(h.shard, "g"), offset(h.shard, "g", partition=1)) == (10, 20)
    assert stable(h.shard, "g") == (10, E.NONE)
    assert h.shard.pending_txn_offsets == {}


def test_an_aborted_transaction_leaves_the_committed_offsets_as_they_were() -> None:
    h = Harness()
    commit(h, "g", -1, "", ("t", 0, 5))
    txn_commit(h, "g", ("t", 0, 10))
    end_txn(h, committed=False)
    assert stable(h.shard, "g") == (5, E.NONE)
    end_txn(h, committed=True)  # a marker with nothing pending changes nothing
    assert offset(h.shard, "g") == 5


def test_each_producers_offsets_wait_for_its_own_marker() -> None:
    h = Harness()
    txn_commit(h, "g", ("t", 0, 10), pid=PID)
    txn_commit(h, "g", ("t", 1, 30), pid=OTHER_PID)
    end_txn(h, committed=True, pid=OTHER_PID)
    assert offset(h.shard, "g", partition=1) == 30
    assert stable(h.shard, "g") == (-1, E.UNSTABLE_OFFSET_COMMIT)
    end_txn(h, committed=True, pid=PID)
    assert offset(h.shard, "g") == 10


def test_a_commit_written_after_the_transactional_one_wins_at_the_marker() -> None:
    # Kafka keeps the offset of the later record: the transactional one is older here.
    h = Harness()
    txn_commit(h, "g", ("t", 0, 10))
    commit(h, "g", -1, "", ("t", 0, 99))
    end_txn(h, committed=True)
    assert offset(h.shard, "g") == 99
    # ... and a transactional offset written after an ordinary commit replaces it.
    txn_commit(h, "g", ("t", 0, 120))
    end_txn(h, committed=True)
    assert offset(h.shard, "g") == 120


def test_the_member_checks_of_v3_and_none_before() -> None:
    h = Harness()
    a, _b = stable_group(h)
    # v0-2 name no member: accepted even though the group is live (KIP-98)
    assert txn_commit(h, "g", ("t", 0, 1)) == [E.NONE]
    # v3 (KIP-447): the member, its generation, its static id
    assert txn_commit(h, "g", ("t", 0, 2), generation=1, member=a) == [E.NONE]
    assert txn_commit(h, "g", ("t", 0, 2), generation=0, member=a) == [E.ILLEGAL_GENERATION]
    assert txn_commit(h, "g", ("t", 0, 2), generation=1, member="x") == [E.UNKNOWN_MEMBER_ID]
    assert txn_commit(h, "g", ("t", 0, 2), generation=1, member=a, instance="i") == [
        E.UNKNOWN_MEMBER_ID
    ]
    assert txn_commit(h, "nope", ("t", 0, 2), generation=3, member="m") == [E.ILLEGAL_GENERATION]
    assert txn_commit(h, "", ("t", 0, 2)) == [E.INVALID_GROUP_ID]
    assert txn_commit(h, "g", ("t", 0, 2), pid=-1) == [E.INVALID_REQUEST]
    # nothing refused reached the log
    assert [r.offset.offset for r in h.log if isinstance(r, OffsetCommitRecord)] == [1, 2]


def test_a_transactional_commit_is_not_refused_during_a_rebalance() -> None:
    h = Harness()
    ids = [h.new_member("g") for _ in range(2)]
    for i in ids:
        h.join("g", i)
    h.advance(2 * DELAY)
    assert h.shard.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert txn_commit(h, "g", ("t", 0, 1), generation=1, member=ids[0]) == [E.NONE]


def test_too_large_metadata_is_refused_per_partition() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=DELAY, offset_metadata_max_bytes=4))
    request = TxnOffsetCommit(
        "g",
        "tx",
        PID,
        0,
        -1,
        "",
        None,
        [OffsetToCommit("t", 0, 1, metadata="12345"), OffsetToCommit("t", 1, 1, metadata="ok")],
    )
    results, effects = h.shard.commit_transactional_offsets(request, h.now)
    assert [r.error for r in results] == [E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    assert len(effects.records) == 1


def test_a_loaded_partition_replays_pending_offsets_until_their_marker() -> None:
    h = Harness()
    commit(h, "g", -1, "", ("t", 0, 5))
    txn_commit(h, "g", ("t", 0, 10), pid=PID)
    txn_commit(h, "g", ("t", 1, 20), pid=OTHER_PID)
    end_txn(h, committed=True, pid=PID)
    fresh = GroupCoordinatorShard(GroupConfig())
    for record in h.log:
        fresh.replay(record)
    fresh.loaded(h.now)
    assert offset(fresh, "g") == 10
    assert stable(fresh, "g", partition=1) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    fresh.replay(TxnMarkerRecord(OTHER_PID, committed=False))
    assert stable(fresh, "g", partition=1) == (-1, E.NONE)


def test_a_group_with_an_open_transaction_does_not_expire() -> None:
    config = GroupConfig(initial_rebalance_delay_ms=DELAY, offsets_retention_ms=120_000)
    h = Harness(config)
    commit(h, "simple", -1, "", ("t", 0, 1))
    txn_commit(h, "simple", ("t", 0, 2))
    h.advance(200_000)
    assert GroupTombstone("simple") not in h.log
    assert OffsetTombstone("simple", "t", 0) not in h.log  # its transaction decides first
    end_txn(h, committed=True)
    assert offset(h.shard, "simple") == 2
    h.advance(200_000)
    assert OffsetTombstone("simple", "t", 0) in h.log and GroupTombstone("simple") in h.log


def test_deleting_a_group_deletes_its_pending_offsets_too() -> None:
    h = Harness()
    commit(h, "simple", -1, "", ("t", 0, 1))
    txn_commit(h, "simple", ("t", 0, 2), ("t", 5, 3))
    errors, effects = h.shard.delete_groups(["simple"], h.now)
    h.apply(effects)
    assert errors == {"simple": E.NONE}
    assert effects.records == [
        OffsetTombstone("simple", "t", 0),
        OffsetTombstone("simple", "t", 5),
        GroupTombstone("simple"),
    ]
    assert h.shard.pending_txn_offsets == {}
    end_txn(h, committed=True)
    assert offset(h.shard, "simple") == -1


# ------------------------------------------------------------------------------ the runtime


def test_the_runtime_appends_a_producers_offsets_in_a_transactional_batch_of_its_own() -> None:
    async def scenario() -> None:
        parts = MemoryPartitions()
        rt = await loaded_runtime(parts)
        partition = rt.partition_of(GROUP)
        request = TxnOffsetCommit(GROUP, "tx", PID, 3, -1, "", None, [OffsetToCommit("t", 0, 10)])
        ordinary = TxnOffsetCommit(GROUP, "tx", PID, 3, -1, "", None, [])
        parts.gate.clear()  # hold the first append so the next calls queue behind it
        first = rt.start_call(
            GROUP, lambda shard, now: shard.commit_offsets(_plain(ordinary, 1), now)
        )
        second = rt.start_call(
            GROUP, lambda shard, now: shard.commit_transactional_offsets(request, now)
        )
        third = rt.start_call(
            GROUP, lambda shard, now: shard.commit_offsets(_plain(ordinary, 2), now)
        )
        parts.gate.set()
        await asyncio.gather(first, second, third)
        # never coalesced with the ordinary commits around it
        assert parts.producers == [None, (PID, 3), None]
        assert [type(r) for r in parts.logs[partition]] == [tuple, TransactionalRecord, tuple]
        offsets = rt.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, [("t", 0)], True))
        assert offsets[0].error is E.UNSTABLE_OFFSET_COMMIT

        rt.transaction_completed(partition, PID, committed=True)
        offsets = rt.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, [("t", 0)], True))
        assert (offsets[0].offset, offsets[0].error) == (10, E.NONE)

        # A new coordinator loads the same state: the marker is in the log.
        parts.write_marker(partition, PID, committed=True)
        later = await loaded_runtime(parts)
        offsets = later.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, [("t", 0)], True))
        assert (offsets[0].offset, offsets[0].error) == (10, E.NONE)

    asyncio.run(scenario())


def test_a_loading_runtime_leaves_the_marker_to_the_log() -> None:
    async def scenario() -> None:
        parts = MemoryPartitions()
        rt = await loaded_runtime(parts)
        partition = rt.partition_of(GROUP)
        request = TxnOffsetCommit(GROUP, "tx", PID, 0, -1, "", None, [OffsetToCommit("t", 0, 10)])
        await rt.call(GROUP, lambda shard, now: shard.commit_transactional_offsets(request, now))
        parts.read_gate.clear()
        later = await loaded_runtime(parts)
        later.transaction_completed(partition, PID, committed=False)  # ignored while loading
        parts.write_marker(partition, PID, committed=False)
        parts.read_gate.set()
        for _ in range(10):
            await asyncio.sleep(0)
        offsets = later.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, [("t", 0)], True))
        assert (offsets[0].offset, offsets[0].error) == (-1, E.NONE)
        # a partition not led here has nothing to complete
        later.transaction_completed(partition + 1, PID, committed=True)

    asyncio.run(scenario())


def _plain(request: TxnOffsetCommit, offset: int) -> OffsetCommit:
    """An ordinary OffsetCommit of the same group, of another partition."""
    return OffsetCommit(request.group_id, -1, "", None, [OffsetToCommit("u", 0, offset)])


def test_kafkas_record_format_gets_the_producer_id_from_the_batch() -> None:
    # OffsetCommitKey/Value carry no producer: the transactional batch around them does.
    async def scenario() -> None:
        rt = GroupCoordinatorRuntime(MemoryPartitions(), ConsumerOffsetsCodec(), 1)
        record = OffsetCommitRecord(GROUP, "t", 0, CommittedOffset(7, -1, "", 0), PID, 2)
        key, value = ConsumerOffsetsCodec().encode(record)
        assert rt._decode((key, value)) == OffsetCommitRecord(
            GROUP, "t", 0, CommittedOffset(7, -1, "", 0)
        )
        read_back = rt._decode(TransactionalRecord(key, value, PID))
        assert isinstance(read_back, OffsetCommitRecord) and read_back.producer_id == PID
        marker = TxnMarkerRecord(PID, True)
        assert rt._decode(marker) is marker

    asyncio.run(scenario())


# ------------------------------------------------------------------------------ the wire


@pytest.mark.parametrize("version", range(5))
def test_txn_offset_commit_is_answered_in_every_version(version: int) -> None:
    async def scenario() -> None:
        svc = await service(ServicePartitions())
        R = m.TxnOffsetCommitRequest
        request = R(
            transactional_id="tx",
            group_id="g",
            producer_id=PID,
            producer_epoch=0,
            topics=[
                R.TxnOffsetCommitRequestTopic(
                    name="t",
                    partitions=[
                        R.TxnOffsetCommitRequestPartition(
                            partition_index=2, committed_offset=9, committed_metadata=None
                        )
                    ],
                )
            ],
        )
        answer = await svc.handle(ApiKey.TXN_OFFSET_COMMIT, version, request, "c", "/h")
        assert answer.topics[0].partitions[0].error_code == E.NONE
        answer.encode(version)
        fetch = m.OffsetFetchRequest(
            group_id="g",
            topics=[m.OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[2])],
            require_stable=True,
        )
        fetched = await svc.handle(ApiKey.OFFSET_FETCH, 7, fetch, "c", "/h")
        assert fetched.topics[0].partitions[0].error_code == E.UNSTABLE_OFFSET_COMMIT
        svc.runtime.transaction_completed(0, PID, committed=True)
        fetched = await svc.handle(ApiKey.OFFSET_FETCH, 7, fetch, "c", "/h")
        assert fetched.topics[0].partitions[0].committed_offset == 9
        no_group = R(
            transactional_id="tx",
            group_id="",
            producer_id=PID,
            producer_epoch=0,
            topics=request.topics,
        )
        refused = await svc.handle(ApiKey.TXN_OFFSET_COMMIT, version, no_group, "c", "/h")
        assert refused.topics[0].partitions[0].error_code == E.INVALID_GROUP_ID

    asyncio.run(scenario())
