"""A broker's data plane, assembled: log manager, metadata cache, replica manager, replica
fetchers, AlterPartition manager, handlers, network server. ZooKeeper and the controller are
outside it, injected as collaborators.

    broker = Broker(config, cluster_id=..., controller=gateway, auto_creator=creator,
                    producer_ids=source, epoch_holder=holder)
    await broker.start()   # loads the logs, starts the background tasks, listens
    ...                    # registration feeds holder.set(epoch); the controller sends
                           # LeaderAndIsr / UpdateMetadata to broker.advertised_endpoints
    await broker.stop()    # stops serving, checkpoints, flushes and closes the logs

Without collaborators it runs alone (tests): never the controller, no auto-creation, producer
ids from a local counter, broker epoch -1 until someone sets one. `start` loads the logs in a
worker thread (recovery after a crash can take a while) so the event loop stays responsive.
Listeners with port 0 get a free port; `advertised_endpoints` reports the real ones, so
register the broker after `start`.

Replication: the replica manager's hooks move partitions between replica fetchers
(`fetcher_manager`) as LeaderAndIsr and StopReplica arrive; its ISR changes go to the controller
named in the metadata cache through the `AlterPartitionManager`. Both talk to other brokers on
the first listener's name and consult the fault injector (`epochlog.test.faults.file`).
"""

from __future__ import annotations

import asyncio
import logging
import socket

from epochlog.broker.alter_partition_manager import AlterPartitionManager
from epochlog.broker.client_quotas import ClientQuotas
from epochlog.broker.collaborators import (
    BrokerEpochHolder,
    ControllerGateway,
    LocalProducerIdSource,
    NoController,
    ProducerIdSource,
    TopicAutoCreator,
)
from epochlog.broker.eventloop import loop_name
from epochlog.broker.fetch_session import FetchSessionCache
from epochlog.broker.fetcher_manager import ReplicaFetcherManager
from epochlog.broker.handlers import BrokerServices
from epochlog.broker.metadata_cache import BrokerEndpoint, MetadataCache
from epochlog.broker.replica_manager import ReplicaManager
from epochlog.broker.server import KafkaServer
from epochlog.broker.transmit import SendMode
from epochlog.client.sasl import login_of
from epochlog.config.broker import SECURITY_PROTOCOLS, BrokerConfig
from epochlog.config.sasl import inter_broker_login, is_sasl, listener_sasl
from epochlog.faults import FaultInjector
from epochlog.security.tls import inter_broker_client_context, listener_tls
from epochlog.storage import LogConfig, LogManager
from epochlog.storage.cleaner import CleanerConfig, run_on_loop

log = logging.getLogger(__name__)


def log_config_from(config: BrokerConfig) -> LogConfig:
    """The default topic config from the broker's log.* settings."""
    return LogConfig(
        segment_bytes=config["log.segment.bytes"],
        segment_ms=config.roll_ms,
        segment_index_bytes=config["log.index.size.max.bytes"],
        index_interval_bytes=config["log.index.interval.bytes"],
        retention_ms=config.retention_ms,
        retention_bytes=config["log.retention.bytes"],
        max_message_bytes=config["message.max.bytes"],
        flush_interval_messages=config["log.flush.interval.messages"],
        flush_ms=_first_set(
            config["log.flush.interval.ms"], config["log.flush.scheduler.interval.ms"]
        ),
        message_timestamp_type=config["log.message.timestamp.type"],
        decompressed_max_multiple=config["epochlog.message.max.decompressed.multiple"],
        cleanup_policy=",".join(sorted(set(config["log.cleanup.policy"]))),
        min_cleanable_dirty_ratio=config["log.cleaner.min.cleanable.ratio"],
        min_compaction_lag_ms=config["log.cleaner.min.compaction.lag.ms"],
        max_compaction_lag_ms=config["log.cleaner.max.compaction.lag.ms"],
        delete_retention_ms=config["log.cleaner.delete.retention.ms"],
        compression_type=config["compression.type"],
        compression_gzip_level=config["compression.gzip.level"],
        compression_lz4_level=config["compression.lz4.level"],
        compression_zstd_level=config["compression.zstd.level"],
    )


