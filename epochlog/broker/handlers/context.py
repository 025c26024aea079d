"""What every request handler gets: the broker's services and the connection it answers on.

`BrokerServices` bundles the broker's parts (config, metadata cache, replica manager, log
manager) and its injected collaborators (controller gateway, topic auto-creator, producer id
source, broker epoch), plus the broker's own advertised endpoints, so a Metadata answer lists
this broker even before the controller's first UpdateMetadata arrives. A handler is
`async (services, request, connection) -> response body | None`; None means no response
(Produce with acks=0). Raising `CloseConnection` closes the client's connection instead of
answering, which is how Kafka reacts to a failed acks=0 produce.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from epochlog.broker.client_quotas import ClientQuotas
from epochlog.broker.collaborators import (
    AclAdmin,
    BrokerEpochHolder,
    ControllerGateway,
    ControllerPins,
    DynamicConfigStore,
    GroupCoordinatorGateway,
    ProducerIdSource,
    TopicAutoCreator,
    TransactionCoordinatorGateway,
    TransactionVerifier,
)
from epochlog.broker.fetch_session import FetchSessionCache
from epochlog.broker.metadata_cache import BrokerEndpoint, MetadataCache
from epochlog.broker.replica_manager import ReplicaManager
from epochlog.config.broker import BrokerConfig
from epochlog.config.sasl import ListenerSasl
from epochlog.protocol.api import Request
from epochlog.security.principal import ANONYMOUS, KafkaPrincipal
from epochlog.security.scram_credentials import ScramCredentialCache
from epochlog.storage import LogManager

if TYPE_CHECKING:
    from epochlog.broker.authorization import RequestAuthorization


class CloseConnection(Exception):
    """Close the client's connection instead of answering (the message says why)."""


class AppendOrder:
    """A connection's produce waiting for transaction verification (KIP-890) before its
    append: `pending` is set once it has appended, and later produces of the connection append
    after that, so appends stay in request order (Kafka mutes the channel meanwhile)."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending: asyncio.Future[Any] | None = None


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    listener: str  # the listener name the client connected through, e.g. PLAINTEXT
    peer: str  # host:port of the client, for log lines
    appends: AppendOrder = field(default_factory=AppendOrder, compare=False)
    # Who the client is: ANONYMOUS on PLAINTEXT; a TLS certificate's mapped name; a SASL user
    # once authenticated (the connection then holds a new ConnectionInfo: `dataclasses.replace`).
    principal: KafkaPrincipal = ANONYMOUS
    security_protocol: str = "PLAINTEXT"  # the listener's, by listener.security.protocol.map


@dataclass
class BrokerServices:
    broker_id: int
    cluster_id: str | None
    config: BrokerConfig
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    log_manager: LogManager
    epoch_holder: BrokerEpochHolder
    controller: ControllerGateway
    auto_creator: TopicAutoCreator | None
    producer_ids: ProducerIdSource
    endpoints: tuple[BrokerEndpoint, ...] = ()  # this broker's advertised endpoints
    rack: str | None = None
    controller_pins: ControllerPins | None = None  # KIP-39 (None: no ZooKeeper, no pinning)
    group_coordinator: GroupCoordinatorGateway | None = None  # None: no groups served
    transaction_coordinator: TransactionCoordinatorGateway | None = None  # None: no transactions
    txn_verifier: TransactionVerifier | None = None  # KIP-890 (None: writes are not verified)
    config_store: DynamicConfigStore | None = None  # None: no config APIs (no ZooKeeper)
    # Reads the controller from ZooKeeper into the metadata cache while it names none that a
    # client could find (None: no ZooKeeper; the cache is all there is).
    locate_controller: Callable[[], Awaitable[None]] | None = None
    client_quotas: ClientQuotas = field(default_factory=ClientQuotas)  # fed by config changes
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)  # KIP-227
    # ACLs (issue 21): None when `authorizer.class.name` is empty: no check anywhere, and the
    # ACL APIs answer SECURITY_DISABLED.
    authorization: RequestAuthorization | None = None
    acl_admin: AclAdmin | None = None
    # SASL (issue 21): the settings of each SASL listener, and the SCRAM credentials that
    # ZooKeeper holds (fed by config changes).
    sasl_listeners: dict[str, ListenerSasl] = field(default_factory=dict)
    scram_credentials: ScramCredentialCache = field(default_factory=ScramCredentialCache)

    @property
    def kip380_enabled(self) -> bool:
        return self.config.enabled("epochlog.test.kip380.enabled")


Handler = Callable[[BrokerServices, Request, ConnectionInfo], Awaitable[Any]]
