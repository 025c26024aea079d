"""Broker registration in /brokers/ids and the broker epoch (KIP-380, step 1).

`register_broker` creates the ephemeral `/brokers/ids/<id>` and learns its czxid atomically: one
multi of (create with empty data, setData with the registration JSON at version 0); the setData
result's Stat carries the czxid, which is the broker epoch (monotonic across re-registrations,
sessions and ZooKeeper restarts). When the node already exists, `classify_existing` decides from
its ephemeralOwner: our current session (a retried multi after a connection loss) -> reuse its
czxid; our previous, expired session (ZOOKEEPER-2985 leaves such nodes visible for a while) ->
delete it and create again; anything else -> `BrokerIdInUseError`.

`BrokerRegistrar` keeps a broker registered: it registers once (optionally waiting for a node left
by a previous process of this broker to expire), then listens to the connection state. Whenever
kazoo reports CONNECTED with a session other than the one the registration belongs to (a LOST
session was replaced), a background thread registers again and hands the new, larger epoch to
`on_new_epoch` (called on that thread; asyncio brokers wrap it with `session.on_loop`). The broker
then re-runs the controller election, as Kafka's RegisterBrokerAndReelect does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)

from epochlog.zk.session import TransactionFailedError, commit, session_id, stat_of
from epochlog.zk.znodes import BrokerRegistration, broker_path, encode_broker_registration

log = logging.getLogger(__name__)


class BrokerIdInUseError(RuntimeError):
    """Another live session holds /brokers/ids/<id>."""

    def __init__(self, broker_id: int, owner_session: int) -> None:
        super().__init__(
            f"broker id {broker_id} is already registered by another live session "
            f"(0x{owner_session:x}); is another broker running with broker.id={broker_id}?"
        )
        self.broker_id = broker_id
        self.owner_session = owner_session


class ExistingRegistration(enum.Enum):
    CURRENT_SESSION = "current"  # ours, from this session: reuse its czxid
    PREVIOUS_SESSION = "previous"  # ours, from our expired session: delete and re-create
    FOREIGN = "foreign"  # someone else's (or not ephemeral): refuse


def classify_existing(
    ephemeral_owner: int, current_session: int | None, previous_session: int | None
) -> ExistingRegistration:
    """Whose is the /brokers/ids/<id> node we found when creating ours?"""
    if ephemeral_owner != 0 and ephemeral_owner == current_session:
        return ExistingRegistration.CURRENT_SESSION
    if ephemeral_owner != 0 and ephemeral_owner == previous_session:
        return ExistingRegistration.PREVIOUS_SESSION
    return ExistingRegistration.FOREIGN


def register_broker(
    client: KazooClient,
    registration: BrokerRegistration,
    *,
    previous_session_id: int | None = None,
    max_attempts: int = 5,
) -> int:
    """Create /brokers/ids/<id> for this session and return the broker epoch (its czxid)."""
    path = broker_path(registration.broker_id)
    data = encode_broker_registration(registration)
    for _ in range(max_attempts):
        tx = client.transaction()
        tx.create(path, b"", ephemeral=True)
        tx.set_data(path, data, version=0)
        try:
            return stat_of(commit(tx)[1]).czxid
        except TransactionFailedError as exc:
            if not isinstance(exc.error, NodeExistsError):
                raise
        try:
            _, stat = client.get(path)
        except NoNodeError:
            continue  # it went away meanwhile: try again
        kind = classify_existing(stat.ephemeralOwner, session_id(client), previous_session_id)
        if kind is ExistingRegistration.CURRENT_SESSION:
            return stat.czxid
        if kind is ExistingRegistration.FOREIGN:
            raise BrokerIdInUseError(registration.broker_id, stat.ephemeralOwner)
        log.info("deleting %s left by our previous session 0x%x", path, stat.ephemeralOwner)
        with contextlib.suppress(NoNodeError, BadVersionError):
            client.delete(path, version=stat.version)
    raise RuntimeError(f"could not register {path} after {max_attempts} attempts")


class BrokerRegistrar:
    """Registers a broker, remembers its epoch and re-registers after every session loss.

    `wait_for_foreign_s`: how long `register()` waits for a node held by another session to go
    away (a previous process of this broker killed less than a session timeout ago) before
    raising `BrokerIdInUseError`; None means the client's session timeout plus two seconds.
    """

    def __init__(
        self,
        client: KazooClient,
        registration: BrokerRegistration,
        *,
        on_new_epoch: Callable[[int], Any] | None = None,
        wait_for_foreign_s: float | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.client = client
        self.registration = registration
        self.on_new_epoch = on_new_epoch
        if wait_for_foreign_s is None:
            wait_for_foreign_s = client._session_timeout / 1000.0 + 2.0
        self.wait_for_foreign_s = wait_for_foreign_s
        self._clock_ms = clock_ms
        self._lock = threading.Lock()  # one registration attempt at a time
        self._changed = threading.Condition()
        self._wakeup = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self.epoch: int | None = None
        self.session_id: int | None = None  # the session our registration belongs to
        self.previous_session_id: int | None = None

    @property
    def broker_id(self) -> int:
        return self.registration.broker_id

    def register(self) -> int:
        """Register now (blocking) and start following the session; returns the epoch."""
        if self._thread is None:
            self.client.add_listener(self._on_state)
            self._thread = threading.Thread(
                target=self._run, name=f"broker-{self.broker_id}-registrar", daemon=True
            )
            self._thread.start()
        deadline = time.monotonic() + self.wait_for_foreign_s
        while True:
            try:
                with self._lock:
                    return self._register_locked()
            except BrokerIdInUseError:
                if time.monotonic() >= deadline or self._closed.is_set():
                    raise
                time.sleep(0.1)

    def wait_for_epoch_above(self, epoch: int, timeout_s: float) -> int:
        """Block until the registration's epoch exceeds `epoch`; return it (for tests, tools)."""
        with self._changed:
            if not self._changed.wait_for(
                lambda: self.epoch is not None and self.epoch > epoch, timeout_s
            ):
                raise TimeoutError(f"broker {self.broker_id} did not re-register in {timeout_s}s")
            assert self.epoch is not None
            return self.epoch

    def deregister(self) -> None:
        """Delete our /brokers/ids node now (it would vanish with the session anyway)."""
        path = broker_path(self.broker_id)
        with contextlib.suppress(NoNodeError, ConnectionLoss, SessionExpiredError):
            _, stat = self.client.get(path)
            if stat.ephemeralOwner == session_id(self.client):
                self.client.delete(path, version=stat.version)

    def close(self, *, deregister: bool = False) -> None:
        """Stop following the session (and optionally delete the registration)."""
        self._closed.set()
        self._wakeup.set()
        self.client.remove_listener(self._on_state)
        if deregister:
            self.deregister()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    # -- internals ----------------------------------------------------------------------------

    def _register_locked(self) -> int:
        current = session_id(self.client)
        if self.epoch is not None and current is not None and current == self.session_id:
            return self.epoch
        fresh = dataclasses.replace(self.registration, timestamp_ms=self._clock_ms())
        epoch = register_broker(self.client, fresh, previous_session_id=self.session_id)
        with self._changed:
            if self.session_id is not None and self.session_id != current:
                self.previous_session_id = self.session_id
            self.session_id = current
            self.epoch = epoch
            self._changed.notify_all()
        log.info(
            "broker %d registered with epoch (czxid) %d, session 0x%x",
            self.broker_id,
            epoch,
            current or 0,
        )
        return epoch

    def _on_state(self, state: KazooState) -> bool:
        # Runs on kazoo's connection thread: never block here. Returning True removes it.
        if self._closed.is_set():
            return True
        if state == KazooState.CONNECTED:
            self._wakeup.set()
        return False

    def _run(self) -> None:
        while not self._closed.is_set():
            self._wakeup.wait()
            self._wakeup.clear()
            if self._closed.is_set():
                return
            self._reregister_if_needed()

    def _reregister_if_needed(self) -> None:
        backoff = 0.1
        while not self._closed.is_set():
            current = session_id(self.client)
            if current is None or self.epoch is None or current == self.session_id:
                return  # not connected (the next CONNECTED wakes us), or nothing to do
            old_epoch = self.epoch
            try:
                with self._lock:
                    epoch = self._register_locked()
            except (ConnectionLoss, SessionExpiredError):
                return
            except Exception:  # another live broker with our id, or a ZooKeeper error
                log.exception("broker %d could not re-register; retrying", self.broker_id)
                if self._closed.wait(backoff):
                    return
                backoff = min(backoff * 2, 2.0)
                continue
            if epoch != old_epoch and self.on_new_epoch is not None:
                try:
                    self.on_new_epoch(epoch)
                except Exception:
                    log.exception("on_new_epoch callback of broker %d failed", self.broker_id)
            return
