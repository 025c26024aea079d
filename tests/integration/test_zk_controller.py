"""The controller's ZooKeeper side against a real server: election, epoch fencing, topics,
partition states, deletions, broker reads and watches."""

from __future__ import annotations

import asyncio
import functools
import threading
import uuid

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from epochlog.zk import controller_zk, znodes
from epochlog.zk.cluster import ensure_top_level_paths
from epochlog.zk.controller_zk import (
    ControllerMovedError,
    FencedWriter,
    TopicAlreadyExistsError,
    mark_topic_for_deletion,
    read_all_partition_states,
    read_brokers,
    read_controller,
    read_controller_epoch,
    read_partition_states,
    read_topic,
    read_topic_config,
    read_topic_deletions,
    read_topics,
    try_elect,
)
from epochlog.zk.registration import register_broker
from epochlog.zk.session import (
    TransactionFailedError,
    commit,
    force_session_expiry,
    run_blocking,
    session_id,
)
from epochlog.zk.watches import watch_broker_ids, watch_controller
from epochlog.zk.znodes import BrokerRegistration, Endpoint, PartitionState, TopicAssignment


@pytest.fixture
def zk(zk_client):
    ensure_top_level_paths(zk_client)
    return zk_client


def _assignment(partitions: int, replicas: tuple[int, ...] = (1, 2, 3)) -> TopicAssignment:
    return TopicAssignment(
        {
            p: replicas[p % len(replicas) :] + replicas[: p % len(replicas)]
            for p in range(partitions)
        },
        uuid.uuid4(),
    )


def _initial_states(assignment: TopicAssignment, controller_epoch: int) -> dict:
    return {
        p: PartitionState(replicas[0], 0, replicas, controller_epoch)
        for p, replicas in assignment.partitions.items()
    }


def _elect(client, broker_id: int) -> FencedWriter:
    result = try_elect(client, broker_id)
    assert result is not None
    return FencedWriter.for_election(client, result)


# -- election -----------------------------------------------------------------------------------


