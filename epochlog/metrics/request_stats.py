"""Kafka's RequestMetrics per API, recorded by the network server (`broker.server`).

Kafka times each request in phases: RequestQueueTimeMs (waiting for a handler thread),
LocalTimeMs (the handler), RemoteTimeMs (waiting in a purgatory for followers or for fetch
data), ThrottleTimeMs, ResponseQueueTimeMs and ResponseSendTimeMs, and TotalTimeMs. epochlog
serves every connection on one event loop, one request at a time per connection, so the phases
map onto it like this (`RequestClock` holds the instants):

- requestqueuetimems: from the request loop taking the frame to its handler starting: decoding,
  and waiting behind the connection's deferred answers. (Time in the socket's frame queue
  before that is not measured: frames are not stamped on arrival.)
- localtimems: the handler's own work. For an API answered later (Produce with acks=all,
  OffsetCommit) that is until it returns its future; for the others it is until the answer is
  ready, which for Fetch includes the long-poll wait (Kafka counts that as remote time).
- remotetimems: a deferred answer's wait for replication (acks=all, commits); 0 for the rest.
- throttletimems: the quota wait before an answer goes out (client quotas).
- responsesendtimems: encoding the answer and handing it to the transport, until its buffer
  has drained (a sendfile'd Fetch included).
- totaltimems: from taking the frame to the answer handed over.

ResponseQueueTimeMs has no counterpart (answers are not queued between threads) and is not
exported. Each record costs a few integer additions and one bisect per phase.
"""

from __future__ import annotations

from epochlog.metrics.timings import Timings
from epochlog.protocol.api import ApiKey

PHASES: tuple[str, ...] = (
    "requestqueuetimems",
    "localtimems",
    "remotetimems",
    "throttletimems",
    "responsesendtimems",
    "totaltimems",
)


def kafka_request_name(api_key: int) -> str:
    """Kafka's name of an API (ApiKeys' name: LeaderAndIsr, OffsetForLeaderEpoch, ...)."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return str(api_key)
    return "".join(part.capitalize() for part in name.split("_"))


class ApiStats:
    """One API's request counts by version and its phase timings."""

    __slots__ = ("by_version", "phases")

    def __init__(self) -> None:
        self.by_version: dict[int, int] = {}
        self.phases = [Timings() for _ in PHASES]


class RequestStats:
    """Per API key: requests by version, and the time of each phase (ms)."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiStats] = {}

    def record(
        self,
        api_key: int,
        version: int,
        started: float,
        handler_started: float,
        begun: float,
        answered: float,
        throttled_ms: float,
        done: float,
    ) -> None:
        """One request answered. Instants are `time.perf_counter()` seconds: taken from the
        queue (`started`), handler called (`handler_started`), handler returned (`begun`),
        answer ready (`answered`), handed to the transport (`done`). `begun == answered` for
        APIs whose handler runs to the answer (no remote phase)."""
        api = self.apis.get(api_key)
        if api is None:
            api = self.apis[api_key] = ApiStats()
        api.by_version[version] = api.by_version.get(version, 0) + 1
        phases = api.phases
        phases[0].record((handler_started - started) * 1000.0, done)
        phases[1].record((begun - handler_started) * 1000.0, done)
        phases[2].record((answered - begun) * 1000.0, done)
        phases[3].record(throttled_ms, done)
        phases[4].record(max(0.0, (done - answered) * 1000.0 - throttled_ms), done)
        phases[5].record((done - started) * 1000.0, done)
