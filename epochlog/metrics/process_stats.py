"""Counts of the broker process's rarer events, kept where they happen (one process is one
broker, so one `STATS` per process): ISR shrinks and expands at the leader, requests refused as
fenced (KIP-380's STALE_BROKER_EPOCH, KIP-903's INELIGIBLE_REPLICA) by reason and API, the
controller's events (time in queue, time handling each kind, named after Kafka's
ControllerState), unclean leader elections, ZooKeeper request latency and session events, and
log flushes. Not the hot path: these are updated a few times a second at most."""

from __future__ import annotations

import time

from epochlog.metrics.timings import Timings


class ProcessStats:
    def __init__(self) -> None:
        self.isr_shrinks = 0
        self.isr_expands = 0
        # (reason: an error name, api: the request's API) -> refused requests (or partitions)
        self.fenced: dict[tuple[str, str], int] = {}
        self.controller_event_queue_time = Timings()
        # Kafka's ControllerState metric name (e.g. "LeaderElectionRateAndTimeMs") -> timings
        self.controller_states: dict[str, Timings] = {}
        self.unclean_leader_elections = 0
        self.zk_request_latency = Timings()
        self.zk_expires = 0
        self.zk_disconnects = 0
        self.zk_state = "NOT_STARTED"
        self.log_flush = Timings()

    def count_fenced(self, reason: str, api: str, count: int = 1) -> None:
        key = (reason, api)
        self.fenced[key] = self.fenced.get(key, 0) + count

    def count_isr_change(self, before: int, after: int) -> None:
        if after < before:
            self.isr_shrinks += 1
        elif after > before:
            self.isr_expands += 1

    def record_controller_event(self, state_metric: str, queued_ms: float, took_ms: float) -> None:
        now = time.perf_counter()
        self.controller_event_queue_time.record(queued_ms, now)
        timings = self.controller_states.get(state_metric)
        if timings is None:
            timings = self.controller_states[state_metric] = Timings()
        timings.record(took_ms, now)

    def record_zk_request(self, ms: float) -> None:
        self.zk_request_latency.record(ms, time.perf_counter())

    def record_log_flush(self, ms: float) -> None:
        self.log_flush.record(ms, time.perf_counter())


STATS = ProcessStats()
