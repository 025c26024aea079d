"""PinController (vendor API key 10039): KIP-39, pin the controller to a chosen broker.

Kafka never shipped KIP-39, so this API is epochlog's own. Its key is far above any key Kafka
uses (Kafka's are below 100; 10039 reads "KIP-39"), so a client that does not know it simply
ignores the extra line in ApiVersions. One request does one of three things (`Operation`):

- DESCRIBE: change nothing, report the controller and the pin;
- PIN: write `/admin/next_controller` = `BrokerId`, or with `Auto` the live broker leading the
  fewest partitions (BrokerId must then be -1). A broker id that is not registered is refused
  with BROKER_NOT_AVAILABLE unless `AllowAbsent`; the pin then waits for that broker;
- UNPIN: delete `/admin/next_controller` (BrokerId -1, no Auto, no AllowAbsent).

Any broker answers it. A request that breaks these rules gets INVALID_REQUEST and changes
nothing. The response always describes the state after the request: the controller, the pinned
broker, the broker holding the ready-to-serve node, and `PinState`.

A DESCRIBE with the tagged `IncludeRecentEvents` also asks for the controller's recent events
(the last events its queue handled, newest last: `ControllerEventRecord`); only the active
controller has them, and says so with `RecentEventsBrokerId` (its id; -1 from any other broker,
whose answer holds no events). The web console reads them this way (issue 22).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from epochlog.protocol.schema import F, message

API_KEY = 10039


class PinOperation(enum.IntEnum):
    DESCRIBE = 0
    PIN = 1
    UNPIN = 2


class PinState(enum.IntEnum):
    """Where a pin stands: none, in force (the pinned broker is the controller), or pending."""

    NONE = 0
    IN_FORCE = 1
    PENDING = 2  # pinned, but the controller is another broker (moving, or x is not running)

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", " ")


def pin_state(controller: int | None, pinned: int | None) -> PinState:
    if pinned is None:
        return PinState.NONE
    return PinState.IN_FORCE if controller == pinned else PinState.PENDING


@dataclass(frozen=True)
class PinStatus:
    """The controller and the pin as one broker (or ZooKeeper) sees them; None is "nobody"."""

    controller: int | None
    pinned: int | None
    ready: int | None  # the broker holding /admin/ready_to_serve_as_controller
    pinned_registered: bool = False

    @property
    def state(self) -> PinState:
        return pin_state(self.controller, self.pinned)

    def summary(self) -> str:
        """One line for people: `pinned to broker 2 (in force)`, `not pinned`, ..."""
        if self.pinned is None:
            return "not pinned"
        text = f"pinned to broker {self.pinned} ({self.state.label}"
        if self.state is PinState.PENDING:
            if not self.pinned_registered:
                text += f": broker {self.pinned} is not registered"
            elif self.ready != self.pinned:
                text += f": waiting for broker {self.pinned} to announce itself ready"
            else:
                text += f": the controller is moving to broker {self.pinned}"
        return text + ")"


@dataclass(frozen=True)
class ControllerEventRecord:
    """One event the controller's queue handled: its type, what it carried or found, when it
    started (wall clock, ms), how long its handler ran, and the error it ended with (None: ok)."""

    name: str
    detail: str
    started_ms: int
    duration_us: int
    error: str | None = None


REQUEST = message(
    "PinControllerRequest",
    api_key=API_KEY,
    valid="0",
    flexible="0+",
    fields=[
        F("Operation", "int8", "0+", about="0 describe, 1 pin, 2 unpin"),
        F("BrokerId", "int32", "0+", default=-1, about="the broker to pin; -1 with Auto"),
        F("Auto", "bool", "0+", about="pin the live broker leading the fewest partitions"),
        F("AllowAbsent", "bool", "0+", about="accept a broker id that is not registered"),
        F("IncludeRecentEvents", "bool", "0+", tag=0, default=False, ignorable=True),
    ],
)

RESPONSE = message(
    "PinControllerResponse",
    api_key=API_KEY,
    valid="0",
    flexible="0+",
    fields=[
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F("ControllerId", "int32", "0+", default=-1),
        F("PinnedBrokerId", "int32", "0+", default=-1),
        F("ReadyBrokerId", "int32", "0+", default=-1, about="holder of the ready-to-serve node"),
        F("PinnedBrokerRegistered", "bool", "0+"),
        F("PinState", "int8", "0+", about="0 none, 1 in force, 2 pending"),
        F("RecentEventsBrokerId", "int32", "0+", tag=0, default=-1, ignorable=True),
        F(
            "RecentEvents",
            "[]ControllerEvent",
            "0+",
            [
                F("Name", "string", "0+"),
                F("Detail", "string", "0+"),
                F("StartedMs", "int64", "0+"),
                F("DurationUs", "int64", "0+"),
                F("Error", "string", "0+", nullable="0+", default=None),
            ],
            tag=1,
            ignorable=True,
        ),
    ],
)
