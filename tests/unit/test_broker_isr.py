"""A leader's ISR on a real partition log: expansion (KIP-903), shrink, the maximal ISR and the
HW, AlterPartition answers, the replica manager's glue (with a fake controller channel), and the
follower-side writes a replica fetcher makes."""

from __future__ import annotations

import asyncio
import uuid

from epochlog.broker import isr_state
from epochlog.broker.alter_partition_manager import PartitionAnswer
from epochlog.broker.appends import append_records
from epochlog.broker.collaborators import BrokerEpochHolder
from epochlog.broker.harness import leader_and_isr_request
from epochlog.broker.isr_rules import ReplicationSettings
from epochlog.broker.isr_state import AlterOutcome, IsrChangeKind
from epochlog.broker.metadata_cache import LiveBroker, MetadataCache
from epochlog.broker.partition import Partition, PartitionState
from epochlog.broker.produce_validation import validate_partition_records
from epochlog.broker.producer_state import ProducerStateManager
from epochlog.broker.replica_manager import ReplicaManager
from epochlog.config.broker import BrokerConfig
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatchBuilder
from epochlog.storage import LogConfig, LogManager, PartitionLog

NOW = 1_700_000_000_000
LAG = 10_000


class Brokers:
    """A metadata view: alive brokers and the epochs the controller told this leader."""

    def __init__(self, epochs):
        self.epochs = dict(epochs)

    def is_alive(self, broker_id):
        return broker_id in self.epochs

    def broker_epoch(self, broker_id):
        return self.epochs.get(broker_id, -1)


def records(n=2, pid=-1, seq=-1):
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)
    for i in range(n):
        b.append(NOW + i, b"k", b"v")
    return b.build()


def leader(tmp_path, isr=(1,), replicas=(1, 2), min_isr=1, kip903=True, epochs=None):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    p = Partition(
        "t",
        0,
        1,
        log,
        ProducerStateManager("t-0"),
        settings=ReplicationSettings(min_isr, LAG, kip903),
        brokers=Brokers(epochs or {1: 501, 2: 502, 3: 503}),
    )
    p.make_leader(
        PartitionState(leader=1, leader_epoch=3, isr=isr, replicas=replicas, partition_epoch=7),
        NOW,
    )
    return p


def append(p, n=2):
    raw = records(n)
    header = validate_partition_records(raw, version=9, max_message_bytes=10**6, where="t-0")
    return p.append_records_as_leader(raw, header, 1, 1, NOW)


def fetch(p, replica, offset, epoch, now=NOW):
    return p.update_follower_fetch_state(replica, offset, 0, epoch, p.log_end_offset, now)


def test_a_caught_up_follower_is_proposed_with_its_fetch_epoch(tmp_path):
    p = leader(tmp_path)
    append(p, 4)
    fetch(p, 2, 2, 502)
    assert isr_state.maybe_expand_isr(p, 2) is None  # below the HW (4)
    fetch(p, 2, 4, 502)
    change = isr_state.maybe_expand_isr(p, 2)
    assert change.kind is IsrChangeKind.EXPAND and change.proposed_isr == (1, 2)
    assert (change.leader_epoch, change.partition_epoch) == (3, 7)
    assert p.pending_isr is change and p.isr == (1,) and p.maximal_isr == (1, 2)
    assert isr_state.isr_with_epochs(p, change, 501) == [(1, 501), (2, 502)]
    assert isr_state.maybe_expand_isr(p, 2) is None  # one change in flight


def test_a_follower_fetching_with_an_old_generation_is_not_proposed(tmp_path):
    p = leader(tmp_path)
    fetch(p, 2, 0, 499)  # fetched with the epoch it had before bouncing
    assert isr_state.maybe_expand_isr(p, 2) is None
    off = leader(tmp_path / "off", kip903=False)
    fetch(off, 2, 0, 499)
    change = isr_state.maybe_expand_isr(off, 2)
    assert change is not None
    assert isr_state.isr_with_epochs(off, change, 501) == [(1, -1), (2, -1)]


