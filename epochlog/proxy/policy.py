"""What the proxy does with each request and each response: sans-I/O.

Theory of operation. The proxy fronts one upstream cluster at a time. Every switch of upstream
(told over the control channel, or noticed as a new cluster id) starts a new *generation*. A
client connection belongs to the generation it was accepted in, and is paired with one upstream
connection of that generation for its whole life. A connection of an older generation is
*stale*: its client still holds metadata of a cluster the proxy no longer fronts.

Requests, by the connection's state (`decide_request`):

| connection | request                 | action                                                 |
|------------|-------------------------|--------------------------------------------------------|
| any        | a rewritten API (below) at a version epochlog does not serve | REFUSE: close |
| current    | anything else           | FORWARD to its upstream broker                         |
| stale      | Metadata v13+           | ANSWER_REBOOTSTRAP: top-level REBOOTSTRAP_REQUIRED     |
| stale      | Metadata v0-12          | CLOSE: the client cannot be told, so it must reconnect |
| stale      | anything else           | CLOSE: nothing may reach the old cluster after a switch |

REFUSE is what a broker does with a version it does not serve (`protocol.api.refusal`): the proxy
could not read the answer to rewrite it. Everything else is the upstream's to refuse, byte for
byte as the client sent it.

At the switch itself (`close_at_switch`), connections that already sent Metadata below v13 are
closed at once (KIP-1102: older clients get their connections closed, not an error they cannot
read); the others stay open until their next request, which the table above handles. Requests
already forwarded before the switch are answered normally.

Responses: Metadata, DescribeCluster and FindCoordinator carry broker addresses;
`rewrite_metadata`, `rewrite_describe_cluster` and `rewrite_find_coordinator` replace each
broker's host and port with the proxy's listener for that node id, so a client only ever sees the
proxy, its group coordinator included (FindCoordinator v0-3 name one coordinator, v4+ one per
key; an answer with an error names no broker and is left alone). `rebootstrap_required_response`
is the body the proxy answers itself: no brokers, no topics, ErrorCode 129.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, refusal
from epochlog.protocol.errors import ErrorCode

REBOOTSTRAP_MIN_METADATA_VERSION = 13
REWRITTEN_APIS = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER, ApiKey.FIND_COORDINATOR})
FIRST_BATCHED_FIND_COORDINATOR = 4  # KIP-699: Coordinators, one per key


class Action(enum.Enum):
    FORWARD = "forward"
    ANSWER_REBOOTSTRAP = "answer REBOOTSTRAP_REQUIRED"
    CLOSE = "close"  # a stale connection
    REFUSE = "close: a version the proxy cannot rewrite"


@dataclass
class ConnectionView:
    """What the policy knows about one client connection."""

    generation: int
    metadata_versions: set[int] = field(default_factory=set)

    @property
    def max_metadata_version(self) -> int:
        return max(self.metadata_versions, default=-1)


def decide_request(
    conn: ConnectionView, current_generation: int, api_key: int, version: int
) -> Action:
    """The action for one request; see the table in the module docstring."""
    if api_key in REWRITTEN_APIS and refusal(api_key, version) is not None:
        return Action.REFUSE
    if api_key == ApiKey.METADATA:
        conn.metadata_versions.add(version)
    if conn.generation == current_generation:
        return Action.FORWARD
    if api_key == ApiKey.METADATA and version >= REBOOTSTRAP_MIN_METADATA_VERSION:
        return Action.ANSWER_REBOOTSTRAP
    return Action.CLOSE


def close_at_switch(conn: ConnectionView) -> bool:
    """Close this connection as its generation ends? Yes if it is known to speak only Metadata
    older than v13 (it could never read REBOOTSTRAP_REQUIRED)."""
    return 0 <= conn.max_metadata_version < REBOOTSTRAP_MIN_METADATA_VERSION


def rebootstrap_required_response() -> Any:
    """A Metadata v13+ response telling the client to rebootstrap (KIP-1102)."""
    return m.MetadataResponse(
        throttle_time_ms=0,
        brokers=[],
        cluster_id=None,
        controller_id=-1,
        topics=[],
        error_code=ErrorCode.REBOOTSTRAP_REQUIRED,
    )


Advertise = Callable[[int], tuple[str, int]]  # node id -> the proxy's (host, port) for it


def rewrite_metadata(response: Any, advertise: Advertise) -> dict[int, tuple[str, int]]:
    """Point every broker of a Metadata response at the proxy, in place; returns the upstream
    addresses it listed, by node id."""
    upstream = {}
    for broker in response.brokers:
        upstream[broker.node_id] = (broker.host, broker.port)
        broker.host, broker.port = advertise(broker.node_id)
    return upstream


def rewrite_describe_cluster(response: Any, advertise: Advertise) -> dict[int, tuple[str, int]]:
    """The same for a DescribeCluster response (its brokers are keyed `broker_id`)."""
    upstream = {}
    for broker in response.brokers:
        upstream[broker.broker_id] = (broker.host, broker.port)
        broker.host, broker.port = advertise(broker.broker_id)
    return upstream


def find_coordinator_nodes(response: Any, version: int) -> list[int]:
    """The node ids a FindCoordinator response names (none for keys answered with an error)."""
    if version >= FIRST_BATCHED_FIND_COORDINATOR:
        return [c.node_id for c in response.coordinators if c.error_code == 0 and c.node_id >= 0]
    return [response.node_id] if response.error_code == 0 and response.node_id >= 0 else []


def rewrite_find_coordinator(
    response: Any, version: int, advertise: Advertise
) -> dict[int, tuple[str, int]]:
    """Point the coordinator(s) of a FindCoordinator response at the proxy, in place; returns
    the upstream addresses it named, by node id."""
    upstream = {}
    if version >= FIRST_BATCHED_FIND_COORDINATOR:
        for c in response.coordinators:
            if c.error_code == 0 and c.node_id >= 0:
                upstream[c.node_id] = (c.host, c.port)
                c.host, c.port = advertise(c.node_id)
    elif response.error_code == 0 and response.node_id >= 0:
        upstream[response.node_id] = (response.host, response.port)
        response.host, response.port = advertise(response.node_id)
    return upstream
