"""Fault injection for inter-broker requests (tests only): delay, hold or drop a chosen request.

The seed races (KIP-380, KIP-903) need a request to arrive late: an AlterPartition held until a
broker has re-registered, a StopReplica delivered after a bounce. A broker started with
`epochlog.test.faults.file=<path>` consults that JSON file before every inter-broker request it
sends (controller requests, AlterPartition, replica Fetch, ControlledShutdown, the transaction
coordinator's WriteTxnMarkers). The test edits the file while the cluster runs; the broker
re-reads it when its modification time changes.

The file holds a list of rules; the first that matches a request applies:

    {"api": "ALTER_PARTITION", "source": 1, "destination": null, "action": "hold"}

- `api`: an `ApiKey` name, or `"event": NAME` for one of the controller's own events
  (`BROKER_CHANGE`; `CONTROLLER_LOAD`, a new controller's first read of ZooKeeper), which
  `before_event` delays or holds as if the controller were busy;
- `source` / `destination`: broker ids (null matches any);
- `action`: `delay` (sleep `seconds`), `drop` (never send; the sender sees a lost request),
  or `hold` (wait until the rule is gone from the file, then send);
- `count` (optional): apply to this many matching requests, then stop matching.

A rule may instead inject a storage error: `{"storage": "EIO", "broker": 4}` makes every
produce append and every probe of an offline log dir on broker 4 fail with that errno (EIO,
ENOSPC, EROFS, ...), as a failing disk would, until the rule is removed (`storage_error`).

A rule may instead jump a broker's wall clock: `{"clock_offset_ms": 3600000, "broker": 2}`
adds an hour to every reading of broker 2's data-plane clock (`WALL_CLOCK`: LogAppendTime
stamps, retention, ISR lag, reads) until the rule is removed; negative offsets go back. A thread
of the broker process re-reads the file every 50 ms (only when the config key is set), so the
clock jumps without any request to carry the news; the clock itself reads one integer.

`FaultRules.write(path, rules)` is the test side. Without the config key nothing is consulted.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochlog.protocol.api import ApiKey

POLL_S = 0.05


@dataclass
class _Rule:
    api: str | None
    action: str
    storage: str | None = None  # an errno name: an injected storage error
    broker: int | None = None  # the broker a storage error applies to (None: every broker)
    event: str | None = None
    source: int | None = None
    destination: int | None = None
    seconds: float = 0.0
    count: int | None = None
    key: str = ""  # identity of the rule in the file (its JSON), so a hold knows it is released

    def matches(self, api: ApiKey, source: int, destination: int | None) -> bool:
        return (
            self.api is not None
            and self.api == api.name
            and (self.source is None or self.source == source)
            and (self.destination is None or self.destination == destination)
            and (self.count is None or self.count > 0)
        )


@dataclass
class FaultInjector:
    """Consulted before each inter-broker request; a no-op without a rules file."""

    path: Path | None = None
    _mtime: float = -1.0
    _rules: list[_Rule] = field(default_factory=list)
    _used: dict[str, int] = field(default_factory=dict)  # rule key -> times applied

    @classmethod
    def from_config(cls, config: Any) -> FaultInjector:
        path = config["epochlog.test.faults.file"]
        if path:
            WALL_CLOCK.watch(Path(path), config["broker.id"])
        return cls(Path(path) if path else None)

    def _load(self) -> list[_Rule]:
        if self.path is None:
            return []
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            self._rules, self._mtime = [], -1.0
            return self._rules
        if mtime != self._mtime:
            try:
                raw = json.loads(self.path.read_text() or "[]")
            except (OSError, json.JSONDecodeError):
                return self._rules  # caught mid-write: keep the previous rules
            self._rules = [
                _Rule(
                    api=r.get("api"),
                    action=r.get("action", ""),
                    storage=r.get("storage"),
                    broker=r.get("broker"),
                    event=r.get("event"),
                    source=r.get("source"),
                    destination=r.get("destination"),
                    seconds=float(r.get("seconds", 0)),
                    count=r.get("count"),
                    key=json.dumps(r, sort_keys=True),
                )
                for r in raw
            ]
            for rule in self._rules:
                if rule.count is not None:
                    rule.count -= self._used.get(rule.key, 0)
            self._mtime = mtime
        return self._rules

    def _match(self, api: ApiKey, source: int, destination: int | None) -> _Rule | None:
        for rule in self._load():
            if rule.matches(api, source, destination):
                return rule
        return None

    async def before_send(self, api: ApiKey, source: int, destination: int | None) -> bool:
        """Apply the matching rule; False means drop the request."""
        if self.path is None:
            return True
        return await self._apply(self._match(api, source, destination))

    def storage_error(self, broker_id: int) -> OSError | None:
        """The storage error a rule injects on this broker now, if any."""
        if self.path is None:
            return None
        for rule in self._load():
            if rule.storage is not None and rule.broker in (None, broker_id):
                code = getattr(errno, rule.storage)
                return OSError(code, f"{os.strerror(code)} (injected by a fault rule)")
        return None

    async def before_event(self, event: str) -> None:
        """Delay or hold one of the controller's events (dropping one is not offered)."""
        if self.path is None:
            return
        rule = next(
            (r for r in self._load() if r.event == event and (r.count is None or r.count > 0)),
            None,
        )
        await self._apply(rule)

    async def _apply(self, rule: _Rule | None) -> bool:
        if rule is None:
            return True
        self._used[rule.key] = self._used.get(rule.key, 0) + 1
        if rule.count is not None:
            rule.count -= 1
        if rule.action == "drop":
            return False
        if rule.action == "delay":
            await asyncio.sleep(rule.seconds)
            return True
        if rule.action == "hold":
            while any(r.key == rule.key for r in self._load()):
                await asyncio.sleep(POLL_S)
            return True
        raise ValueError(f"unknown fault action {rule.action!r}")


