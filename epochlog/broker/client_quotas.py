"""Client quota enforcement, as Kafka's ClientQuotaManager and DefaultQuotaCallback do it.
Sans-I/O: values and times go in, throttle times come out; the server mutes connections.

**Which quota applies.** Quotas are set per entity (see `config.client_quotas`). For a request
from (user, client id) the most specific entity that has a quota of this type wins, in Kafka's
order: users/<u>/clients/<c>, users/<u>/clients/<default>, users/<u>,
users/<default>/clients/<c>, users/<default>/clients/<default>, users/<default>,
clients/<c>, clients/<default>. The entity found decides the *metric tags* (user, client id)
the rate is kept under, so clients that share an entity share its rate: a quota on user alice
alone is one rate for all of alice's client ids (tags (alice, "")); a client-id quota is one
rate per client id across users (tags ("", c)); the <default> entities give each user or client
id its own rate at the default bound (`metric_tags`, `quota_limit`).

**The rate** is Kafka's `Rate` over a `WindowedSum` (`SampledRate`): `quota.window.num` (11)
samples of `quota.window.size.seconds` (1 s); the rate is the sum of the live samples divided
by the time since the oldest sample started, counted as at least (samples - 1) whole windows,
so a burst after a quiet spell is measured over 10 s, not over its own few milliseconds.

**Throttle time** (KIP-13/KIP-219): a recorded value that takes the rate O above the bound T
gives X = (O - T) / T * W ms, W the window the rate was measured over: the delay after which,
with nothing more recorded, the rate is back at T. Produce records the request's size when it
is answered; Fetch the response's size, and when that throttles, the bytes are unrecorded and
the client gets an empty response (Kafka does both). Replication fetches are not counted.
Every connection's user is ANONYMOUS until epochlog has authentication (Kafka's principal for
PLAINTEXT).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from epochlog.config.client_quotas import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    client_entity,
    quota_values,
    user_client_entity,
    user_entity,
)

ANONYMOUS_USER = "ANONYMOUS"  # KafkaPrincipal.ANONYMOUS's name
DEFAULT_WINDOW_NUM = 11  # quota.window.num
DEFAULT_WINDOW_SIZE_SECONDS = 1  # quota.window.size.seconds
INACTIVE_RATE_EXPIRATION_MS = 3600 * 1000  # Kafka drops a client's sensors after an idle hour


class QuotaType(enum.Enum):
    PRODUCE = PRODUCER_BYTE_RATE
    FETCH = CONSUMER_BYTE_RATE
    REQUEST = REQUEST_PERCENTAGE  # stored and described, not enforced yet
    CONTROLLER_MUTATION = CONTROLLER_MUTATION_RATE  # stored and described, not enforced yet


MetricTags = tuple[str, str]  # (user, client id); "" where the entity has no such part


@dataclass
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0
    events: int = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value, self.events = 0.0, 0


@dataclass
class SampledRate:
    """Kafka's Rate over a WindowedSum (SampledStat keeps samples + 1 windows)."""

    samples: int = DEFAULT_WINDOW_NUM
    window_ms: int = DEFAULT_WINDOW_SIZE_SECONDS * 1000
    _samples: list[_Sample] = field(default_factory=list)
    _current: int = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Rate.windowSize)."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        oldest = min(s.start_ms for s in self._samples)
        elapsed = now_ms - oldest
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return elapsed

    def measure(self, now_ms: int) -> float:
        """Per second."""
        window = self.window_size_ms(now_ms)  # purges first, as Kafka's measure does
        total = sum(s.value for s in self._samples)
        return total / (window / 1000.0)

    def last_event_ms(self) -> int:
        return max((s.last_event_ms for s in self._samples), default=0)


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """X = (O - T) / T * W, rounded as Java's Math.round (half up)."""
    return int(math.floor((rate - bound) / bound * window_ms + 0.5))


