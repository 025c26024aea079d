"""The ZooKeeper side of the controller: election, epoch-fenced writes, and the reads it needs.

Election (Kafka's `registerControllerAndIncrementControllerEpoch`): `try_elect` reads /controller;
if nobody holds it, it reads (or creates, at 0) /controller_epoch and commits one multi: create the
ephemeral /controller naming this broker, and setData /controller_epoch = epoch + 1 at the version
just read. Exactly one contender can win: the others get NODEEXISTS or BADVERSION and, after
checking that the winner is not in fact themselves (a retried multi), get None. The winner's
`ElectionResult` carries the new controller epoch and the /controller_epoch znode version.

Fencing: every write of a `FencedWriter` is a multi whose first op is
`check(/controller_epoch, version)`. When a newer controller has been elected the version has
moved, the check fails, nothing is written and `ControllerMovedError` is raised, so a deposed
controller can change nothing. Writes for many partitions are batched into multis of bounded size;
where items are independent (partition-state updates, creating state znodes, deleting nodes) a
failing item (BADVERSION, NODEEXISTS, NONODE) is reported for that item and the multi is
retried without it, so one stale partition does not block the others.

Reads are plain functions over a client, pipelined with kazoo's async calls for many znodes.
Watches are registered by the callers (controller and brokers) with `zk.watches`. Calls here
block: asyncio code runs them with `session.run_blocking`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.serialization import Create, Delete, SetData
from kazoo.protocol.states import ZnodeStat

from epochlog.zk.bulk_read import get_many
from epochlog.zk.session import (
    PendingCommit,
    TransactionFailedError,
    commit,
    creation_acl,
    session_id,
    stat_of,
)
from epochlog.zk.znodes import (
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    INITIAL_CONTROLLER_EPOCH,
    PartitionState,
    RegisteredBroker,
    TopicAssignment,
    TopicPartition,
    VersionedPartitionState,
    decode_broker_registration,
    decode_controller,
    decode_controller_epoch,
    decode_partition_state,
    decode_topic_assignment,
    decode_topic_config,
    delete_topic_path,
    encode_controller,
    encode_controller_epoch,
    encode_partition_state,
    encode_topic_assignment,
    encode_topic_config,
    parse_broker_id,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
)

log = logging.getLogger(__name__)

K = TypeVar("K")

# A multi travels in one ZooKeeper packet (jute.maxbuffer, 1 MiB by default): stay well below.
MAX_MULTI_BYTES = 512 * 1024
MAX_MULTI_OPS = 1000


class ControllerMovedError(RuntimeError):
    """The /controller_epoch version changed: another controller was elected; nothing written."""


class TopicAlreadyExistsError(RuntimeError):
    """create_topic found /brokers/topics/<t> already present."""


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------------------------
# Election
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ElectionResult:
    """This broker is the controller with `controller_epoch`; fence writes on `epoch_zk_version`."""

    broker_id: int
    controller_epoch: int
    epoch_zk_version: int


def read_controller(client: KazooClient) -> int | None:
    """The broker id in /controller, or None when there is no controller."""
    node = read_controller_node(client)
    return node[0] if node else None


def read_controller_node(client: KazooClient) -> tuple[int, ZnodeStat] | None:
    try:
        data, stat = client.get(CONTROLLER_PATH)
    except NoNodeError:
        return None
    return decode_controller(data).broker_id, stat


def read_controller_epoch(client: KazooClient) -> tuple[int, int] | None:
    """(controller epoch, /controller_epoch znode version), or None before the first election."""
    try:
        data, stat = client.get(CONTROLLER_EPOCH_PATH)
    except NoNodeError:
        return None
    return decode_controller_epoch(data), stat.version


def _read_or_create_controller_epoch(client: KazooClient) -> tuple[int, int]:
    while True:
        current = read_controller_epoch(client)
        if current is not None:
            return current
        try:
            client.create(CONTROLLER_EPOCH_PATH, encode_controller_epoch(INITIAL_CONTROLLER_EPOCH))
            return INITIAL_CONTROLLER_EPOCH, 0
        except NodeExistsError:
            continue


def _if_we_are_controller(client: KazooClient, broker_id: int) -> ElectionResult | None:
    node = read_controller_node(client)
    if node is None:
        return None
    controller, stat = node
    if controller != broker_id or stat.ephemeralOwner != session_id(client):
        return None
    epoch = read_controller_epoch(client)
    if epoch is None:
        return None
    return ElectionResult(broker_id, epoch[0], epoch[1])


def try_elect(
    client: KazooClient,
    broker_id: int,
    *,
    clock_ms: Callable[[], int] = _now_ms,
    guard: Callable[[TransactionRequest], None] | None = None,
) -> ElectionResult | None:
    """Try to become the controller; the result when this broker is it, None when another is.

    `guard` adds ops to the election multi that must succeed too (KIP-39: the ready-to-serve
    node must be absent or this broker's); when one fails this broker does not win."""
    existing = read_controller_node(client)
    if existing is not None:
        return _if_we_are_controller(client, broker_id)
    epoch, version = _read_or_create_controller_epoch(client)
    tx = client.transaction()
    tx.create(CONTROLLER_PATH, encode_controller(broker_id, clock_ms()), ephemeral=True)
    tx.set_data(CONTROLLER_EPOCH_PATH, encode_controller_epoch(epoch + 1), version=version)
    if guard is not None:
        guard(tx)
    try:
        results = commit(tx)
    except TransactionFailedError as exc:
        if isinstance(exc.error, NodeExistsError | BadVersionError) or exc.index >= 2:
            return _if_we_are_controller(client, broker_id)
        raise
    new_version = stat_of(results[1]).version
    log.info("broker %d elected controller with epoch %d", broker_id, epoch + 1)
    return ElectionResult(broker_id, epoch + 1, new_version)


# ---------------------------------------------------------------------------------------------
# Fenced writes
# ---------------------------------------------------------------------------------------------


class WriteOp(NamedTuple):
    """One op of a fenced multi. A tuple, not a dataclass: a failure writes one per partition
    (100,000), and building it was a visible share of the write."""

    kind: Literal["create", "set", "delete"]
    path: str  # absolute, normalised (the path builders of `znodes` make them so)
    data: bytes = b""
    version: int = -1

    def add_to(self, tx: TransactionRequest) -> None:
        # kazoo's TransactionRequest.create/set_data/delete check types, normalise the path and
        # log each op; our ops are already checked, so the kazoo request goes straight in.
        path = tx.client.chroot + self.path
        if self.kind == "create":
            acl = creation_acl(tx.client, self.path)  # zookeeper.set.acl: Kafka's secure ACLs
            tx.operations.append(Create(path, self.data, acl, 0))
        elif self.kind == "set":
            tx.operations.append(SetData(path, self.data, self.version))
        else:
            tx.operations.append(Delete(path, self.version))

    @property
    def size(self) -> int:
        return len(self.path) + len(self.data) + 32


def chunk_items(
    items: Sequence[tuple[K, Sequence[WriteOp]]],
    max_bytes: int = MAX_MULTI_BYTES,
    max_ops: int = MAX_MULTI_OPS,
) -> list[list[tuple[K, Sequence[WriteOp]]]]:
    """Split items (each a group of ops that must stay together) into multis of bounded size."""
    chunks: list[list[tuple[K, Sequence[WriteOp]]]] = []
    current: list[tuple[K, Sequence[WriteOp]]] = []
    size = count = 0
    for key, ops in items:
        item_size = sum(op.size for op in ops)
        if current and (size + item_size > max_bytes or count + len(ops) > max_ops):
            chunks.append(current)
            current, size, count = [], 0, 0
        current.append((key, ops))
        size += item_size
        count += len(ops)
    if current:
        chunks.append(current)
    return chunks


def _ops_of(items: Sequence[tuple[Any, Sequence[WriteOp]]]) -> list[WriteOp]:
    return [op for _, item_ops in items for op in item_ops]


@dataclass(frozen=True)
class ItemResults:
    """Per-item outcome of a batched fenced write: op results of the items written, errors of
    the items refused (BadVersionError, NodeExistsError, NoNodeError, ...)."""

    done: dict[Any, list[Any]]
    failed: dict[Any, Exception]


@dataclass(frozen=True)
class PartitionUpdateResult:
    """New znode versions (partition epochs) of the partitions written; errors of the others."""

    updated: dict[TopicPartition, int]
    failed: dict[TopicPartition, Exception]


class FencedWriter:
    """Writes as the controller of one epoch: every multi checks /controller_epoch's version."""

    def __init__(
        self, client: KazooClient, epoch_zk_version: int, controller_epoch: int | None = None
    ) -> None:
        self.client = client
        self.epoch_zk_version = epoch_zk_version
        self.controller_epoch = controller_epoch

    @classmethod
    def for_election(cls, client: KazooClient, election: ElectionResult) -> FencedWriter:
        return cls(client, election.epoch_zk_version, election.controller_epoch)

    # -- the fenced multi ---------------------------------------------------------------------

    def commit(self, ops: Sequence[WriteOp]) -> list[Any]:
        """Commit `ops` behind the epoch check as one multi; results exclude the check's."""
        return self._result(self._send(ops))

    def _send(self, ops: Sequence[WriteOp]) -> PendingCommit:
        tx = self.client.transaction()
        tx.check(CONTROLLER_EPOCH_PATH, self.epoch_zk_version)
        for op in ops:
            op.add_to(tx)
        return PendingCommit(tx)

    def _result(self, pending: PendingCommit) -> list[Any]:
        try:
            return pending.result()[1:]
        except TransactionFailedError as exc:
            if exc.index == 0:
                raise ControllerMovedError(
                    f"controller epoch znode is no longer at version {self.epoch_zk_version} "
                    f"({type(exc.error).__name__}): a newer controller was elected"
                ) from exc
            raise

    def commit_items(self, items: Mapping[K, Sequence[WriteOp]]) -> ItemResults:
        """Commit independent items in bounded multis; an item whose op fails is dropped and
        reported, and the rest of its multi retried without it."""
        done: dict[Any, list[Any]] = {}
        failed: dict[Any, Exception] = {}
        # Every multi is sent before the first answer is awaited: ZooKeeper applies one
        # session's requests in order, and a failover of 10,000 partitions is 10+ multis whose
        # round trips would otherwise add up. A multi that fails is resent without its culprit.
        chunks = chunk_items(list(items.items()))
        sent = [self._send(_ops_of(chunk)) for chunk in chunks]
        for chunk, pending in zip(chunks, sent, strict=True):
            remaining = chunk
            while remaining:
                owners = [key for key, item_ops in remaining for _ in item_ops]
                try:
                    results = self._result(pending)
                except TransactionFailedError as exc:
                    culprit = owners[exc.index - 1]
                    failed[culprit] = exc.error
                    remaining = [(k, o) for k, o in remaining if k != culprit]
                    if remaining:
                        pending = self._send(_ops_of(remaining))
                    continue
                position = 0
                for key, item_ops in remaining:
                    done[key] = results[position : position + len(item_ops)]
                    position += len(item_ops)
                break
        return ItemResults(done, failed)

    # -- topics -------------------------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        assignment: TopicAssignment,
        states: Mapping[int, PartitionState],
        config: Mapping[str, str] | None = None,
    ) -> dict[int, int]:
        """Create the config, topic, partitions and state znodes; returns {partition: version}.

        Small topics take one multi. A topic too large for one multi is written in several,
        parents first; if the controller moves in between, the next one finds partitions without
        state znodes and initialises them, as Kafka's controller does with new partitions.
        """
        config_op = self._config_op(topic, config or {})
        head = [
            config_op,
            WriteOp("create", topic_path(topic), encode_topic_assignment(assignment)),
            WriteOp("create", partitions_path(topic)),
        ]
        items: list[tuple[Any, Sequence[WriteOp]]] = [("head", head)]
        for partition in sorted(states):
            items.append(
                (
                    partition,
                    [
                        WriteOp("create", partition_path(topic, partition)),
                        WriteOp(
                            "create",
                            partition_state_path(topic, partition),
                            encode_partition_state(states[partition]),
                        ),
                    ],
                )
            )
        for chunk in chunk_items(items):
            ops = [op for _, item_ops in chunk for op in item_ops]
            try:
                self.commit(ops)
            except TransactionFailedError as exc:
                if isinstance(exc.error, NodeExistsError) and exc.path == topic_path(topic):
                    raise TopicAlreadyExistsError(f"topic {topic!r} already exists") from exc
                raise
        return {partition: 0 for partition in states}

    def set_topic_assignment(
        self, topic: str, assignment: TopicAssignment, expected_version: int = -1
    ) -> int:
        """Rewrite /brokers/topics/<t> (new partitions, reassignment); returns the new version."""
        op = WriteOp(
            "set", topic_path(topic), encode_topic_assignment(assignment), expected_version
        )
        return stat_of(self.commit([op])[0]).version

    def create_partition_states(
        self, topic: str, states: Mapping[int, PartitionState]
    ) -> tuple[dict[int, int], dict[int, Exception]]:
        """Create state znodes (and missing partition parents) for partitions of an existing
        topic; returns ({partition: version 0}, {partition: error, e.g. NodeExistsError})."""
        if self.client.exists(partitions_path(topic)) is None:
            try:
                self.commit([WriteOp("create", partitions_path(topic))])
            except TransactionFailedError as exc:
                if not isinstance(exc.error, NodeExistsError):
                    raise
        partitions = sorted(states)
        # which partition parents exist, in one bulk read (kazoo's one exists per partition
        # cost 0.3 s per 1,000 partitions created)
        parents = [partition_path(topic, p) for p in partitions]
        items: dict[int, list[WriteOp]] = {}
        for partition, parent, found in zip(
            partitions, parents, get_many(self.client, parents), strict=True
        ):
            ops = [] if found is not None else [WriteOp("create", parent)]
            ops.append(
                WriteOp(
                    "create",
                    partition_state_path(topic, partition),
                    encode_partition_state(states[partition]),
                )
            )
            items[partition] = ops
        result = self.commit_items(items)
        return {p: 0 for p in result.done}, dict(result.failed)

    def update_partition_states(
        self, updates: Mapping[TopicPartition, tuple[PartitionState, int]]
    ) -> PartitionUpdateResult:
        """Conditionally write partition states: {tp: (new state, expected znode version)}.

        Returns each written partition's new version (its partition epoch); a partition whose
        version moved gets BadVersionError, a deleted one NoNodeError, and is not written.
        """
        items = {
            tp: [WriteOp("set", partition_state_path(*tp), encode_partition_state(state), version)]
            for tp, (state, version) in updates.items()
        }
        result = self.commit_items(items)
        return PartitionUpdateResult(
            {tp: stat_of(res[0]).version for tp, res in result.done.items()}, dict(result.failed)
        )

    def delete_topic(self, topic: str, *, delete_config: bool = True) -> None:
        """Delete /brokers/topics/<t> recursively (children first) and its config znode."""
        paths = _subtree_bottom_up(self.client, topic_path(topic))
        if delete_config:
            paths.append(topic_config_path(topic))
        self.delete_paths(paths)

    def delete_topic_deletion_markers(self, topics: Iterable[str]) -> None:
        """Delete /admin/delete_topics/<t> for topics whose deletion is complete."""
        self.delete_paths([delete_topic_path(t) for t in topics])

    def delete_paths(self, paths: Sequence[str]) -> None:
        """Delete znodes in order, batched and fenced; nodes already gone are fine."""
        result = self.commit_items({path: [WriteOp("delete", path)] for path in paths})
        for path, error in result.failed.items():
            if not isinstance(error, NoNodeError):
                error.add_note(f"while deleting {path}")
                raise error

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        self.commit([self._config_op(topic, config)])

    def resign(self) -> None:
        """Delete /controller (fenced, so only the current controller can): a new election runs.

        KIP-39's controller does this when the ready-to-serve node names another broker.
        """
        self.delete_paths([CONTROLLER_PATH])

    def _config_op(self, topic: str, config: Mapping[str, str]) -> WriteOp:
        path = topic_config_path(topic)
        if self.client.exists(path) is None:
            return WriteOp("create", path, encode_topic_config(config))
        return WriteOp("set", path, encode_topic_config(config))