def test_a_pending_expansion_holds_the_hw_and_ineligible_replica_reverts_it(tmp_path):
    brokers = {1: 501, 2: 502}
    p = leader(tmp_path, epochs=brokers)
    append(p, 4)
    fetch(p, 2, 4, 502)
    change = isr_state.maybe_expand_isr(p, 2)
    append(p, 2)
    assert p.high_watermark == 4  # follower 2 is in the maximal ISR at LEO 4
    p.brokers.epochs[2] = 602  # meanwhile the controller saw broker 2 register again
    outcome, moved = isr_state.apply_alter_partition_answer(
        p, change, ErrorCode.INELIGIBLE_REPLICA, NOW
    )
    assert outcome is AlterOutcome.REVERT and moved
    assert p.pending_isr is None and p.maximal_isr == (1,) and p.high_watermark == 6


def test_a_committed_expansion_takes_the_controllers_state(tmp_path):
    p = leader(tmp_path)
    fetch(p, 2, 0, 502)
    change = isr_state.maybe_expand_isr(p, 2)
    outcome, _ = isr_state.apply_alter_partition_answer(
        p, change, ErrorCode.NONE, NOW, leader_epoch=3, isr=(1, 2), partition_epoch=8
    )
    assert outcome is AlterOutcome.COMMIT
    assert (p.isr, p.partition_epoch, p.pending_isr) == ((1, 2), 8, None)


def test_stale_view_errors_keep_the_change_pending_until_leader_and_isr(tmp_path):
    p = leader(tmp_path)
    fetch(p, 2, 0, 502)
    for error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION):
        change = p.pending_isr or isr_state.maybe_expand_isr(p, 2)
        outcome, _ = isr_state.apply_alter_partition_answer(p, change, error, NOW)
        assert outcome is AlterOutcome.WAIT
        assert p.pending_isr is change and p.maximal_isr == (1, 2)
        assert isr_state.maybe_shrink_isr(p, NOW + 10 * LAG) is None  # nothing new meanwhile
    p.make_leader(PartitionState(1, 4, (1,), (1, 2), partition_epoch=9), NOW)
    assert p.pending_isr is None  # LeaderAndIsr replaces the pending state
    # The old answer arriving now is ignored.
    outcome, _ = isr_state.apply_alter_partition_answer(
        p, change, ErrorCode.NONE, NOW, leader_epoch=3, isr=(1, 2), partition_epoch=8
    )
    assert outcome is None and p.isr == (1,)


def test_a_success_for_another_leader_epoch_is_ignored(tmp_path):
    p = leader(tmp_path)
    fetch(p, 2, 0, 502)
    change = isr_state.maybe_expand_isr(p, 2)
    outcome, _ = isr_state.apply_alter_partition_answer(
        p, change, ErrorCode.NONE, NOW, leader_epoch=4, isr=(1, 2), partition_epoch=8
    )
    assert outcome is None and p.pending_isr is change


def test_a_lagging_member_is_proposed_for_removal_and_counts_until_committed(tmp_path):
    p = leader(tmp_path, isr=(1, 2, 3), replicas=(1, 2, 3))
    append(p, 4)
    fetch(p, 2, 4, 502)
    fetch(p, 3, 1, 503)
    assert p.high_watermark == 1
    assert isr_state.maybe_shrink_isr(p, NOW + LAG) is None  # within the lag time
    change = isr_state.maybe_shrink_isr(p, NOW + LAG + 1)
    assert change.kind is IsrChangeKind.SHRINK and change.proposed_isr == (1, 2)
    assert p.maximal_isr == (1, 2, 3) and p.high_watermark == 1
    outcome, moved = isr_state.apply_alter_partition_answer(
        p, change, ErrorCode.NONE, NOW + LAG + 2, leader_epoch=3, isr=(1, 2), partition_epoch=8
    )
    assert outcome is AlterOutcome.COMMIT and moved and p.high_watermark == 4


