"""Cluster-wide znodes against a real ZooKeeper: top-level paths, cluster id, producer id blocks,
and KIP-39's pin and ready-to-serve nodes."""

from __future__ import annotations

import asyncio
import threading

from epochlog.zk import znodes
from epochlog.zk.cluster import (
    allocate_producer_id_block,
    ensure_top_level_paths,
    get_or_create_cluster_id,
    read_cluster_id,
)
from epochlog.zk.pinning import (
    announce_ready_to_serve,
    pin_controller,
    read_next_controller,
    read_ready_to_serve,
    unpin_controller,
    withdraw_ready_to_serve,
)
from epochlog.zk.session import run_blocking
from epochlog.zk.watches import watch_next_controller, watch_ready_to_serve


def test_top_level_paths(zk_client):
    ensure_top_level_paths(zk_client)
    ensure_top_level_paths(zk_client)
    for path in znodes.TOP_LEVEL_PATHS:
        assert zk_client.exists(path) is not None


def test_cluster_id_is_created_once(zk_client_factory):
    clients = [zk_client_factory() for _ in range(4)]
    assert read_cluster_id(clients[0]) is None
    ids: list[str] = []
    threads = [
        threading.Thread(target=lambda c=c: ids.append(get_or_create_cluster_id(c)))
        for c in clients
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(ids) == 4 and len(set(ids)) == 1
    assert len(ids[0]) == 22
    znodes.parse_kafka_uuid(ids[0])
    data, _ = clients[0].get(znodes.CLUSTER_ID_PATH)
    assert data == znodes.encode_cluster_id(ids[0])


def test_concurrent_producer_id_blocks_never_overlap(zk_client_factory):
    first = zk_client_factory()
    ensure_top_level_paths(first)  # Kafka's empty /latest_producer_id_block
    clients = {1: first, 2: zk_client_factory()}
    blocks: dict[int, list[znodes.ProducerIdBlock]] = {1: [], 2: []}
    barrier = threading.Barrier(2)

    def allocate(broker_id: int) -> None:
        barrier.wait()
        for _ in range(15):
            blocks[broker_id].append(allocate_producer_id_block(clients[broker_id], broker_id))

    threads = [threading.Thread(target=allocate, args=(i,)) for i in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    every = sorted(blocks[1] + blocks[2], key=lambda b: b.block_start)
    assert len(every) == 30
    assert all(b.size == 1000 for b in every)
    assert all(b.broker_id == i for i in blocks for b in blocks[i])
    for earlier, later in zip(every, every[1:], strict=False):
        assert later.block_start == earlier.block_end + 1  # disjoint and dense
    assert every[0].block_start == 0
    data, _ = first.get(znodes.LATEST_PRODUCER_ID_BLOCK_PATH)
    assert znodes.decode_producer_id_block(data) == every[-1]


def test_pin_and_ready_to_serve(zk_client_factory):
    admin, pinned, other = zk_client_factory(), zk_client_factory(), zk_client_factory()
    assert read_next_controller(admin) is None
    pin_controller(admin, 2)
    assert read_next_controller(admin) == 2
    pin_controller(admin, 3)
    assert read_next_controller(admin) == 3
    assert announce_ready_to_serve(pinned, 3) is True
    assert announce_ready_to_serve(pinned, 3) is True  # idempotent for its owner
    assert announce_ready_to_serve(other, 1) is False
    assert read_ready_to_serve(admin) == 3
    assert withdraw_ready_to_serve(other) is False
    pinned.stop()  # the pinned broker dies: its ephemeral ready node goes with it
    assert read_ready_to_serve(admin) is None
    assert announce_ready_to_serve(other, 1) is True
    assert withdraw_ready_to_serve(other) is True
    assert unpin_controller(admin) is True
    assert unpin_controller(admin) is False
    assert read_next_controller(admin) is None


def test_kip39_watches(zk_client_factory):
    admin, broker = zk_client_factory(), zk_client_factory()

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        pins: asyncio.Queue = asyncio.Queue()
        ready: asyncio.Queue = asyncio.Queue()
        await run_blocking(watch_next_controller, broker, loop, pins.put_nowait)
        handle = await run_blocking(watch_ready_to_serve, broker, loop, ready.put_nowait)
        assert await asyncio.wait_for(pins.get(), 5) is None
        assert await asyncio.wait_for(ready.get(), 5) is None
        await run_blocking(pin_controller, admin, 4)
        assert await asyncio.wait_for(pins.get(), 5) == 4
        await run_blocking(announce_ready_to_serve, broker, 4)
        assert await asyncio.wait_for(ready.get(), 5) == 4
        handle.cancel()
        await run_blocking(withdraw_ready_to_serve, broker)
        await run_blocking(unpin_controller, admin)
        assert await asyncio.wait_for(pins.get(), 5) is None
        await asyncio.sleep(0.2)
        assert ready.empty()  # cancelled

    asyncio.run(scenario())
