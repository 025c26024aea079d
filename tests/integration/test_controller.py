"""The controller against a real ZooKeeper and recording brokers: topics, failures, bounces,
controlled shutdown, deletion, failover and fencing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from epochlog.config.broker import BrokerConfig
from epochlog.controller.controller import Controller
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.zk import controller_zk as zkc
from epochlog.zk.cluster import ensure_top_level_paths
from epochlog.zk.registration import register_broker
from epochlog.zk.session import force_session_expiry
from epochlog.zk.znodes import BrokerRegistration, Endpoint
from tests.integration.fake_broker import FakeBroker


def config(zk_hosts: str, **extra) -> BrokerConfig:
    return BrokerConfig.from_dict({"broker.id": 1, "zookeeper.connect": zk_hosts, **extra})


async def register(client: KazooClient, broker: FakeBroker) -> int:
    registration = BrokerRegistration(
        broker.broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", broker.port),)
    )
    return await asyncio.to_thread(register_broker, client, registration)


class Cluster:
    """Three recording brokers registered in ZooKeeper, and a controller for broker 1."""

    def __init__(self, zk_hosts: str, make_client: Callable[..., KazooClient]) -> None:
        self.zk_hosts = zk_hosts
        self.make_client = make_client
        self.admin = make_client()
        ensure_top_level_paths(self.admin)
        self.brokers: dict[int, FakeBroker] = {}
        self.sessions: dict[int, KazooClient] = {}
        self.epochs: dict[int, int] = {}
        self.controller: Controller | None = None

    async def start(self, **config_overrides) -> Controller:
        for broker_id in (1, 2, 3):
            broker = await FakeBroker(broker_id).start()
            self.brokers[broker_id] = broker
            self.sessions[broker_id] = self.make_client()
            self.epochs[broker_id] = await register(self.sessions[broker_id], broker)
        return await self.elect(1, **config_overrides)

    async def elect(self, broker_id: int, **config_overrides) -> Controller:
        result = await asyncio.to_thread(zkc.try_elect, self.sessions[broker_id], broker_id)
        assert result is not None
        controller = Controller(
            broker_id,
            self.sessions[broker_id],
            result,
            config(self.zk_hosts, **config_overrides),
        )
        await controller.start()
        self.controller = controller
        return controller

    async def stop(self) -> None:
        if self.controller is not None:
            await self.controller.stop()
        for broker in self.brokers.values():
            await broker.stop()


@pytest.fixture
async def cluster(zk_hosts, zk_client_factory):
    c = Cluster(zk_hosts, zk_client_factory)
    yield c
    await c.stop()


def create_request(name: str, partitions: int, rf: int) -> m.CreateTopicsRequest:
    return m.CreateTopicsRequest(
        topics=[
            m.CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=rf
            )
        ],
        timeout_ms=10000,
    )


async def until(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_create_topic_writes_states_and_tells_every_replica_with_its_epoch(cluster) -> None:
    controller = await cluster.start()
    response = await controller.create_topics(create_request("orders", 6, 2), 7)
    result = response.topics[0]
    assert result.error_code == ErrorCode.NONE
    assert (result.num_partitions, result.replication_factor) == (6, 2)
    states = zkc.read_all_partition_states(cluster.admin, zkc.read_topics(cluster.admin))
    assert len(states) == 6
    assignment = zkc.read_topics(cluster.admin)["orders"]
    assert assignment.topic_id == result.topic_id
    for (_, p), versioned in states.items():
        assert versioned.state.leader == assignment.partitions[p][0]
        assert versioned.state.isr == assignment.partitions[p]
    for broker_id, broker in cluster.brokers.items():
        requests = await broker.wait_for(ApiKey.LEADER_AND_ISR, 1)
        assert {r.broker_epoch for r in requests} == {cluster.epochs[broker_id]}
        told = {
            p.partition_index
            for r in requests
            for t in r.topic_states
            if t.topic_name == "orders"
            for p in t.partition_states
        }
        assert told == {p for p, replicas in assignment.partitions.items() if broker_id in replicas}
        metadata = await broker.wait_for(ApiKey.UPDATE_METADATA)
        assert {b.broker_epoch for b in metadata[-1].live_brokers} == set(cluster.epochs.values())
    again = await controller.create_topics(create_request("orders", 1, 1), 7)
    assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    too_many = await controller.create_topics(create_request("wide", 1, 4), 7)
    assert too_many.topics[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR


async def test_broker_failure_moves_leadership_and_shrinks_isr(cluster) -> None:
    controller = await cluster.start()
    await controller.create_topics(create_request("t", 3, 3), 7)
    led_by_2 = [tp for tp, s in controller.ctx.states.items() if s.leader == 2]
    assert led_by_2
    cluster.sessions[2].stop()  # broker 2 dies: its ephemeral registration goes
    await until(lambda: 2 not in controller.ctx.live_brokers)
    await until(lambda: all(controller.ctx.states[tp].leader != 2 for tp in led_by_2))
    states = zkc.read_all_partition_states(cluster.admin, zkc.read_topics(cluster.admin))
    for tp, versioned in states.items():
        assert versioned.state.leader != 2
        assert 2 not in versioned.state.isr
        assert versioned.version == controller.ctx.states[tp].partition_epoch


async def test_a_bounced_broker_gets_a_full_leader_and_isr_with_its_new_epoch(cluster) -> None:
    controller = await cluster.start()
    await controller.create_topics(create_request("t", 3, 3), 7)
    broker = cluster.brokers[3]
    # A fast bounce: the session expires and the broker registers again at once.
    await asyncio.to_thread(force_session_expiry, cluster.sessions[3], hosts=cluster.zk_hosts)
    new_epoch = await register(cluster.sessions[3], broker)
    assert new_epoch > cluster.epochs[3]
    await until(
        lambda: any(
            r.broker_epoch == new_epoch and r.type == 2 for r in broker.of(ApiKey.LEADER_AND_ISR)
        )
    )
    full = [r for r in broker.of(ApiKey.LEADER_AND_ISR) if r.broker_epoch == new_epoch]
    told = {p.partition_index for r in full for t in r.topic_states for p in t.partition_states}
    assert told == {0, 1, 2}
    assert controller.ctx.live_brokers[3].epoch == new_epoch


async def test_controlled_shutdown_moves_leadership_and_refuses_a_stale_epoch(cluster) -> None:
    controller = await cluster.start()
    await controller.create_topics(create_request("t", 3, 3), 7)
    error, remaining = await controller.controlled_shutdown(2, cluster.epochs[2] - 1)
    assert error == ErrorCode.STALE_BROKER_EPOCH
    assert 2 not in controller.ctx.shutting_down
    error, remaining = await controller.controlled_shutdown(2, cluster.epochs[2])
    assert error == ErrorCode.NONE
    assert remaining == []
    assert all(s.leader != 2 and 2 not in s.isr for s in controller.ctx.states.values())
    stops = await cluster.brokers[2].wait_for(ApiKey.STOP_REPLICA)
    flags = {p.delete_partition for t in stops[-1].topic_states for p in t.partition_states}
    assert flags == {False}  # stopped, not deleted


async def test_delete_topic_stops_replicas_and_removes_znodes(cluster) -> None:
    controller = await cluster.start()
    await controller.create_topics(create_request("gone", 2, 2), 7)
    errors = await controller.delete_topics(["gone", "never"])
    assert errors == {"gone": ErrorCode.NONE, "never": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert "gone" not in zkc.list_topics(cluster.admin)
    assert zkc.read_topic_deletions(cluster.admin) == []
    deleted = {
        (b.broker_id, t.topic_name, p.partition_index)
        for b in cluster.brokers.values()
        for r in b.of(ApiKey.STOP_REPLICA)
        for t in r.topic_states
        for p in t.partition_states
        if p.delete_partition
    }
    assignment = {0: 2, 1: 2}  # two replicas of each of the two partitions
    assert len(deleted) == sum(assignment.values())
    assert {t for _, t, _ in deleted} == {"gone"}


async def test_a_new_controller_loads_everything_and_fences_the_old_one(cluster) -> None:
    old = await cluster.start()
    await old.create_topics(create_request("t", 3, 3), 7)
    states_before = dict(old.ctx.states)
    # The old controller's session expires; broker 2 wins the next election.
    await asyncio.to_thread(force_session_expiry, cluster.sessions[1], hosts=cluster.zk_hosts)
    await register(cluster.sessions[1], cluster.brokers[1])
    new = await cluster.elect(2)
    assert new.ctx.epoch == old.ctx.epoch + 1
    assert set(new.ctx.states) == set(states_before)
    assert new.ctx.topic_ids == old.ctx.topic_ids
    # The deposed controller can change nothing: its fenced write fails.
    with pytest.raises(zkc.ControllerMovedError):
        await asyncio.to_thread(old.writer.delete_topic, "t")
    assert "t" in zkc.list_topics(cluster.admin)
    await old.stop()


def alter_request(controller, cluster, tp, isr_with_epochs, leader=None):
    state = controller.ctx.states[tp]
    leader = state.leader if leader is None else leader
    r = m.AlterPartitionRequest
    return r(
        broker_id=leader,
        broker_epoch=cluster.epochs[leader],
        topics=[
            r.TopicData(
                topic_id=controller.ctx.topic_ids[tp[0]],
                partitions=[
                    r.PartitionData(
                        partition_index=tp[1],
                        leader_epoch=state.leader_epoch,
                        partition_epoch=state.partition_epoch,
                        new_isr_with_epochs=[
                            r.BrokerState(broker_id=b, broker_epoch=e) for b, e in isr_with_epochs
                        ],
                    )
                ],
            )
        ],
    )


async def test_alter_partition_writes_the_isr_and_announces_it(cluster) -> None:
    controller = await cluster.start()
    await controller.create_topics(create_request("t", 1, 3), 7)
    tp = ("t", 0)
    leader = controller.ctx.states[tp].leader
    followers = [b for b in controller.ctx.replicas(tp) if b != leader]
    shrink = alter_request(controller, cluster, tp, [(leader, cluster.epochs[leader])])
    answer = (await controller.alter_partition(shrink, 3)).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE and answer.isr == [leader]
    states = zkc.read_all_partition_states(cluster.admin, zkc.read_topics(cluster.admin))
    assert states[tp].state.isr == (leader,)
    assert states[tp].version == answer.partition_epoch
    grow = alter_request(
        controller, cluster, tp, [(b, cluster.epochs[b]) for b in (leader, *followers)]
    )
    answer = (await controller.alter_partition(grow, 3)).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE
    assert sorted(answer.isr) == [1, 2, 3]
    await until(
        lambda: any(
            sorted(p.isr) == [1, 2, 3] and p.zk_version == answer.partition_epoch
            for r in cluster.brokers[followers[0]].of(ApiKey.UPDATE_METADATA)
            for t in r.topic_states
            for p in t.partition_states
        )
    )


@pytest.mark.parametrize("kip903", [True, False], ids=["kip903-on", "kip903-off"])
async def test_a_replica_that_re_registered_is_kept_out_of_the_isr(cluster, kip903) -> None:
    controller = await cluster.start(**{"epochlog.test.kip903.enabled": kip903})
    await controller.create_topics(create_request("t", 1, 2), 7)
    tp = ("t", 0)
    leader = controller.ctx.states[tp].leader
    follower = next(b for b in controller.ctx.replicas(tp) if b != leader)
    shrink = alter_request(controller, cluster, tp, [(leader, cluster.epochs[leader])])
    await controller.alter_partition(shrink, 3)
    old_epoch = cluster.epochs[follower]  # what the leader saw in the follower's fetches
    # The follower loses its disk and registers again (a new generation).
    await asyncio.to_thread(
        force_session_expiry, cluster.sessions[follower], hosts=cluster.zk_hosts
    )
    new_epoch = await register(cluster.sessions[follower], cluster.brokers[follower])
    await until(
        lambda: (
            controller.ctx.live_brokers.get(follower, None) is not None
            and controller.ctx.live_brokers[follower].epoch == new_epoch
        )
    )
    # The leader's delayed expansion, built from the old generation's fetches, arrives.
    late = alter_request(
        controller, cluster, tp, [(leader, cluster.epochs[leader]), (follower, old_epoch)]
    )
    answer = (await controller.alter_partition(late, 3)).topics[0].partitions[0]
    if kip903:
        assert answer.error_code == ErrorCode.INELIGIBLE_REPLICA
        assert controller.ctx.states[tp].isr == (leader,)
    else:  # the damage: the empty replica joins the ISR
        assert answer.error_code == ErrorCode.NONE
        assert follower in controller.ctx.states[tp].isr


async def test_preferred_leader_election_requested_through_zookeeper(cluster) -> None:
    from epochlog.zk.znodes import (
        PREFERRED_REPLICA_ELECTION_PATH,
        encode_preferred_replica_election,
    )

    controller = await cluster.start()
    await controller.create_topics(create_request("t", 3, 3), 7)
    moved = [tp for tp, s in controller.ctx.states.items() if s.leader == 2]
    cluster.sessions[2].stop()  # broker 2 dies: others take its leaderships
    await until(lambda: all(controller.ctx.states[tp].leader != 2 for tp in moved))
    cluster.sessions[2] = cluster.make_client()
    cluster.epochs[2] = await register(cluster.sessions[2], cluster.brokers[2])
    await until(
        lambda: (
            2 in controller.ctx.live_brokers
            and controller.ctx.live_brokers[2].epoch == cluster.epochs[2]
        )
    )
    # The fake brokers never fetch, so re-admit broker 2 to the ISRs as its leaders would.
    for tp in moved:
        state = controller.ctx.states[tp]
        grow = alter_request(
            controller, cluster, tp, [(b, cluster.epochs[b]) for b in controller.ctx.replicas(tp)]
        )
        answer = (await controller.alter_partition(grow, 3)).topics[0].partitions[0]
        assert answer.error_code == ErrorCode.NONE, (tp, state, answer)
    cluster.admin.create(PREFERRED_REPLICA_ELECTION_PATH, encode_preferred_replica_election(moved))
    await until(lambda: cluster.admin.exists(PREFERRED_REPLICA_ELECTION_PATH) is None)
    assert all(controller.ctx.states[tp].leader == 2 for tp in moved)


@pytest.mark.parametrize("kip380", [True, False], ids=["kip380-on", "kip380-off"])
async def test_seed_a_retried_controlled_shutdown_from_before_a_bounce(cluster, kip380) -> None:
    """KIP-380: a ControlledShutdown sent by a broker's previous generation (a retry that arrives
    late) must not make the controller move partitions off the restarted broker."""
    controller = await cluster.start(**{"epochlog.test.kip380.enabled": kip380})
    await controller.create_topics(create_request("t", 3, 3), 7)
    old_epoch = cluster.epochs[2]
    await asyncio.to_thread(force_session_expiry, cluster.sessions[2], hosts=cluster.zk_hosts)
    cluster.epochs[2] = await register(cluster.sessions[2], cluster.brokers[2])
    await until(
        lambda: (
            2 in controller.ctx.live_brokers
            and controller.ctx.live_brokers[2].epoch == cluster.epochs[2]
        )
    )
    # The new generation catches up: back in every ISR, and preferred leader where assigned.
    for tp in controller.ctx.all_partitions():
        grow = alter_request(
            controller, cluster, tp, [(b, cluster.epochs[b]) for b in controller.ctx.replicas(tp)]
        )
        assert (await controller.alter_partition(grow, 3)).topics[0].partitions[0].error_code == 0
    await controller.elect_preferred_leaders()
    preferred = [
        tp for tp in controller.ctx.all_partitions() if controller.ctx.replicas(tp)[0] == 2
    ]
    assert preferred and all(controller.ctx.states[tp].leader == 2 for tp in preferred)

    error, _ = await controller.controlled_shutdown(2, old_epoch)  # the late retry
    if kip380:
        assert error == ErrorCode.STALE_BROKER_EPOCH
        assert all(controller.ctx.states[tp].leader == 2 for tp in preferred)
        assert 2 not in controller.ctx.shutting_down
    else:  # the damage: a healthy broker of the new generation is drained and fenced off
        assert error == ErrorCode.NONE
        assert not any(controller.ctx.states[tp].leader == 2 for tp in preferred)
        assert all(2 not in s.isr for s in controller.ctx.states.values())
        assert 2 in controller.ctx.shutting_down
