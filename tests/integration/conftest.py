"""Shared fixtures for integration tests: a real ZooKeeper server per test module.

`zookeeper` starts Debian's ZooKeeper (tickTime 500 ms, minSessionTimeout 1000 ms, no fsync) on a
free port once per test module and stops that process, by its pid, afterwards. Tests that share
the server stay apart through `zk_hosts`, a connect string with a fresh chroot per test.
`zk_client_factory` makes started kazoo clients (short session timeouts) and closes them all at
the end of the test. A missing ZooKeeper fails the tests (`make test` installs it), never skips.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

import pytest

from epochlog.zk.launcher import (
    ZooKeeperNotInstalledError,
    ZooKeeperServer,
    find_java,
    find_zookeeper_jar,
)

TEST_SESSION_TIMEOUT_MS = 3000

_chroots = itertools.count(1)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    try:
        find_zookeeper_jar()
        find_java()
    except ZooKeeperNotInstalledError as exc:
        pytest.fail(f"{exc} (make test installs it)")
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), fsync=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()  # this server's process only: SIGTERM, then SIGKILL to its pid


@pytest.fixture
def zk_hosts(zookeeper: ZooKeeperServer) -> str:
    """A connect string with a chroot of its own for this test."""
    from epochlog.zk.session import close_client, connect

    chroot = f"/test-{os.getpid()}-{next(_chroots)}"
    root = connect(zookeeper.connect_string, session_timeout_ms=TEST_SESSION_TIMEOUT_MS)
    try:
        root.ensure_path(chroot)
    finally:
        close_client(root)
    return zookeeper.connect_string + chroot


@pytest.fixture
def zk_client_factory(zk_hosts: str) -> Iterator[Callable[..., object]]:
    """make(session_timeout_ms=3000, hosts=zk_hosts) -> a started KazooClient, closed at the end."""
    from kazoo.client import KazooClient

    from epochlog.zk.session import close_client, connect

    clients: list[KazooClient] = []

    def make(
        session_timeout_ms: int = TEST_SESSION_TIMEOUT_MS, hosts: str | None = None
    ) -> KazooClient:
        client = connect(hosts or zk_hosts, session_timeout_ms=session_timeout_ms)
        clients.append(client)
        return client

    yield make
    for client in clients:
        close_client(client)


@pytest.fixture
def zk_client(zk_client_factory: Callable[..., object]) -> object:
    return zk_client_factory()
