"""The leader epoch cache: which leader epoch began at which offset of this log.

Each entry (epoch, start offset) says that the leader of `epoch` wrote its first batch at
`start offset`. Followers use the leader's answer to "where does my last epoch end?" to truncate
away a divergent tail (OffsetForLeaderEpoch, or DivergingEpoch in Fetch v12+), so the rules here
are Kafka's `LeaderEpochFileCache`, exactly:

- `assign(epoch, start)` is a no-op when `epoch` is already the latest with an earlier or equal
  start; otherwise entries that would break monotonicity (epoch >= the new one or start >= the
  new one) are removed from the end and the new entry is added. The log is the truth, so a new
  entry wins over stale ones.
- `end_offset_for(E, leo)`: E == -1 gives (-1, -1); E == latest epoch gives (E, leo); otherwise
  take the first entry with a higher epoch H: none gives (-1, -1); no entry <= E gives
  (E, H.start); else (the largest epoch <= E, H.start).
- `truncate_from_end(o)` drops entries starting at or after `o` (the log was truncated to `o`);
  `truncate_from_start(o)` drops entries wholly before `o` and moves the last of them up to `o`
  (the log start offset advanced to `o`).

The cache is plain state; `on_change` (the partition log passes a write of its
`leader-epoch-checkpoint` file) runs after every change, before the method returns.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import NamedTuple

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Epoch -> start offset entries, ascending in both epoch and start offset."""

    def __init__(
        self,
        entries: Iterable[EpochEntry | tuple[int, int]] = (),
        on_change: Callable[[list[EpochEntry]], None] | None = None,
    ) -> None:
        self._entries: list[EpochEntry] = []
        # Loading goes through the same rule as assign, as Kafka's does, so a checkpoint with
        # out-of-order lines still yields a monotonic cache.
        for epoch, start_offset in entries:
            self._assign(EpochEntry(epoch, start_offset))
        self._on_change = on_change

    # ------------------------------------------------------------------------------ queries

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch and the Fetch divergence check."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1].epoch == requested_epoch:
            # The latest epoch is still being written: it ends at the log end offset.
            return requested_epoch, log_end_offset
        epochs = [entry.epoch for entry in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher_entry = self._entries[higher]
        if higher == 0:
            # Older than anything cached (the data is gone): answer with the start of the next
            # known epoch, so the follower truncates to where the leader's knowledge begins.
            return requested_epoch, higher_entry.start_offset
        return self._entries[higher - 1].epoch, higher_entry.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds `offset` (ListOffsets' leader epoch), or None."""
        starts = [entry.start_offset for entry in self._entries]
        index = bisect.bisect_right(starts, offset)
        return self._entries[index - 1].epoch if index else None

    # ----------------------------------------------------------------------------- changes

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True when the cache changed."""
        entries = self._entries
        if entries:
            latest = entries[-1]
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return False  # another batch of the latest epoch: every append asks this
        changed = self._assign(EpochEntry(epoch, start_offset))
        if changed:
            self._changed()
        return changed

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop every entry that starts at or after `end_offset`."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        self._changed()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget offsets before `start_offset`; an entry at exactly `start_offset` stays as is."""
        removed: EpochEntry | None = None
        while self._entries and self._entries[0].start_offset <= start_offset:
            removed = self._entries.pop(0)
        if removed is None:
            return
        self._entries.insert(0, EpochEntry(removed.epoch, start_offset))
        self._changed()

    def clear(self) -> None:
        if self._entries:
            self._entries.clear()
            self._changed()

    # ---------------------------------------------------------------------------- internals

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}: epoch and offset must be >= 0")
        latest = self.latest_entry
        if (
            latest is not None
            and entry.epoch == latest.epoch
            and entry.start_offset >= latest.start_offset
        ):
            return False
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch
            or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(list(self._entries))