def test_a_caught_up_eligible_follower_outside_the_isr_holds_the_hw(tmp_path):
    p = leader(tmp_path)  # ISR [1], follower 2 outside
    append(p, 4)
    fetch(p, 2, 4, 502, now=NOW + 1)  # caught up
    append(p, 2)
    p.maybe_increment_high_watermark(NOW + 2)
    assert p.high_watermark == 4  # about to join: must not miss committed data
    p.maybe_increment_high_watermark(NOW + LAG + 2)
    assert p.high_watermark == 6  # lagged too long: no longer waited for


def test_the_hw_is_frozen_below_min_insync_replicas(tmp_path):
    p = leader(tmp_path, min_isr=2)
    append(p, 3)
    assert p.high_watermark == 0
    p.make_leader(PartitionState(1, 4, (1, 2), (1, 2), partition_epoch=8), NOW)
    fetch(p, 2, 3, 502)
    assert p.high_watermark == 3


# ------------------------------------------------------------------------ replica manager


class FakeSender:
    def __init__(self, accept=True):
        self.items = []
        self.delays = []
        self.accept = accept

    def submit(self, item, delay_ms=0):
        if not self.accept:
            return False
        self.items.append(item)
        self.delays.append(delay_ms)
        return True


TOPIC_ID = uuid.uuid4()


def make_rm(tmp_path, **overrides):
    config = BrokerConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "zk:2181", "log.dirs": str(tmp_path), **overrides}
    )
    log_manager = LogManager([tmp_path])
    log_manager.startup(1)
    cache = MetadataCache()
    cache._brokers = {b: LiveBroker(b, (), None, 500 + b) for b in (1, 2, 3)}
    rm = ReplicaManager(
        broker_id=1,
        config=config,
        log_manager=log_manager,
        metadata_cache=cache,
        epoch_holder=BrokerEpochHolder(501),
    )
    rm.alter_partition_manager = FakeSender()
    return rm


def lai(rm, isr, replicas=(1, 2), leader_epoch=0):
    request = leader_and_isr_request(
        topic="t",
        topic_id=TOPIC_ID,
        assignment={0: list(replicas)},
        leader_epoch=leader_epoch,
        controller_id=9,
        controller_epoch=1,
    )
    request.topic_states[0].partition_states[0].isr = list(isr)
    rm.apply_leader_and_isr(request, 6)
    return rm.get_partition("t", 0)


def produce(rm, acks=-1, timeout_ms=2000):
    return append_records(
        rm, timeout_ms=timeout_ms, required_acks=acks, entries=[(("t", 0), records())], version=9
    )


def test_follower_fetches_propose_the_expansion_and_answers_settle_it(tmp_path):
    rm = make_rm(tmp_path)
    p = lai(rm, isr=[1])
    rm.record_follower_fetch(p, 2, 0, 0, 502, p.log_end_offset, NOW)
    [item] = rm.alter_partition_manager.items
    assert item.key == ("t", 0) and item.topic_id == TOPIC_ID
    assert item.isr_with_epochs == [(1, 501), (2, 502)]
    assert (item.leader_epoch, item.partition_epoch) == (0, 0)
    assert item.still_wanted()
    item.on_answer(PartitionAnswer(ErrorCode.NOT_CONTROLLER))  # per-partition: retry later
    assert len(rm.alter_partition_manager.items) == 2 and rm.alter_partition_manager.delays[1] > 0
    item.on_answer(PartitionAnswer(ErrorCode.NONE, 1, 0, (1, 2), 1))
    assert p.isr == (1, 2) and p.partition_epoch == 1
    assert not rm.alter_partition_manager.items[1].still_wanted()  # settled: drop the retry


def test_a_refused_submit_reverts_the_change(tmp_path):
    rm = make_rm(tmp_path)
    rm.alter_partition_manager = FakeSender(accept=False)
    p = lai(rm, isr=[1])
    rm.record_follower_fetch(p, 2, 0, 0, 502, p.log_end_offset, NOW)
    assert p.pending_isr is None and p.maximal_isr == (1,)


