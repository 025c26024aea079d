"""The replica manager on real log dirs, without sockets: LeaderAndIsr and StopReplica, the
HW-checkpoint guard (KAFKA-7235), delayed produce and fetch, the metadata cache, the
purgatory."""

from __future__ import annotations

import asyncio
import uuid

from epochlog.broker.appends import append_records
from epochlog.broker.collaborators import BrokerEpochHolder
from epochlog.broker.delayed import DelayedOperation, DelayedOperationPurgatory
from epochlog.broker.harness import leader_and_isr_request, update_metadata_request
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.broker.reads import FetchParams, PartitionFetch, fetch_messages
from epochlog.broker.replica_manager import ReplicaManager
from epochlog.config.broker import BrokerConfig
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder
from epochlog.storage import LogManager

TOPIC_ID = uuid.uuid4()


def make_rm(tmp_path, epoch=100, **overrides):
    config = BrokerConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "zk:2181", "log.dirs": str(tmp_path), **overrides}
    )
    log_manager = LogManager([tmp_path])
    log_manager.startup(1)
    rm = ReplicaManager(
        broker_id=1,
        config=config,
        log_manager=log_manager,
        metadata_cache=MetadataCache(),
        epoch_holder=BrokerEpochHolder(epoch),
    )
    rm._stored_hws = log_manager.read_high_watermarks()
    return rm


def lai(assignment=None, leader_epoch=0, isr=None, topic_id=TOPIC_ID):
    request = leader_and_isr_request(
        topic="t",
        topic_id=topic_id,
        assignment=assignment or {0: [1]},
        leader_epoch=leader_epoch,
        controller_id=1,
        controller_epoch=1,
    )
    if isr is not None:
        for p in request.topic_states[0].partition_states:
            p.isr = list(isr)
    return request


def batch(n=2):
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(1000 + i, b"k", b"v")
    return b.build()


def test_leader_and_isr_creates_led_partitions_with_the_topic_id(tmp_path):
    rm = make_rm(tmp_path)
    results = rm.apply_leader_and_isr(lai({0: [1], 1: [1, 2]}), 6)
    assert [r[3] for r in results] == [ErrorCode.NONE, ErrorCode.NONE]
    assert rm.get_partition("t", 0).is_leader
    assert rm.get_partition("t", 1).topic_id == TOPIC_ID
    assert rm.topic_name_for_id(TOPIC_ID) == "t"


def test_repeated_leader_epoch_is_ignored_as_stale(tmp_path):
    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(lai(leader_epoch=2), 6)
    results = rm.apply_leader_and_isr(lai(leader_epoch=2), 6)
    assert results[0][3] is ErrorCode.STALE_CONTROLLER_EPOCH


def test_leader_and_isr_with_another_topic_id_is_inconsistent(tmp_path):
    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(lai(leader_epoch=0), 6)
    results = rm.apply_leader_and_isr(lai(leader_epoch=1, topic_id=uuid.uuid4()), 6)
    assert results[0][3] is ErrorCode.INCONSISTENT_TOPIC_ID


def test_become_follower_calls_the_fetcher_hook(tmp_path):
    rm = make_rm(tmp_path)
    seen = []
    rm.on_become_follower = lambda partitions: seen.extend(p.name for p in partitions)
    request = lai({0: [2, 1]})
    rm.apply_leader_and_isr(request, 6)
    assert seen == ["t-0"]
    assert rm.get_partition("t", 0).leader_id == 2


