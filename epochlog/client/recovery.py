"""The rebootstrap decision (KIP-899 / KIP-1102): when to drop the known brokers and start again
from `bootstrap.servers`. Sans-I/O: times are passed in, nothing here touches a socket.

The network client reports to one `MetadataRecovery` object everything the decision needs, and
asks it one question; it never decides itself. The events, in the order the client sees them:

- `on_metadata_request(now_ms)`: a Metadata request is about to be sent (or would be, but no
  node is available). KIP-1102's trigger timer runs from the first of these after the last
  good response (librdkafka 2.12 fixed its timer to run the same way).
- `on_metadata_response(now_ms, brokers, error)`: a Metadata response arrived, listing `brokers`
  brokers, with top-level `error` (REBOOTSTRAP_REQUIRED from v13; NONE before).
- `should_rebootstrap(now_ms, any_node_available, using_bootstrap)`: asked after each of the
  above; `any_node_available` is false when every known node has no connection and is in
  reconnect backoff (KIP-899's condition); `using_bootstrap` is true while the known nodes are
  the bootstrap servers themselves (no metadata yet, or just rebootstrapped).
- `on_rebootstrap(now_ms)`: the client has just rebootstrapped.
- `time_to_trigger_ms(now_ms)`: how long a metadata attempt under way may take before the
  trigger fires; the client bounds each attempt by it, so a connection that hangs (KIP-1102's
  case: setup timeouts of 10-30 s) cannot hold the decision back.

`Rebootstrap` (strategy `rebootstrap`, the default since Kafka 4.0) decides, in this order:

| condition                                                         | reason             |
|-------------------------------------------------------------------|--------------------|
| the last response carried top-level REBOOTSTRAP_REQUIRED (129)    | REQUIRED           |
| no known broker available, and the known nodes are not bootstrap  | NO_NODE_AVAILABLE  |
| first attempt since the last good response > trigger.ms ago       | TRIGGER_ELAPSED    |

A good response is one without a top-level error that lists at least one broker: it clears the
timer and any REBOOTSTRAP_REQUIRED. Rebootstrapping clears the request and restarts the timer at
that moment, so bootstrap servers that do not answer either are given trigger.ms before the next
attempt (which resolves their names again). NO_NODE_AVAILABLE is not applied to the bootstrap
servers themselves: they are what a rebootstrap would return to, and forgetting their reconnect
backoff would only turn it into a tight reconnect loop.

`NeverRebootstrap` (strategy `none`) keeps the brokers of the last metadata forever, whatever it
is told. `recovery_for(config)` picks the object for a client's config.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any, Protocol

from epochlog.protocol.errors import ErrorCode


class RebootstrapReason(enum.Enum):
    REQUIRED = "a metadata response said REBOOTSTRAP_REQUIRED"
    NO_NODE_AVAILABLE = "no known broker is available"
    TRIGGER_ELAPSED = "no metadata for metadata.recovery.rebootstrap.trigger.ms"


class MetadataRecovery(Protocol):
    def on_metadata_request(self, now_ms: float) -> None: ...

    def on_metadata_response(self, now_ms: float, brokers: int, error: ErrorCode) -> None: ...

    def should_rebootstrap(
        self, now_ms: float, any_node_available: bool, using_bootstrap: bool = False
    ) -> bool: ...

    def on_rebootstrap(self, now_ms: float) -> None: ...

    def time_to_trigger_ms(self, now_ms: float) -> float: ...


class NeverRebootstrap:
    """Keeps the brokers of the last metadata forever (strategy `none`)."""

    reason: RebootstrapReason | None = None

    def on_metadata_request(self, now_ms: float) -> None:
        pass

    def on_metadata_response(self, now_ms: float, brokers: int, error: ErrorCode) -> None:
        pass

    def should_rebootstrap(
        self, now_ms: float, any_node_available: bool, using_bootstrap: bool = False
    ) -> bool:
        return False

    def on_rebootstrap(self, now_ms: float) -> None:
        pass

    def time_to_trigger_ms(self, now_ms: float) -> float:
        return math.inf


class Rebootstrap:
    """Strategy `rebootstrap`; see the module docstring for the table it decides by."""

    def __init__(self, trigger_ms: float) -> None:
        self.trigger_ms = trigger_ms
        self.first_attempt_ms: float | None = None  # first request since the last good response
        self.required = False  # the last response said REBOOTSTRAP_REQUIRED
        self.reason: RebootstrapReason | None = None  # why the last `True` was answered

    def on_metadata_request(self, now_ms: float) -> None:
        if self.first_attempt_ms is None:
            self.first_attempt_ms = now_ms

    def on_metadata_response(self, now_ms: float, brokers: int, error: ErrorCode) -> None:
        if error is ErrorCode.REBOOTSTRAP_REQUIRED:
            self.required = True
        elif error is ErrorCode.NONE and brokers > 0:
            self.first_attempt_ms = None
            self.required = False

    def decide(
        self, now_ms: float, any_node_available: bool, using_bootstrap: bool = False
    ) -> RebootstrapReason | None:
        """Why the client should rebootstrap now, or None."""
        if self.required:
            return RebootstrapReason.REQUIRED
        if not any_node_available and not using_bootstrap:
            return RebootstrapReason.NO_NODE_AVAILABLE
        if self.first_attempt_ms is not None and now_ms - self.first_attempt_ms >= self.trigger_ms:
            return RebootstrapReason.TRIGGER_ELAPSED
        return None

    def should_rebootstrap(
        self, now_ms: float, any_node_available: bool, using_bootstrap: bool = False
    ) -> bool:
        self.reason = self.decide(now_ms, any_node_available, using_bootstrap)
        return self.reason is not None

    def on_rebootstrap(self, now_ms: float) -> None:
        self.required = False
        self.first_attempt_ms = now_ms

    def time_to_trigger_ms(self, now_ms: float) -> float:
        if self.first_attempt_ms is None:
            return self.trigger_ms
        return max(0.0, self.first_attempt_ms + self.trigger_ms - now_ms)


def recovery_for(config: Mapping[str, Any]) -> MetadataRecovery:
    """The decision object for a client with `config` (metadata.recovery.strategy and
    metadata.recovery.rebootstrap.trigger.ms are read here, and only here)."""
    if config["metadata.recovery.strategy"] == "none":
        return NeverRebootstrap()
    return Rebootstrap(config["metadata.recovery.rebootstrap.trigger.ms"])
