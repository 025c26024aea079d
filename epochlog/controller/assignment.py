"""Replica assignment for new topics: Kafka's rack-unaware round robin with shifted followers.

Partition p's first replica is broker (start + p) mod n; its followers follow at a shift that
grows by one every n partitions, so leaders and followers both spread evenly over the brokers
(AdminUtils.assignReplicasToBrokersRackUnaware). `start` and the initial shift are random in
Kafka; callers pass them, so the function stays deterministic and testable.
"""

from __future__ import annotations

from collections.abc import Sequence


class AssignmentError(ValueError):
    """A topic that cannot be placed; `error` names Kafka's error for the CreateTopics answer."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    start_index: int = 0,
    replica_shift: int = 0,
    first_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    if partitions <= 0:
        raise AssignmentError(
            "INVALID_PARTITIONS", f"number of partitions must be > 0, not {partitions}"
        )
    if replication_factor <= 0:
        raise AssignmentError(
            "INVALID_REPLICATION_FACTOR",
            f"replication factor must be > 0, not {replication_factor}",
        )
    ordered = sorted(brokers)
    n = len(ordered)
    if replication_factor > n:
        raise AssignmentError(
            "INVALID_REPLICATION_FACTOR",
            f"replication factor {replication_factor} is larger than the {n} available brokers",
        )
    result: dict[int, tuple[int, ...]] = {}
    shift = replica_shift
    for partition in range(first_partition, first_partition + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            offset = 1 + (shift + j) % (n - 1)
            replicas.append(ordered[(first + offset) % n])
        result[partition] = tuple(replicas)
    return result
