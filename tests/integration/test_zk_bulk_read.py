"""Bulk znode reads (`epochlog.zk.bulk_read.get_many`) against a real ZooKeeper server."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from epochlog.zk import bulk_read
from epochlog.zk.bulk_read import BULK_MIN_PATHS, get_many


def _fill(client: KazooClient, n: int) -> list[str]:
    client.ensure_path("/bulk")
    tx = client.transaction()
    for i in range(n):
        tx.create(f"/bulk/n{i}", b"" if i % 7 == 0 else f'{{"i":{i}}}'.encode())
    assert all(not isinstance(r, Exception) for r in tx.commit())
    for i in range(0, n, 5):
        client.set(f"/bulk/n{i}", f"v{i}".encode())  # some with version 1
    return [f"/bulk/n{i}" for i in range(n)]


def _one_by_one(client: KazooClient, paths: list[str]) -> list[Any]:
    results: list[Any] = []
    for path in paths:
        try:
            results.append(client.get(path))
        except NoNodeError:
            results.append(None)
    return results


def test_bulk_read_matches_reading_each_znode(zk_client: KazooClient) -> None:
    paths = _fill(zk_client, 1200)
    paths[3] = "/bulk/missing"  # absent znodes read as None, in their place
    paths.append("/nowhere/at/all")
    assert len(paths) >= BULK_MIN_PATHS
    got = get_many(zk_client, paths)
    assert got == _one_by_one(zk_client, paths)
    assert got[3] is None and got[-1] is None
    assert got[5] is not None and got[5][0] == b"v5" and got[5][1].version == 1


def test_bulk_read_sees_a_write_the_callers_session_just_made(zk_client: KazooClient) -> None:
    paths = _fill(zk_client, 400)
    zk_client.set("/bulk/n399", b"latest")
    assert get_many(zk_client, paths)[399][0] == b"latest"


class _AheadOfTheServer:
    """The caller's client as if its session had seen a newer zxid than the server has: the
    server must refuse the bulk session, and the read falls back to the caller's session."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self.hosts = client.hosts
        self.chroot = client.chroot
        self.last_zxid = client.last_zxid + 1_000_000

    def get_async(self, path: str) -> Any:
        return self._client.get_async(path)


def test_a_server_behind_the_callers_view_is_not_read_from(
    zk_client: KazooClient, caplog: pytest.LogCaptureFixture
) -> None:
    paths = _fill(zk_client, 300)
    with caplog.at_level(logging.WARNING, logger=bulk_read.__name__):
        got = get_many(_AheadOfTheServer(zk_client), paths)  # type: ignore[arg-type]
    assert got == _one_by_one(zk_client, paths)
    assert "behind this client's view" in caplog.text  # the refusal, then kazoo answered


def test_few_paths_are_read_through_the_callers_session(
    zk_client: KazooClient, caplog: pytest.LogCaptureFixture
) -> None:
    paths = _fill(zk_client, 20)
    ahead = _AheadOfTheServer(zk_client)  # a bulk session would be refused and say so
    with caplog.at_level(logging.WARNING, logger=bulk_read.__name__):
        assert get_many(ahead, paths) == _one_by_one(zk_client, paths)  # type: ignore[arg-type]
    assert "bulk read" not in caplog.text
