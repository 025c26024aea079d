"""A StreamingQueryListener that makes a query's offsets-behind-latest visible (`lag`).

    from epochlog.spark.lag_listener import install_lag_listener
    lag = install_lag_listener(spark)                 # before or after queries start
    ...
    lag.latest(query.id)   # [{"minOffsetsBehindLatest": "95", ..., "dataLoss": "0", ...}]

Each progress event of every query in the session is read: per source, the figures Spark's
Kafka source puts in `sources[*].metrics` (computed from the progress's endOffset and
latestOffset), plus the source's data-loss counts when it reports them (failOnDataLoss=false).
The last figures of each query are kept (`latest`; `history`: the last 100 events), and
`on_lag` is called with every `SourceLag`, e.g. to publish them to a metrics system. Sources
whose offsets are not {topic: {partition: offset}} JSON get no figures. PySpark calls listeners
on its own thread, after the batch; `latest` is a snapshot.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from epochlog.spark.lag import source_metrics

log = logging.getLogger(__name__)
HISTORY = 100  # progress events kept per query


@dataclass(frozen=True)
class SourceLag:
    query_id: str
    run_id: str
    batch_id: int
    source: int  # index in the progress's sources
    description: str
    metrics: dict[str, str]


class OffsetLagListener(StreamingQueryListener):
    def __init__(self, on_lag: Callable[[SourceLag], None] | None = None) -> None:
        self.on_lag = on_lag
        self._lock = threading.Lock()
        self._latest: dict[str, list[SourceLag]] = {}
        self._history: dict[str, deque[list[SourceLag]]] = {}

    def latest(self, query_id: str) -> list[dict[str, str]]:
        """The metrics of each source in the query's last progress ([] before any)."""
        with self._lock:
            return [dict(s.metrics) for s in self._latest.get(str(query_id), [])]

    def history(self, query_id: str) -> list[SourceLag]:
        """Every source's figures of the query's last `HISTORY` progress events, oldest first."""
        with self._lock:
            return [lag for lags in self._history.get(str(query_id), ()) for lag in lags]

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        lags = [
            SourceLag(
                query_id=str(progress.id),
                run_id=str(progress.runId),
                batch_id=int(progress.batchId),
                source=i,
                description=str(source.description),
                metrics=source_metrics(source.endOffset, source.latestOffset),
            )
            for i, source in enumerate(progress.sources)
        ]
        with self._lock:
            self._latest[str(progress.id)] = lags
            self._history.setdefault(str(progress.id), deque(maxlen=HISTORY)).append(lags)
        if self.on_lag is not None:
            for lag in lags:
                try:
                    self.on_lag(lag)
                except Exception:  # a broken callback must not stop the listener bus
                    log.exception("on_lag failed for %s", lag)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


def install_lag_listener(
    spark: Any, on_lag: Callable[[SourceLag], None] | None = None
) -> OffsetLagListener:
    """Add an OffsetLagListener to the session's streaming queries and return it."""
    listener = OffsetLagListener(on_lag)
    spark.streams.addListener(listener)
    return listener
