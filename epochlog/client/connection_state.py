"""Per-broker connection state, reconnect backoff and "which node next": sans-I/O.

Theory of operation. Everything that decides when the client may (re)connect to a broker lives
in this file, and nothing here touches a socket or reads a clock: every method takes `now` in
milliseconds, and randomness (jitter, the start of the least-loaded scan) comes from a function
the caller passes in. `network.NetworkClient` is the I/O shell that feeds it events and asks it
questions; tests drive it with plain numbers.

Each node is in one of four states:

    DISCONNECTED  no connection, and a new attempt is allowed now
    CONNECTING    an attempt is under way (TCP connect + ApiVersions)
    READY         connected and negotiated; requests may be sent
    BACKOFF       no connection, and no attempt is allowed before `backoff_until_ms`

Events move a node between states along the table `TRANSITIONS`; an event the table does not
list for the current state raises `InvalidTransition`, naming the node, event and state. The one
transition that no event causes is time: BACKOFF becomes DISCONNECTED once `now` reaches
`backoff_until_ms` (applied lazily by `state()`).

Backoff follows Kafka's ClusterConnectionStates: after every failed attempt or lost connection the
wait is `reconnect.backoff.ms * 2**failures` with +-20% jitter, capped at
`reconnect.backoff.max.ms`; `failures` resets when a connection becomes READY. The connection
setup timeout grows the same way from `socket.connection.setup.timeout.ms` to its max with each
consecutive failed attempt. A node is *unavailable* (KIP-899) when it has no connection and is
in BACKOFF; `least_loaded_node` returns None exactly when every known node is unavailable, the
condition the rebootstrap decision looks at.
"""

from __future__ import annotations

import enum
import math
import random as _random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


class ConnState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    READY = "ready"
    BACKOFF = "backoff"


class ConnEvent(enum.Enum):
    CONNECT = "connect"  # an attempt starts
    ESTABLISHED = "established"  # socket up and ApiVersions negotiated
    FAILED = "failed"  # the attempt failed or timed out
    LOST = "lost"  # a READY connection broke (peer closed, request timed out, bad frame)
    CLOSED = "closed"  # we closed it on purpose (shutdown, rebootstrap, broker left metadata)


_S, _E = ConnState, ConnEvent
TRANSITIONS: dict[ConnState, dict[ConnEvent, ConnState]] = {
    _S.DISCONNECTED: {_E.CONNECT: _S.CONNECTING, _E.CLOSED: _S.DISCONNECTED},
    _S.CONNECTING: {_E.ESTABLISHED: _S.READY, _E.FAILED: _S.BACKOFF, _E.CLOSED: _S.DISCONNECTED},
    _S.READY: {_E.LOST: _S.BACKOFF, _E.CLOSED: _S.DISCONNECTED},
    _S.BACKOFF: {_E.CLOSED: _S.DISCONNECTED},
    # and, by time alone: BACKOFF -> DISCONNECTED when now >= backoff_until_ms
}


class InvalidTransition(Exception):
    def __init__(self, node_id: int, event: ConnEvent, state: ConnState) -> None:
        self.node_id, self.event, self.state = node_id, event, state
        super().__init__(f"node {node_id}: event {event.value} is not valid in state {state.value}")


