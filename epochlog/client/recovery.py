"""Where the rebootstrap decision (KIP-899 / KIP-1102) plugs into the network client.

The network client reports to one `MetadataRecovery` object everything the decision needs, and
asks it one question; it never decides itself. The events, in the order the client sees them:

- `on_metadata_request(now_ms)`: a Metadata request is about to be sent (or would be, but no
  node is available). KIP-1102's trigger timer runs from the first of these after the last
  good response.
- `on_metadata_response(now_ms, brokers, error)`: a Metadata response arrived, listing `brokers`
  brokers, with top-level `error` (REBOOTSTRAP_REQUIRED from v13; NONE before).
- `should_rebootstrap(now_ms, any_node_available)`: asked after each of the above;
  `any_node_available` is false when every known node has no connection and is in reconnect
  backoff (KIP-899's condition). True makes the client rebootstrap: close every connection,
  forget the known brokers and start again from `bootstrap.servers`.
- `on_rebootstrap(now_ms)`: the client has just done so.

The object is plain and sans-I/O (times are passed in), so the decision is unit-tested without
sockets. `recovery_for(config)` picks the object for a client's config; until rebootstrap
itself is built it returns `NeverRebootstrap` for both strategies (with `none` that is final).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from epochlog.protocol.errors import ErrorCode


class MetadataRecovery(Protocol):
    def on_metadata_request(self, now_ms: float) -> None: ...

    def on_metadata_response(self, now_ms: float, brokers: int, error: ErrorCode) -> None: ...

    def should_rebootstrap(self, now_ms: float, any_node_available: bool) -> bool: ...

    def on_rebootstrap(self, now_ms: float) -> None: ...


class NeverRebootstrap:
    """Keeps the brokers of the last metadata forever (strategy `none`)."""

    def on_metadata_request(self, now_ms: float) -> None:
        pass

    def on_metadata_response(self, now_ms: float, brokers: int, error: ErrorCode) -> None:
        pass

    def should_rebootstrap(self, now_ms: float, any_node_available: bool) -> bool:
        return False

    def on_rebootstrap(self, now_ms: float) -> None:
        pass


def recovery_for(config: Mapping[str, Any]) -> MetadataRecovery:
    """The decision object for a client with `config` (metadata.recovery.strategy and
    metadata.recovery.rebootstrap.trigger.ms are read here, and only here)."""
    return NeverRebootstrap()
