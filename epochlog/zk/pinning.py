"""KIP-39, the pinned controller: the znodes and the small decisions around them.

An admin request writes the persistent `/admin/next_controller` = {"version":1,"brokerid":x}
(`pin_controller`; `unpin_controller` deletes it). Every broker watches it; broker x answers by
creating the ephemeral `/admin/ready_to_serve_as_controller` = x (`announce_ready_to_serve`) and
deletes it when the pin moves elsewhere or is removed (`withdraw_ready_to_serve`); which of the two
a broker should do is `ready_to_serve_action`. Brokers join an election only when the ready node
is absent or names themselves (`may_join_election`); a controller whose id differs from a ready
node resigns (`should_resign`, then `FencedWriter.resign`). Because the ready node is ephemeral, a
pinned broker that dies releases everyone to elect: the cluster is never without a controller.

The decisions are pure functions; the rest are thin blocking calls. The watches on both znodes
are in `zk.watches`.
"""

from __future__ import annotations

import contextlib
import enum

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from epochlog.zk.session import session_id
from epochlog.zk.znodes import (
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
