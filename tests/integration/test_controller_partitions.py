"""The controller's CreatePartitions and ElectLeaders against a real ZooKeeper and recording
brokers: what it writes, what it tells the brokers, and how it answers."""

from __future__ import annotations

from typing import Any

import pytest

from epochlog.controller.decisions import Plan
from epochlog.controller.events import ExecutePlan
from epochlog.controller.partition_admin import ElectionType
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.zk import controller_zk as zkc
from tests.integration.test_controller import Cluster, create_request


@pytest.fixture
async def cluster(zk_hosts, zk_client_factory):
    c = Cluster(zk_hosts, zk_client_factory)
    yield c
    await c.stop()


def grow(*topics: tuple[str, int], timeout_ms: int = 10000, validate_only: bool = False) -> Any:
    R = m.CreatePartitionsRequest
    return R(
        topics=[R.CreatePartitionsTopic(name=n, count=c) for n, c in topics],
        timeout_ms=timeout_ms,
        validate_only=validate_only,
    )


def errors(response: Any) -> dict[str, int]:
    return {r.name: r.error_code for r in response.results}


async def test_create_partitions_writes_the_assignment_and_tells_the_new_replicas(cluster) -> None:
    controller = await cluster.start()
    await controller.create_topics(create_request("orders", 2, 2), 7)
    before = zkc.read_topics(cluster.admin)["orders"]

    checked = await controller.create_partitions(grow(("orders", 5), validate_only=True))
    assert errors(checked) == {"orders": ErrorCode.NONE}
    assert zkc.read_topics(cluster.admin)["orders"] == before

    grown = await controller.create_partitions(grow(("orders", 5)))
    assert errors(grown) == {"orders": ErrorCode.NONE}
    after = zkc.read_topics(cluster.admin)["orders"]
    assert after.topic_id == before.topic_id
    assert sorted(after.partitions) == [0, 1, 2, 3, 4]
    assert {p: after.partitions[p] for p in (0, 1)} == dict(before.partitions)
    states = zkc.read_all_partition_states(cluster.admin, {"orders": after})
    for p in (2, 3, 4):
        state = states[("orders", p)].state
        assert (state.leader, tuple(state.isr)) == (after.partitions[p][0], after.partitions[p])
    # Each replica of a new partition hears of it as new; every broker's metadata has it.
    for broker_id, broker in cluster.brokers.items():
        told = {
            p.partition_index
            for r in broker.of(ApiKey.LEADER_AND_ISR)
            for t in r.topic_states
            for p in t.partition_states
            if p.partition_index >= 2 and p.is_new
        }
        assert told == {p for p in (2, 3, 4) if broker_id in after.partitions[p]}
        await broker.wait_for(ApiKey.UPDATE_METADATA, 1)


async def test_create_partitions_refusals_and_a_zero_timeout(cluster) -> None:
    controller = await cluster.start()
    await controller.create_topics(create_request("a", 1, 1), 7)
    await controller.create_topics(create_request("b", 1, 1), 7)
    await controller.create_topics(create_request("c", 1, 1), 7)
    controller.ctx.topics_being_deleted.add("c")  # as while its deletion runs

    answer = await controller.create_partitions(
        grow(("a", 2), ("a", 3), ("b", 1), ("c", 2), ("nope", 2))
    )
    assert errors(answer) == {
        "a": ErrorCode.INVALID_REQUEST,
        "b": ErrorCode.INVALID_PARTITIONS,
        "c": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert all(len(zkc.read_topics(cluster.admin)[t].partitions) == 1 for t in "abc")

    # Kafka: a timeout of 0 or less creates the partitions and answers REQUEST_TIMED_OUT.
    timed_out = await controller.create_partitions(grow(("b", 3), timeout_ms=0))
    assert errors(timed_out) == {"b": ErrorCode.REQUEST_TIMED_OUT}
    assert len(zkc.read_topics(cluster.admin)["b"].partitions) == 3


async def test_elect_leaders_moves_leadership_back_and_reports_each_partition(cluster) -> None:
    controller = await cluster.start()
    await controller.create_topics(create_request("t", 3, 3), 7)
    assignment = zkc.read_topics(cluster.admin)["t"].partitions
    # Move partition 0 away from its preferred replica, as a failure would have.
    state = controller.ctx.states[("t", 0)]
    other = assignment[0][1]
    plan = Plan(updates={("t", 0): state.with_leader(other, state.isr, controller.ctx.epoch)})
    await controller._enqueue_and_wait(ExecutePlan(plan))
    assert controller.ctx.states[("t", 0)].leader == other

    outcomes = await controller.elect_leaders(
        [("t", 0), ("t", 1), ("t", 5)], ElectionType.PREFERRED, 5000
    )
    assert {tp: o.error for tp, o in outcomes.items()} == {
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
        ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    written = zkc.read_partition_states(cluster.admin, [("t", 0)])[("t", 0)].state
    assert written.leader == assignment[0][0]
    assert written.leader_epoch == state.leader_epoch + 2

    everything = await controller.elect_leaders(None, ElectionType.PREFERRED, 5000)
    assert everything == {}  # every partition has its preferred leader: nothing to report