def test_no_hw_checkpoint_before_the_first_leader_and_isr_of_the_generation(tmp_path):
    rm = make_rm(tmp_path, epoch=100)
    rm.apply_leader_and_isr(lai(), 6)
    rm.get_partition("t", 0).high_watermark = 7
    assert rm.checkpoint_high_watermarks()
    assert rm.log_manager.read_high_watermarks() == {("t", 0): 7}
    # A restart of the broker: a new generation that has not applied a LeaderAndIsr yet.
    rm.log_manager.shutdown()
    rm2 = make_rm(tmp_path, epoch=200)
    assert not rm2.checkpoint_high_watermarks()
    assert rm2.log_manager.read_high_watermarks() == {("t", 0): 7}  # not erased
    rm2.apply_leader_and_isr(lai(leader_epoch=1), 6)
    assert rm2.get_partition("t", 0).high_watermark == 0  # clamped to the (empty) log
    assert rm2.checkpoint_high_watermarks()
    rm2.epoch_holder.set(300)  # re-registration: a new generation again
    assert not rm2.checkpoint_high_watermarks()


def test_without_the_guard_an_early_checkpoint_erases_the_hws(tmp_path):
    rm = make_rm(tmp_path)
    rm.log_manager.write_high_watermarks({})
    rm.apply_leader_and_isr(lai(), 6)
    rm.get_partition("t", 0).high_watermark = 7
    rm.checkpoint_high_watermarks()
    rm.log_manager.shutdown()
    rm2 = make_rm(tmp_path, epoch=200, **{"epochlog.test.hw.checkpoint.guard.enabled": False})
    assert rm2.checkpoint_high_watermarks()
    assert rm2.log_manager.read_high_watermarks() == {}


def test_stop_replica_with_delete_removes_the_log(tmp_path):
    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(lai(leader_epoch=3), 6)
    directory = rm.get_partition("t", 0).log.directory
    assert rm.stop_replicas([("t", 0, 2, True)]) == [("t", 0, ErrorCode.FENCED_LEADER_EPOCH)]
    assert directory.exists()
    assert rm.stop_replicas([("t", 0, -2, True)]) == [("t", 0, ErrorCode.NONE)]
    assert rm.get_partition("t", 0) is None and not directory.exists()


def test_acks_all_waits_for_the_follower_and_completes_when_it_fetches(tmp_path):
    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(lai({0: [1, 2]}), 6)

    async def scenario():
        produce = asyncio.ensure_future(
            append_records(
                rm, timeout_ms=5000, required_acks=-1, entries=[(("t", 0), batch(3))], version=9
            )
        )
        await asyncio.sleep(0.05)
        assert not produce.done()  # follower 2 has not fetched yet
        follower = FetchParams(
            replica_id=2,
            replica_epoch=55,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=10**6,
            isolation_level=0,
        )
        await fetch_messages(rm, follower, [PartitionFetch("t", 0, 3, 10**6)])
        return await asyncio.wait_for(produce, 1)

    results = asyncio.run(scenario())
    assert results[("t", 0)].error is ErrorCode.NONE
    assert results[("t", 0)].base_offset == 0


def test_acks_all_times_out_when_the_follower_never_fetches(tmp_path):
    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(lai({0: [1, 2]}), 6)
    results = asyncio.run(
        append_records(
            rm, timeout_ms=50, required_acks=-1, entries=[(("t", 0), batch())], version=9
        )
    )
    assert results[("t", 0)].error is ErrorCode.REQUEST_TIMED_OUT


def test_long_poll_fetch_completes_when_data_arrives(tmp_path):
    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(lai(), 6)
    consumer = FetchParams(-1, -1, 5000, min_bytes=1, max_bytes=10**6, isolation_level=0)

    async def scenario():
        fetch = asyncio.ensure_future(
            fetch_messages(rm, consumer, [PartitionFetch("t", 0, 0, 10**6)])
        )
        await asyncio.sleep(0.05)
        assert not fetch.done()
        await append_records(
            rm, timeout_ms=1000, required_acks=1, entries=[(("t", 0), batch())], version=9
        )
        return await asyncio.wait_for(fetch, 1)

    (result,) = asyncio.run(scenario())
    assert result.error is ErrorCode.NONE and len(result.records) > 0
    assert result.high_watermark == 2


