"""Moving a replica to another of this broker's log dirs while it serves (AlterReplicaLogDirs).

How it works (Kafka's ReplicaAlterLogDirsThread, on the event loop). The log manager creates an
empty future log in the target dir; one task per moving replica copies batches into it from the
current log, as a follower appends its leader's batches (same offsets, same epochs), a chunk at
a time, yielding to the loop between chunks so produce and fetch carry on. `next_copy_step`
decides each step from the two logs' offsets (no I/O):

- RESTART: the current log was truncated since the copy began (a follower truncation or a damage
  cut: the copied batches may no longer be the current ones), or the future log runs past it,
  or retention deleted the current segments the copy had not reached. The future log starts
  again, empty, at the current log's first segment.
- COPY: the future log is behind: copy the next chunk from its end.
- WAIT: caught up, but the log cleaner is rewriting the current log's segments: try again soon.
- SWAP: caught up. The chunk that catches up and the swap run in the same step of the loop
  (nothing can append in between: this is the partition lock; under constant produce the copy
  would otherwise trail by the batch appended while it yielded):
  `LogManager.replace_current_with_future` swaps the logs and the partition serves the moved
  log.

The move is abandoned (its future log deleted) when the partition stops being hosted, its log
changes under it (a dir going offline), or another AlterReplicaLogDirs names another dir.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from epochlog.storage import LogManager
from epochlog.storage.log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
COPY_CHUNK_BYTES = 1 << 20
WAIT_FOR_CLEANER_S = 0.05


class CopyStep(enum.Enum):
    RESTART = "restart"
    COPY = "copy"
    WAIT = "wait"
    SWAP = "swap"


@dataclass(frozen=True, slots=True)
class CopyState:
    current_first_base: int  # base offset of the current log's first segment
    current_end: int
    current_truncations: int
    truncations_at_start: int  # the current log's truncation count when the copy (re)started
    future_end: int
    cleaning: bool  # the cleaner is working on the current log


def next_copy_step(state: CopyState) -> CopyStep:
    if (
        state.current_truncations != state.truncations_at_start
        or state.future_end > state.current_end
        or state.future_end < state.current_first_base
    ):
        return CopyStep.RESTART
    if state.future_end < state.current_end:
        return CopyStep.COPY
    return CopyStep.WAIT if state.cleaning else CopyStep.SWAP


class HostedPartitions(Protocol):
    """What the mover needs of the replica manager: the partition's current log, and a way to
    hand it the moved one."""

    def hosted_log(self, topic: str, partition: int) -> PartitionLog | None: ...

    def use_moved_log(self, topic: str, partition: int, moved: PartitionLog) -> None: ...


class ReplicaMover:
    """The tasks copying replicas to their future logs, one per moving replica."""

    def __init__(
        self,
        log_manager: LogManager,
        partitions: HostedPartitions,
        is_cleaning: Callable[[TopicPartition], bool] = lambda key: False,
        chunk_bytes: int = COPY_CHUNK_BYTES,
    ) -> None:
        self.log_manager = log_manager
        self.partitions = partitions
        self.is_cleaning = is_cleaning
        self.chunk_bytes = chunk_bytes
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        self.moves_done = 0

    def is_moving(self, key: TopicPartition) -> bool:
        task = self._tasks.get(key)
        return task is not None and not task.done()

    def start(self, topic: str, partition: int, log_dir: Path) -> None:
        """Move the replica to `log_dir` (a future log there is kept; one elsewhere dropped)."""
        key = (topic, partition)
        manager = self.log_manager
        if manager.future_dir_of(topic, partition) != log_dir:
            manager.create_future_log(topic, partition, log_dir)
        if not self.is_moving(key):
            self._tasks[key] = asyncio.get_running_loop().create_task(
                self._copy(key), name=f"move {topic}-{partition} to {log_dir}"
            )

    def abandon(self, topic: str, partition: int) -> None:
        """Stop moving the replica and delete its future log."""
        task = self._tasks.pop((topic, partition), None)
        if task is not None:
            task.cancel()
        self.log_manager.remove_future_log(topic, partition)

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _copy(self, key: TopicPartition) -> None:
        topic, partition = key
        manager = self.log_manager
        truncations_at_start: int | None = None
        try:
            while True:
                current = self.partitions.hosted_log(topic, partition)
                future = manager.future_log(topic, partition)
                if current is None or future is None or manager.get_log(*key) is not current:
                    log.info("move of %s-%d abandoned: its log changed", topic, partition)
                    manager.remove_future_log(topic, partition)
                    return
                if truncations_at_start is None:
                    truncations_at_start = current.truncations
                step = next_copy_step(
                    CopyState(
                        current_first_base=current.segments[0].base_offset,
                        current_end=current.log_end_offset,
                        current_truncations=current.truncations,
                        truncations_at_start=truncations_at_start,
                        future_end=future.log_end_offset,
                        cleaning=self.is_cleaning(key),
                    )
                )
                if step is CopyStep.RESTART:
                    log.info("move of %s-%d restarts from its first segment", topic, partition)
                    future.truncate_fully_and_start_at(current.segments[0].base_offset)
                    truncations_at_start = current.truncations
                elif step is CopyStep.COPY:
                    if not self._copy_chunk(key, current, future):
                        return
                    if future.log_end_offset == current.log_end_offset:
                        continue  # caught up: swap in this same step, before another append
                elif step is CopyStep.WAIT:
                    await asyncio.sleep(WAIT_FOR_CLEANER_S)
                    continue
                else:
                    moved = manager.replace_current_with_future(topic, partition)
                    self.partitions.use_moved_log(topic, partition, moved)
                    self.moves_done += 1
                    return
                await asyncio.sleep(0)  # let produce and fetch run between chunks
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("move of %s-%d failed; its future log is deleted", topic, partition)
            manager.remove_future_log(topic, partition)
        finally:
            if self._tasks.get(key) is asyncio.current_task():
                del self._tasks[key]

    def _copy_chunk(self, key: TopicPartition, current: PartitionLog, future: PartitionLog) -> bool:
        """Copy the next chunk; False when an I/O error ended the move."""
        manager = self.log_manager
        try:
            data = current.read_for_copy(future.log_end_offset, self.chunk_bytes).read_bytes()
        except OSError as exc:
            manager.remove_future_log(*key)
            manager.handle_io_error(manager.dir_of(*key), exc)
            return False
        if not data:  # behind, yet nothing to read: never expected; do not spin
            log.error("move of %s-%d found nothing to copy at %d", *key, future.log_end_offset)
            manager.remove_future_log(*key)
            return False
        try:
            future.append_as_follower(data)
        except OSError as exc:
            target = manager.future_dir_of(*key)
            manager.remove_future_log(*key)
            manager.handle_io_error(target, exc)
            return False
        return True
