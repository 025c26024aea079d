"""DeleteRecords on the leader, and the wait for the followers (Kafka's DelayedDeleteRecords).

How it works. For each partition the leader checks and moves its log start offset
(`delete_records_on_leader`): it must lead (NOT_LEADER_OR_FOLLOWER), the topic's cleanup policy
must include `delete` (POLICY_VIOLATION, as Kafka), and the offset must lie in [0, HW] (-1
means the HW; OFFSET_OUT_OF_RANGE otherwise). Records below the new log start offset are no
longer readable at once; segments wholly below it are deleted, and the log dir's
`log-start-offset-checkpoint` rewritten, right after (`ReplicaManager.on_log_start_moved`).

The answer's low watermark is Kafka's `lowWatermarkIfLeader`: the smallest log start offset of
this replica and of every follower on a live broker, as their fetches report them (a follower
moves its own log start offset to the leader's, up to its HW, from each fetch response). The
request waits, watched per partition in the replica manager's delete-records purgatory, until
every partition's low watermark reached the offset asked for; a follower's fetch or a change of
leadership re-checks it, a partition no longer led answers NOT_LEADER_OR_FOLLOWER, and the
timeout answers REQUEST_TIMED_OUT for what is still waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochlog.broker.delayed import DelayedOperation, resolve
from epochlog.broker.partition import Partition, PartitionError
from epochlog.protocol.errors import ErrorCode
from epochlog.storage import StorageError

if TYPE_CHECKING:
    from epochlog.broker.replica_manager import ReplicaManager

TopicPartition = tuple[str, int]

HIGH_WATERMARK = -1  # DeleteRecords' offset meaning "up to the high watermark"


def delete_records_on_leader(partition: Partition, offset: int) -> int:
    """Move the leader's log start offset to `offset` (or its HW for -1); returns the offset
    the followers must reach. Raises PartitionError with Kafka's error when refused."""
    if not partition.is_leader:
        raise PartitionError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"{partition.name}: this broker ({partition.local_broker_id}) is not the leader "
            f"(leader {partition.leader_id})",
        )
    if not partition.log.config.delete:
        raise PartitionError(
            ErrorCode.POLICY_VIOLATION,
            f"Records of partition {partition.name} can not be deleted due to the configured "
            "policy",
        )
    high_watermark = partition.high_watermark
    target = high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > high_watermark:
        raise PartitionError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"{partition.name}: cannot delete records below offset {offset}: it is outside "
            f"[0, high watermark {high_watermark}]",
        )
    partition.log.maybe_increment_log_start_offset(target, high_watermark)
    return target


def low_watermark(partition: Partition) -> int:
    """Kafka's lowWatermarkIfLeader: the smallest log start offset of this replica and of the
    followers on live brokers (-1 for one that has not fetched yet)."""
    lowest = partition.log_start_offset
    for broker_id, replica in partition.remote_replicas.items():
        if partition.brokers.is_alive(broker_id) and replica.log_start_offset < lowest:
            lowest = replica.log_start_offset
    return lowest


@dataclass(slots=True)
class DeleteRecordsStatus:
    """One partition of a DeleteRecords request: the offset to reach, and its answer."""

    required_offset: int
    low_watermark: int = -1
    error: ErrorCode = ErrorCode.NONE
    waiting: bool = True


class DelayedDeleteRecords(DelayedOperation):
    """Completes when every waiting partition's low watermark reached its required offset (or
    failed), or at the timeout; resolves `future` with {tp: (low watermark, error)}."""

    def __init__(
        self,
        timeout_ms: int,
        statuses: Mapping[TopicPartition, DeleteRecordsStatus],
        lookup: Callable[[TopicPartition], Partition | None],
        future: asyncio.Future[dict[TopicPartition, tuple[int, ErrorCode]]],
    ) -> None:
        super().__init__(timeout_ms)
        self.statuses = dict(statuses)
        self.lookup = lookup
        self.future = future

    def try_complete(self) -> bool:
        for tp, status in self.statuses.items():
            if not status.waiting:
                continue
            partition = self.lookup(tp)
            if partition is None:
                status.error, status.waiting = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False
            elif not partition.is_leader:
                status.error, status.waiting = ErrorCode.NOT_LEADER_OR_FOLLOWER, False
            else:
                lowest = low_watermark(partition)
                if lowest >= status.required_offset:
                    status.low_watermark, status.waiting = lowest, False
        if any(s.waiting for s in self.statuses.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        answer = {}
        for tp, status in self.statuses.items():
            if status.waiting:  # expired
                status.error = ErrorCode.REQUEST_TIMED_OUT
            low = status.low_watermark if status.error is ErrorCode.NONE else -1
            answer[tp] = (low, status.error)
        resolve(self.future, answer)


async def delete_records(
    rm: ReplicaManager, offsets: Mapping[TopicPartition, int], timeout_ms: int
) -> dict[TopicPartition, tuple[int, ErrorCode]]:
    """DeleteRecords for `offsets` on this broker: {tp: (low watermark, error)} once the
    followers have the new log start offsets, or at the timeout."""
    statuses: dict[TopicPartition, DeleteRecordsStatus] = {}
    for tp, offset in offsets.items():
        try:
            partition = rm.partition_or_error(*tp)
            required = delete_records_on_leader(partition, offset)
        except (PartitionError, StorageError) as exc:
            statuses[tp] = DeleteRecordsStatus(-1, error=exc.error_code, waiting=False)
            continue
        rm.on_log_start_moved(partition)
        statuses[tp] = DeleteRecordsStatus(required)
    future: asyncio.Future[dict[TopicPartition, tuple[int, ErrorCode]]]
    future = asyncio.get_running_loop().create_future()
    operation = DelayedDeleteRecords(timeout_ms, statuses, lambda tp: rm.get_partition(*tp), future)
    waiting = [tp for tp, status in statuses.items() if status.waiting]
    rm.delete_records_purgatory.try_complete_else_watch(operation, waiting)
    return await future