def test_leader_and_isr_makes_a_queued_change_unwanted(tmp_path):
    rm = make_rm(tmp_path)
    p = lai(rm, isr=[1])
    rm.record_follower_fetch(p, 2, 0, 0, 502, p.log_end_offset, NOW)
    [item] = rm.alter_partition_manager.items
    lai(rm, isr=[1], leader_epoch=1)
    assert not item.still_wanted()


def test_acks_all_fails_after_append_when_the_isr_shrinks_below_min_isr(tmp_path):
    rm = make_rm(tmp_path, **{"min.insync.replicas": 2, "replica.lag.time.max.ms": 100})
    p = lai(rm, isr=[1, 2])

    async def scenario():
        waiting = asyncio.ensure_future(produce(rm))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        assert rm.shrink_isrs(p.remote_replicas[2].last_caught_up_time_ms + 101) == 1
        [item] = rm.alter_partition_manager.items
        assert item.isr_with_epochs == [(1, 501)]
        assert not waiting.done()  # the shrink is only pending: 2 still counts
        item.on_answer(PartitionAnswer(ErrorCode.NONE, 1, 0, (1,), 1))
        return await asyncio.wait_for(waiting, 1), await produce(rm)

    after, refused = asyncio.run(scenario())
    assert after[("t", 0)].error is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert refused[("t", 0)].error is ErrorCode.NOT_ENOUGH_REPLICAS


def test_becoming_leader_calls_the_leader_hook_and_records_live_leaders(tmp_path):
    rm = make_rm(tmp_path)
    seen = []
    rm.on_become_leader = lambda partitions: seen.extend(p.name for p in partitions)
    request = leader_and_isr_request(
        topic="t",
        topic_id=TOPIC_ID,
        assignment={0: [1, 2]},
        leader_epoch=0,
        controller_id=9,
        controller_epoch=1,
        brokers={1: ("h1", 9091), 2: ("h2", 9092)},
    )
    rm.apply_leader_and_isr(request, 6)
    assert seen == ["t-0"]
    assert rm.live_leaders == {1: ("h1", 9091), 2: ("h2", 9092)}


# ------------------------------------------------------------------------ follower writes


def follower(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    p = Partition("t", 0, 2, log, ProducerStateManager("t-0"))
    return p


def test_follower_appends_keep_offsets_epochs_and_producer_state(tmp_path):
    source = leader(tmp_path / "leader")
    raw = records(3, pid=77, seq=0)
    header = validate_partition_records(raw, version=9, max_message_bytes=10**6, where="t-0")
    source.append_records_as_leader(raw, header, 1, 1, NOW)
    data = source.log.read(0, 10**6, None, True).read_bytes()
    p = follower(tmp_path / "follower")
    info = p.append_records_as_follower(data, NOW)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert p.log.leader_epoch_cache.entries == [(3, 0)]
    assert p.producer_state.entry(77).last_seq == 2
    assert p.update_follower_high_watermark(10) and p.high_watermark == 3


def test_truncation_cuts_an_epoch_this_broker_started_without_writing(tmp_path):
    p = leader(tmp_path)  # epoch 3 assigned at offset 0 with no data
    append(p, 2)
    p.make_leader(PartitionState(1, 5, (1,), (1, 2)), NOW)  # epoch 5 @2, nothing written
    p.make_follower(PartitionState(2, 6, (2,), (1, 2)))
    assert not p.truncate_as_follower(2, NOW)  # no data goes
    assert p.log.leader_epoch_cache.entries == [(3, 0)]  # but the empty epoch does
    assert p.truncate_as_follower(1, NOW) and p.log_end_offset == 0
    assert p.high_watermark == 0


def test_a_full_truncation_restarts_the_log_at_the_leaders_start(tmp_path):
    p = leader(tmp_path)
    append(p, 2)
    p.make_follower(PartitionState(2, 6, (2,), (1, 2)))
    p.truncate_fully_as_follower(40, NOW)
    assert (p.log_start_offset, p.log_end_offset, p.high_watermark) == (40, 40, 40)