def test_fetch_response_size_limits_keep_at_least_one_whole_batch(tmp_path):
    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(lai({0: [1], 1: [1]}), 6)

    async def scenario():
        for p in (0, 1):
            for _ in range(3):
                await append_records(
                    rm, timeout_ms=10, required_acks=1, entries=[(("t", p), batch(5))], version=9
                )
        params = FetchParams(-1, -1, 0, 1, max_bytes=10, isolation_level=0)
        return await fetch_messages(
            rm, params, [PartitionFetch("t", 0, 0, 10**6), PartitionFetch("t", 1, 0, 10**6)]
        )

    first, second = asyncio.run(scenario())
    one_batch = len(batch(5))
    assert len(first.records) == one_batch  # over max bytes, but one whole batch (KIP-74)
    assert len(second.records) == 0  # the response is full


# --------------------------------------------------------------------- metadata cache


def test_update_metadata_fills_brokers_topics_and_deletes_with_leader_minus_two():
    cache = MetadataCache()
    request = update_metadata_request(
        brokers={1: ("h1", 9092), 2: ("h2", 9093)},
        topic="t",
        topic_id=TOPIC_ID,
        assignment={0: [1, 2], 1: [2, 1]},
        leader_epoch=4,
        controller_id=2,
        controller_epoch=7,
        broker_epochs={1: 11, 2: 22},
    )
    assert cache.apply_update_metadata(request) == []
    assert [b.broker_id for b in cache.live_brokers()] == [1, 2]
    assert cache.broker_epoch(2) == 22 and cache.controller_id == 2
    assert cache.topic_name(TOPIC_ID) == "t" and cache.partition("t", 1).leader == 2
    for p in request.topic_states[0].partition_states:
        p.leader = -2
    assert sorted(cache.apply_update_metadata(request)) == [("t", 0), ("t", 1)]
    assert not cache.has_topic("t") and cache.topic_name(TOPIC_ID) is None


# ------------------------------------------------------------------------ purgatory


class FakeTimers:
    def __init__(self):
        self.pending = []

    def __call__(self, delay, callback):
        timer = _Timer(callback)
        self.pending.append(timer)
        return timer

    def fire_all(self):
        for timer in self.pending:
            if not timer.cancelled:
                timer.callback()


class _Timer:
    def __init__(self, callback):
        self.callback = callback
        self.cancelled = False

    def cancel(self):
        self.cancelled = True


class Waiting(DelayedOperation):
    def __init__(self, ready):
        super().__init__(1000)
        self.ready = ready
        self.outcome = None

    def try_complete(self):
        return self.ready() and self.force_complete()

    def on_complete(self):
        self.outcome = "expired" if self.expired else "done"


def test_purgatory_completes_watched_operations_when_their_key_moves():
    timers = FakeTimers()
    purgatory = DelayedOperationPurgatory("test", timers)
    flag = {"ready": False}
    op = Waiting(lambda: flag["ready"])
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    assert purgatory.watching("a") and purgatory.watching("b") and not purgatory.watching("c")
    assert purgatory.check_and_complete("a") == 0
    flag["ready"] = True
    assert purgatory.check_and_complete("b") == 1
    assert op.outcome == "done" and len(purgatory) == 0
    assert not purgatory.watching("a") and not purgatory.watching("b")
    timers.fire_all()  # its timer was cancelled
    assert op.outcome == "done"


def test_purgatory_expires_operations_once():
    timers = FakeTimers()
    purgatory = DelayedOperationPurgatory("test", timers)
    op = Waiting(lambda: False)
    purgatory.try_complete_else_watch(op, ["a"])
    timers.fire_all()
    assert op.outcome == "expired" and len(purgatory) == 0
    assert not op.force_complete()


def test_purgatory_completes_everything_on_shutdown():
    purgatory = DelayedOperationPurgatory("test", FakeTimers())
    op = Waiting(lambda: False)
    purgatory.try_complete_else_watch(op, ["a"])
    assert purgatory.complete_all() == 1 and op.outcome == "done"