def _subtree_bottom_up(client: KazooClient, root: str) -> list[str]:
    """Every znode under `root` and `root` itself, children before their parents."""
    order: list[str] = []

    def visit(path: str) -> None:
        try:
            children = client.get_children(path)
        except NoNodeError:
            return
        for child in sorted(children):
            visit(f"{path}/{child}")
        order.append(path)

    visit(root)
    return order


# ---------------------------------------------------------------------------------------------
# Reads
# ---------------------------------------------------------------------------------------------


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return []


def read_brokers(client: KazooClient) -> dict[int, RegisteredBroker]:
    """Every registered broker with its epoch (czxid) and session (ephemeralOwner)."""
    ids = [parse_broker_id(child) for child in _children(client, BROKER_IDS_PATH)]
    pending = [(i, f"{BROKER_IDS_PATH}/{i}") for i in ids]
    fetches = [(i, path, client.get_async(path)) for i, path in pending]
    brokers: dict[int, RegisteredBroker] = {}
    for broker_id, path, fetch in fetches:
        try:
            data, stat = fetch.get()
        except NoNodeError:
            continue  # went away since the listing
        if not data:
            continue  # not a registration (the registration multi never leaves it empty)
        registration = decode_broker_registration(broker_id, data, path)
        brokers[broker_id] = RegisteredBroker(registration, stat.czxid, stat.ephemeralOwner)
    return dict(sorted(brokers.items()))


