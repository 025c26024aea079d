"""How long this broker's event loop was kept from running, measured by the loop itself.

A broker serves everything from one asyncio loop, so a long synchronous step (applying a
LeaderAndIsr for thousands of partitions, a full garbage collection) stops every fetch, produce
and timer at once. `LoopStalls` is the record of such stalls, kept sans-I/O: a probe task sleeps
`interval_ms` at a time and calls `observe(now)` when it wakes; the time past the interval is a
stall (one wake-up late by less than `threshold_ms` is scheduling noise, not recorded). The record
keeps the stalls of the last `horizon_ms` as (start, end) intervals, the largest seen (`max_ms`,
the figure the benchmarks and tests report), and answers `stalled_ms(since, now)`: how much of
[since, now] the loop was blocked, counting a stall still in progress (the gap since the probe
last ran) so a check that runs right after a stall, before the probe woke, sees it too.

The leader's ISR check reads it (`isr_rules.out_of_sync_replicas`): a follower whose fetches the
leader could not process was not lagging (Kafka's lastCaughtUpTime is a leader-side clock).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

PROBE_INTERVAL_MS = 50
STALL_THRESHOLD_MS = 50
REPORT_STALL_MS = 500  # a stall this long is logged
REPORT_MAX_FROM_MS = 100  # and a new largest stall from this long (the figure benchmarks read)


def wall_ms() -> int:
    """The clock of the ISR times it is compared with (`replica_manager.now_ms`)."""
    return time.time_ns() // 1_000_000


class LoopStalls:
    """The loop's recent stalls, fed by `observe`; times in milliseconds (the ISR's clock)."""

    def __init__(
        self,
        *,
        interval_ms: int = PROBE_INTERVAL_MS,
        threshold_ms: int = STALL_THRESHOLD_MS,
        horizon_ms: int = 300_000,
        started_ms: int | None = None,
    ) -> None:
        self.interval_ms = interval_ms
        self.threshold_ms = threshold_ms
        self.horizon_ms = horizon_ms
        self.last_seen_ms: int | None = started_ms
        self.max_ms = 0
        self.stalls: deque[tuple[int, int]] = deque()  # (start, end), oldest first

    def observe(self, now_ms: int) -> int:
        """The probe woke at `now_ms`; returns the stall it measured (0: none)."""
        stall = 0
        if self.last_seen_ms is not None:
            stall = now_ms - self.last_seen_ms - self.interval_ms
            if stall >= self.threshold_ms:
                self.stalls.append((now_ms - stall, now_ms))
                self.max_ms = max(self.max_ms, stall)
            else:
                stall = 0
        self.last_seen_ms = now_ms
        while self.stalls and self.stalls[0][1] < now_ms - self.horizon_ms:
            self.stalls.popleft()
        return stall

    def stalled_ms(self, since_ms: int, now_ms: int) -> int:
        """How much of [since_ms, now_ms] the loop was blocked, including a stall in progress."""
        total = 0
        for start, end in self.stalls:
            total += max(0, min(end, now_ms) - max(start, since_ms))
        if self.last_seen_ms is not None:
            open_start = self.last_seen_ms + self.interval_ms
            if now_ms - open_start >= self.threshold_ms:
                total += max(0, now_ms - max(open_start, since_ms))
        return total


async def run_probe(
    stalls: LoopStalls,
    clock: Callable[[], int] = wall_ms,
    report_ms: int = REPORT_STALL_MS,
) -> None:
    """Measure the loop's own scheduling delay until cancelled; log stalls of `report_ms`+ and
    each new largest stall of REPORT_MAX_FROM_MS+."""
    stalls.observe(clock())
    while True:
        await asyncio.sleep(stalls.interval_ms / 1000)
        largest = stalls.max_ms
        stall = stalls.observe(clock())
        if stall >= report_ms or (stall > largest and stall >= REPORT_MAX_FROM_MS):
            log.info("event loop blocked for %d ms (max so far %d ms)", stall, stalls.max_ms)