def test_retention_deletes_old_segments_below_the_hw_and_expires_producers(tmp_path):
    from epochlog.broker.broker import log_config_from

    rm = make_rm(tmp_path, **{"log.segment.bytes": 1024, "log.retention.bytes": 2048})
    rm.log_manager.default_config = log_config_from(rm.config)
    rm.apply_leader_and_isr(lai(), 6)
    partition = rm.get_partition("t", 0)
    partition.producer_state.record(5, 0, 0, 0, 0, 0, timestamp=0)

    async def fill():
        for _ in range(40):
            await append_records(
                rm, timeout_ms=10, required_acks=1, entries=[(("t", 0), batch(3))], version=9
            )

    asyncio.run(fill())
    segments = len(partition.log.segments)
    assert rm.run_retention() > 0
    assert len(partition.log.segments) < segments
    assert partition.log.log_start_offset > 0
    assert partition.log.size_in_bytes <= 2048 + 1024
    assert partition.producer_state.entry(5) is None  # idle for a day: expired


def test_a_parked_follower_fetch_is_read_again_only_when_its_partition_changed(
    tmp_path, monkeypatch
):
    from epochlog.broker import reads

    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(lai({0: [1, 2, 3]}), 6)
    reads_done = []
    real_read = reads.read_from_local_log

    def counting_read(*args, **kwargs):
        reads_done.append(args[2][0].key)
        return real_read(*args, **kwargs)

    monkeypatch.setattr(reads, "read_from_local_log", counting_read)

    def follower(replica_id, max_wait_ms=5000):
        return FetchParams(
            replica_id, 55, max_wait_ms, min_bytes=1, max_bytes=10**6, isolation_level=0
        )

    async def scenario():
        await append_records(
            rm, timeout_ms=1000, required_acks=1, entries=[(("t", 0), batch(3))], version=9
        )
        parked = asyncio.ensure_future(
            fetch_messages(rm, follower(2), [PartitionFetch("t", 0, 3, 10**6)])
        )
        await asyncio.sleep(0.02)
        assert not parked.done() and len(reads_done) == 1
        # Follower 3 catches up: the HW moves, which re-tries the parked fetch, but nothing
        # it would read changed.
        hw = rm.get_partition("t", 0).high_watermark
        await fetch_messages(rm, follower(3, max_wait_ms=0), [PartitionFetch("t", 0, 3, 10**6)])
        await asyncio.sleep(0.02)
        assert rm.get_partition("t", 0).high_watermark != hw
        assert not parked.done() and len(reads_done) == 2  # follower 3's own read only
        await append_records(
            rm, timeout_ms=1000, required_acks=1, entries=[(("t", 0), batch(2))], version=9
        )
        return await asyncio.wait_for(parked, 1)

    (result,) = asyncio.run(scenario())
    assert result.error is ErrorCode.NONE and len(result.records) > 0


def test_an_idle_follower_fetch_expires_without_a_second_read_and_with_the_current_hw(
    tmp_path, monkeypatch
):
    from epochlog.broker import reads

    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(lai({0: [1, 2, 3]}), 6)
    reads_done = []
    real_read = reads.read_from_local_log

    def counting_read(*args, **kwargs):
        reads_done.append(args[1].replica_id)
        return real_read(*args, **kwargs)

    monkeypatch.setattr(reads, "read_from_local_log", counting_read)

    def follower(replica_id, max_wait_ms):
        return FetchParams(
            replica_id, 55, max_wait_ms, min_bytes=1, max_bytes=10**6, isolation_level=0
        )

    async def scenario():
        await append_records(
            rm, timeout_ms=1000, required_acks=1, entries=[(("t", 0), batch(3))], version=9
        )
        parked = asyncio.ensure_future(
            fetch_messages(rm, follower(2, 100), [PartitionFetch("t", 0, 3, 10**6)])
        )
        await asyncio.sleep(0.02)
        assert not parked.done()
        hw = rm.get_partition("t", 0).high_watermark
        await fetch_messages(rm, follower(3, 0), [PartitionFetch("t", 0, 3, 10**6)])
        assert rm.get_partition("t", 0).high_watermark == 3 != hw
        return await asyncio.wait_for(parked, 2)

    (result,) = asyncio.run(scenario())
    assert reads_done == [2, 3]  # follower 2's one read, follower 3's; none at the expiry
    assert result.error is ErrorCode.NONE and len(result.records) == 0
    assert result.high_watermark == 3