def test_exactly_one_of_concurrent_contenders_wins(zk, zk_client_factory):
    contenders = [zk_client_factory() for _ in range(5)]
    barrier = threading.Barrier(len(contenders))
    results: dict[int, object] = {}

    def contend(broker_id: int, client) -> None:
        barrier.wait()
        results[broker_id] = try_elect(client, broker_id)

    threads = [
        threading.Thread(target=contend, args=(i, c)) for i, c in enumerate(contenders, start=1)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    winners = {i: r for i, r in results.items() if r is not None}
    assert len(results) == 5 and len(winners) == 1
    ((winner, result),) = winners.items()
    assert read_controller(zk) == winner == result.broker_id
    assert result.controller_epoch == 1
    assert read_controller_epoch(zk) == (1, result.epoch_zk_version)
    # Asking again is idempotent for the winner, None for everybody else.
    assert try_elect(contenders[winner - 1], winner) == result
    loser = 1 if winner != 1 else 2
    assert try_elect(contenders[loser - 1], loser) is None


def test_controller_epoch_increments_with_every_election(zk_client_factory):
    epochs = []
    versions = []
    for broker_id in (1, 2, 3):
        client = zk_client_factory()
        result = try_elect(client, broker_id)
        assert result is not None and result.broker_id == broker_id
        epochs.append(result.controller_epoch)
        versions.append(result.epoch_zk_version)
        client.stop()  # the ephemeral /controller goes with the session
    assert epochs == [1, 2, 3]
    assert versions == [1, 2, 3]


def test_deposed_controller_can_change_nothing(zk, zk_client_factory):
    old_client = zk_client_factory()
    old = _elect(old_client, 1)
    assignment = _assignment(2)
    old.create_topic("orders", assignment, _initial_states(assignment, old.controller_epoch))
    before = read_all_partition_states(zk, {"orders": assignment})

    force_session_expiry(old_client)  # the old controller pauses past its session
    new_client = zk_client_factory()
    new = _elect(new_client, 2)
    assert new.controller_epoch == old.controller_epoch + 1

    bumped = PartitionState(2, 1, (2, 3), old.controller_epoch)
    with pytest.raises(ControllerMovedError):
        old.update_partition_states({("orders", 0): (bumped, before[("orders", 0)].version)})
    with pytest.raises(ControllerMovedError):
        old.create_topic("other", assignment, _initial_states(assignment, 1))
    with pytest.raises(ControllerMovedError):
        old.delete_topic("orders")
    with pytest.raises(ControllerMovedError):
        old.set_topic_config("orders", {"retention.ms": "1"})
    with pytest.raises(ControllerMovedError):
        old.resign()
    assert read_all_partition_states(zk, {"orders": assignment}) == before
    assert read_topic(zk, "orders") == assignment
    assert read_topic(zk, "other") is None
    assert read_topic_config(zk, "orders") == {}
    assert read_controller(zk) == 2
    # The new controller writes fine.
    result = new.update_partition_states({("orders", 0): (bumped, before[("orders", 0)].version)})
    assert result.updated == {("orders", 0): before[("orders", 0)].version + 1}


def test_resign_deletes_the_controller_node(zk):
    writer = _elect(zk, 1)
    writer.resign()
    assert read_controller(zk) is None
    writer.resign()  # nothing left to delete: fine
    again = try_elect(zk, 1)
    assert again is not None and again.controller_epoch == writer.controller_epoch + 1


# -- topics and partition states ----------------------------------------------------------------


def test_create_and_read_topic_with_states_and_config(zk):
    writer = _elect(zk, 1)
    assignment = _assignment(3)
    states = _initial_states(assignment, writer.controller_epoch)
    versions = writer.create_topic("orders", assignment, states, {"cleanup.policy": "delete"})
    assert versions == {0: 0, 1: 0, 2: 0}
    assert read_topics(zk) == {"orders": assignment}
    assert read_topic(zk, "orders").topic_id == assignment.topic_id
    read = read_all_partition_states(zk, read_topics(zk))
    assert {tp: v.state for tp, v in read.items()} == {("orders", p): s for p, s in states.items()}
    assert {v.version for v in read.values()} == {0}
    assert read_topic_config(zk, "orders") == {"cleanup.policy": "delete"}
    with pytest.raises(TopicAlreadyExistsError):
        writer.create_topic("orders", assignment, states)


def test_big_topic_is_created_in_several_multis(zk):
    writer = _elect(zk, 1)
    assignment = _assignment(700)
    writer.create_topic("big", assignment, _initial_states(assignment, writer.controller_epoch))
    states = read_all_partition_states(zk, {"big": assignment})
    assert len(states) == 700


def test_conditional_updates_refuse_a_stale_version_per_partition(zk):
    writer = _elect(zk, 1)
    assignment = _assignment(3)
    writer.create_topic("t", assignment, _initial_states(assignment, writer.controller_epoch))
    shrink = PartitionState(1, 1, (1,), writer.controller_epoch)
    first = writer.update_partition_states({("t", 0): (shrink, 0)})
    assert first.updated == {("t", 0): 1} and first.failed == {}

    stale = PartitionState(3, 9, (3,), writer.controller_epoch)
    second = writer.update_partition_states(
        {("t", 0): (stale, 0), ("t", 1): (shrink, 0), ("t", 2): (shrink, 0), ("t", 5): (shrink, 0)}
    )
    assert second.updated == {("t", 1): 1, ("t", 2): 1}
    assert isinstance(second.failed[("t", 0)], BadVersionError)
    assert isinstance(second.failed[("t", 5)], NoNodeError)
    states = read_partition_states(zk, [("t", 0), ("t", 1)])
    assert states[("t", 0)].state == shrink and states[("t", 0)].version == 1


def test_pipelined_multis_retry_only_the_one_that_failed(zk, monkeypatch):
    writer = _elect(zk, 1)
    assignment = _assignment(12)
    writer.create_topic("p", assignment, _initial_states(assignment, writer.controller_epoch))
    # Multis of 4 ops: three in flight at once, a stale version in the first and the last.
    monkeypatch.setattr(
        controller_zk, "chunk_items", functools.partial(controller_zk.chunk_items, max_ops=4)
    )
    shrink = PartitionState(1, 1, (1,), writer.controller_epoch)
    updates = {("p", i): (shrink, 0) for i in range(12)}
    updates[("p", 1)] = (shrink, 7)
    updates[("p", 11)] = (shrink, 7)
    result = writer.update_partition_states(updates)
    assert set(result.failed) == {("p", 1), ("p", 11)}
    assert result.updated == {("p", i): 1 for i in range(12) if i not in (1, 11)}
    states = read_all_partition_states(zk, {"p": assignment})
    assert {tp: v.version for tp, v in states.items()} == {
        ("p", i): 0 if i in (1, 11) else 1 for i in range(12)
    }


def test_create_partition_states_for_new_partitions(zk):
    writer = _elect(zk, 1)
    assignment = _assignment(2)
    writer.create_topic("t", assignment, {0: PartitionState(1, 0, (1, 2, 3), 1)})
    grown = TopicAssignment({**assignment.partitions, 2: (3, 1, 2)}, assignment.topic_id)
    assert writer.set_topic_assignment("t", grown, expected_version=0) == 1
    with pytest.raises(TransactionFailedError) as err:
        writer.set_topic_assignment("t", grown, expected_version=0)
    assert isinstance(err.value.error, BadVersionError)
    created, failed = writer.create_partition_states(
        "t", {p: PartitionState(1, 0, (1,), 1) for p in (0, 1, 2)}
    )
    assert created == {1: 0, 2: 0}
    assert isinstance(failed[0], NodeExistsError)
    assert set(read_all_partition_states(zk, {"t": grown})) == {("t", 0), ("t", 1), ("t", 2)}


def test_topic_deletion(zk):
    writer = _elect(zk, 1)
    assignment = _assignment(4)
    writer.create_topic("doomed", assignment, _initial_states(assignment, 1), {"a": "b"})
    writer.create_topic("kept", assignment, _initial_states(assignment, 1))
    assert mark_topic_for_deletion(zk, "doomed") is True
    assert mark_topic_for_deletion(zk, "doomed") is False
    assert read_topic_deletions(zk) == ["doomed"]
    writer.delete_topic("doomed")
    writer.delete_topic_deletion_markers(["doomed"])
    assert read_topic(zk, "doomed") is None
    assert zk.exists(znodes.topic_config_path("doomed")) is None
    assert read_topic_deletions(zk) == []
    assert list(read_topics(zk)) == ["kept"]
    writer.delete_topic("doomed")  # already gone: nothing to do


# -- brokers ------------------------------------------------------------------------------------


def test_read_brokers_gives_epochs_for_bounce_detection(zk, zk_client_factory):
    clients = {i: zk_client_factory() for i in (1, 2)}
    epochs = {
        i: register_broker(c, BrokerRegistration(i, (Endpoint("PLAINTEXT", "h", 9090 + i),)))
        for i, c in clients.items()
    }
    brokers = read_brokers(zk)
    assert {i: b.epoch for i, b in brokers.items()} == epochs
    assert brokers[2].registration.port == 9092
    assert brokers[1].session_id == session_id(clients[1])
    # Broker 1 bounces: same id, larger epoch.
    clients[1].stop()
    bounced = zk_client_factory()
    register_broker(bounced, BrokerRegistration(1, (Endpoint("PLAINTEXT", "h", 9091),)))
    assert read_brokers(zk)[1].epoch > epochs[1]


def test_commit_reports_the_failing_op_path_without_chroot(zk):
    tx = zk.transaction()
    tx.create("/a-node", b"")
    tx.create("/a-node", b"")
    with pytest.raises(TransactionFailedError) as err:
        commit(tx)
    assert err.value.index == 1 and err.value.path == "/a-node"
    assert isinstance(err.value.error, NodeExistsError)
    assert zk.exists("/a-node") is None  # all or nothing


# -- watches ------------------------------------------------------------------------------------


def test_watches_deliver_on_the_event_loop(zk, zk_client_factory):
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        ids: asyncio.Queue = asyncio.Queue()
        controllers: asyncio.Queue = asyncio.Queue()
        on_loop = []

        def broker_ids(value: list[int]) -> None:
            on_loop.append(asyncio.get_running_loop() is loop)
            ids.put_nowait(value)

        ids_watch = await run_blocking(watch_broker_ids, zk, loop, broker_ids)
        await run_blocking(watch_controller, zk, loop, controllers.put_nowait)
        assert await asyncio.wait_for(ids.get(), 5) == []
        assert await asyncio.wait_for(controllers.get(), 5) is None

        broker = zk_client_factory()
        reg = BrokerRegistration(5, (Endpoint("PLAINTEXT", "h", 1),))
        await run_blocking(register_broker, broker, reg)
        assert await asyncio.wait_for(ids.get(), 5) == [5]
        await run_blocking(try_elect, broker, 5)
        assert await asyncio.wait_for(controllers.get(), 5) == 5
        await run_blocking(broker.stop)
        assert await asyncio.wait_for(ids.get(), 5) == []
        assert await asyncio.wait_for(controllers.get(), 5) is None
        assert all(on_loop)
        ids_watch.cancel()

    asyncio.run(scenario())
