"""What a follower decides, as pure functions and plain state (Kafka's AbstractFetcherThread,
fact sheet §4c).

- Where a partition starts fetching when this broker becomes its follower: at the log end offset
  with the latest leader epoch of its log (the leader checks that epoch and answers with a
  DivergingEpoch if the logs differ: truncation on fetch, Fetch v12+). A log that knows no epoch
  cannot be checked that way, so it is first truncated to its high watermark (everything below
  the HW is committed) and fetches from there.
- Truncation by leader epoch (`offset_truncation_state`), given the leader's (epoch, end offset)
  from a DivergingEpoch or an OffsetForLeaderEpoch answer: when the follower knows that epoch,
  truncate to the smaller end offset of the two (done); when it does not, truncate to the end of
  its own largest epoch below it and ask again (not done: the next Fetch or OffsetForLeaderEpoch
  carries the new latest epoch). The result never exceeds the local log end offset.
- OFFSET_OUT_OF_RANGE (`out_of_range_action`): with the leader's log end offset below ours,
  truncate to it; otherwise, when the leader's log starts after our end, throw our log away and
  start at the leader's start; otherwise continue from our log end offset.
- Per-partition fetch state: offset, last fetched epoch, the leader epoch it follows, the phase
  (fetching, truncating, failed until the next LeaderAndIsr) and a back-off deadline.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True, slots=True)
class OffsetTruncationState:
    offset: int
    complete: bool


def offset_truncation_state(
    *,
    leader_epoch: int,
    leader_end_offset: int,
    local_epoch_end: Callable[[int], tuple[int, int]],
    log_end_offset: int,
    fetch_offset: int,
) -> OffsetTruncationState:
    """Kafka's getOffsetTruncationState. `local_epoch_end(epoch)` is this log's (epoch, end
    offset) for an epoch (the epoch cache's answer; (-1, -1) when unknown)."""
    if leader_end_offset == UNDEFINED_OFFSET:
        # The leader knows nothing of our epoch: fall back to the fetch offset (HW or LEO).
        return OffsetTruncationState(min(fetch_offset, log_end_offset), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return OffsetTruncationState(min(leader_end_offset, log_end_offset), True)
    local_epoch, local_end = local_epoch_end(leader_epoch)
    if local_epoch == UNDEFINED_EPOCH or local_end == UNDEFINED_OFFSET:
        return OffsetTruncationState(min(leader_end_offset, log_end_offset), True)
    if local_epoch != leader_epoch:
        # We never had the leader's epoch: cut back to the end of our largest earlier epoch and
        # compare again from there.
        return OffsetTruncationState(min(local_end, log_end_offset), False)
    return OffsetTruncationState(min(local_end, leader_end_offset, log_end_offset), True)


class OutOfRangeAction(enum.Enum):
    NEED_LEADER_START = "ask the leader for its log start offset"
    TRUNCATE = "truncate to the leader's log end offset"
    RESTART = "delete the log and start at the leader's log start offset"
    CONTINUE = "keep the log and fetch from its end"


def out_of_range_action(
    *, local_leo: int, leader_leo: int, leader_start: int | None
) -> tuple[OutOfRangeAction, int]:
    """(action, offset to fetch from next) after OFFSET_OUT_OF_RANGE."""
    if leader_leo < local_leo:
        return OutOfRangeAction.TRUNCATE, leader_leo
    if leader_start is None:
        return OutOfRangeAction.NEED_LEADER_START, -1
    if leader_start > local_leo:
        return OutOfRangeAction.RESTART, leader_start
    return OutOfRangeAction.CONTINUE, local_leo


class FetchPhase(enum.Enum):
    FETCHING = "fetching"
    TRUNCATING = "truncating"  # to the HW (no epoch) or by OffsetForLeaderEpoch
    FAILED = "failed"  # fenced: waits for a LeaderAndIsr to re-add it


@dataclass(eq=False, slots=True)
class PartitionFetchState:
    """One partition in a replica fetcher. Replaced (not mutated) when the partition is added
    again, so an answer to an older request can tell it is stale (`is`)."""

    topic: str
    partition: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    phase: FetchPhase = FetchPhase.FETCHING
    delayed_until_ms: int = 0
    epoch_checked: bool = False  # compared with the leader's log by epoch at least once
    # How far the log was behind the leader's HW after the last answer (None: no answer yet).
    lag: int | None = None

    @property
    def in_sync(self) -> bool:
        """Kafka's PartitionFetchState.isReplicaInSync: caught up with the leader's HW."""
        return self.lag is not None and self.lag <= 0

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def is_ready(self, now_ms: int) -> bool:
        return self.phase is not FetchPhase.FAILED and now_ms >= self.delayed_until_ms

    def delay(self, now_ms: int, backoff_ms: int) -> None:
        self.delayed_until_ms = now_ms + backoff_ms


def initial_fetch_state(
    *,
    topic: str,
    partition: int,
    leader_epoch: int,
    log_end_offset: int,
    high_watermark: int,
    latest_epoch: int | None,
) -> PartitionFetchState:
    """Where a new follower starts: its LEO and latest epoch, or (no epoch, data above the HW)
    a truncation to the HW first."""
    if latest_epoch is None and log_end_offset > high_watermark:
        return PartitionFetchState(
            topic,
            partition,
            high_watermark,
            UNDEFINED_EPOCH,
            leader_epoch,
            FetchPhase.TRUNCATING,
        )
    return PartitionFetchState(
        topic,
        partition,
        log_end_offset,
        UNDEFINED_EPOCH if latest_epoch is None else latest_epoch,
        leader_epoch,
    )


def whole_batches_length(buf: bytes | bytearray | memoryview) -> int:
    """How many leading bytes of a fetched Records field are whole record batches (a leader may
    cut the last one at its size limit; Kafka's followers drop that partial batch)."""
    pos, end = 0, len(buf)
    while end - pos >= 12:
        length = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True)
        size = 12 + length
        if length <= 0 or end - pos < size:
            break
        pos += size
    return pos