def test_the_read_state_of_a_consumer_fetch_includes_the_hw(tmp_path):
    from epochlog.broker.reads import read_state, same_read_state

    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(lai({0: [1, 2]}), 6)
    consumer = FetchParams(-1, -1, 5000, min_bytes=1, max_bytes=10**6, isolation_level=0)
    follower = FetchParams(2, 55, 5000, min_bytes=1, max_bytes=10**6, isolation_level=0)
    requests = [PartitionFetch("t", 0, 0, 10**6), PartitionFetch("t", 9, 0, 10**6)]
    before = {p: read_state(rm, p, requests) for p in (consumer, follower)}
    partition = rm.get_partition("t", 0)
    partition.high_watermark += 1
    assert not same_read_state(read_state(rm, consumer, requests), before[consumer])
    assert same_read_state(read_state(rm, follower, requests), before[follower])
    partition.leader_epoch += 1
    assert not same_read_state(read_state(rm, follower, requests), before[follower])
    assert not same_read_state(read_state(rm, follower, requests[:1]), before[follower])


def test_purgatory_retries_each_operation_once_for_keys_that_moved_together():
    purgatory = DelayedOperationPurgatory("test", FakeTimers())
    tries = {"ab": 0, "bc": 0, "z": 0}
    flags = {"ab": False, "bc": False, "z": False}

    def ready(name):
        def check():
            tries[name] += 1
            return flags[name]

        return check

    ops = {name: Waiting(ready(name)) for name in ("ab", "bc", "z")}
    for name, keys in (("ab", "ab"), ("bc", "bc"), ("z", "z")):
        assert not purgatory.try_complete_else_watch(ops[name], list(keys))
    flags["bc"] = True
    assert purgatory.check_and_complete_keys(["a", "b", "c"]) == 1
    assert tries == {"ab": 2, "bc": 2, "z": 1}  # one re-try each; "z" was not involved
    assert ops["bc"].outcome == "done" and ops["ab"].outcome is None
    assert purgatory.check_and_complete_keys(["c", "q"]) == 0  # "bc" is no longer watched
    assert tries["bc"] == 2 and len(purgatory) == 2 and ops["z"].outcome is None


def test_a_follower_fetch_moving_several_hws_completes_the_waiting_produce(tmp_path):
    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(lai({0: [1, 2], 1: [1, 2], 2: [1, 2]}), 6)
    follower = FetchParams(2, 55, 0, min_bytes=1, max_bytes=10**6, isolation_level=0)

    async def scenario():
        produce = asyncio.ensure_future(
            append_records(
                rm,
                timeout_ms=5000,
                required_acks=-1,
                entries=[(("t", p), batch(2)) for p in range(3)],
                version=9,
            )
        )
        await asyncio.sleep(0.02)
        assert not produce.done()
        await fetch_messages(rm, follower, [PartitionFetch("t", p, 2, 10**6) for p in range(3)])
        # The HWs moved during the fetch; the produce is re-tried once the step is done.
        assert [rm.get_partition("t", p).high_watermark for p in range(3)] == [2, 2, 2]
        return await asyncio.wait_for(produce, 1)

    results = asyncio.run(scenario())
    assert all(r.error is ErrorCode.NONE for r in results.values())
