"""Incremental fetch sessions (KIP-227): both ends, without I/O.

A Fetch (v7+) names a session by (SessionId, SessionEpoch). On the broker (Kafka's FetchManager
and FetchSessionCache), `FetchSessionCache.new_context` turns them into a `FetchContext`:

| SessionId | SessionEpoch | context                                                       |
|-----------|--------------|---------------------------------------------------------------|
| any       | -1 (final)   | SESSIONLESS: close the named session; a full fetch, id 0 back |
| any       | 0 (initial)  | FULL: close the named session; answer all, then try to cache  |
|           |              | the partitions as a new session (its id in the answer)        |
| 0         | > 0          | ERROR FETCH_SESSION_ID_NOT_FOUND                              |
| unknown   | > 0          | ERROR FETCH_SESSION_ID_NOT_FOUND                              |
| known     | != expected  | ERROR INVALID_FETCH_SESSION_EPOCH                             |
| known     | expected     | INCREMENTAL: the request's partitions add to or update the    |
|           |              | session's, ForgottenTopicsData removes; the session's         |
|           |              | partitions are read, and only those with something new        |
|           |              | (records, an error, a moved HW / LSO / log start, a diverging |
|           |              | epoch) are answered. A session left empty is dropped (id 0).  |

A session switching between topic names (< v13) and topic ids is FETCH_SESSION_TOPIC_ID_ERROR.
The cache holds at most `max.incremental.fetch.session.cache.slots` sessions. A new one takes a
free slot, else evicts the least recently used session if idle for more than 120 s, else the
smallest evictable session whose key (follower?, partition count, id) is below the newcomer's:
a follower's session is evictable by a consumer's only once older than 120 s. Answered partitions
that carried records move to the end of the session so that later ones get their turn first.

On the fetching side (Kafka's FetchSessionHandler), `FetchSessionBuilder` decides what a request
carries: all wanted partitions when starting a session, else only those whose fetch parameters
changed, with the ones no longer wanted forgotten; `on_response` / `on_error` move it on.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, NamedTuple, TypeVar

from epochlog.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000  # Kafka's min.incremental.fetch.session.eviction.ms (not a broker config)
_INT32_MAX = 2**31 - 1

# (topic id or None, topic name, partition): ids from Fetch v13, names below it.
SessionKey = tuple[uuid.UUID | None, str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch` (Kafka's FetchMetadata.nextEpoch: wraps to 1)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


class PartitionParams(NamedTuple):
    """What a fetcher asks of one partition; a session remembers the last it was sent. (Named
    tuples: built per partition per Fetch, several times cheaper than frozen dataclasses.)"""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


class PartitionAnswer(NamedTuple):
    """What the broker found for one partition: compared with what the session last sent."""

    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records_size: int
    diverging: bool = False


@dataclass(slots=True)
class CachedPartition:
    params: PartitionParams
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def must_answer(self, answer: PartitionAnswer) -> bool:
        """Whether an incremental answer carries this partition; records what it says."""
        changed = (
            answer.records_size > 0
            or answer.error is not ErrorCode.NONE
            or answer.diverging
            or answer.high_watermark != self.high_watermark
            or answer.last_stable_offset != self.last_stable_offset
            or answer.log_start_offset != self.log_start_offset
        )
        self.high_watermark = answer.high_watermark
        self.last_stable_offset = answer.last_stable_offset
        self.log_start_offset = answer.log_start_offset
        return changed


@dataclass(eq=False, slots=True)
class FetchSession:
    id: int
    privileged: bool  # a follower's
    uses_topic_ids: bool
    partitions: dict[SessionKey, CachedPartition]
    creation_ms: int
    last_used_ms: int
    epoch: int = 1  # the epoch the next incremental request must carry

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, len(self.partitions), self.id)


class ContextKind(Enum):
    SESSIONLESS = "sessionless"
    FULL = "full"
    INCREMENTAL = "incremental"
    ERROR = "error"


@dataclass(slots=True)
class FetchContext:
    """How one Fetch is answered: which partitions to read, in what order."""

    kind: ContextKind
    partitions: list[tuple[SessionKey, PartitionParams]] = field(default_factory=list)
    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None
    privileged: bool = False
    uses_topic_ids: bool = False


class FetchSessionCache:
    """The broker's fetch sessions (Kafka's FetchSessionCache and FetchManager.newContext)."""

    def __init__(
        self,
        max_slots: int = 1000,
        eviction_ms: int = EVICTION_MS,
        rng: random.Random | None = None,
    ) -> None:
        if max_slots < 0:
            raise ValueError(f"max.incremental.fetch.session.cache.slots {max_slots} is negative")
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def new_context(
        self,
        *,
        session_id: int,
        epoch: int,
        partitions: list[tuple[SessionKey, PartitionParams]],
        forgotten: Iterable[SessionKey],
        privileged: bool,
        uses_topic_ids: bool,
        now_ms: int,
    ) -> FetchContext:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)  # a full fetch closes the session it names
            kind = ContextKind.SESSIONLESS if epoch == FINAL_EPOCH else ContextKind.FULL
            return FetchContext(
                kind, partitions, privileged=privileged, uses_topic_ids=uses_topic_ids
            )
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext(ContextKind.ERROR, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(ContextKind.ERROR, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(ContextKind.ERROR, error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        cached = session.partitions
        for key, params in partitions:
            entry = cached.get(key)
            if entry is None:
                cached[key] = CachedPartition(params)
            else:
                entry.params = params
        for key in forgotten:
            cached.pop(key, None)
        if not cached:
            del self._sessions[session.id]
            return FetchContext(ContextKind.SESSIONLESS, partitions, privileged=privileged)
        session.last_used_ms = now_ms
        session.epoch = next_epoch(session.epoch)
        return FetchContext(
            ContextKind.INCREMENTAL,
            [(key, entry.params) for key, entry in cached.items()],
            session=session,
            privileged=privileged,
            uses_topic_ids=uses_topic_ids,
        )

    def answer(
        self, context: FetchContext, answers: list[PartitionAnswer], now_ms: int
    ) -> tuple[int, list[int]]:
        """The answer's SessionId and which of the read partitions (indexes into
        `context.partitions`) it carries; a full fetch may open a session here."""
        if context.kind is ContextKind.INCREMENTAL:
            session = context.session
            assert session is not None
            carried: list[int] = []
            moved: list[SessionKey] = []
            for index, ((key, _), answer) in enumerate(
                zip(context.partitions, answers, strict=True)
            ):
                entry = session.partitions.get(key)
                if entry is None or entry.must_answer(answer):
                    carried.append(index)
                    if answer.records_size > 0 and entry is not None:
                        moved.append(key)
            for key in moved:  # records were sent: the others come first next time
                session.partitions[key] = session.partitions.pop(key)
            return session.id, carried
        everything = list(range(len(context.partitions)))
        if context.kind is not ContextKind.FULL or not context.partitions:
            return INVALID_SESSION_ID, everything
        session = self._maybe_create(context, answers, now_ms)
        return (INVALID_SESSION_ID if session is None else session.id), everything

    def _maybe_create(
        self, context: FetchContext, answers: list[PartitionAnswer], now_ms: int
    ) -> FetchSession | None:
        newcomer = (context.privileged, len(context.partitions), _INT32_MAX)
        if not self._make_room(newcomer, context.privileged, now_ms):
            return None
        session_id = self._rng.randint(1, _INT32_MAX)
        while session_id in self._sessions:
            session_id = self._rng.randint(1, _INT32_MAX)
        partitions = {
            key: CachedPartition(
                params,
                high_watermark=answer.high_watermark,
                last_stable_offset=answer.last_stable_offset,
                log_start_offset=answer.log_start_offset,
            )
            for (key, params), answer in zip(context.partitions, answers, strict=True)
        }
        session = FetchSession(
            session_id,
            context.privileged,
            context.uses_topic_ids,
            partitions,
            creation_ms=now_ms,
            last_used_ms=now_ms,
        )
        self._sessions[session_id] = session
        return session

    def _make_room(self, newcomer: tuple[bool, int, int], privileged: bool, now_ms: int) -> bool:
        if self.max_slots == 0:
            return False
        if len(self._sessions) < self.max_slots:
            return True
        least_recent = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - least_recent.last_used_ms > self.eviction_ms:
            self._evict(least_recent)
            return True
        # A consumer may evict only sessions older than the eviction time; a follower may also
        # evict any consumer's session.
        evictable = [
            s
            for s in self._sessions.values()
            if now_ms - s.creation_ms > self.eviction_ms or (privileged and not s.privileged)
        ]
        if not evictable:
            return False
        smallest = min(evictable, key=FetchSession.evictable_key)
        if newcomer < smallest.evictable_key():
            return False
        self._evict(smallest)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self._sessions[session.id]
        self.evictions += 1


K = TypeVar("K", bound=Hashable)  # how the fetching side names a partition


class FetchSessionBuilder(Generic[K]):
    """The fetching side of one session with one broker (Kafka's FetchSessionHandler)."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent: dict[K, PartitionParams] = {}  # what the broker's session holds
        self._pending: dict[K, PartitionParams] | None = None
        self._topic_ids: bool | None = None

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def build(
        self, wanted: dict[K, PartitionParams], uses_topic_ids: bool
    ) -> tuple[list[K], list[K]]:
        """(partitions to send, partitions to forget) for the next request, whose session id
        and epoch are `session_id` and `epoch` after this call."""
        if self._topic_ids is not None and self._topic_ids != uses_topic_ids:
            self.epoch = INITIAL_EPOCH  # names <-> ids: close this session, open another
        self._topic_ids = uses_topic_ids
        self._pending = dict(wanted)
        if self.is_full:
            return list(wanted), []
        send = [key for key, params in wanted.items() if self._sent.get(key) != params]
        forget = [key for key in self._sent if key not in wanted]
        return send, forget

    def on_response(self, error: ErrorCode, session_id: int) -> bool:
        """Move on after an answer; False when its top-level error voids it."""
        pending, self._pending = self._pending, None
        if error is not ErrorCode.NONE:
            self.on_error(error)
            return False
        if session_id == INVALID_SESSION_ID:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            self._sent = {}
            return True
        if self.is_full:
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = next_epoch(self.epoch)
        self._sent = pending or {}
        return True

    def on_error(self, error: ErrorCode | None = None) -> None:
        """A lost request or a session error: the next request starts a session again
        (closing this one, unless the broker no longer has it)."""
        self._pending = None
        self._sent = {}
        if error is ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
