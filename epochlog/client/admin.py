"""The asyncio admin client: topics, the cluster, the controller pin, and consumer groups.

How it works. The admin's network client keeps metadata for all topics. CreateTopics and
DeleteTopics go to the controller (Metadata's ControllerId); a topic answered NOT_CONTROLLER, or
a request that cannot reach the controller, is retried after a metadata refresh until the
operation's timeout (`default.api.timeout.ms` unless given), so a controller move is invisible to
the caller. Listing and describing topics read a fresh Metadata response. `describe_cluster`
sends DescribeCluster to the least loaded broker and falls back to Metadata for brokers that do
not serve it (as librdkafka and kafka-python do). `pin_controller`, `unpin_controller` and
`describe_controller_pin` send epochlog's PinController (KIP-39) to any broker and return the
`PinStatus` it reports after the change; `describe_controller_events` sends a DESCRIBE asking
for the recent events to the controller (retried after a metadata refresh while the broker
asked is not the controller). Consumer groups and their offsets (list, describe,
delete; list, alter, delete offsets) and ListOffsets are in `admin_groups`;
describe_configs, alter_configs and incremental_alter_configs in `admin_configs`; log dirs,
producers and paginated topic descriptions in `admin_log_dirs`; create_partitions,
delete_records and elect_leaders in `admin_partitions`; partition reassignments (alter,
list) in `admin_reassign`; describe_client_quotas and alter_client_quotas in
`admin_quotas`; describe_transactions, list_transactions and abort_transaction (KIP-664) in
`admin_transactions`; all are mixed in here.

The `*_topics` calls return a result per topic (`None` on success, else the `KafkaError`); the
single-topic forms raise instead.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from epochlog.client.admin_configs import ConfigAdminOperations
from epochlog.client.admin_groups import GroupAdminOperations
from epochlog.client.admin_log_dirs import LogDirAdminOperations
from epochlog.client.admin_partitions import PartitionAdminOperations
from epochlog.client.admin_quotas import QuotaAdminOperations
from epochlog.client.admin_reassign import ReassignmentAdminOperations
from epochlog.client.admin_scram import ScramAdminOperations
from epochlog.client.admin_transactions import TransactionAdminOperations
from epochlog.client.config import Role, load_config
from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.metadata import BrokerNode, PartitionInfo
from epochlog.client.network import NetworkClient
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.messages.pin_controller import (
    ControllerEventRecord,
    PinOperation,
    PinStatus,
)

_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True)
class NewTopic:
    """A topic to create; -1 partitions or replication factor means the broker's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)
    replica_assignment: Mapping[int, Sequence[int]] | None = None


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[PartitionInfo]


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerNode]


@dataclass(frozen=True)
class ControllerEvents:
    """The controller's recent events (oldest first), as the controller `broker_id` kept them."""

    broker_id: int
    events: list[ControllerEventRecord]