class ExponentialBackoff:
    """Kafka's ExponentialBackoff: initial * 2**attempts, +-jitter, capped at `maximum` (ms)."""

    def __init__(
        self,
        initial_ms: float,
        maximum_ms: float,
        *,
        multiplier: float = 2.0,
        jitter: float = 0.2,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.initial_ms = initial_ms
        self.maximum_ms = max(maximum_ms, initial_ms)
        self.multiplier = multiplier
        self.jitter = jitter
        self._random = random
        if self.maximum_ms > initial_ms:
            self._exp_max = math.log(self.maximum_ms / max(initial_ms, 1)) / math.log(multiplier)
        else:
            self._exp_max = 0.0

    def backoff(self, attempts: int) -> float:
        if self._exp_max == 0:
            return self.initial_ms
        term = self.initial_ms * self.multiplier ** min(attempts, self._exp_max)
        factor = 1.0 + self.jitter * (2 * self._random() - 1) if self.jitter else 1.0
        return min(term * factor, self.maximum_ms)


@dataclass(slots=True)
class NodeConnectionState:
    node_id: int
    state: ConnState = ConnState.DISCONNECTED
    failures: int = 0  # failed attempts and lost connections since the last READY
    failed_connects: int = 0  # consecutive failed attempts (grows the setup timeout)
    attempt_started_ms: float = 0.0
    backoff_until_ms: float = 0.0
    setup_timeout_ms: float = 0.0


class ConnectionStates:
    """The state of every node the client has talked to; see the module docstring."""

    def __init__(
        self,
        reconnect_backoff_ms: float,
        reconnect_backoff_max_ms: float,
        setup_timeout_ms: float,
        setup_timeout_max_ms: float,
        *,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.reconnect_backoff = ExponentialBackoff(
            reconnect_backoff_ms, reconnect_backoff_max_ms, random=random
        )
        self.setup_timeout = ExponentialBackoff(
            setup_timeout_ms, setup_timeout_max_ms, random=random
        )
        self._nodes: dict[int, NodeConnectionState] = {}

    def _node(self, node_id: int) -> NodeConnectionState:
        node = self._nodes.get(node_id)
        if node is None:
            node = self._nodes[node_id] = NodeConnectionState(node_id)
        return node

    def _fire(self, node: NodeConnectionState, event: ConnEvent, now: float) -> None:
        current = self._state(node, now)
        target = TRANSITIONS[current].get(event)
        if target is None:
            raise InvalidTransition(node.node_id, event, current)
        node.state = target

    @staticmethod
    def _state(node: NodeConnectionState, now: float) -> ConnState:
        if node.state is ConnState.BACKOFF and now >= node.backoff_until_ms:
            node.state = ConnState.DISCONNECTED
        return node.state

    # ---------------------------------------------------------------- queries

    def state(self, node_id: int, now: float) -> ConnState:
        node = self._nodes.get(node_id)
        return ConnState.DISCONNECTED if node is None else self._state(node, now)

    def can_connect(self, node_id: int, now: float) -> bool:
        return self.state(node_id, now) is ConnState.DISCONNECTED

    def is_ready(self, node_id: int, now: float) -> bool:
        return self.state(node_id, now) is ConnState.READY

    def is_unavailable(self, node_id: int, now: float) -> bool:
        """KIP-899's 'unavailable': no connection, and reconnecting is not allowed yet."""
        return self.state(node_id, now) is ConnState.BACKOFF

    def connection_delay(self, node_id: int, now: float) -> float:
        """Ms until an attempt may start: 0 if allowed now, the rest of the backoff, or infinity
        while connecting or ready (nothing to wait for)."""
        state = self.state(node_id, now)
        if state is ConnState.DISCONNECTED:
            return 0.0
        if state is ConnState.BACKOFF:
            return self._nodes[node_id].backoff_until_ms - now
        return math.inf

    def setup_timeout_ms(self, node_id: int) -> float:
        """The timeout of the attempt under way (or the next one)."""
        node = self._node(node_id)
        if node.setup_timeout_ms == 0:
            node.setup_timeout_ms = self.setup_timeout.backoff(node.failed_connects)
        return node.setup_timeout_ms

    def is_setup_timed_out(self, node_id: int, now: float) -> bool:
        node = self._nodes.get(node_id)
        return (
            node is not None
            and node.state is ConnState.CONNECTING
            and now - node.attempt_started_ms >= self.setup_timeout_ms(node_id)
        )

    def all_unavailable(self, node_ids: Sequence[int], now: float) -> bool:
        return all(self.is_unavailable(n, now) for n in node_ids)

    # ---------------------------------------------------------------- events

    def connecting(self, node_id: int, now: float) -> float:
        """An attempt starts; returns its setup timeout in ms."""
        node = self._node(node_id)
        self._fire(node, ConnEvent.CONNECT, now)
        node.attempt_started_ms = now
        node.setup_timeout_ms = self.setup_timeout.backoff(node.failed_connects)
        return node.setup_timeout_ms

    def established(self, node_id: int, now: float) -> None:
        node = self._node(node_id)
        self._fire(node, ConnEvent.ESTABLISHED, now)
        node.failures = 0
        node.failed_connects = 0
        node.setup_timeout_ms = 0.0

    def failed(self, node_id: int, now: float) -> float:
        """The attempt failed or timed out; returns the backoff in ms."""
        node = self._node(node_id)
        self._fire(node, ConnEvent.FAILED, now)
        node.failed_connects += 1
        node.setup_timeout_ms = 0.0
        return self._start_backoff(node, now)

    def lost(self, node_id: int, now: float) -> float:
        """A ready connection broke; returns the backoff in ms."""
        node = self._node(node_id)
        self._fire(node, ConnEvent.LOST, now)
        return self._start_backoff(node, now)

    def closed(self, node_id: int, now: float) -> None:
        """We closed the connection on purpose: no backoff, and the history is forgotten."""
        node = self._nodes.get(node_id)
        if node is not None:
            self._fire(node, ConnEvent.CLOSED, now)
            del self._nodes[node_id]

    def forget(self, node_id: int) -> None:
        """Drop a node that is no longer part of the cluster (its state, backoff and all)."""
        self._nodes.pop(node_id, None)

    def _start_backoff(self, node: NodeConnectionState, now: float) -> float:
        delay = self.reconnect_backoff.backoff(node.failures)
        node.failures += 1
        node.backoff_until_ms = now + delay
        return delay


def least_loaded_node(
    node_ids: Sequence[int],
    states: ConnectionStates,
    in_flight: Mapping[int, int],
    now: float,
    start: int = 0,
) -> int | None:
    """Kafka's leastLoadedNode: scanning from `start` (randomised by the caller so load spreads),
    a READY node with no request in flight at once; else the READY node with the fewest in flight;
    else a CONNECTING node; else one that may connect now. None when every node is in BACKOFF
    (KIP-899: no node is available), or there are no nodes."""
    best_ready: int | None = None
    fewest = math.inf
    connecting: int | None = None
    can_connect: int | None = None
    count = len(node_ids)
    for i in range(count):
        node = node_ids[(start + i) % count]
        state = states.state(node, now)
        if state is ConnState.READY:
            pending = in_flight.get(node, 0)
            if pending == 0:
                return node
            if pending < fewest:
                best_ready, fewest = node, pending
        elif state is ConnState.CONNECTING:
            if connecting is None:
                connecting = node
        elif state is ConnState.DISCONNECTED and can_connect is None:
            can_connect = node
    for choice in (best_ready, connecting, can_connect):
        if choice is not None:
            return choice
    return None
