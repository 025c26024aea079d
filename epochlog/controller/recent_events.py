"""The controller's recent events: the last events its queue handled, kept for operators.

How it works. `Controller._handle` calls `begin(event, now_ms)` before an event's handler runs
and `end(duration_us, error)` after it; a handler may `note(text)` what it found (a broker
change's new, dead and bounced brokers), which is added to the event's detail. Only the last
`capacity` events are kept (a ring), so the cost is a few objects per event and no growth. The
active controller serves them through PinController DESCRIBE (`IncludeRecentEvents`), which
the web console shows. No I/O here.
"""

from __future__ import annotations

import dataclasses
from collections import deque

from epochlog.protocol.messages.pin_controller import ControllerEventRecord

DEFAULT_CAPACITY = 200
# An event's own fields go into its detail only when they are small and plain (a topic name,
# a broker id); request bodies are summarised by their type's name alone.
_PLAIN = (str, int, bool, float)
_MAX_VALUE_CHARS = 80


def describe_event(event: object) -> str:
    """The event's plain fields as `name=value` pairs (empty for events that carry nothing)."""
    if not dataclasses.is_dataclass(event) or isinstance(event, type):
        return ""
    parts = []
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if isinstance(value, _PLAIN) or (
            isinstance(value, tuple | list) and all(isinstance(v, _PLAIN) for v in value)
        ):
            text = repr(value)
            if len(text) > _MAX_VALUE_CHARS:
                text = text[: _MAX_VALUE_CHARS - 3] + "..."
            parts.append(f"{f.name}={text}")
    return " ".join(parts)


class RecentEvents:
    """A ring of the last `capacity` handled events (see the module docstring)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"RecentEvents capacity must be >= 1, got {capacity}")
        self._done: deque[ControllerEventRecord] = deque(maxlen=capacity)
        self._current: tuple[str, str, int] | None = None
        self._notes: list[str] = []

    def begin(self, event: object, now_ms: int) -> None:
        self._current = (type(event).__name__, describe_event(event), now_ms)
        self._notes = []

    def note(self, text: str) -> None:
        """Add what the running handler found to its event's detail (ignored between events)."""
        if self._current is not None:
            self._notes.append(text)

    def end(self, duration_us: int, error: str | None = None) -> None:
        if self._current is None:
            return
        name, detail, started_ms = self._current
        detail = "; ".join(p for p in (detail, *self._notes) if p)
        self._done.append(ControllerEventRecord(name, detail, started_ms, duration_us, error))
        self._current = None
        self._notes = []

    def records(self) -> list[ControllerEventRecord]:
        """The kept events, oldest first."""
        return list(self._done)
