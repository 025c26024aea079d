"""What DescribeLogDirs and AlterReplicaLogDirs answer, decided from a snapshot (no I/O).

DescribeLogDirs (Kafka's `ReplicaManager.describeLogDirs`): one result per configured log dir,
by absolute path. An offline dir is KAFKA_STORAGE_ERROR with no topics and no sizes. An online
one lists, per topic, the requested replicas it holds (all of them for a null topic list) with
the size of their segments, their offset lag and whether they are a future replica; topics with
no requested replica are left out. The lag of a current replica is how far its log end is
behind the partition's high watermark (never negative: a leader's log end is at or past it);
the lag of a future replica (one being moved here by AlterReplicaLogDirs) is how far its log end
is behind the current replica's.

AlterReplicaLogDirs (Kafka's `ReplicaManager.alterReplicaLogDirs`), per partition, in order:
a destination that is not one of the broker's log dirs is LOG_DIR_NOT_FOUND; an offline one, or
a replica in an offline dir, KAFKA_STORAGE_ERROR; an illegal topic name INVALID_TOPIC_EXCEPTION.
The destination is then remembered as the partition's preferred dir (a replica created later
by LeaderAndIsr goes there), and a replica this broker does not host is REPLICA_NOT_AVAILABLE.
A hosted replica already in the destination needs nothing (a move of it elsewhere is abandoned);
one elsewhere starts a move, unless some log dir is offline (KAFKA_STORAGE_ERROR, as Kafka).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from epochlog.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]
INVALID_OFFSET_LAG = -1


@dataclass(frozen=True, slots=True)
class ReplicaOnDisk:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True, slots=True)
class LogDirSnapshot:
    path: str
    offline: bool
    total_bytes: int = -1
    usable_bytes: int = -1
    replicas: tuple[ReplicaOnDisk, ...] = ()


@dataclass(frozen=True, slots=True)
class LogDirReport:
    path: str
    error: ErrorCode
    total_bytes: int
    usable_bytes: int
    topics: dict[str, list[ReplicaOnDisk]] = field(default_factory=dict)


def current_offset_lag(high_watermark: int, log_end_offset: int) -> int:
    return max(high_watermark - log_end_offset, 0)


def future_offset_lag(current_log_end_offset: int, future_log_end_offset: int) -> int:
    return current_log_end_offset - future_log_end_offset


def describe_log_dirs(
    dirs: Iterable[LogDirSnapshot], wanted: Collection[TopicPartition] | None
) -> list[LogDirReport]:
    """The report of every dir; `wanted` None means every replica."""
    reports: list[LogDirReport] = []
    for snapshot in dirs:
        if snapshot.offline:
            reports.append(LogDirReport(snapshot.path, ErrorCode.KAFKA_STORAGE_ERROR, -1, -1))
            continue
        topics: dict[str, list[ReplicaOnDisk]] = {}
        for replica in snapshot.replicas:
            if wanted is None or (replica.topic, replica.partition) in wanted:
                topics.setdefault(replica.topic, []).append(replica)
        for replicas in topics.values():
            replicas.sort(key=lambda r: (r.partition, r.is_future))
        reports.append(
            LogDirReport(
                snapshot.path,
                ErrorCode.NONE,
                snapshot.total_bytes,
                snapshot.usable_bytes,
                dict(sorted(topics.items())),
            )
        )
    return reports


class MoveDecision(enum.Enum):
    REFUSE = "refuse"  # answer the error, change nothing
    REMEMBER = "remember"  # not hosted: remember the preferred dir, REPLICA_NOT_AVAILABLE
    NOTHING = "nothing"  # already in the destination (any other move abandoned)
    MOVE = "move"  # start (or keep) moving the replica to the destination


@dataclass(frozen=True, slots=True)
class MoveVerdict:
    decision: MoveDecision
    error: ErrorCode
    message: str = ""


def decide_replica_move(
    topic: str,
    partition: int,
    destination: str,
    log_dirs: Collection[str],
    offline_dirs: Collection[str],
    current_dir: str | None,
    hosted: bool,
    topic_name_error: str | None = None,
) -> MoveVerdict:
    """What to do for one partition of AlterReplicaLogDirs (see the module doc).

    `current_dir` is the dir holding the replica's log (None: no log here); `hosted` says the
    broker hosts the replica (it has a partition for it); `topic_name_error` why the name is
    illegal, if it is.
    """
    name = f"{topic}-{partition}"
    if topic_name_error is not None:
        return MoveVerdict(MoveDecision.REFUSE, ErrorCode.INVALID_TOPIC_EXCEPTION, topic_name_error)
    if destination not in log_dirs:
        return MoveVerdict(
            MoveDecision.REFUSE,
            ErrorCode.LOG_DIR_NOT_FOUND,
            f"{name}: {destination} is not one of this broker's log dirs",
        )
    if destination in offline_dirs:
        return MoveVerdict(
            MoveDecision.REFUSE,
            ErrorCode.KAFKA_STORAGE_ERROR,
            f"{name}: log dir {destination} is offline",
        )
    if current_dir is not None and current_dir in offline_dirs:
        return MoveVerdict(
            MoveDecision.REFUSE,
            ErrorCode.KAFKA_STORAGE_ERROR,
            f"{name} is offline (log dir {current_dir})",
        )
    if not hosted or current_dir is None:
        return MoveVerdict(
            MoveDecision.REMEMBER,
            ErrorCode.REPLICA_NOT_AVAILABLE,
            f"{name} is not hosted here; it will be created in {destination}",
        )
    if current_dir == destination:
        return MoveVerdict(MoveDecision.NOTHING, ErrorCode.NONE)
    if offline_dirs:
        # Kafka creates no future log while a dir is offline: the replica could then end up
        # with logs in two dirs once the offline one returns.
        return MoveVerdict(
            MoveDecision.REFUSE,
            ErrorCode.KAFKA_STORAGE_ERROR,
            f"{name}: not moving while log dirs {sorted(offline_dirs)} are offline",
        )
    return MoveVerdict(MoveDecision.MOVE, ErrorCode.NONE)
