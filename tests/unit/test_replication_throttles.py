"""num.replica.fetchers and replication throttles (KIP-73), without sockets: the fetcher-id
mapping (Kafka's getFetcherId), a resize that keeps fetch states, the throttle decisions and
rate, the throttled-replicas topic configs, and the leader's fetch path holding back a
throttled partition from a follower outside the ISR."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from epochlog.broker.appends import append_records
from epochlog.broker.collaborators import BrokerEpochHolder
from epochlog.broker.fetcher_manager import ReplicaFetcherManager
from epochlog.broker.harness import leader_and_isr_request
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.broker.reads import FetchParams, PartitionFetch, fetch_messages
from epochlog.broker.replica_manager import ReplicaManager, now_ms
from epochlog.broker.replication_quotas import (
    UNLIMITED,
    ReplicationQuota,
    ReplicationQuotas,
    SimpleRate,
    should_follower_throttle,
    should_leader_throttle,
)
from epochlog.config.broker import BrokerConfig
from epochlog.config.dynamic import (
    BrokerLayers,
    ConfigChange,
    ConfigRequestError,
    broker_alter,
    describe_topic,
    topic_alter,
)
from epochlog.config.topic import (
    ALL_PARTITIONS,
    TopicConfigError,
    throttled_partitions,
    validate_topic_configs,
)
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.java_hash import fetcher_id, java_string_hash, java_utils_abs
from epochlog.protocol.records import RecordBatchBuilder
from epochlog.storage import LogManager

TOPIC_ID = uuid.uuid4()
LEADER_KEY = "leader.replication.throttled.replicas"
FOLLOWER_KEY = "follower.replication.throttled.replicas"


def config(**overrides: object) -> BrokerConfig:
    return BrokerConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "zk:2181", "log.dirs": "/tmp/x", **overrides}
    )


# ----------------------------------------------------------------------------- fetcher ids


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("t") == 116
    assert java_string_hash("test") == 3556498
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE


def test_utils_abs_maps_int_min_to_zero() -> None:
    assert java_utils_abs(-(2**31)) == 0
    assert java_utils_abs(-5) == 5


def test_fetcher_id_is_kafkas_get_fetcher_id() -> None:
    # Utils.abs(31 * hash + partition) % N, in Java int arithmetic
    assert fetcher_id("test", 0, 4) == (31 * 3556498) % 4
    assert fetcher_id("t", 5, 3) == (31 * 116 + 5) % 3
    # 31 * Integer.MIN_VALUE wraps to Integer.MIN_VALUE, which Utils.abs maps to 0
    assert fetcher_id("polygenelubricants", 0, 7) == 0
    # a hash whose product overflows: wrap, then abs
    h = java_string_hash("orders-events-2024")
    wrapped = ((31 * h + 3 + 2**31) % 2**32) - 2**31
    assert fetcher_id("orders-events-2024", 3, 5) == abs(wrapped) % 5
    assert all(fetcher_id("orders", p, 1) == 0 for p in range(20))


# ------------------------------------------------------------------------------ resizing


def make_rm(tmp_path, **overrides: object) -> ReplicaManager:
    cfg = BrokerConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "zk:2181", "log.dirs": str(tmp_path), **overrides}
    )
    log_manager = LogManager([tmp_path])
    log_manager.startup(1)
    rm = ReplicaManager(
        broker_id=1,
        config=cfg,
        log_manager=log_manager,
        metadata_cache=MetadataCache(),
        epoch_holder=BrokerEpochHolder(100),
    )
    rm._stored_hws = log_manager.read_high_watermarks()
    return rm


def lai(assignment: dict[int, list[int]], isr: list[int] | None = None, topic: str = "t"):
    request = leader_and_isr_request(
        topic=topic,
        topic_id=TOPIC_ID,
        assignment=assignment,
        leader_epoch=0,
        controller_id=1,
        controller_epoch=1,
    )
    if isr is not None:
        for p in request.topic_states[0].partition_states:
            p.isr = list(isr)
    return request


def test_resize_moves_partitions_to_their_new_fetchers_keeping_fetch_states(tmp_path) -> None:
    rm = make_rm(tmp_path, **{"replica.fetch.backoff.ms": 50})
    manager = ReplicaFetcherManager(
        broker_id=1,
        replica_manager=rm,
        metadata_cache=rm.metadata_cache,
        config=rm.config,
        epoch_holder=rm.epoch_holder,
    )
    rm.on_become_follower = manager.add_partitions

    async def scenario() -> None:
        rm.apply_leader_and_isr(lai({p: [2, 1] for p in range(8)}), 6)
        assert list(manager.fetchers) == [(2, 0)]
        states = dict(manager.fetchers[(2, 0)].partitions)
        for offset, state in enumerate(states.values()):
            state.fetch_offset = 10 + offset  # as if fetched
        moved = manager.resize(3)
        expected = {key: (2, fetcher_id(key[0], key[1], 3)) for key in states}
        assert moved == sum(1 for target in expected.values() if target != (2, 0))
        assert moved > 0
        assert set(manager.fetchers) == set(expected.values())
        for key, target in expected.items():
            assert manager.fetchers[target].partitions[key] is states[key]  # same offsets
            assert manager.fetcher_of(key) is manager.fetchers[target]
        manager.resize(1)
        assert list(manager.fetchers) == [(2, 0)]
        assert manager.fetchers[(2, 0)].partitions == states
        assert [s.fetch_offset for s in states.values()] == list(range(10, 18))
        # a partition added after a resize goes to its fetcher under the new count
        manager.resize(2)
        rm.apply_leader_and_isr(lai({0: [2, 1]}, topic="u"), 6)
        assert ("u", 0) in manager.fetchers[(2, fetcher_id("u", 0, 2))].partitions
        await manager.shutdown()
        assert manager.fetchers == {}

    asyncio.run(scenario())


def test_resize_refuses_a_count_below_one(tmp_path) -> None:
    rm = make_rm(tmp_path)
    manager = ReplicaFetcherManager(
        broker_id=1,
        replica_manager=rm,
        metadata_cache=rm.metadata_cache,
        config=rm.config,
        epoch_holder=rm.epoch_holder,
    )
    with pytest.raises(ValueError, match="num.replica.fetchers must be at least 1, not 0"):
        manager.resize(0)
    assert manager.num_fetchers == 1


def test_num_replica_fetchers_changes_by_at_most_half_or_double() -> None:
    layers = BrokerLayers(config(**{"num.replica.fetchers": 4}))
    ok = broker_alter(
        {},
        [ConfigChange("num.replica.fetchers", "8")],
        incremental=True,
        layers=layers,
        per_broker=True,
    )
    assert ok == {"num.replica.fetchers": "8"}
    for value, words in (("9", "greater than double"), ("1", "at least half")):
        with pytest.raises(ConfigRequestError, match=words) as info:
            broker_alter(
                {},
                [ConfigChange("num.replica.fetchers", value)],
                incremental=True,
                layers=layers,
                per_broker=False,
            )
        assert info.value.error is ErrorCode.INVALID_REQUEST


def test_replication_keys_are_dynamic_broker_keys() -> None:
    layers = BrokerLayers(config())
    result = broker_alter(
        {},
        [
            ConfigChange("leader.replication.throttled.rate", "102400"),
            ConfigChange("follower.replication.throttled.rate", "102400"),
            ConfigChange("num.replica.fetchers", "2"),
        ],
        incremental=False,
        layers=layers,
        per_broker=True,
    )
    effective = BrokerLayers(layers.static, {}, result).effective()
    assert effective["leader.replication.throttled.rate"] == 102400
    assert effective["num.replica.fetchers"] == 2
    assert config()["leader.replication.throttled.rate"] == UNLIMITED
    with pytest.raises(ConfigRequestError, match="leader.replication.throttled.rate"):
        broker_alter(
            {},
            [ConfigChange("leader.replication.throttled.rate", "-1")],
            incremental=False,
            layers=layers,
            per_broker=True,
        )


# ---------------------------------------------------------------- throttled-replicas configs


def test_throttled_replicas_validation_is_kafkas() -> None:
    for good in ("*", "", "0:1", "0:1,1:2", " 0:1 , 3:4 "):
        validate_topic_configs({LEADER_KEY: good, FOLLOWER_KEY: good})
    for bad in ("0", "a:1", "0:1;1:2", "*,0:1", "-1:2"):
        with pytest.raises(TopicConfigError, match=f"{LEADER_KEY} must be the literal"):
            validate_topic_configs({LEADER_KEY: bad})


def test_throttled_partitions_are_those_listed_with_this_broker() -> None:
    configs = {LEADER_KEY: "0:1,1:2,2:1", FOLLOWER_KEY: "*"}
    assert throttled_partitions(configs, LEADER_KEY, 1) == {0, 2}
    assert throttled_partitions(configs, LEADER_KEY, 3) == frozenset()
    assert throttled_partitions(configs, FOLLOWER_KEY, 7) is ALL_PARTITIONS
    assert throttled_partitions({}, FOLLOWER_KEY, 1) == frozenset()


def test_topic_alter_appends_and_refuses_bad_throttled_replicas() -> None:
    result = topic_alter(
        "t",
        {LEADER_KEY: "0:1"},
        [ConfigChange(LEADER_KEY, "1:2", 2)],  # APPEND
        incremental=True,
    )
    assert result == {LEADER_KEY: "0:1,1:2"}
    with pytest.raises(ConfigRequestError) as info:
        topic_alter("t", {}, [ConfigChange(FOLLOWER_KEY, "x")], incremental=False)
    assert info.value.error is ErrorCode.INVALID_CONFIG
    assert FOLLOWER_KEY in str(info.value)


def test_describe_topic_lists_throttled_replicas_empty_by_default() -> None:
    entries = {e.name: e for e in describe_topic({FOLLOWER_KEY: "0:2"}, BrokerLayers(config()))}
    assert entries[LEADER_KEY].value == ""
    assert entries[FOLLOWER_KEY].value == "0:2"


# ------------------------------------------------------------------- the throttle decisions


def test_simple_rate_is_measured_over_at_least_one_window() -> None:
    rate = SimpleRate(11, 1000)
    rate.record(5000, 0)
    assert rate.measure(0) == 5000.0  # over one window, not ten (a client quota's Rate)
    assert rate.measure(5000) == 1000.0


def test_quota_is_exceeded_only_above_its_bound() -> None:
    quota = ReplicationQuota(bound=1000)
    quota.record(1000, 0)
    assert not quota.is_quota_exceeded(0)
    quota.record(1, 0)
    assert quota.is_quota_exceeded(0)
    assert not quota.is_quota_exceeded(20_000)  # the samples expired
    unlimited = ReplicationQuota()
    unlimited.record(10**12, 0)
    assert not unlimited.is_quota_exceeded(0)


def over_quota(partitions: frozenset[int]) -> ReplicationQuota:
    quota = ReplicationQuota(bound=100)
    quota.mark_throttled("t", partitions)
    quota.record(10_000, 0)
    return quota


def test_leader_holds_back_only_throttled_partitions_of_followers_outside_the_isr() -> None:
    quota = over_quota(frozenset({0}))
    assert should_leader_throttle(quota, "t", 0, follower_in_isr=False, now_ms=0)
    assert not should_leader_throttle(quota, "t", 0, follower_in_isr=True, now_ms=0)
    assert not should_leader_throttle(quota, "t", 1, follower_in_isr=False, now_ms=0)
    assert not should_leader_throttle(quota, "u", 0, follower_in_isr=False, now_ms=0)
    quota.mark_throttled("t", frozenset())
    assert not should_leader_throttle(quota, "t", 0, follower_in_isr=False, now_ms=0)


def test_follower_holds_back_throttled_partitions_not_in_sync_while_over_quota() -> None:
    quota = over_quota(ALL_PARTITIONS)
    assert should_follower_throttle(quota, "t", 5, replica_in_sync=False, now_ms=0)
    assert not should_follower_throttle(quota, "t", 5, replica_in_sync=True, now_ms=0)
    assert not should_follower_throttle(quota, "t", 5, replica_in_sync=False, now_ms=30_000)


def test_quotas_follow_rates_and_topic_configs() -> None:
    quotas = ReplicationQuotas(broker_id=2)
    quotas.apply_rates(500, 700)
    quotas.apply_topic_config("t", {LEADER_KEY: "0:2,1:3", FOLLOWER_KEY: "1:2"})
    assert (quotas.leader.bound, quotas.follower.bound) == (500, 700)
    assert quotas.leader.is_throttled("t", 0) and not quotas.leader.is_throttled("t", 1)
    assert quotas.follower.is_throttled("t", 1) and not quotas.follower.is_throttled("t", 0)
    quotas.apply_topic_config("t", {})
    assert not quotas.leader.is_throttled("t", 0)
    assert not quotas.follower.is_throttled("t", 1)


# ------------------------------------------------------------------- the leader's fetch path


def batch(n: int = 3) -> bytes:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(1000 + i, b"k", b"v" * 100)
    return b.build()


def follower_fetch(rm: ReplicaManager, partitions: list[int]) -> dict[int, int]:
    params = FetchParams(2, 55, max_wait_ms=0, min_bytes=1, max_bytes=10**6, isolation_level=0)
    requests = [PartitionFetch("t", p, 0, 10**6) for p in partitions]
    results = asyncio.run(fetch_messages(rm, params, requests))
    return {r.request.partition: len(r.records) for r in results}


def test_leader_leaves_throttled_data_out_for_a_follower_outside_the_isr(tmp_path) -> None:
    rm = make_rm(
        tmp_path,
        **{"leader.replication.throttled.rate": 100},
    )
    rm.apply_leader_and_isr(lai({0: [1, 2], 1: [1, 2]}, isr=[1]), 6)
    rm.apply_topic_config("t", {LEADER_KEY: "0:1"})
    for p in (0, 1):
        asyncio.run(
            append_records(
                rm, timeout_ms=0, required_acks=1, entries=[(("t", p), batch())], version=9
            )
        )
    first = follower_fetch(rm, [0, 1])
    assert first[0] > 0 and first[1] > 0  # under the quota: everything flows
    assert rm.replication_quotas.leader.is_quota_exceeded(now_ms())  # 391 bytes > 100/s
    second = follower_fetch(rm, [0, 1])
    assert second[0] == 0  # throttled, over the quota: held back
    assert second[1] == first[1]  # not throttled: flows
    # a follower in the ISR is never held back
    both = lai({0: [1, 2], 1: [1, 2]}, isr=[1, 2])
    for state in both.topic_states[0].partition_states:
        state.leader_epoch = 1
    rm.apply_leader_and_isr(both, 6)
    assert follower_fetch(rm, [0])[0] > 0


def test_the_fetcher_leaves_out_throttled_partitions_that_are_not_in_sync(tmp_path) -> None:
    rm = make_rm(tmp_path, **{"follower.replication.throttled.rate": 100})
    manager = ReplicaFetcherManager(
        broker_id=1,
        replica_manager=rm,
        metadata_cache=rm.metadata_cache,
        config=rm.config,
        epoch_holder=rm.epoch_holder,
    )
    rm.on_become_follower = manager.add_partitions

    async def scenario() -> list[tuple[str, int]]:
        rm.apply_leader_and_isr(lai({0: [2, 1], 1: [2, 1], 2: [2, 1]}), 6)
        rm.apply_topic_config("t", {FOLLOWER_KEY: "0:1,2:1"})
        fetcher = manager.fetchers[(2, 0)]
        states = fetcher.partitions
        states[("t", 2)].lag = 0  # caught up: in sync, never held back
        now = now_ms()
        everything = fetcher.unthrottled(list(states.values()), now)
        rm.replication_quotas.follower.record(10_000, now)  # over 100 B/s
        held = fetcher.unthrottled(list(states.values()), now)
        await manager.shutdown()
        assert len(everything) == 3
        return sorted(s.key for s in held)

    assert asyncio.run(scenario()) == [("t", 1), ("t", 2)]
