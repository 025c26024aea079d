"""What the broker needs from the rest of the process, as small interfaces the wiring injects.

The data plane knows nothing about ZooKeeper. The process wiring (`node/process.py`) hands a
`Broker` these collaborators, and tests hand it the simple in-process ones defined here:

- `BrokerEpochHolder`: this broker's current epoch (KIP-380), the czxid of its registration.
  The registration code calls `set(epoch)` on every (re-)registration, on the broker's event
  loop (from a ZooKeeper thread, hop over with `loop.call_soon_threadsafe`); control-request
  handlers read `epoch`, and the HW-checkpoint guard compares it with the generation of the last
  applied LeaderAndIsr. Listeners hear about every change.
- `ControllerGateway`: the controller running in this process. CreateTopics, DeleteTopics,
  ControlledShutdown, AlterPartition and the reassignment APIs (KIP-455) sent to this broker
  are answered by it when it is the active controller (`is_active`); otherwise the handlers
  answer NOT_CONTROLLER (or, for ControlledShutdown, STALE_CONTROLLER_EPOCH, as Kafka's ZK
  controller does) themselves.
- `TopicAutoCreator`: writes a topic znode when Metadata asks for an unknown topic and
  auto-creation is on; the controller then creates the partitions and tells the brokers.
- `ProducerIdSource`: producer ids for InitProducerId (ZooKeeper-backed blocks in production).
- `ControllerPins`: KIP-39's pin, read and changed for PinController requests (ZooKeeper-backed;
  a broker without one answers PinController with an error).
- `DynamicConfigStore`: topic and broker configs read and written for the config APIs
  (ZooKeeper's /config/*, with a change notification every broker watches).

`NoController` and `LocalProducerIdSource` are the stand-ins for running without ZooKeeper.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from epochlog.config.dynamic import BrokerLayers
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.messages.pin_controller import ControllerEventRecord, PinStatus
from epochlog.security.acls import AclBinding, AclBindingFilter

log = logging.getLogger(__name__)

NO_BROKER_EPOCH = -1


class BrokerEpochHolder:
    """This broker's current epoch; -1 until the first registration."""

    def __init__(self, epoch: int = NO_BROKER_EPOCH) -> None:
        self._epoch = epoch
        self._listeners: list[Callable[[int, int], None]] = []

    @property
    def epoch(self) -> int:
        return self._epoch

    def set(self, epoch: int) -> None:
        """Take a new epoch (a new registration). Epochs are czxids, so they only grow; a lower
        one is refused loudly rather than letting stale control requests through."""
        if epoch < self._epoch:
            raise ValueError(f"broker epoch cannot go back from {self._epoch} to {epoch}")
        old, self._epoch = self._epoch, epoch
        if epoch != old:
            log.info("broker epoch is now %d (was %d)", epoch, old)
            for listener in list(self._listeners):
                listener(old, epoch)

    def add_listener(self, listener: Callable[[int, int], None]) -> None:
        """`listener(old, new)` runs on every change, on the caller's thread."""
        self._listeners.append(listener)


@runtime_checkable
class ControllerGateway(Protocol):
    """The controller in this process. Each method gets the decoded request body and version and
    returns the response body (same API, same version). Called on the broker's event loop only
    while `is_active` is True."""

    @property
    def is_active(self) -> bool: ...

    async def create_topics(self, request: Any, version: int) -> Any: ...

    async def delete_topics(self, request: Any, version: int) -> Any: ...

    async def controlled_shutdown(self, request: Any, version: int) -> Any: ...

    async def alter_partition(self, request: Any, version: int) -> Any: ...

    async def create_partitions(self, request: Any, version: int) -> Any: ...

    async def elect_leaders(
        self, partitions: list[tuple[str, int]] | None, election_type: int, timeout_ms: int
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders of `election_type` (0 preferred, 1 unclean) for `partitions` (None:
        every partition): each partition's error and message (ELECTION_NOT_NEEDED left out
        when None)."""
        ...

    async def alter_partition_reassignments(self, request: Any, version: int) -> Any: ...

    async def list_partition_reassignments(self, request: Any, version: int) -> Any: ...

    def recent_events(self) -> list[ControllerEventRecord] | None:
        """The active controller's recent events, oldest first; None when not the controller."""
        ...


@runtime_checkable
class TopicAutoCreator(Protocol):
    """Creates a topic with the broker defaults (num.partitions, default.replication.factor).

    Returns when the topic's znode is written or already exists. To report a specific error
    (for example INVALID_REPLICATION_FACTOR when too few brokers are alive) raise an exception
    with an `error_code: ErrorCode` attribute; any other exception is UNKNOWN_SERVER_ERROR."""

    async def create_topic(self, name: str) -> None: ...


@runtime_checkable
class ProducerIdSource(Protocol):
    """Unique producer ids across the cluster and across restarts."""

    async def next_producer_id(self) -> int: ...


@runtime_checkable
class ControllerPins(Protocol):
    """KIP-39's controller pin. Each call returns the state after it; raise CollaboratorError
    to answer a specific error (BROKER_NOT_AVAILABLE for a broker that is not registered)."""

    async def describe(self) -> PinStatus: ...

    async def pin(self, broker_id: int | None, allow_absent: bool) -> PinStatus:
        """Pin `broker_id`; None: the live broker leading the fewest partitions."""
        ...

    async def unpin(self) -> PinStatus: ...


