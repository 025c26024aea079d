"""DescribeLogDirs (v0-4) and AlterReplicaLogDirs (v0-2): this broker's log dirs.

The decisions are `broker.log_dir_report`'s; these handlers take the snapshot they decide from
(the log manager's dirs, logs and future logs, each partition's high watermark, the volume's
sizes from statvfs) and start or abandon moves through the replica manager's `ReplicaMover`.
Paths are the dirs' absolute paths, as Kafka reports them and as AlterReplicaLogDirs names them.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.log_dir_report import (
    INVALID_OFFSET_LAG,
    LogDirSnapshot,
    MoveDecision,
    ReplicaOnDisk,
    current_offset_lag,
    decide_replica_move,
    describe_log_dirs,
    future_offset_lag,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.errors import ErrorCode
from epochlog.storage.errors import StorageError
from epochlog.storage.layout import validate_topic_name

log = logging.getLogger(__name__)


def _volume_bytes(log_dir: Path) -> tuple[int, int]:
    """(total, usable) bytes of the volume holding `log_dir` (Kafka's FileStore figures)."""
    stats = os.statvfs(log_dir)
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


def log_dir_snapshots(services: BrokerServices) -> list[LogDirSnapshot]:
    manager = services.log_manager
    replicas = services.replica_manager
    by_dir: dict[Path, list[ReplicaOnDisk]] = {d: [] for d in manager.log_dirs}
    current_ends: dict[tuple[str, int], int] = {}
    for key, partition_log in manager.all_logs().items():
        log_dir = manager.dir_of(*key)
        if log_dir is None:
            continue
        current_ends[key] = partition_log.log_end_offset
        hosted = replicas.get_partition(*key)
        lag = (
            current_offset_lag(hosted.high_watermark, partition_log.log_end_offset)
            if hosted is not None
            else INVALID_OFFSET_LAG
        )
        by_dir[log_dir].append(ReplicaOnDisk(key[0], key[1], partition_log.size_in_bytes, lag))
    for key, future in manager.all_future_logs().items():
        log_dir = manager.future_dir_of(*key)
        if log_dir is None:
            continue
        current_end = current_ends.get(key)
        lag = (
            INVALID_OFFSET_LAG
            if current_end is None
            else future_offset_lag(current_end, future.log_end_offset)
        )
        by_dir[log_dir].append(
            ReplicaOnDisk(key[0], key[1], future.size_in_bytes, lag, is_future=True)
        )
    snapshots: list[LogDirSnapshot] = []
    for log_dir in manager.log_dirs:
        if log_dir in manager.offline_dirs:
            snapshots.append(LogDirSnapshot(str(log_dir), offline=True))
            continue
        try:
            total, usable = _volume_bytes(log_dir)
        except OSError as exc:
            log.warning("cannot read the size of log dir %s: %s", log_dir, exc)
            snapshots.append(LogDirSnapshot(str(log_dir), offline=True))
            continue
        snapshots.append(LogDirSnapshot(str(log_dir), False, total, usable, tuple(by_dir[log_dir])))
    return snapshots


async def handle_describe_log_dirs(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.DescribeLogDirsResponse
    body = request.body
    wanted = (
        None if body.topics is None else {(t.topic, p) for t in body.topics for p in t.partitions}
    )
    results = []
    for report in describe_log_dirs(log_dir_snapshots(services), wanted):
        results.append(
            R.DescribeLogDirsResult(
                error_code=report.error,
                log_dir=report.path,
                total_bytes=report.total_bytes,
                usable_bytes=report.usable_bytes,
                topics=[
                    R.DescribeLogDirsTopic(
                        name=topic,
                        partitions=[
                            R.DescribeLogDirsPartition(
                                partition_index=r.partition,
                                partition_size=r.size,
                                offset_lag=r.offset_lag,
                                is_future_key=r.is_future,
                            )
                            for r in replicas
                        ],
                    )
                    for topic, replicas in report.topics.items()
                ],
            )
        )
    return R(error_code=ErrorCode.NONE, results=results)


def _topic_name_error(topic: str) -> str | None:
    try:
        validate_topic_name(topic)
    except ValueError as exc:
        return str(exc)
    return None


def alter_replica_log_dir(
    services: BrokerServices, topic: str, partition: int, path: str
) -> ErrorCode:
    """Carry out one partition of an AlterReplicaLogDirs request; its error code."""
    manager = services.log_manager
    mover = services.replica_manager.replica_mover
    destination = manager.dir_for(path) if os.path.isabs(path) else None
    current = manager.dir_of(topic, partition)
    hosted = services.replica_manager.get_partition(topic, partition) is not None
    verdict = decide_replica_move(
        topic,
        partition,
        str(destination) if destination is not None else path,
        log_dirs=[str(d) for d in manager.log_dirs],
        offline_dirs=[str(d) for d in manager.offline_dirs],
        current_dir=str(current) if current is not None else None,
        hosted=hosted,
        topic_name_error=_topic_name_error(topic),
    )
    if verdict.decision is MoveDecision.REFUSE:
        log.info("AlterReplicaLogDirs refused: %s", verdict.message)
        return verdict.error
    assert destination is not None
    if verdict.decision is MoveDecision.REMEMBER:
        manager.set_preferred_dir(topic, partition, destination)
        log.info("AlterReplicaLogDirs: %s", verdict.message)
        return verdict.error
    if verdict.decision is MoveDecision.NOTHING:
        mover.abandon(topic, partition)  # a move elsewhere, if any, is no longer wanted
        return ErrorCode.NONE
    try:
        mover.start(topic, partition, destination)
    except (StorageError, OSError) as exc:
        log.warning("cannot move %s-%d to %s: %s", topic, partition, destination, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    log.info("moving %s-%d from %s to %s", topic, partition, current, destination)
    return ErrorCode.NONE


async def handle_alter_replica_log_dirs(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    R = m.AlterReplicaLogDirsResponse
    results: dict[str, list[Any]] = {}
    for entry in request.body.dirs:
        for topic in entry.topics:
            answers = results.setdefault(topic.name, [])
            for partition in topic.partitions:
                error = alter_replica_log_dir(services, topic.name, partition, entry.path)
                answers.append(
                    R.AlterReplicaLogDirPartitionResult(partition_index=partition, error_code=error)
                )
    return R(
        results=[
            R.AlterReplicaLogDirTopicResult(topic_name=name, partitions=partitions)
            for name, partitions in results.items()
        ]
    )
