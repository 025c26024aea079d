"""/admin/reassign_partitions: the ZooKeeper-mode way to ask for partition reassignments.

Kafka's tools before KIP-455 (kafka-reassign-partitions --zookeeper, removed from the tool in
Kafka 3.0, and third-party tools that write the znode directly) create it with
`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}`. Kafka's
ZooKeeper controller still honours it (ReassignPartitionsZNode, PartitionReassignmentHandler):
it starts every entry when the znode is created or when it takes over, takes each partition out
of the znode once its reassignment completes (or when an AlterPartitionReassignments request
supersedes it, or it cannot start), and deletes the znode when it is empty.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from epochlog.zk.znodes import ZNodeDecodeError

REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"


def encode_reassign_partitions(entries: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    partitions = [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(entries.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":")).encode()


def decode_reassign_partitions(
    data: bytes | None, path: str = REASSIGN_PARTITIONS_PATH
) -> dict[tuple[str, int], tuple[int, ...]]:
    """{(topic, partition): target replicas}; a malformed znode raises ZNodeDecodeError."""
    try:
        obj = json.loads((data or b"").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZNodeDecodeError(path, f"not JSON ({exc})") from None
    entries = obj.get("partitions") if isinstance(obj, dict) else None
    if not isinstance(entries, list):
        raise ZNodeDecodeError(path, 'expected {"version":1,"partitions":[...]}')
    result: dict[tuple[str, int], tuple[int, ...]] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise ZNodeDecodeError(path, f"bad partition entry {entry!r}")
        topic, partition, replicas = (
            entry.get("topic"),
            entry.get("partition"),
            entry.get("replicas"),
        )
        if (
            not isinstance(topic, str)
            or isinstance(partition, bool)
            or not isinstance(partition, int)
            or not isinstance(replicas, list)
            or not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas)
        ):
            raise ZNodeDecodeError(path, f"bad partition entry {entry!r}")
        result[(topic, partition)] = tuple(replicas)
    return result