class AsyncAdmin(
    GroupAdminOperations,
    ConfigAdminOperations,
    LogDirAdminOperations,
    PartitionAdminOperations,
    ReassignmentAdminOperations,
    QuotaAdminOperations,
    TransactionAdminOperations,
    ScramAdminOperations,
):
    """An asyncio admin client; see the module docstring."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = load_config(Role.ADMIN, config)
        self._net = NetworkClient(self.config, allow_auto_topic_creation=False)
        self._net.want_all_topics()
        self._started = False
        self._retry_backoff_ms: int = self.config["retry.backoff.ms"]

    @property
    def cluster_id(self) -> str | None:
        """The id of the cluster this client's metadata comes from (None before any)."""
        return self._net.cluster.cluster_id

    @property
    def rebootstraps(self) -> int:
        """How many times this client went back to bootstrap.servers (KIP-899 / KIP-1102)."""
        return self._net.rebootstraps

    async def __aenter__(self) -> AsyncAdmin:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        if not self._started:
            self._started = True
            await self._net.start()

    async def close(self) -> None:
        await self._net.close()

    def _timeout_ms(self, timeout: float | None) -> float:
        return self.config["default.api.timeout.ms"] if timeout is None else timeout * 1000

    # ---------------------------------------------------------------- topics

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        """Create one topic; raises KafkaError (e.g. TOPIC_ALREADY_EXISTS) on failure."""
        results = await self.create_topics(
            [NewTopic(name, partitions, replication_factor, dict(configs or {}))], timeout=timeout
        )
        if results[name] is not None:
            raise results[name]  # type: ignore[misc]

    async def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> dict[str, KafkaError | None]:
        wanted = {t.name: t for t in topics}

        def build(names: list[str], timeout_ms: int, version: int) -> Any:
            return m.CreateTopicsRequest(
                topics=[_creatable(wanted[n]) for n in names],
                timeout_ms=timeout_ms,
                validate_only=validate_only,
            )

        def parse(response: Any) -> dict[str, tuple[ErrorCode, str | None]]:
            return {t.name: (ErrorCode.of(t.error_code), t.error_message) for t in response.topics}

        return await self._to_controller(
            "CreateTopics", list(wanted), build, parse, ApiKey.CREATE_TOPICS, timeout
        )

    async def delete_topic(self, name: str, *, timeout: float | None = None) -> None:
        results = await self.delete_topics([name], timeout=timeout)
        if results[name] is not None:
            raise results[name]  # type: ignore[misc]

    async def delete_topics(
        self, names: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, KafkaError | None]:
        def build(todo: list[str], timeout_ms: int, version: int) -> Any:
            if version >= 6:  # topics by name or id; v0-5 list names only
                states = [
                    m.DeleteTopicsRequest.DeleteTopicState(name=n, topic_id=_ZERO_UUID)
                    for n in todo
                ]
                return m.DeleteTopicsRequest(topics=states, timeout_ms=timeout_ms)
            return m.DeleteTopicsRequest(topic_names=list(todo), timeout_ms=timeout_ms)

        def parse(response: Any) -> dict[str, tuple[ErrorCode, str | None]]:
            return {
                r.name: (ErrorCode.of(r.error_code), r.error_message)
                for r in response.responses
                if r.name is not None
            }

        return await self._to_controller(
            "DeleteTopics", list(dict.fromkeys(names)), build, parse, ApiKey.DELETE_TOPICS, timeout
        )

    async def list_topics(
        self, *, include_internal: bool = False, timeout: float | None = None
    ) -> list[str]:
        await self.start()
        cluster = await self._net.update_metadata(self._timeout_ms(timeout))
        return sorted(
            name
            for name, info in cluster.topics.items()
            if info.error is ErrorCode.NONE and (include_internal or not info.is_internal)
        )

    async def describe_topics(
        self, names: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, TopicDescription]:
        """Raises KafkaError (UNKNOWN_TOPIC_OR_PARTITION, ...) naming the first missing topic."""
        await self.start()
        cluster = await self._net.update_metadata(self._timeout_ms(timeout))
        out: dict[str, TopicDescription] = {}
        for name in names:
            info = cluster.topic(name)
            if info is None or info.error is not ErrorCode.NONE:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if info is None else info.error
                raise KafkaError(code, f"describe topic {name!r}")
            out[name] = TopicDescription(
                name,
                info.topic_id,
                info.is_internal,
                [info.partitions[p] for p in sorted(info.partitions)],
            )
        return out

    # ---------------------------------------------------------------- cluster

    async def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        await self.start()
        timeout_ms = self._timeout_ms(timeout)
        deadline = self._net.now_ms() + timeout_ms
        while True:
            remaining = deadline - self._net.now_ms()
            try:
                conn = await self._net.least_loaded_connection(max(remaining, 0))
                if not conn.supports(ApiKey.DESCRIBE_CLUSTER):
                    cluster = await self._net.update_metadata(max(remaining, 0))
                    return ClusterDescription(
                        cluster.cluster_id,
                        cluster.controller_id,
                        [cluster.brokers[b] for b in sorted(cluster.brokers)],
                    )
                response = await conn.send(
                    m.DescribeClusterRequest(include_cluster_authorized_operations=False),
                    api_key=ApiKey.DESCRIBE_CLUSTER,
                )
            except ClientError as exc:
                if self._net.now_ms() >= deadline:
                    raise KafkaError(
                        ErrorCode.REQUEST_TIMED_OUT, "DescribeCluster", str(exc)
                    ) from exc
                await asyncio.sleep(self._retry_backoff_ms / 1000)
                continue
            code = ErrorCode.of(response.error_code)
            if code is not ErrorCode.NONE:
                error = KafkaError(code, "DescribeCluster", response.error_message)
                if not error.retriable or self._net.now_ms() >= deadline:
                    raise error
                await asyncio.sleep(self._retry_backoff_ms / 1000)
                continue
            brokers = sorted(
                (
                    BrokerNode(b.broker_id, b.host, b.port, b.rack, b.broker_epoch)
                    for b in response.brokers
                ),
                key=lambda b: b.node_id,
            )
            return ClusterDescription(response.cluster_id, response.controller_id, brokers)

    # ---------------------------------------------------------------- controller pin (KIP-39)

    async def pin_controller(
        self,
        broker_id: int | None = None,
        *,
        auto: bool = False,
        allow_absent: bool = False,
        timeout: float | None = None,
    ) -> PinStatus:
        """Pin the controller to `broker_id`, or with `auto` to the live broker leading the
        fewest partitions. A broker that is not registered is refused (BROKER_NOT_AVAILABLE)
        unless `allow_absent`. Returns the state right after the pin: usually PENDING until
        the controller has moved."""
        if (broker_id is None) == (not auto):
            raise ValueError("pin_controller needs a broker id or auto=True (one of the two)")
        if broker_id is not None and broker_id < 0:
            raise ValueError(f"pin_controller: broker id must be >= 0, got {broker_id}")
        request = m.PinControllerRequest(
            operation=PinOperation.PIN,
            broker_id=-1 if broker_id is None else broker_id,
            auto=auto,
            allow_absent=allow_absent,
        )
        return await self._pin_request(request, timeout)

    async def unpin_controller(self, *, timeout: float | None = None) -> PinStatus:
        """Remove the pin (nothing happens when there is none); the controller stays put."""
        return await self._pin_request(
            m.PinControllerRequest(operation=PinOperation.UNPIN), timeout
        )

    async def describe_controller_pin(self, *, timeout: float | None = None) -> PinStatus:
        return await self._pin_request(
            m.PinControllerRequest(operation=PinOperation.DESCRIBE), timeout
        )

    async def describe_controller_events(
        self, *, timeout: float | None = None
    ) -> ControllerEvents:
        """The active controller's recent events: PinController DESCRIBE with
        IncludeRecentEvents, sent to the controller the metadata names."""
        await self.start()
        timeout_ms = self._timeout_ms(timeout)
        deadline = self._net.now_ms() + timeout_ms
        request = m.PinControllerRequest(
            operation=PinOperation.DESCRIBE, include_recent_events=True
        )
        last = "no answer"
        while True:
            remaining = deadline - self._net.now_ms()
            if remaining <= 0:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT, "PinController (controller events)", last
                )
            try:
                conn = await self._controller_connection(remaining, "PinController")
                response = await conn.send(request, api_key=ApiKey.PIN_CONTROLLER)
            except (ClientError, KafkaError) as exc:
                if isinstance(exc, KafkaError) and exc.code is not ErrorCode.NOT_CONTROLLER:
                    raise
                last = str(exc)
            else:
                code = ErrorCode.of(response.error_code)
                if code is not ErrorCode.NONE:
                    raise KafkaError(code, "PinController", response.error_message)
                if response.recent_events_broker_id >= 0:
                    return ControllerEvents(
                        response.recent_events_broker_id,
                        [
                            ControllerEventRecord(
                                e.name, e.detail, e.started_ms, e.duration_us, e.error
                            )
                            for e in response.recent_events
                        ],
                    )
                last = f"broker {conn.node_id} is not the controller"
            self._net.request_update()
            await asyncio.sleep(min(self._retry_backoff_ms, max(remaining, 0)) / 1000)

    async def _pin_request(self, request: Any, timeout: float | None) -> PinStatus:
        await self.start()
        deadline = self._net.now_ms() + self._timeout_ms(timeout)
        while True:
            try:
                conn = await self._net.least_loaded_connection(
                    max(deadline - self._net.now_ms(), 0)
                )
                if not conn.supports(ApiKey.PIN_CONTROLLER):
                    raise KafkaError(
                        ErrorCode.UNSUPPORTED_VERSION,
                        "PinController",
                        f"broker {conn.node_id} does not serve epochlog's PinController (KIP-39)",
                    )
                response = await conn.send(request, api_key=ApiKey.PIN_CONTROLLER)
            except KafkaError:
                raise
            except ClientError as exc:
                if self._net.now_ms() >= deadline:
                    raise KafkaError(
                        ErrorCode.REQUEST_TIMED_OUT, "PinController", str(exc)
                    ) from exc
                await asyncio.sleep(self._retry_backoff_ms / 1000)
                continue
            code = ErrorCode.of(response.error_code)
            if code is not ErrorCode.NONE:
                raise KafkaError(code, "PinController", response.error_message)
            return PinStatus(
                controller=None if response.controller_id < 0 else response.controller_id,
                pinned=None if response.pinned_broker_id < 0 else response.pinned_broker_id,
                ready=None if response.ready_broker_id < 0 else response.ready_broker_id,
                pinned_registered=response.pinned_broker_registered,
            )


def _creatable(topic: NewTopic) -> Any:
    assignments = [
        m.CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=list(b))
        for p, b in sorted((topic.replica_assignment or {}).items())
    ]
    return m.CreateTopicsRequest.CreatableTopic(
        name=topic.name,
        num_partitions=-1 if assignments else topic.num_partitions,
        replication_factor=-1 if assignments else topic.replication_factor,
        assignments=assignments,
        configs=[
            m.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
            for k, v in topic.configs.items()
        ],
    )
