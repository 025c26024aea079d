"""A kazoo client configured for epochlog, transactions that raise, and bridges to asyncio.

`connect()` / `make_client()` build a `KazooClient` with the connection retry measured in
reference/zookeeper.md §2(g) (retry forever, 50 ms backoff capped at 0.5 s: kazoo's default backs
off for up to an hour and loses sessions) and Kafka's `zookeeper.session.timeout.ms` (default
18000). kazoo runs its own threads; calls block the caller and callbacks (state listeners, watches)
run on kazoo's threads, where they must not block or call ZooKeeper synchronously.

For asyncio callers: `run_blocking` runs a kazoo call in a worker thread (`asyncio.to_thread`);
`watch_children`, `watch_data` and `add_state_listener_on_loop` deliver kazoo callbacks onto an
event loop with `loop.call_soon_threadsafe`, and return a handle to stop them.

A failed kazoo transaction does not raise: its result list holds exception instances
(`RolledBackError` for ops before the failing one, the real error, `RuntimeInconsistency` after).
`commit()` turns that into `TransactionFailedError` carrying the failing op's index, path and the
real error; `first_failure()` is the pure part of that decision.

`force_session_expiry()` is fault injection for tests and the chaos harness: it opens a second
connection with the victim's session id and password and closes it, which expires the session on
the server (ephemerals gone in well under a second; the victim sees SUSPENDED, LOST, CONNECTED).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import KazooException, RolledBackError, RuntimeInconsistency
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.security import ACL

from epochlog.metrics.process_stats import STATS
from epochlog.zk.security import ZkLogin, znode_acls

DEFAULT_SESSION_TIMEOUT_MS = 18000  # Kafka's zookeeper.session.timeout.ms
CONNECTION_RETRY: dict[str, float] = {
    "max_tries": -1,
    "delay": 0.05,
    "backoff": 1.5,
    "max_delay": 0.5,
}

T = TypeVar("T")
StateListener = Callable[[KazooState], Any]


class TimedKazooClient(KazooClient):
    """A KazooClient that times every request from queueing to its answer (Kafka's
    ZooKeeperRequestLatencyMs) and counts session events: `_call` is where every kazoo
    operation, sync or async, is queued with the object its answer completes.

    With `secure_acls` (Kafka's `zookeeper.set.acl`) a znode created without an explicit ACL
    gets the one Kafka gives its path (`zk.security.znode_acls`): every create, `ensure_path`
    step and transaction create goes through `create_async` or `SecureTransaction.create`.
    (kazoo's `makepath=True` gives the missing parents the child's ACL; our code creates
    parents with `ensure_path`.)"""

    secure_acls = False

    def create_async(self, path: str, value: bytes = b"", acl: Any = None, **kwargs: Any) -> Any:
        if acl is None and self.secure_acls:
            acl = znode_acls(path, True)
        return super().create_async(path, value, acl=acl, **kwargs)

    def transaction(self) -> TransactionRequest:
        return SecureTransaction(self) if self.secure_acls else super().transaction()

    def _call(self, request: Any, async_object: Any) -> Any:
        started = time.perf_counter()
        async_object.rawlink(
            lambda _done: STATS.record_zk_request((time.perf_counter() - started) * 1000)
        )
        return super()._call(request, async_object)


def creation_acl(client: KazooClient, path: str) -> list[ACL]:
    """The ACL `client` creates `path` with (for code that builds kazoo's Create ops itself)."""
    if getattr(client, "secure_acls", False):
        return znode_acls(path, True)
    return client.default_acl or znode_acls(path, False)


class SecureTransaction(TransactionRequest):
    """A transaction whose creates get their path's ACL, as `TimedKazooClient.create_async`."""

    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: list[ACL] | None = None,
        ephemeral: bool = False,
        sequence: bool = False,
    ) -> None:
        if acl is None:
            acl = znode_acls(path, True)
        super().create(path, value, acl, ephemeral, sequence)


def _count_session_state(state: KazooState) -> None:
    """Kafka's SessionExpireListener metrics: the state, expirations, disconnects."""
    STATS.zk_state = str(state)
    if state == KazooState.LOST:
        STATS.zk_expires += 1
    elif state == KazooState.SUSPENDED:
        STATS.zk_disconnects += 1


def make_client(
    hosts: str,
    *,
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
    client_id: tuple[int, bytes] | None = None,
    listeners: Iterable[StateListener] = (),
    login: ZkLogin | None = None,
    secure_acls: bool = False,
) -> KazooClient:
    """A KazooClient (not started) for `hosts` ("h:p,h:p[/chroot]"), logged in as `login`
    (digest scheme) and creating znodes with Kafka's secure ACLs when `secure_acls`."""
    client = TimedKazooClient(
        hosts=hosts,
        timeout=session_timeout_ms / 1000.0,
        client_id=client_id,
        connection_retry=dict(CONNECTION_RETRY),
        auth_data=login.auth_data if login is not None else None,
    )
    client.secure_acls = secure_acls
    client.add_listener(_count_session_state)
    for listener in listeners:
        client.add_listener(listener)
    return client


def connect(
    hosts: str,
    *,
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
    listeners: Iterable[StateListener] = (),
    timeout_s: float = 15.0,
    login: ZkLogin | None = None,
    secure_acls: bool = False,
) -> KazooClient:
    """A started KazooClient; raises kazoo's timeout error if no server answers in time."""
    client = make_client(
        hosts,
        session_timeout_ms=session_timeout_ms,
        listeners=listeners,
        login=login,
        secure_acls=secure_acls,
    )
    client.start(timeout=timeout_s)
    STATS.zk_state = str(client.state)
    return client


def close_client(client: KazooClient) -> None:
    """Stop and close, ignoring a client that is already stopped."""
    with contextlib.suppress(Exception):
        client.stop()
    with contextlib.suppress(Exception):
        client.close()


def session_id(client: KazooClient) -> int | None:
    """The current session id, or None while not connected."""
    cid = client.client_id
    return cid[0] if cid else None


def hosts_of(client: KazooClient) -> str:
    """The client's servers as a connect string, without its chroot."""
    return ",".join(f"{host}:{port}" for host, port in client.hosts)


# ---------------------------------------------------------------------------------------------
# Transactions
# ---------------------------------------------------------------------------------------------


class TransactionFailedError(KazooException):
    """A multi failed; `error` is ZooKeeper's error for op `index` (on `path`)."""

    def __init__(self, index: int, path: str | None, error: Exception, results: list[Any]) -> None:
        super().__init__(f"ZooKeeper multi failed at op {index} ({path}): {type(error).__name__}")
        self.index = index
        self.path = path
        self.error = error
        self.results = results


def first_failure(results: Sequence[Any]) -> tuple[int, Exception] | None:
    """The (index, error) that made a multi fail, or None when every op succeeded."""
    errors = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
    if not errors:
        return None
    for index, error in errors:
        if not isinstance(error, RolledBackError | RuntimeInconsistency):
            return index, error
    return errors[0]


def commit(tx: TransactionRequest) -> list[Any]:
    """Commit a kazoo transaction; return its results or raise TransactionFailedError."""
    if not tx.operations:
        return []
    return check_results(tx, tx.commit())


class PendingCommit:
    """A multi sent without waiting for its answer (`commit_async`); `result()` waits."""

    def __init__(self, tx: TransactionRequest) -> None:
        self.tx = tx
        self._async = tx.commit_async() if tx.operations else None

    def result(self) -> list[Any]:
        """The multi's results, or TransactionFailedError, as `commit` gives them."""
        if self._async is None:
            return []
        return check_results(self.tx, self._async.get())


def check_results(tx: TransactionRequest, results: list[Any]) -> list[Any]:
    failure = first_failure(results)
    if failure is None:
        return results
    index, error = failure
    op = tx.operations[index] if index < len(tx.operations) else None
    path = tx.client.unchroot(op.path) if op is not None else None
    raise TransactionFailedError(index, path, error, results)


def stat_of(result: Any) -> ZnodeStat:
    """The ZnodeStat of a setData result in a committed multi."""
    if not isinstance(result, ZnodeStat):
        raise TypeError(f"expected a ZnodeStat in the multi result, got {result!r}")
    return result


# ---------------------------------------------------------------------------------------------
# asyncio bridges
# ---------------------------------------------------------------------------------------------


async def run_blocking(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking kazoo call (or any function using one) in a worker thread."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def on_loop(loop: asyncio.AbstractEventLoop, callback: Callable[..., Any]) -> Callable[..., bool]:
    """A thread-safe function that schedules `callback(*args)` on `loop`.

    It returns False once the loop is closed (so a kazoo watch calling it can stop).
    """

    def deliver(*args: Any) -> bool:
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # loop closed
            return False
        return True

    return deliver


def add_state_listener_on_loop(
    client: KazooClient, loop: asyncio.AbstractEventLoop, callback: StateListener
) -> StateListener:
    """Deliver connection state changes to `callback` on `loop`; returns the kazoo listener
    (pass it to `client.remove_listener` to stop)."""
    deliver = on_loop(loop, callback)

    def listener(state: KazooState) -> None:
        deliver(state)

    client.add_listener(listener)
    return listener


class WatchHandle:
    """Stops a watch created by `watch_children` / `watch_data` (kazoo stops at its next event)."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()


def _guarded(handle: WatchHandle, callback: Callable[..., Any]) -> Callable[..., None]:
    def run(*args: Any) -> None:
        if not handle.cancelled:
            callback(*args)

    return run


def watch_children(
    client: KazooClient,
    path: str,
    loop: asyncio.AbstractEventLoop,
    callback: Callable[[list[str]], Any],
) -> WatchHandle:
    """Call `callback(children)` on `loop` now and on every change of `path`'s children.

    Creates `path` if missing (a kazoo ChildrenWatch silently stops on a missing node). The watch
    re-arms after reconnects and session loss. Blocking: call it from a thread or via
    `run_blocking`.
    """
    handle = WatchHandle()
    deliver = on_loop(loop, _guarded(handle, callback))
    client.ensure_path(path)

    def on_children(children: list[str]) -> bool | None:
        if handle.cancelled or not deliver(sorted(children)):
            handle.cancel()
            return False
        return None

    ChildrenWatch(client, path, on_children)
    return handle


def watch_data(
    client: KazooClient,
    path: str,
    loop: asyncio.AbstractEventLoop,
    callback: Callable[[bytes | None, ZnodeStat | None], Any],
) -> WatchHandle:
    """Call `callback(data, stat)` on `loop` now and on every change of `path` (None, None when
    it does not exist). Blocking, like `watch_children`."""
    handle = WatchHandle()
    deliver = on_loop(loop, _guarded(handle, callback))

    def on_data(data: bytes | None, stat: ZnodeStat | None) -> bool | None:
        if handle.cancelled or not deliver(data, stat):
            handle.cancel()
            return False
        return None

    DataWatch(client, path, on_data)
    return handle


# ---------------------------------------------------------------------------------------------
# Fault injection
# ---------------------------------------------------------------------------------------------


def force_session_expiry(
    victim: KazooClient, *, hosts: str | None = None, wait_new_session_s: float | None = 10.0
) -> int:
    """Expire `victim`'s session on the server (reference/zookeeper.md §2(f)); return its id.

    With `wait_new_session_s`, wait until the victim has reconnected with a new session.
    """
    client_id = victim.client_id
    if client_id is None:
        raise RuntimeError("the victim client has no live session to expire")
    intruder = KazooClient(
        hosts=hosts or hosts_of(victim),
        client_id=client_id,
        timeout=victim._session_timeout / 1000.0,
        connection_retry=dict(CONNECTION_RETRY),
    )
    intruder.start(timeout=10)
    close_client(intruder)
    old = client_id[0]
    if wait_new_session_s is not None:
        deadline = time.monotonic() + wait_new_session_s
        while session_id(victim) in (None, old):
            if time.monotonic() > deadline:
                raise TimeoutError(f"session 0x{old:x} expired but no new session came up")
            time.sleep(0.02)
    return old
