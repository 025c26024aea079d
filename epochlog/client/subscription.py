"""The consumer's assigned partitions and their positions: sans-I/O.

Each assigned partition has a position, the offset of the next record `poll()` will return, or
none yet. A partition without a position needs a reset: to the log start ("earliest"), to the
log end ("latest"), or to the first offset at or after a timestamp; `seek_to_beginning/end` ask
for one explicitly, `assign` asks for one per `auto.offset.reset` (with `none`, a partition
without a position is an error at `poll()`). A reset is carried out by a ListOffsets request,
after which `complete_reset` sets the position.

Every seek or reset bumps the partition's `generation`. Fetch and ListOffsets results carry the
generation they were started under and are dropped if it changed in the meantime, so a response
that was in flight during a seek can never move the position.

In a group (`assign(..., from_committed=True)`), a new partition first waits for the group's
committed offset (`awaiting_committed`): the consumer fetches it with OffsetFetch and
`complete_committed` sets the position there, with the committed leader epoch, or, when nothing
was committed, asks for the auto.offset.reset reset (with `none`, the partition has no position
and `poll()` raises).

A partition is fetchable when it has a position, no data is buffered for it, no fetch for it is
in flight, and it is not backing off after an error (`retry.backoff.ms`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from epochlog.client.metadata import TopicPartition

EARLIEST = "earliest"
LATEST = "latest"
EARLIEST_TIMESTAMP = -2  # ListOffsets timestamps that mean "log start" and "log end"
LATEST_TIMESTAMP = -1
RESET_TIMESTAMPS = {EARLIEST: EARLIEST_TIMESTAMP, LATEST: LATEST_TIMESTAMP}


@dataclass(slots=True)
class PartitionState:
    position: int | None = None
    leader_epoch: int = -1  # epoch of the last record returned, -1 if unknown
    reset: str | None = None  # EARLIEST or LATEST while a reset is wanted
    generation: int = 0
    high_watermark: int = -1
    log_start_offset: int = -1
    backoff_until_ms: float = 0.0
    fetching: bool = False  # a fetch for it is in flight
    buffered: bool = False  # fetched records wait to be returned by poll()
    resetting: bool = False  # a ListOffsets for its reset is in flight
    awaiting_committed: bool = False  # its group's committed offset is wanted first


class SubscriptionState:
    def __init__(self, default_reset: str) -> None:
        self.default_reset = default_reset  # auto.offset.reset: earliest, latest or none
        self._parts: dict[TopicPartition, PartitionState] = {}

    # ---------------------------------------------------------------- assignment

    def assign(
        self, partitions: Iterable[tuple[str, int]], *, from_committed: bool = False
    ) -> None:
        """Replace the assignment; partitions kept keep their positions. New ones start at the
        group's committed offset if `from_committed`, else per auto.offset.reset."""
        wanted = [TopicPartition(t, p) for t, p in partitions]
        old = self._parts
        self._parts = {}
        for tp in wanted:
            state = old.get(tp)
            if state is None:
                state = PartitionState()
                if from_committed:
                    state.awaiting_committed = True
                elif self.default_reset != "none":
                    state.reset = self.default_reset
            self._parts[tp] = state

    def assignment(self) -> set[TopicPartition]:
        return set(self._parts)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._parts

    def state(self, tp: tuple[str, int]) -> PartitionState:
        state = self._parts.get(TopicPartition(*tp))
        if state is None:
            raise KeyError(f"{tp[0]}-{tp[1]} is not assigned to this consumer")
        return state

    # ---------------------------------------------------------------- positions

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        if offset < 0:
            raise ValueError(f"seek to negative offset {offset} on {tp[0]}-{tp[1]}")
        state = self.state(tp)
        state.position = offset
        state.reset = None
        state.leader_epoch = -1
        self._invalidate(state)

    def request_reset(self, tp: tuple[str, int], strategy: str) -> None:
        assert strategy in (EARLIEST, LATEST), strategy
        state = self.state(tp)
        state.position = None
        state.reset = strategy
        self._invalidate(state)

    def _invalidate(self, state: PartitionState) -> None:
        state.generation += 1
        state.awaiting_committed = False  # a seek or reset overrides the committed offset
        state.buffered = False
        state.backoff_until_ms = 0.0

    def position(self, tp: tuple[str, int]) -> int | None:
        return self.state(tp).position

    def advance(self, tp: tuple[str, int], generation: int, offset: int, leader_epoch: int) -> bool:
        """Move the position after records were returned (or skipped); False if stale."""
        state = self._parts.get(TopicPartition(*tp))
        if state is None or state.generation != generation:
            return False
        state.position = offset
        if leader_epoch >= 0:
            state.leader_epoch = leader_epoch
        return True

    # ---------------------------------------------------------------- resets

    def needing_reset(self) -> list[TopicPartition]:
        return [tp for tp, s in self._parts.items() if s.reset is not None and not s.resetting]

    def missing_position(self) -> list[TopicPartition]:
        """Partitions with no position and no reset wanted (auto.offset.reset=none)."""
        return [
            tp
            for tp, s in self._parts.items()
            if s.position is None and s.reset is None and not s.awaiting_committed
        ]

    # ---------------------------------------------------------------- committed offsets

    def awaiting_committed(self) -> dict[TopicPartition, int]:
        """Partitions waiting for their committed offset, with their generation."""
        return {tp: s.generation for tp, s in self._parts.items() if s.awaiting_committed}

    def complete_committed(
        self, tp: TopicPartition, generation: int, offset: int, leader_epoch: int = -1
    ) -> None:
        """The committed offset arrived (-1: none committed, so reset per auto.offset.reset)."""
        state = self._parts.get(tp)
        if state is None or state.generation != generation or not state.awaiting_committed:
            return
        state.awaiting_committed = False
        if offset >= 0:
            state.position = offset
            state.leader_epoch = leader_epoch
            state.generation += 1
        elif self.default_reset != "none":
            state.reset = self.default_reset

    def positions(self) -> dict[TopicPartition, tuple[int, int]]:
        """(position, leader epoch of the last record returned) of every partition with one."""
        return {
            tp: (s.position, s.leader_epoch)
            for tp, s in self._parts.items()
            if s.position is not None
        }

    def begin_reset(self, tp: TopicPartition) -> tuple[str, int]:
        state = self.state(tp)
        assert state.reset is not None
        state.resetting = True
        return state.reset, state.generation

    def complete_reset(self, tp: TopicPartition, generation: int, offset: int | None) -> None:
        """A reset's ListOffsets answered (offset None: it failed and will be retried)."""
        state = self._parts.get(tp)
        if state is None:
            return
        state.resetting = False
        if state.generation != generation or state.reset is None or offset is None:
            return
        state.position = offset
        state.reset = None
        state.generation += 1

    # ---------------------------------------------------------------- fetching

    def fetchable(self, now_ms: float) -> list[TopicPartition]:
        return [
            tp
            for tp, s in self._parts.items()
            if s.position is not None
            and not s.awaiting_committed
            and not s.buffered
            and not s.fetching
            and s.reset is None
            and now_ms >= s.backoff_until_ms
        ]

    def back_off(self, tp: TopicPartition, until_ms: float) -> None:
        state = self._parts.get(tp)
        if state is not None:
            state.backoff_until_ms = until_ms