NO_FAULTS = FaultInjector()


def clock_offset_ms(rules: list[dict[str, Any]], broker_ids: set[int]) -> int:
    """The offset the first clock rule for one of `broker_ids` (or for every broker) sets."""
    for rule in rules:
        if "clock_offset_ms" in rule and rule.get("broker") in (None, *broker_ids):
            return int(rule["clock_offset_ms"])
    return 0


class WallClock:
    """The data plane's wall clock in ms, plus the offset a clock rule sets (tests only).

    `offset_ms` is a plain attribute, written by the watcher thread and read by `now_ms`; with no
    rules file it stays 0 and no thread runs. One clock per process: brokers run in processes of
    their own, and an in-process harness's brokers share it (a rule then names any of them)."""

    def __init__(self) -> None:
        self.offset_ms = 0
        self._broker_ids: set[int] = set()
        self._path: Path | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def watch(self, path: Path, broker_id: int) -> None:
        with self._lock:
            self._broker_ids.add(broker_id)
            if self._path is not None:
                return
            self._path = path
        threading.Thread(target=self._poll, name="fault-clock", daemon=True).start()

    def close(self) -> None:
        """Stop watching (the offset stays as it is)."""
        self._closed.set()

    def _poll(self) -> None:
        mtime = -1
        while not self._closed.is_set():
            assert self._path is not None
            try:
                current = os.stat(self._path).st_mtime_ns
            except FileNotFoundError:
                current, self.offset_ms = -1, 0
            if current != mtime and current != -1:
                try:
                    rules = json.loads(self._path.read_text() or "[]")
                    self.offset_ms = clock_offset_ms(rules, self._broker_ids)
                    mtime = current
                except (OSError, json.JSONDecodeError, ValueError, TypeError):
                    pass  # caught mid-write, or a bad rule: try again on the next poll
            elif current == -1:
                mtime = -1
            self._closed.wait(POLL_S)


WALL_CLOCK = WallClock()


class FaultRules:
    """The test side: write the rules a running cluster's brokers will apply."""

    @staticmethod
    def write(path: str | os.PathLike[str], rules: list[dict[str, Any]]) -> None:
        for rule in rules:
            offset = rule.get("clock_offset_ms", 0)
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise ValueError(f"clock_offset_ms must be an integer number of ms: {rule!r}")
        target = Path(path)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(rules))
        os.replace(tmp, target)  # atomic: a broker never reads half a file
