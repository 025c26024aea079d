"""The group coordinator's runtime over an in-memory partition layer: loading, the
acks=all-before-reply rule, timers on a real event loop, unloading."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import AsyncIterator, Sequence

import pytest

from epochlog.coordinator.group.operations import (
    GroupConfig,
    JoinGroup,
    OffsetCommit,
    OffsetToCommit,
    SyncGroup,
)
from epochlog.coordinator.group.records import GroupRecord, TxnMarkerRecord
from epochlog.coordinator.group.runtime import (
    CoordinatorError,
    EncodedRecord,
    GroupCoordinatorRuntime,
    LoggedRecord,
    TransactionalRecord,
    TxnProducer,
    partition_for_group,
)
from epochlog.protocol.errors import ErrorCode as E


class PickleCodec:
    def encode(self, record: GroupRecord) -> EncodedRecord:
        return pickle.dumps(record), b"v"

    def decode(self, key: bytes, value: bytes | None) -> GroupRecord | None:
        return pickle.loads(key)


class MemoryPartitions:
    """The partition layer: a list per partition; appends can be held or made to fail."""

    def __init__(self) -> None:
        self.logs: dict[int, list[LoggedRecord]] = {}
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: E | None = None  # set by tests
        self.read_gate = asyncio.Event()
        self.read_gate.set()
        self.appends = 0
        self.producers: list[TxnProducer | None] = []  # of each append, in order

    async def append(
        self,
        partition: int,
        records: Sequence[EncodedRecord],
        producer: TxnProducer | None = None,
    ) -> None:
        self.appends += 1
        self.producers.append(producer)
        await self.gate.wait()  # "waiting for the followers"
        if self.fail is not None:
            raise CoordinatorError(self.fail)
        log = self.logs.setdefault(partition, [])
        if producer is None:
            log.extend(records)
        else:
            log.extend(TransactionalRecord(k, v, producer[0]) for k, v in records)

    def write_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """What WriteTxnMarkers leaves in the log."""
        self.logs.setdefault(partition, []).append(TxnMarkerRecord(producer_id, committed))

    async def read(self, partition: int) -> AsyncIterator[LoggedRecord]:
        await self.read_gate.wait()
        for record in list(self.logs.get(partition, [])):
            yield record


GROUP = "my-group"
PARTITIONS = 50


def runtime(partitions: MemoryPartitions) -> GroupCoordinatorRuntime:
    return GroupCoordinatorRuntime(
        partitions,
        PickleCodec(),
        PARTITIONS,
        GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10),
    )


def join(member_id: str = "", session_ms: int = 10_000) -> JoinGroup:
    return JoinGroup(
        GROUP, member_id, None, "c", "h", session_ms, 1000, "consumer", [("range", b"")]
    )


def commit(offset: int) -> OffsetCommit:
    return OffsetCommit(GROUP, -1, "", None, [OffsetToCommit("t", 0, offset)])


@pytest.mark.parametrize(
    "group, partition",
    [("", 0), ("hello", 22), ("my-group", 12), ("polygenelubricants", 0), ("grüppe-中", 22)],
)
def test_groups_map_to_the_partition_kafka_chooses(group: str, partition: int) -> None:
    # Expected values from Java 17: (s.hashCode()==MIN_VALUE ? 0 : abs(s.hashCode())) % 50
    assert partition_for_group(group, 50) == partition


async def loaded_runtime(parts: MemoryPartitions) -> GroupCoordinatorRuntime:
    rt = runtime(parts)
    rt.elected(rt.partition_of(GROUP))
    for _ in range(5):
        await asyncio.sleep(0)
    return rt


def test_a_group_of_a_partition_not_led_here_is_not_coordinated_here() -> None:
    async def scenario() -> None:
        rt = runtime(MemoryPartitions())
        with pytest.raises(CoordinatorError) as err:
            await rt.call(GROUP, lambda shard, now: shard.commit_offsets(commit(1), now))
        assert err.value.error is E.NOT_COORDINATOR

    asyncio.run(scenario())


def test_requests_wait_for_the_load_and_see_what_it_replayed() -> None:
    async def scenario() -> None:
        parts = MemoryPartitions()
        first = await loaded_runtime(parts)
        await first.call(GROUP, lambda shard, now: shard.commit_offsets(commit(41), now))
        await first.call(GROUP, lambda shard, now: shard.commit_offsets(commit(42), now))
        # Another broker takes over the partition and loads it from the log.
        parts.read_gate.clear()
        second = runtime(parts)
        second.elected(second.partition_of(GROUP))
        await asyncio.sleep(0)
        with pytest.raises(CoordinatorError) as err:
            second.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, None))
        assert err.value.error is E.COORDINATOR_LOAD_IN_PROGRESS
        parts.read_gate.set()
        for _ in range(5):
            await asyncio.sleep(0)
        fetched = second.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, None))
        assert [f.offset for f in fetched] == [42]

    asyncio.run(scenario())


def test_a_commit_is_answered_only_once_it_is_replicated() -> None:
    async def scenario() -> None:
        parts = MemoryPartitions()
        rt = await loaded_runtime(parts)
        parts.gate.clear()
        task = asyncio.create_task(
            rt.call(GROUP, lambda shard, now: shard.commit_offsets(commit(7), now))
        )
        await asyncio.sleep(0.05)
        assert not task.done()
        unstable = rt.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, [("t", 0)], True))
        assert unstable[0].error is E.UNSTABLE_OFFSET_COMMIT
        parts.gate.set()
        results = await task
        assert [r.error for r in results] == [E.NONE]
        assert rt.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, None))[0].offset == 7

    asyncio.run(scenario())


def test_a_failed_append_fails_the_commit_and_changes_nothing() -> None:
    async def scenario() -> None:
        parts = MemoryPartitions()
        rt = await loaded_runtime(parts)
        parts.fail = E.NOT_LEADER_OR_FOLLOWER
        with pytest.raises(CoordinatorError):
            await rt.call(GROUP, lambda shard, now: shard.commit_offsets(commit(9), now))
        assert rt.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, None)) == []

    asyncio.run(scenario())


def test_a_member_joins_syncs_and_expires_on_the_event_loop() -> None:
    async def scenario() -> None:
        parts = MemoryPartitions()
        rt = await loaded_runtime(parts)
        first = await rt.call_with_reply(GROUP, lambda s, h, now: s.join_group(join(), h, now))
        assert first.error is E.MEMBER_ID_REQUIRED
        joined = await rt.call_with_reply(
            GROUP, lambda s, h, now: s.join_group(join(first.member_id, 200), h, now)
        )
        assert (joined.error, joined.generation, joined.leader_id) == (
            E.NONE,
            1,
            first.member_id,
        )
        sync = SyncGroup(GROUP, 1, first.member_id, None, None, None, {first.member_id: b"A"})
        synced = await rt.call_with_reply(GROUP, lambda s, h, now: s.sync_group(sync, h, now))
        assert synced.assignment == b"A"
        assert parts.logs[rt.partition_of(GROUP)]  # the group's metadata was written
        await asyncio.sleep(0.4)  # no heartbeat within the 200 ms session
        shard = rt.shards()[0]
        assert shard.groups[GROUP].state.value == "Empty"

    asyncio.run(scenario())


def test_resigning_answers_waiting_members_not_coordinator() -> None:
    async def scenario() -> None:
        parts = MemoryPartitions()
        rt = runtime(parts)
        rt.config = GroupConfig(initial_rebalance_delay_ms=10_000, min_session_timeout_ms=10)
        rt.elected(rt.partition_of(GROUP))
        for _ in range(5):
            await asyncio.sleep(0)
        first = await rt.call_with_reply(GROUP, lambda s, h, now: s.join_group(join(), h, now))
        waiting = asyncio.create_task(
            rt.call_with_reply(GROUP, lambda s, h, now: s.join_group(join(first.member_id), h, now))
        )
        await asyncio.sleep(0.05)
        assert not waiting.done()  # the initial rebalance delay
        rt.resigned(rt.partition_of(GROUP))
        with pytest.raises(CoordinatorError) as err:
            await waiting
        assert err.value.error is E.NOT_COORDINATOR

    asyncio.run(scenario())


def test_commits_arriving_during_an_append_go_out_together_in_order() -> None:
    async def scenario() -> None:
        parts = MemoryPartitions()
        rt = await loaded_runtime(parts)
        parts.gate.clear()  # the first append waits for its replicas

        def commit_task(offset: int) -> asyncio.Task[object]:
            return asyncio.create_task(
                rt.call(GROUP, lambda shard, now: shard.commit_offsets(commit(offset), now))
            )

        tasks = [commit_task(1)]
        await asyncio.sleep(0.05)
        tasks += [commit_task(o) for o in range(2, 21)]
        await asyncio.sleep(0.05)
        assert parts.appends == 1  # the 19 others queue behind the one in flight
        parts.gate.set()
        await asyncio.gather(*tasks)
        assert parts.appends == 2  # ... and went out as one batch
        assert rt.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, None))[0].offset == 20

    asyncio.run(scenario())


def test_a_load_that_fails_is_tried_again_until_it_works() -> None:
    async def scenario() -> None:
        parts = MemoryPartitions()
        first = await loaded_runtime(parts)
        await first.call(GROUP, lambda shard, now: shard.commit_offsets(commit(5), now))
        failures = [OSError("the log moved")]
        read = parts.read

        async def flaky_read(partition: int) -> AsyncIterator[EncodedRecord]:
            if failures:
                raise failures.pop()
            async for record in read(partition):
                yield record

        parts.read = flaky_read  # type: ignore[method-assign]
        second = runtime(parts)
        second.elected(second.partition_of(GROUP))
        await asyncio.sleep(0.5)
        fetched = second.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, None))
        assert [f.offset for f in fetched] == [5]

    asyncio.run(scenario())


def test_started_calls_are_queued_in_call_order_before_anything_runs() -> None:
    # The server begins a connection's pipelined OffsetCommits one after the other without
    # yielding to the loop: each must be queued when start_call returns, in that order.
    async def scenario() -> None:
        parts = MemoryPartitions()
        rt = await loaded_runtime(parts)
        parts.gate.clear()
        started = [
            rt.start_call(GROUP, lambda shard, now, o=o: shard.commit_offsets(commit(o), now))
            for o in (3, 1, 2)  # offsets need not grow: the last one committed wins
        ]
        assert not any(f.done() for f in started)  # answered only once replicated
        parts.gate.set()
        await asyncio.gather(*started)
        assert parts.appends == 1  # one append for the three
        assert rt.read(GROUP, lambda shard: shard.fetch_offsets(GROUP, None))[0].offset == 2
        written = [pickle.loads(key) for key, _ in parts.logs[rt.partition_of(GROUP)]]
        assert [record.offset.offset for record in written[-3:]] == [3, 1, 2]

    asyncio.run(scenario())


def test_a_call_started_where_the_group_is_not_coordinated_fails_its_future() -> None:
    async def scenario() -> None:
        rt = runtime(MemoryPartitions())
        started = rt.start_call(GROUP, lambda shard, now: shard.commit_offsets(commit(1), now))
        with pytest.raises(CoordinatorError) as err:
            await started
        assert err.value.error is E.NOT_COORDINATOR

    asyncio.run(scenario())
