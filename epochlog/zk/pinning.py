"""KIP-39, the pinned controller: the znodes and the small decisions around them.

An admin request writes the persistent `/admin/next_controller` = {"version":1,"brokerid":x}
(`pin_controller`; `unpin_controller` deletes it). Every broker watches it; broker x answers by
creating the ephemeral `/admin/ready_to_serve_as_controller` = x (`announce_ready_to_serve`) and
deletes it when the pin moves elsewhere or is removed (`withdraw_ready_to_serve`); which of the two
a broker should do is `ready_to_serve_action`. Brokers join an election only when the ready node
is absent or names themselves (`may_join_election`); a controller whose id differs from a ready
node resigns (`should_resign`, then `FencedWriter.resign`). Because the ready node is ephemeral, a
pinned broker that dies releases everyone to elect: the cluster is never without a controller.

The restriction is enforced by ZooKeeper, not only by each broker's view of the ready node (which
lags behind, the KIP's gotcha III): `try_elect_when_allowed` adds an `ElectionGuard` to the
election multi. For a broker that must see no ready node the guard creates and deletes the node in
the same multi, which commits only if the node does not exist; for the named broker it checks the
node's version. A guard that fails means that broker does not win, so no broker ever becomes the
controller while the ready node names another one.

`elector_steps` is the whole per-broker decision, level-triggered: from what a broker currently
sees (controller, pin, ready node, whether it acts as the controller and holds the ready node) it
lists what to do. `choose_auto_pin` is `pin --auto`: the live broker leading the fewest partitions.

The decisions are pure functions; the rest are thin blocking calls. The watches on both znodes
are in `zk.watches`.
"""

from __future__ import annotations

import contextlib
import enum
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from epochlog.protocol.messages.pin_controller import PinStatus
from epochlog.zk import controller_zk as zkc
from epochlog.zk.session import session_id
from epochlog.zk.znodes import (
    BROKER_IDS_PATH,
    NEXT_CONTROLLER_PATH,
    READY_TO_SERVE_PATH,
    decode_broker_id_node,
    encode_broker_id_node,
)


class ReadyAction(enum.Enum):
    ANNOUNCE = "announce"
    WITHDRAW = "withdraw"


def ready_to_serve_action(
    pinned: int | None, broker_id: int, holding_ready_node: bool
) -> ReadyAction | None:
    """What broker `broker_id` does with the ready node after reading /admin/next_controller."""
    if pinned == broker_id and not holding_ready_node:
        return ReadyAction.ANNOUNCE
    if pinned != broker_id and holding_ready_node:
        return ReadyAction.WITHDRAW
    return None


def may_join_election(ready_broker: int | None, broker_id: int) -> bool:
    """A broker joins the controller election only if no other broker is ready to serve."""
    return ready_broker is None or ready_broker == broker_id


def should_resign(ready_broker: int | None, controller_id: int) -> bool:
    """The controller resigns when another broker is ready to serve as controller."""
    return ready_broker is not None and ready_broker != controller_id


@dataclass(frozen=True)
class ElectionGuard:
    """Ops that make an election multi fail unless this broker may join (see the module doc).

    `ready_version` None: the ready node must be absent; otherwise it must still be at that
    version (this broker's own node)."""

    ready_version: int | None

    def add_to(self, tx: TransactionRequest) -> None:
        if self.ready_version is None:
            tx.create(READY_TO_SERVE_PATH, b"")
            tx.delete(READY_TO_SERVE_PATH)
        else:
            tx.check(READY_TO_SERVE_PATH, self.ready_version)


def election_guard(ready: tuple[int, int] | None, broker_id: int) -> ElectionGuard | None:
    """The guard for `broker_id` given the ready node (broker, version); None: may not join."""
    if ready is None:
        return ElectionGuard(None)
    ready_broker, version = ready
    return ElectionGuard(version) if ready_broker == broker_id else None


class ElectorStep(enum.Enum):
    ANNOUNCE_READY = "announce ready"  # create the ready node (this broker is pinned)
    WITHDRAW_READY = "withdraw ready"  # delete our ready node (the pin moved or went)
    STOP_CONTROLLER = "stop controller"  # /controller no longer names us: stop acting
    RESIGN = "resign"  # another broker is ready: stop acting, then delete /controller
    ELECT = "elect"  # try to become the controller


@dataclass(frozen=True)
class ElectorView:
    """What one broker's elector knows; None means the znode is absent."""

    broker_id: int
    controller: int | None  # /controller
    acting: bool  # this broker's controller is running
    pinned: int | None  # /admin/next_controller
    ready: int | None  # /admin/ready_to_serve_as_controller
    holding_ready: bool  # the ready node is this broker's (its current session's)