class ClientQuotaManager:
    """The quotas of one type (produce or fetch bytes, ...) and the rates kept under them."""

    def __init__(
        self,
        quota_type: QuotaType,
        *,
        window_num: int = DEFAULT_WINDOW_NUM,
        window_size_seconds: int = DEFAULT_WINDOW_SIZE_SECONDS,
    ) -> None:
        self.quota_type = quota_type
        self.window_num = window_num
        self.window_ms = window_size_seconds * 1000
        self.overrides: dict[QuotaEntity, float] = {}
        self.rates: dict[MetricTags, SampledRate] = {}
        self._next_expiry_ms = 0

    @property
    def enabled(self) -> bool:
        return bool(self.overrides)

    def update(self, entity: QuotaEntity, bound: float | None) -> None:
        """Set (or remove, bound None) the entity's quota of this type."""
        if bound is None:
            self.overrides.pop(entity, None)
        else:
            self.overrides[entity] = bound

    def metric_tags(self, user: str, client_id: str) -> MetricTags:
        """Which rate a request counts in: DefaultQuotaCallback.quotaMetricTags."""
        o = self.overrides
        if user_client_entity(user, client_id) in o or user_client_entity(user, None) in o:
            return (user, client_id)
        if user_entity(user) in o:
            return (user, "")
        if user_client_entity(None, client_id) in o or user_client_entity(None, None) in o:
            return (user, client_id)
        if user_entity(None) in o:
            return (user, "")
        return ("", client_id)

    def quota_limit(self, tags: MetricTags) -> float | None:
        """The bound for a rate's tags (DefaultQuotaCallback.quotaLimit); None: unlimited."""
        user, client_id = tags
        o = self.overrides
        candidates: list[QuotaEntity]
        if user and client_id:
            candidates = [
                user_client_entity(user, client_id),
                user_client_entity(user, None),
                user_client_entity(None, client_id),
                user_client_entity(None, None),
            ]
        elif user:
            candidates = [user_entity(user), user_entity(None)]
        elif client_id:
            candidates = [client_entity(client_id), client_entity(None)]
        else:
            return None
        for entity in candidates:
            if entity in o:
                return o[entity]
        return None

    def quota(self, user: str, client_id: str) -> float | None:
        """The bound that applies to (user, client id); None: unlimited."""
        return self.quota_limit(self.metric_tags(user, client_id))

    def _rate(self, tags: MetricTags) -> SampledRate:
        rate = self.rates.get(tags)
        if rate is None:
            rate = self.rates[tags] = SampledRate(self.window_num, self.window_ms)
        return rate

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` for the client; the throttle time in ms (0: within its quota)."""
        if not self.enabled:
            return 0
        if now_ms >= self._next_expiry_ms:  # a look at idle rates once a minute at most
            self.expire_idle(now_ms)
            self._next_expiry_ms = now_ms + 60_000
        tags = self.metric_tags(user, client_id)
        rate = self._rate(tags)
        rate.record(value, now_ms)
        bound = self.quota_limit(tags)
        if bound is None:
            return 0
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        return throttle_time_ms(observed, bound, rate.window_size_ms(now_ms))

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch is answered empty)."""
        if self.enabled:
            self._rate(self.metric_tags(user, client_id)).record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most one request may carry without being throttled for sure
        (getMaxValueInQuotaWindow): bound x (samples - 1) windows; None: unlimited."""
        if not self.enabled:
            return None
        bound = self.quota(user, client_id)
        if bound is None:
            return None
        return bound * (self.window_num - 1) * self.window_ms / 1000.0

    def expire_idle(self, now_ms: int) -> None:
        """Forget rates idle for an hour (Kafka's inactive sensor expiration)."""
        for tags in [
            t
            for t, r in self.rates.items()
            if now_ms - r.last_event_ms() >= INACTIVE_RATE_EXPIRATION_MS
        ]:
            del self.rates[tags]


class ClientQuotas:
    """All quota types of a broker, fed with the stored entity configs."""

    def __init__(
        self,
        *,
        window_num: int = DEFAULT_WINDOW_NUM,
        window_size_seconds: int = DEFAULT_WINDOW_SIZE_SECONDS,
    ) -> None:
        self.managers = {
            t: ClientQuotaManager(t, window_num=window_num, window_size_seconds=window_size_seconds)
            for t in QuotaType
        }
        self.produce = self.managers[QuotaType.PRODUCE]
        self.fetch = self.managers[QuotaType.FETCH]

    def apply_entity_config(self, entity: QuotaEntity, config: Mapping[str, str]) -> None:
        """The entity's stored config is now `config`: every quota type takes its key's value,
        or drops the entity's quota if the key is gone (Kafka's Client/UserConfigHandler)."""
        values = quota_values(config)
        for quota_type, manager in self.managers.items():
            manager.update(entity, values.get(quota_type.value))


# KIP-219: from these versions on the client holds back by itself for the throttle time it is
# told (AbstractResponse.shouldClientThrottle), so the broker answers at once and then reads
# nothing from the connection for that time; an older client is throttled by a delayed answer.
_CLIENT_THROTTLES_FROM = {0: 6, 1: 8}  # Produce v6+, Fetch v8+


def client_throttles_itself(api_key: int, version: int) -> bool:
    return version >= _CLIENT_THROTTLES_FROM.get(api_key, 0)
