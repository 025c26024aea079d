"""One broker process: ZooKeeper session, data plane, registration, controller election, shutdown.

Startup, in order: connect to ZooKeeper, make sure the top-level paths and the cluster id exist,
start the data plane (logs recovered, listening), register `/brokers/ids/<id>` (KIP-380: the
czxid is the broker epoch; every re-registration after a lost session feeds the new epoch to the
data plane), then join the controller election (with KIP-39's pin: see `controller.elector`).
A SIGTERM runs Kafka's controlled shutdown: ask the controller (over the wire, with this
broker's current epoch) to move leadership away, retrying with
`controlled.shutdown.retry.backoff.ms` up to `controlled.shutdown.max.retries`, then stop
serving, checkpoint and close cleanly. SIGKILL is a crash: the logs recover on the next start.

This package (`node/`) is the one place that assembles a broker process: the data plane
(`broker/`), the controller and the coordinators, which do not import each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from epochlog.aio import wait_for
from epochlog.broker.broker import Broker
from epochlog.broker.collaborators import BrokerEpochHolder, CollaboratorError
from epochlog.broker.eventloop import run
from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import ConnectionFailedError, RequestTimedOutError
from epochlog.client.sasl import login_of
from epochlog.config.broker import BrokerConfig, ConfigError
from epochlog.config.sasl import inter_broker_login
from epochlog.controller.assignment import AssignmentError, assign_replicas
from epochlog.controller.elector import ControllerElector
from epochlog.node.acls import ZkAcls, authorizer_enabled
from epochlog.node.controller_gateway import (
    ControllerGateway,
    ControllerLocator,
    ZkControllerPins,
)
from epochlog.node.dynamic_configs import ZkDynamicConfigs, load_broker_layers
from epochlog.node.groups import ZkGroupCoordinator, attach_group_coordinator
from epochlog.node.metrics import BrokerMetrics
from epochlog.node.open_files import raise_open_files_limit
from epochlog.node.shutdown_report import report_line
from epochlog.node.transactions import ZkTransactionCoordinator, attach_transaction_coordinator
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.security.tls import inter_broker_client_context
from epochlog.zk import controller_zk as zkc
from epochlog.zk.cluster import (
    allocate_producer_id_block,
    ensure_top_level_paths,
    get_or_create_cluster_id,
)
from epochlog.zk.log_dir_events import write_log_dir_event
from epochlog.zk.registration import BrokerRegistrar
from epochlog.zk.security import ZkLogin, zk_login_from_jaas
from epochlog.zk.session import close_client, connect, on_loop
from epochlog.zk.znodes import (
    BrokerRegistration,
    Endpoint,
    TopicAssignment,
    encode_topic_assignment,
    topic_path,
)

log = logging.getLogger(__name__)


class ZkTopicAutoCreator:
    """Auto-creation (Metadata for an unknown topic): write the topic znode with the broker
    defaults, as Kafka's AdminZkClient does; the controller's topic watch creates the partitions."""

    def __init__(self, zk: KazooClient, config: BrokerConfig) -> None:
        self.zk = zk
        self.config = config

    async def create_topic(self, name: str) -> None:
        def create() -> None:
            brokers = sorted(zkc.read_brokers(self.zk))
            try:
                assignment = assign_replicas(
                    brokers,
                    self.config["num.partitions"],
                    self.config["default.replication.factor"],
                    start_index=hash(name) % max(len(brokers), 1),
                )
            except AssignmentError as exc:
                raise CollaboratorError(ErrorCode[exc.error], str(exc)) from exc
            data = encode_topic_assignment(TopicAssignment(assignment, uuid.uuid4()))
            # someone else creating it meanwhile is fine
            with contextlib.suppress(NodeExistsError):
                self.zk.create(topic_path(name), data, makepath=True)

        await asyncio.to_thread(create)


class ZkProducerIdSource:
    """Producer ids in blocks of 1000 claimed through /latest_producer_id_block."""

    def __init__(self, zk: KazooClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._next = 0
        self._end = -1
        self._lock = asyncio.Lock()

    async def next_producer_id(self) -> int:
        async with self._lock:
            if self._next > self._end:
                block = await asyncio.to_thread(allocate_producer_id_block, self.zk, self.broker_id)
                self._next, self._end = block.block_start, block.block_end
            producer_id = self._next
            self._next += 1
            return producer_id


class ZkLogDirEventNotifier:
    """Writes Kafka's log-dir event notification for this broker (KIP-112), so the controller
    resends its LeaderAndIsr and learns from the answers which replicas it can serve."""

    def __init__(self, zk: KazooClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._writes: set[asyncio.Task[None]] = set()

    def notify(self) -> None:
        """Write one notification in the background (from the event loop)."""
        task = asyncio.get_running_loop().create_task(self._write())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self) -> None:
        try:
            path = await asyncio.to_thread(write_log_dir_event, self.zk, self.broker_id)
        except Exception as exc:
            log.error("cannot write the log dir event notification: %s", exc)
        else:
            log.info("wrote log dir event notification %s", path)


class BrokerProcess:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.stopping = asyncio.Event()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        loop.add_signal_handler(signal.SIGUSR1, _dump_tasks)  # where is each task waiting?
        gc.set_threshold(*GC_THRESHOLDS)
        if _log_slow_collections not in gc.callbacks:
            gc.callbacks.append(_log_slow_collections)
        zk = await asyncio.to_thread(
            connect,
            self.config["zookeeper.connect"],
            session_timeout_ms=self.config["zookeeper.session.timeout.ms"],
            login=zookeeper_login(self.config),
            secure_acls=self.config["zookeeper.set.acl"],
        )
        try:
            await self._serve(zk)
        finally:
            await asyncio.to_thread(close_client, zk)

    async def _serve(self, zk: KazooClient) -> None:
        await asyncio.to_thread(ensure_top_level_paths, zk)
        cluster_id = await asyncio.to_thread(get_or_create_cluster_id, zk)
        # Dynamic broker configs in ZooKeeper apply from the start (Kafka reads them first).
        layers = await asyncio.to_thread(load_broker_layers, zk, self.config)
        dynamic_configs = ZkDynamicConfigs(zk, layers)
        effective = layers.effective()
        elector = ControllerElector(self.broker_id, zk, effective)
        epoch_holder = BrokerEpochHolder()
        producer_ids = ZkProducerIdSource(zk, self.broker_id)
        broker = Broker(
            effective,
            cluster_id=cluster_id,
            controller=ControllerGateway(elector),
            auto_creator=ZkTopicAutoCreator(zk, self.config),
            producer_ids=producer_ids,
            epoch_holder=epoch_holder,
        )
        broker.services.controller_pins = ZkControllerPins(zk)  # KIP-39: any broker pins
        broker.services.config_store = dynamic_configs
        locator = ControllerLocator(zk, broker.metadata_cache, self.broker_id)
        elector.on_controller_change = locator.changed
        broker.services.locate_controller = locator.locate
        broker.replica_manager.topic_configs = lambda topic: zkc.read_topic_config(zk, topic)
        broker.replica_manager.on_storage_event = ZkLogDirEventNotifier(zk, self.broker_id).notify
        groups = ZkGroupCoordinator(zk, self.config, broker)
        attach_group_coordinator(broker, groups)
        transactions = ZkTransactionCoordinator(zk, self.config, broker, producer_ids)
        attach_transaction_coordinator(broker, transactions)
        acls = ZkAcls(zk, self.config) if authorizer_enabled(self.config) else None
        if acls is not None:  # before the listeners open: no request goes unchecked
            await acls.start(broker)
        metrics = BrokerMetrics(self.config)
        metrics.attach(broker, elector, groups.runtime)
        await broker.start()
        await metrics.start()
        await dynamic_configs.start(broker, elector)
        registration = BrokerRegistration(
            self.broker_id,
            tuple(
                Endpoint(e.listener, e.host, e.port, self.config.security_protocol(e.listener))
                for e in broker.advertised_endpoints
            ),
            rack=self.config["broker.rack"],
        )
        loop = asyncio.get_running_loop()
        registrar = BrokerRegistrar(zk, registration, on_new_epoch=on_loop(loop, epoch_holder.set))
        try:
            epoch_holder.set(await asyncio.to_thread(registrar.register))
            log.info("broker %d registered with epoch %d", self.broker_id, epoch_holder.epoch)
            await elector.start()
            await self.stopping.wait()
            log.info("broker %d shutting down", self.broker_id)
            if self.config["controlled.shutdown.enable"]:
                await self._controlled_shutdown(zk, epoch_holder)
        finally:
            await metrics.stop()
            dynamic_configs.stop()
            if acls is not None:
                acls.stop()
            await elector.stop()
            await groups.runtime.close()
            await transactions.close()
            await broker.stop()
            await asyncio.to_thread(registrar.close, deregister=True)

    async def _controlled_shutdown(self, zk: KazooClient, epoch_holder: BrokerEpochHolder) -> bool:
        """Ask the controller to move our leaderships away, as Kafka does: up to
        controlled.shutdown.max.retries retries, controlled.shutdown.retry.backoff.ms apart.
        True when it said it has; otherwise the partitions still led here are logged in one
        line (`shutdown_report`; `epochlog broker stop` reports them)."""
        retries = self.config["controlled.shutdown.max.retries"]
        backoff_s = self.config["controlled.shutdown.retry.backoff.ms"] / 1000
        remaining: list[str] | None = None  # None: the controller never answered
        error = ErrorCode.NONE
        for attempt in range(retries + 1):
            if attempt:
                await asyncio.sleep(backoff_s)
            try:
                answer = await self._ask_controller(zk, epoch_holder.epoch)
            except (ConnectionFailedError, RequestTimedOutError, OSError, TimeoutError) as exc:
                log.warning("controlled shutdown attempt %d failed: %s", attempt + 1, exc)
                continue
            if answer is None:
                log.warning("controlled shutdown attempt %d: no controller", attempt + 1)
                continue
            remaining = [f"{r.topic_name}-{r.partition_index}" for r in answer.remaining_partitions]
            error = ErrorCode.of(answer.error_code)
            if error is ErrorCode.NONE and not remaining:
                log.info("controlled shutdown of broker %d succeeded", self.broker_id)
                return True
            log.warning(
                "controlled shutdown attempt %d: %s, %d partitions still led: %s",
                attempt + 1,
                error.name,
                len(remaining),
                ", ".join(remaining[:20]) + (" ..." if len(remaining) > 20 else ""),
            )
        log.error(
            "%s",
            report_line(
                self.broker_id, retries + 1, remaining is not None, remaining or [], error.name
            ),
        )
        return False

    async def _ask_controller(self, zk: KazooClient, broker_epoch: int) -> Any:
        controller_id = await asyncio.to_thread(zkc.read_controller, zk)
        if controller_id is None:
            return None
        brokers = await asyncio.to_thread(zkc.read_brokers, zk)
        registered = brokers.get(controller_id)
        if registered is None:
            return None
        # the controller's endpoint on the inter-broker listener, as every broker-to-broker
        # connection (the first listener only if the registration predates named listeners)
        listener = self.config.inter_broker_listener
        endpoints = registered.registration.endpoints
        endpoint = next((e for e in endpoints if e.listener == listener), endpoints[0])
        connection = BrokerConnection(
            endpoint.host,
            endpoint.port,
            node_id=controller_id,
            client_id=f"broker-{self.broker_id}-shutdown",
            request_timeout_ms=self.config["request.timeout.ms"],
            ssl_context=inter_broker_client_context(self.config),
            # a SASL inter-broker listener wants the broker's login here too (without it the
            # controller closed the connection and every controlled shutdown failed)
            sasl=login_of(inter_broker_login(self.config)),
        )
        try:
            await wait_for(connection.connect(), 10)
            request = m.ControlledShutdownRequest(
                broker_id=self.broker_id, broker_epoch=broker_epoch
            )
            return await connection.send(request, api_key=ApiKey.CONTROLLED_SHUTDOWN)
        finally:
            await connection.close()


_gc_started: list[float] = []
SLOW_COLLECTION_S = 0.05
# Python's default (700, 10, 10) ran full collections of the whole heap several times a second
# while a broker with 10,000 partitions took a controller's LeaderAndIsr and UpdateMetadata
# (each decoded request is a few hundred thousand new objects): 200-470 ms each, freeing
# nothing, measured in the failover benchmark. A broker's garbage is freed by reference counting;
# young cycles are still collected often (small generations), full collections become rare.
GC_THRESHOLDS = (10_000, 10, 100)


def _log_slow_collections(phase: str, info: dict[str, int]) -> None:
    """Log a garbage collection that held the broker for long (like a JVM's GC log)."""
    if phase == "start":
        _gc_started[:] = [time.perf_counter()]
    elif _gc_started:
        took = time.perf_counter() - _gc_started[0]
        if took >= SLOW_COLLECTION_S:
            log.info(
                "garbage collection of generation %d took %.0f ms (%d collected)",
                info["generation"],
                took * 1000,
                info["collected"],
            )


def _dump_tasks() -> None:
    """SIGUSR1: log every asyncio task's stack, to see what a stuck broker waits for."""
    for task in asyncio.all_tasks():
        frames = "".join(
            f"\n    {f.f_code.co_filename}:{f.f_lineno} {f.f_code.co_name}"
            for f in task.get_stack()
        )
        log.warning("task %s%s", task.get_name(), frames)


def zookeeper_login(config: BrokerConfig) -> ZkLogin | None:
    """The broker's ZooKeeper login (`epochlog.zookeeper.login.config`), None without one;
    ConfigError when the file does not give one, or `zookeeper.set.acl` is on without it
    (Kafka refuses to start then too: nobody could write the znodes it locks)."""
    path = config["epochlog.zookeeper.login.config"]
    if not path:
        if config["zookeeper.set.acl"]:
            raise ConfigError(
                "zookeeper.set.acl=true needs a ZooKeeper login: set "
                "epochlog.zookeeper.login.config to a JAAS file with a Client section"
            )
        return None
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(
            f"epochlog.zookeeper.login.config: cannot read {path}: {exc.strerror}"
        ) from None
    try:
        return zk_login_from_jaas(text, path)
    except ValueError as exc:
        raise ConfigError(f"epochlog.zookeeper.login.config: {exc}") from None


def run_from_properties(path: str) -> int:
    """`epochlog broker start --config server.properties`: run one broker in the foreground."""
    try:
        config = BrokerConfig.from_properties(path)
        config.listeners  # noqa: B018 - validates the listener syntax now, with the key's name
        zookeeper_login(config)  # a bad ZooKeeper login stops the broker before it starts
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Plain one-line records (a broker's output is a file that people and tests grep).
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s %(levelname)s [broker {config.broker_id}] %(name)s: %(message)s",
        force=True,
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    raise_open_files_limit()  # a log's active segment stays open: one descriptor per replica
    run(BrokerProcess(config).run())
    return 0