def list_topics(client: KazooClient) -> list[str]:
    return _children(client, BROKER_TOPICS_PATH)


def read_topic(client: KazooClient, topic: str) -> TopicAssignment | None:
    path = topic_path(topic)
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return None
    return decode_topic_assignment(data, path)


def read_topics(
    client: KazooClient, topics: Iterable[str] | None = None
) -> dict[str, TopicAssignment]:
    """Assignments (with topic ids) of `topics`, or of every topic; missing ones are left out."""
    names = list_topics(client) if topics is None else list(topics)
    paths = [topic_path(t) for t in names]
    result: dict[str, TopicAssignment] = {}
    for topic, path, found in zip(names, paths, get_many(client, paths), strict=True):
        if found is not None:
            result[topic] = decode_topic_assignment(found[0], path)
    return result


def read_partition_states(
    client: KazooClient, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, VersionedPartitionState]:
    """States with znode versions (partition epochs); partitions without a state are left out."""
    tps = list(partitions)
    paths = [partition_state_path(topic, partition) for topic, partition in tps]
    result: dict[TopicPartition, VersionedPartitionState] = {}
    for tp, path, found in zip(tps, paths, get_many(client, paths), strict=True):
        if found is not None:
            data, stat = found
            result[tp] = VersionedPartitionState(decode_partition_state(data, path), stat.version)
    return result