def elector_steps(view: ElectorView) -> list[ElectorStep]:
    """What the elector does now, in order. Run again on every change it sees."""
    me = view.broker_id
    steps: list[ElectorStep] = []
    action = ready_to_serve_action(view.pinned, me, view.holding_ready)
    ready = view.ready
    if action is ReadyAction.ANNOUNCE:
        steps.append(ElectorStep.ANNOUNCE_READY)
    elif action is ReadyAction.WITHDRAW:
        steps.append(ElectorStep.WITHDRAW_READY)
        ready = None
    if view.acting:
        if view.controller != me:
            steps.append(ElectorStep.STOP_CONTROLLER)
            if view.controller is None and may_join_election(ready, me):
                steps.append(ElectorStep.ELECT)
        elif should_resign(ready, me) and view.pinned != me:
            # (pinned to us while another's ready node lingers: it is about to be withdrawn)
            steps.append(ElectorStep.RESIGN)
    elif view.controller == me or (view.controller is None and may_join_election(ready, me)):
        # /controller naming us while we do not act: a node we still own is adopted (and
        # resigned at once if another broker is ready); one of our previous session is ignored.
        steps.append(ElectorStep.ELECT)
    return steps


def choose_auto_pin(
    live_brokers: Iterable[int], leaders: Iterable[int], controller: int | None
) -> int | None:
    """`pin --auto`: the live broker leading the fewest partitions (`leaders`: the leader of
    each partition). Ties go to the current controller (no move), then to the lowest id."""
    live = sorted(set(live_brokers))
    if not live:
        return None
    led = Counter(leader for leader in leaders if leader in live)
    fewest = min(led[b] for b in live)
    candidates = [b for b in live if led[b] == fewest]
    return controller if controller in candidates else candidates[0]


def _read_id(client: KazooClient, path: str) -> tuple[int, ZnodeStat] | None:
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return None
    return decode_broker_id_node(data, path), stat


def pin_controller(client: KazooClient, broker_id: int) -> None:
    """Write /admin/next_controller = broker_id (create or overwrite)."""
    data = encode_broker_id_node(broker_id)
    try:
        client.create(NEXT_CONTROLLER_PATH, data, makepath=True)
    except NodeExistsError:
        client.set(NEXT_CONTROLLER_PATH, data)


def unpin_controller(client: KazooClient) -> bool:
    """Delete /admin/next_controller; False when there was no pin."""
    try:
        client.delete(NEXT_CONTROLLER_PATH)
    except NoNodeError:
        return False
    return True


def read_next_controller(client: KazooClient) -> int | None:
    node = _read_id(client, NEXT_CONTROLLER_PATH)
    return node[0] if node else None


def read_ready_to_serve(client: KazooClient) -> int | None:
    node = _read_id(client, READY_TO_SERVE_PATH)
    return node[0] if node else None


def announce_ready_to_serve(client: KazooClient, broker_id: int) -> bool:
    """Create the ephemeral ready node for `broker_id`; True if it is (now) ours."""
    try:
        client.create(
            READY_TO_SERVE_PATH, encode_broker_id_node(broker_id), ephemeral=True, makepath=True
        )
        return True
    except NodeExistsError:
        node = _read_id(client, READY_TO_SERVE_PATH)
        return node is not None and node[1].ephemeralOwner == session_id(client)


def withdraw_ready_to_serve(client: KazooClient) -> bool:
    """Delete the ready node if this session owns it; True when deleted."""
    try:
        _, stat = client.get(READY_TO_SERVE_PATH)
    except NoNodeError:
        return False
    if stat.ephemeralOwner != session_id(client):
        return False
    with contextlib.suppress(NoNodeError):
        client.delete(READY_TO_SERVE_PATH, version=stat.version)
        return True
    return False


def read_ready_node(client: KazooClient) -> tuple[int, int] | None:
    """(broker id, znode version) of the ready node, or None."""
    node = _read_id(client, READY_TO_SERVE_PATH)
    return (node[0], node[1].version) if node else None


def try_elect_when_allowed(client: KazooClient, broker_id: int) -> zkc.ElectionResult | None:
    """`try_elect` with the KIP-39 guard; also adopts a /controller this session still owns."""
    guard = election_guard(read_ready_node(client), broker_id)
    if guard is not None:
        return zkc.try_elect(client, broker_id, guard=guard.add_to)
    node = zkc.read_controller_node(client)
    if node is not None and node[1].ephemeralOwner == session_id(client):
        return zkc.try_elect(client, broker_id)  # ours: adopt it, so that it can be resigned
    return None


def read_pin_status(client: KazooClient) -> PinStatus:
    pinned = read_next_controller(client)
    registered = pinned is not None and client.exists(f"{BROKER_IDS_PATH}/{pinned}") is not None
    return PinStatus(
        controller=zkc.read_controller(client),
        pinned=pinned,
        ready=read_ready_to_serve(client),
        pinned_registered=registered,
    )


def auto_pin_target(client: KazooClient) -> int | None:
    """`choose_auto_pin` over the registered brokers and the partition leaders in ZooKeeper."""
    brokers = zkc.read_brokers(client)
    states = zkc.read_all_partition_states(client, zkc.read_topics(client))
    leaders = [versioned.state.leader for versioned in states.values()]
    return choose_auto_pin(brokers, leaders, zkc.read_controller(client))
