"""The rules a partition leader applies, as pure functions (Kafka's `Partition`, fact sheet 4b/4c).

- High watermark: the leader's HW is the smallest log end offset among the leader and the
  followers in the ISR; it never goes down while the leader stays leader. A follower whose LEO
  is not known yet (-1, e.g. right after a leader change) holds the HW where it is. With the ISR
  being just the leader, HW = LEO. A follower's own HW is min(leader's HW, local LEO).
- acks=all needs at least min.insync.replicas in the ISR before the append
  (NOT_ENOUGH_REPLICAS) and again when the HW passes the append
  (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
- CurrentLeaderEpoch fencing (Fetch, ListOffsets, OffsetForLeaderEpoch): -1 skips the check; an
  older epoch than the leader's is FENCED_LEADER_EPOCH (the client is behind), a newer one is
  UNKNOWN_LEADER_EPOCH (this broker is behind).
- Divergence (Fetch v12+ LastFetchedEpoch): look up where the fetcher's last epoch ends in this
  log; an unknown answer, or a fetch offset below the log start, is OFFSET_OUT_OF_RANGE; an
  answer with a smaller epoch or an end offset below the fetch offset means the fetcher's log
  diverged: return no records but DivergingEpoch {epoch, end offset} to truncate to.
- ListOffsets "latest" for a client while a new leader's HW has not yet reached the start of its
  epoch: OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5), since the true HW is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from epochlog.protocol.errors import ErrorCode

UNKNOWN_OFFSET = -1
NO_LEADER_EPOCH = -1


def leader_high_watermark(current_hw: int, leader_leo: int, follower_leos: Iterable[int]) -> int:
    """The leader's new HW: min LEO over the leader and its ISR followers, never below the
    current HW."""
    candidate = leader_leo
    for leo in follower_leos:
        if leo < candidate:
            candidate = leo
    return candidate if candidate > current_hw else current_hw


def follower_high_watermark(leader_hw: int, local_leo: int) -> int:
    return min(leader_hw, local_leo)


def enough_replicas(isr_size: int, min_insync_replicas: int) -> bool:
    """acks=all may proceed (or complete) only with at least min.insync.replicas in the ISR."""
    return isr_size >= min_insync_replicas


def check_current_leader_epoch(request_epoch: int, local_epoch: int) -> ErrorCode:
    if request_epoch == NO_LEADER_EPOCH:
        return ErrorCode.NONE
    if request_epoch < local_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if request_epoch > local_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    """Where the fetcher's log stops agreeing with the leader's: truncate to `end_offset`."""

    epoch: int
    end_offset: int


def check_divergence(
    *,
    last_fetched_epoch: int,
    fetch_offset: int,
    epoch_end: tuple[int, int],
    log_start_offset: int,
) -> ErrorCode | DivergingEpoch | None:
    """The v12+ divergence check. `epoch_end` is this log's (epoch, end offset) for
    `last_fetched_epoch`. None: no divergence, read normally."""
    if last_fetched_epoch == NO_LEADER_EPOCH:
        return None
    epoch, end_offset = epoch_end
    if epoch == NO_LEADER_EPOCH or end_offset == UNKNOWN_OFFSET:
        return ErrorCode.OFFSET_OUT_OF_RANGE
    if fetch_offset < log_start_offset:
        return ErrorCode.OFFSET_OUT_OF_RANGE
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return DivergingEpoch(epoch, end_offset)
    return None


def latest_offset_error(
    *, is_client: bool, high_watermark: int, leader_epoch_start_offset: int, version: int
) -> ErrorCode:
    """ListOffsets -1 for a client on a leader whose HW is behind the start of its epoch."""
    if is_client and leader_epoch_start_offset > high_watermark:
        return ErrorCode.OFFSET_NOT_AVAILABLE if version >= 5 else ErrorCode.LEADER_NOT_AVAILABLE
    return ErrorCode.NONE
