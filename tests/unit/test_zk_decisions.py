"""The sans-I/O decisions of the zk package: zoo.cfg, srvr, multi failures, ownership, batching,
KIP-39 pinning."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, RolledBackError, RuntimeInconsistency
from kazoo.protocol.states import ZnodeStat

from epochlog.zk.controller_zk import WriteOp, chunk_items
from epochlog.zk.launcher import ZooKeeperConfig, parse_srvr_mode, render_zoo_cfg
from epochlog.zk.pinning import (
    ReadyAction,
    may_join_election,
    ready_to_serve_action,
    should_resign,
)
from epochlog.zk.registration import ExistingRegistration, classify_existing
from epochlog.zk.session import first_failure


def test_standalone_zoo_cfg():
    text = render_zoo_cfg(ZooKeeperConfig(Path("/d"), 2181, fsync=False))
    lines = text.splitlines()
    for expected in (
        "tickTime=500",
        "dataDir=/d",
        "clientPort=2181",
        "clientPortAddress=127.0.0.1",
        "minSessionTimeout=1000",
        "maxSessionTimeout=60000",
        "admin.enableServer=false",
        "4lw.commands.whitelist=*",
        "forceSync=no",
    ):
        assert expected in lines
    assert not any(line.startswith("server.") for line in lines)


def test_ensemble_zoo_cfg_needs_my_id():
    servers = {i: f"127.0.0.1:{2888 + i}:{3888 + i};127.0.0.1:{22180 + i}" for i in (1, 2, 3)}
    cfg = ZooKeeperConfig(Path("/d"), 22181, servers=servers, my_id=1)
    assert "server.2=127.0.0.1:2890:3890;127.0.0.1:22182" in render_zoo_cfg(cfg).splitlines()
    with pytest.raises(ValueError, match="my_id"):
        render_zoo_cfg(ZooKeeperConfig(Path("/d"), 22181, servers=servers))


def test_parse_srvr_mode():
    reply = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: standalone\nNodes: 5\n"
    assert parse_srvr_mode(reply) == "standalone"
    assert parse_srvr_mode("This ZooKeeper instance is not currently serving requests\n") is None


def test_first_failure_finds_the_real_error():
    ok = ["/brokers/ids/1", ZnodeStat(*range(11))]
    assert first_failure(ok) is None
    bad = BadVersionError()
    index, error = first_failure([RolledBackError(), bad, RuntimeInconsistency()])
    assert (index, error) == (1, bad)
    exists = NodeExistsError()
    assert first_failure([exists, RuntimeInconsistency()]) == (0, exists)


@pytest.mark.parametrize(
    "owner, current, previous, expected",
    [
        (0x10, 0x10, None, ExistingRegistration.CURRENT_SESSION),
        (0x10, 0x20, 0x10, ExistingRegistration.PREVIOUS_SESSION),
        (0x30, 0x20, 0x10, ExistingRegistration.FOREIGN),
        (0x30, 0x20, None, ExistingRegistration.FOREIGN),
        (0, None, None, ExistingRegistration.FOREIGN),  # a persistent node is never ours
    ],
)
def test_classify_existing_registration(owner, current, previous, expected):
    assert classify_existing(owner, current, previous) is expected


def test_chunk_items_keeps_groups_whole_and_bounded():
    items = [
        (i, [WriteOp("set", f"/p/{i}", b"x" * 100), WriteOp("set", f"/q/{i}")]) for i in range(50)
    ]
    chunks = chunk_items(items, max_bytes=2000, max_ops=1000)
    assert [k for chunk in chunks for k, _ in chunk] == list(range(50))
    for chunk in chunks:
        assert sum(op.size for _, ops in chunk for op in ops) <= 2000
    by_ops = chunk_items(items, max_bytes=10**9, max_ops=7)
    assert all(sum(len(ops) for _, ops in chunk) <= 7 for chunk in by_ops)
    assert chunk_items([]) == []
    huge = [("big", [WriteOp("create", "/big", b"x" * 5000)])]
    assert chunk_items(huge, max_bytes=100) == [huge]  # an oversized group still goes alone


def test_kip39_decisions():
    assert ready_to_serve_action(pinned=2, broker_id=2, holding_ready_node=False) is (
        ReadyAction.ANNOUNCE
    )
    assert ready_to_serve_action(2, 2, True) is None
    assert ready_to_serve_action(3, 2, True) is ReadyAction.WITHDRAW
    assert ready_to_serve_action(None, 2, True) is ReadyAction.WITHDRAW
    assert ready_to_serve_action(None, 2, False) is None
    assert may_join_election(None, 1) and may_join_election(1, 1)
    assert not may_join_election(2, 1)
    assert should_resign(2, controller_id=1)
    assert not should_resign(1, controller_id=1) and not should_resign(None, 1)