def _first_set(*values: int | None) -> int:
    return next(v for v in values if v is not None)


def cleaner_config_from(config: BrokerConfig) -> CleanerConfig:
    """The log cleaner's settings from the broker's log.cleaner.* keys."""
    return CleanerConfig(
        enable=config["log.cleaner.enable"],
        threads=config["log.cleaner.threads"],
        dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
        io_buffer_size=config["log.cleaner.io.buffer.size"],
        backoff_ms=config["log.cleaner.backoff.ms"],
        io_max_bytes_per_second=config["log.cleaner.io.max.bytes.per.second"],
        step_delay_ms=config["epochlog.test.cleaner.step.delay.ms"],
    )


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        cluster_id: str | None = None,
        controller: ControllerGateway | None = None,
        auto_creator: TopicAutoCreator | None = None,
        producer_ids: ProducerIdSource | None = None,
        epoch_holder: BrokerEpochHolder | None = None,
        send_mode: SendMode = SendMode.DIRECT,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.cluster_id = cluster_id
        self.epoch_holder = epoch_holder or BrokerEpochHolder()
        self.metadata_cache = MetadataCache()
        self.log_manager = LogManager(
            config.log_dirs, log_config_from(config), cleaner_config=cleaner_config_from(config)
        )
        self.replica_manager = ReplicaManager(
            broker_id=self.broker_id,
            config=config,
            log_manager=self.log_manager,
            metadata_cache=self.metadata_cache,
            epoch_holder=self.epoch_holder,
        )
        listener = config.inter_broker_listener
        # TLS: each SSL/SASL_SSL listener's server side, and this broker's client side on the
        # inter-broker listener (None when that is not TLS); a bad setting fails here, early.
        self.listener_tls = listener_tls(config)
        self.inter_broker_ssl = inter_broker_client_context(config)
        faults = FaultInjector.from_config(config)
        self.alter_partition_manager = AlterPartitionManager(
            broker_id=self.broker_id,
            broker_epoch=lambda: self.epoch_holder.epoch,
            metadata_cache=self.metadata_cache,
            listener=listener,
            request_timeout_ms=config["request.timeout.ms"],
            faults=faults,
            sasl=login_of(inter_broker_login(config)),
            ssl_context=self.inter_broker_ssl,
        )
        self.fetcher_manager = ReplicaFetcherManager(
            broker_id=self.broker_id,
            replica_manager=self.replica_manager,
            metadata_cache=self.metadata_cache,
            config=config,
            epoch_holder=self.epoch_holder,
            faults=faults,
            listener=listener,
            ssl_context=self.inter_broker_ssl,
        )
        rm = self.replica_manager
        rm.alter_partition_manager = self.alter_partition_manager
        rm.faults = faults
        rm.on_become_follower = self.fetcher_manager.add_partitions
        rm.on_become_leader = lambda ps: self.fetcher_manager.remove_partitions(p.key for p in ps)
        rm.on_stop_replicas = self.fetcher_manager.remove_partitions
        self.services = BrokerServices(
            broker_id=self.broker_id,
            cluster_id=cluster_id,
            config=config,
            metadata_cache=self.metadata_cache,
            replica_manager=self.replica_manager,
            log_manager=self.log_manager,
            epoch_holder=self.epoch_holder,
            controller=controller or NoController(),
            auto_creator=auto_creator,
            producer_ids=producer_ids or LocalProducerIdSource(),
            rack=config["broker.rack"],
            client_quotas=ClientQuotas(
                window_num=config["quota.window.num"],
                window_size_seconds=config["quota.window.size.seconds"],
            ),
            fetch_sessions=FetchSessionCache(config["max.incremental.fetch.session.cache.slots"]),
            sasl_listeners={
                e.listener: listener_sasl(config, e.listener)
                for e in config.listeners
                if is_sasl(config, e.listener)
            },
        )
        self.server = KafkaServer(
            self.services,
            max_request_bytes=config["socket.request.max.bytes"],
            send_mode=send_mode,
        )
        self._started = False

    def _high_watermark_of(self, key: tuple[str, int]) -> int | None:
        """For the log cleaner (on the loop): how far it may clean, the partition's last stable
        offset (min(HW, first unstable offset): an undecided transaction is never cleaned), None
        if it is not served."""
        partition = self.replica_manager.partitions.get(key)
        return None if partition is None else partition.last_stable_offset

    @property
    def advertised_endpoints(self) -> tuple[BrokerEndpoint, ...]:
        """Where clients reach this broker, with the bound ports (valid after `start`)."""
        return self.services.endpoints

    @property
    def port(self) -> int:
        return self.services.endpoints[0].port

    async def reconfigure(self, config: BrokerConfig) -> None:
        """Apply a dynamic broker config change at once (on the event loop): log defaults and
        min.insync.replicas for every partition without a topic override, the log cleaner's
        settings (its workers restart off the loop when their number changes), the replica
        fetchers' count and the replication throttle rates, and the config the handlers read
        (message.max.bytes, unclean.leader.election.enable, ...)."""
        self.config = config
        self.services.config = config
        rebuilt = self.replica_manager.apply_broker_config(config, log_config_from(config))
        log.info("broker %d: dynamic config applied to %d partitions", self.broker_id, rebuilt)
        self.fetcher_manager.resize(config["num.replica.fetchers"])
        await asyncio.to_thread(self.log_manager.cleaner.reconfigure, cleaner_config_from(config))

    def apply_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        """Apply a topic config change at once to this broker's partitions of the topic."""
        changed = self.replica_manager.apply_topic_config(topic, overrides)
        log.info("topic %s: config %s applied to %d partitions here", topic, overrides, changed)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.log_manager.startup, self.broker_id, self.cluster_id)
        try:
            self.replica_manager.startup()
            self.log_manager.cleaner.start(
                run_on_owner=run_on_loop(loop, self.log_manager.cleaner.stopping),
                high_watermark_of=self._high_watermark_of,
            )
            self.alter_partition_manager.start()
            bound: dict[str, int] = {}
            for endpoint in self.config.listeners:
                bound[endpoint.listener] = await self.server.listen(
                    endpoint.listener,
                    endpoint.host,
                    endpoint.port,
                    security_protocol=self.config.security_protocol(endpoint.listener),
                    tls=self.listener_tls.get(endpoint.listener),
                )
        except BaseException:
            await self.alter_partition_manager.stop()
            await self.replica_manager.shutdown()
            await self.server.stop()
            await loop.run_in_executor(None, self.log_manager.shutdown)
            raise
        advertised = []
        for endpoint in self.config.advertised_listeners:
            port = endpoint.port or bound.get(endpoint.listener, 0)
            host = endpoint.host if endpoint.host not in ("", "0.0.0.0", "::") else socket.getfqdn()
            advertised.append(
                BrokerEndpoint(
                    endpoint.listener,
                    host,
                    port,
                    SECURITY_PROTOCOLS[self.config.security_protocol(endpoint.listener)],
                )
            )
        self.services.endpoints = tuple(advertised)
        self._started = True
        log.info(
            "broker %d serving on %s (%s loop)",
            self.broker_id,
            ", ".join(f"{e.listener}://{e.host}:{e.port}" for e in advertised),
            loop_name(loop),
        )

    async def stop(self) -> None:
        """Stop serving and fetching, answer waiting requests, checkpoint the HWs, close the
        logs cleanly."""
        if not self._started:
            return
        self._started = False
        await self.server.stop()
        await self.fetcher_manager.shutdown()
        await self.alter_partition_manager.stop()
        await self.replica_manager.shutdown()
        await asyncio.get_running_loop().run_in_executor(None, self.log_manager.shutdown)
        log.info("broker %d stopped", self.broker_id)
