"""Time spent, as Kafka's Yammer histograms report it: a count and a sum since the start, and
quantiles over the recent past.

`Timings.record(ms, now_s)` finds the value's bucket (log-spaced bounds) and adds one; two
generations of buckets are kept and the older dropped every `window_s`, so quantiles cover the
last one to two windows (Kafka's histograms decay over about five minutes; the point is the
same: a p99 that reflects now, not the process's whole life). A quantile is interpolated
inside its bucket, so it is accurate to the bucket's width.
"""

from __future__ import annotations

import bisect

# Upper bounds in milliseconds; values above the last fall in an overflow bucket.
BOUNDS_MS: tuple[float, ...] = (
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
    1000.0, 2500.0, 5000.0, 10000.0, 30000.0, 60000.0,
)  # fmt: skip
# Kafka's histogram attributes (50thPercentile ... 999thPercentile) as the JMX exporter's
# quantile label values.
QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50),
    ("0.75", 0.75),
    ("0.95", 0.95),
    ("0.98", 0.98),
    ("0.99", 0.99),
    ("0.999", 0.999),
)
WINDOW_S = 60.0


class Timings:
    """Count, sum (ms) and recent quantiles of one kind of duration."""

    __slots__ = ("count", "sum_ms", "_current", "_previous", "_rotate_at", "window_s")

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.count = 0
        self.sum_ms = 0.0
        self.window_s = window_s
        self._current = [0] * (len(BOUNDS_MS) + 1)
        self._previous = [0] * (len(BOUNDS_MS) + 1)
        self._rotate_at = 0.0

    def record(self, ms: float, now_s: float) -> None:
        if now_s >= self._rotate_at:
            self._rotate(now_s)
        self.count += 1
        self.sum_ms += ms
        self._current[bisect.bisect_left(BOUNDS_MS, ms)] += 1

    def _rotate(self, now_s: float) -> None:
        # A gap of more than a window leaves nothing recent in either generation.
        stale = now_s >= self._rotate_at + self.window_s
        self._previous = [0] * len(self._current) if stale else self._current
        self._current = [0] * len(self._previous)
        self._rotate_at = now_s + self.window_s

    def recent_buckets(self, now_s: float) -> list[int]:
        """Counts per bucket over the recent generations (nothing if idle for two windows)."""
        if now_s >= self._rotate_at + self.window_s:
            return [0] * len(self._current)
        if now_s >= self._rotate_at:
            return list(self._current)
        return [a + b for a, b in zip(self._current, self._previous, strict=True)]

    def quantiles(self, now_s: float) -> list[tuple[str, float]]:
        """(label, ms) for each of `QUANTILES`; 0 when nothing was recorded recently."""
        buckets = self.recent_buckets(now_s)
        total = sum(buckets)
        return [(label, quantile_of(buckets, total, q)) for label, q in QUANTILES]


def quantile_of(buckets: list[int], total: int, q: float) -> float:
    """The q-quantile of bucketed counts, interpolated linearly inside its bucket."""
    if total == 0:
        return 0.0
    rank = q * total
    seen = 0
    for index, count in enumerate(buckets):
        if count and seen + count >= rank:
            low = BOUNDS_MS[index - 1] if index > 0 else 0.0
            high = BOUNDS_MS[index] if index < len(BOUNDS_MS) else BOUNDS_MS[-1] * 2
            return low + (high - low) * max(0.0, rank - seen) / count
        seen += count
    return BOUNDS_MS[-1] * 2