@runtime_checkable
class GroupCoordinatorGateway(Protocol):
    """The group coordinator running in this process (Kafka's classic group APIs).

    `api_keys` are the group APIs it answers (decoded bodies in, response bodies out, every
    version); FindCoordinator stays with the broker, which asks `partition_of` for a group's
    `__consumer_offsets` partition and answers with that partition's leader, after
    `create_offsets_topic` if the topic does not exist yet."""

    @property
    def api_keys(self) -> frozenset[int]: ...

    @property
    def partition_count(self) -> int: ...

    def partition_of(self, group_id: str) -> int: ...

    async def create_offsets_topic(self) -> None: ...

    async def handle(
        self, api_key: int, version: int, body: Any, client_id: str, client_host: str
    ) -> Any: ...

    def start_offset_commit(
        self, version: int, body: Any, client_id: str, client_host: str
    ) -> asyncio.Future[Any]:
        """OffsetCommit begun now: the commit is queued in call order before this returns,
        and the future gets the response body once it is replicated."""
        ...

    def transaction_completed(self, partition: int, producer_id: int, committed: bool) -> None:
        """WriteTxnMarkers wrote and replicated the producer's COMMIT (or ABORT) marker in
        `__consumer_offsets` partition `partition`: its transactional offsets there are
        committed (or dropped)."""
        ...


@runtime_checkable
class TransactionCoordinatorGateway(Protocol):
    """The transaction coordinator running in this process.

    `api_keys` are the APIs it answers (InitProducerId with a transactional id,
    AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions: decoded
    bodies in, response bodies out, every version). FindCoordinator stays with the broker, which
    asks `partition_of` for an id's `__transaction_state` partition and answers with its leader,
    after `create_state_topic` if the topic does not exist yet."""

    @property
    def api_keys(self) -> frozenset[int]: ...

    def partition_of(self, transactional_id: str) -> int: ...

    async def create_state_topic(self) -> None: ...

    async def handle(self, api_key: int, version: int, body: Any) -> Any: ...


@runtime_checkable
class TransactionVerifier(Protocol):
    """Asks a transactional id's coordinator whether partitions are in the producer's ongoing
    transaction (KIP-890 part 1: AddPartitionsToTxn v4, VerifyOnly). The answer has an error
    per partition (NONE: verified), as `txn_verification.verification_errors` reads it;
    COORDINATOR_NOT_AVAILABLE when no coordinator is known, NETWORK_EXCEPTION when the
    request is lost."""

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: tuple[tuple[str, int], ...],
    ) -> dict[tuple[str, int], Any]: ...


class NoController:
    """The gateway of a broker that is never the controller (tests without ZooKeeper)."""

    @property
    def is_active(self) -> bool:
        return False

    async def create_topics(self, request: Any, version: int) -> Any:
        raise RuntimeError("not the controller")

    async def delete_topics(self, request: Any, version: int) -> Any:
        raise RuntimeError("not the controller")

    async def controlled_shutdown(self, request: Any, version: int) -> Any:
        raise RuntimeError("not the controller")

    async def alter_partition(self, request: Any, version: int) -> Any:
        raise RuntimeError("not the controller")

    async def create_partitions(self, request: Any, version: int) -> Any:
        raise RuntimeError("not the controller")

    async def elect_leaders(
        self, partitions: list[tuple[str, int]] | None, election_type: int, timeout_ms: int
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        raise RuntimeError("not the controller")

    async def alter_partition_reassignments(self, request: Any, version: int) -> Any:
        raise RuntimeError("not the controller")

    async def list_partition_reassignments(self, request: Any, version: int) -> Any:
        raise RuntimeError("not the controller")

    def recent_events(self) -> list[ControllerEventRecord] | None:
        return None


class LocalProducerIdSource:
    """Producer ids from a counter, for a broker without ZooKeeper.

    It starts at the wall clock in microseconds so that a restarted broker does not hand out an
    id that its rebuilt producer state already knows (a reused id with sequence 0 would look like
    a duplicate). Not unique across brokers; the ZooKeeper-backed source is.
    """

    def __init__(self, start: int | None = None) -> None:
        self._next = start if start is not None else time.time_ns() // 1000

    async def next_producer_id(self) -> int:
        producer_id = self._next
        self._next += 1
        return producer_id


class DynamicConfigStore(Protocol):
    """Where dynamic configs live (ZooKeeper's /config/topics, /config/brokers). A write is
    announced to every broker, which applies it; `broker_layers` is this broker's view now."""

    def broker_layers(self) -> BrokerLayers: ...

    async def read_topic_config(self, topic: str) -> dict[str, str]: ...

    async def read_broker_config(self, broker_id: int | None) -> dict[str, str]: ...

    async def write_topic_config(self, topic: str, config: dict[str, str]) -> None: ...

    async def write_broker_config(self, broker_id: int | None, config: dict[str, str]) -> None:
        """broker_id None: the cluster-wide default (/config/brokers/<default>)."""
        ...

    async def read_quota_configs(self) -> list[tuple[str, str, dict[str, str]]]:
        """Every /config/users and /config/clients entity: (config type, stored name, config)."""
        ...

    async def read_entity_config(self, config_type: str, name: str) -> dict[str, str]: ...

    async def write_entity_config(
        self, config_type: str, name: str, config: dict[str, str]
    ) -> None:
        """Write /config/<config_type>/<name> and announce it (client quotas)."""
        ...


class CollaboratorError(Exception):
    """An error a collaborator raises to report a specific Kafka error code."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


class AclAdmin(Protocol):
    """Where ACLs live (ZooKeeper's /kafka-acl*): what Create/Describe/DeleteAcls change and
    read. A change is announced to every broker, whose authorizer follows it."""

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]: ...

    async def create(self, bindings: list[AclBinding]) -> None:
        """Add them (already validated); raises on a ZooKeeper failure."""
        ...

    async def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove every binding each filter matches; returns what each filter removed."""
        ...