def read_all_partition_states(
    client: KazooClient, assignments: Mapping[str, TopicAssignment]
) -> dict[TopicPartition, VersionedPartitionState]:
    """The states of every partition of the given topics (e.g. from `read_topics`)."""
    return read_partition_states(
        client, [(t, p) for t, a in assignments.items() for p in a.partitions]
    )


def read_topic_deletions(client: KazooClient) -> list[str]:
    """Topics queued for deletion (children of /admin/delete_topics)."""
    return _children(client, DELETE_TOPICS_PATH)


def read_topic_config(client: KazooClient, topic: str) -> dict[str, str]:
    path = topic_config_path(topic)
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return {}
    return decode_topic_config(data, path)


def read_topic_configs(client: KazooClient, topics: Iterable[str]) -> dict[str, dict[str, str]]:
    """The topic-level settings of each topic ({} for a topic without any), read together."""
    names = list(topics)
    paths = [topic_config_path(t) for t in names]
    return {
        topic: {} if found is None else decode_topic_config(found[0], path)
        for topic, path, found in zip(names, paths, get_many(client, paths), strict=True)
    }


def mark_topic_for_deletion(client: KazooClient, topic: str) -> bool:
    """Create /admin/delete_topics/<t> (what DeleteTopics does); False if already marked."""
    try:
        client.create(delete_topic_path(topic), b"", makepath=True)
    except NodeExistsError:
        return False
    return True
