"""Dynamic configs for one broker process: the ZooKeeper-backed `DynamicConfigStore` the config
handlers use, and the listener that applies every change at once.

At start the broker reads `/config/brokers/<default>` and `/config/brokers/<id>` before its
data plane starts, so its logs open with the dynamic settings (Kafka's
DynamicBrokerConfig.initialize). Then it watches `/config/changes`
(`zk.config_changes.ConfigChangeListener`): a topic change goes to the data plane (the topic's
partitions here get their new log config and min.insync.replicas) and to the controller if
this broker is it (its cached topic configs; unclean.leader.election.enable); a change to the
cluster default or to this broker's own configs recomputes the effective settings and applies
them to the data plane, the controller elector and the active controller. Changes to other
brokers' configs are not ours and are skipped. Client quotas (/config/users, /config/clients)
are all read at start, before the listener, as Kafka's ZkConfigManager does, and each change
goes to the data plane's `ClientQuotas`; a user's SCRAM credentials (same znodes) go to the
data plane's credential cache, so a SASL login reads no znode.
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.client import KazooClient

from epochlog.broker.broker import Broker
from epochlog.config.broker import BrokerConfig
from epochlog.config.client_quotas import CLIENTS, USERS, desanitize, entity_from_znode
from epochlog.config.dynamic import BrokerLayers
from epochlog.controller.elector import ControllerElector
from epochlog.zk.client_quotas import read_all_quota_configs
from epochlog.zk.config_changes import (
    BROKERS,
    DEFAULT_ENTITY,
    TOPICS,
    ConfigChangeListener,
    change_entity_config,
    read_entity_config,
)

log = logging.getLogger(__name__)


def load_broker_layers(zk: KazooClient, static: BrokerConfig) -> BrokerLayers:
    """This broker's three layers as ZooKeeper holds them now. Blocking."""
    return BrokerLayers(
        static,
        read_entity_config(zk, BROKERS, DEFAULT_ENTITY),
        read_entity_config(zk, BROKERS, str(static.broker_id)),
    )


class ZkDynamicConfigs:
    """The store the config handlers use, and the applier of change notifications."""

    def __init__(self, zk: KazooClient, layers: BrokerLayers) -> None:
        self.zk = zk
        self.layers = layers
        self.broker: Broker | None = None
        self.elector: ControllerElector | None = None
        self._listener: ConfigChangeListener | None = None
        self._applying: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ the store

    def broker_layers(self) -> BrokerLayers:
        return self.layers

    async def read_topic_config(self, topic: str) -> dict[str, str]:
        return await asyncio.to_thread(read_entity_config, self.zk, TOPICS, topic)

    async def read_broker_config(self, broker_id: int | None) -> dict[str, str]:
        return await asyncio.to_thread(read_entity_config, self.zk, BROKERS, _entity(broker_id))

    async def write_topic_config(self, topic: str, config: dict[str, str]) -> None:
        await asyncio.to_thread(change_entity_config, self.zk, TOPICS, topic, config)

    async def write_broker_config(self, broker_id: int | None, config: dict[str, str]) -> None:
        await asyncio.to_thread(change_entity_config, self.zk, BROKERS, _entity(broker_id), config)

    async def read_quota_configs(self) -> list[tuple[str, str, dict[str, str]]]:
        return await asyncio.to_thread(read_all_quota_configs, self.zk)

    async def read_entity_config(self, config_type: str, name: str) -> dict[str, str]:
        return await asyncio.to_thread(read_entity_config, self.zk, config_type, name)

    async def write_entity_config(
        self, config_type: str, name: str, config: dict[str, str]
    ) -> None:
        await asyncio.to_thread(change_entity_config, self.zk, config_type, name, config)

    # ------------------------------------------------------------------ applying

    async def start(self, broker: Broker, elector: ControllerElector) -> None:
        self.broker, self.elector = broker, elector
        for config_type, name, config in await self.read_quota_configs():
            self._apply_quota(broker, config_type, name, config)
        listener = ConfigChangeListener(self.zk, asyncio.get_running_loop(), self._on_change)
        self._listener = listener
        await asyncio.to_thread(listener.start)

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.cancel()

    def _on_change(self, entity_type: str, name: str, config: dict[str, str]) -> None:
        broker, elector = self.broker, self.elector
        if broker is None or elector is None:
            return
        if entity_type == TOPICS:
            broker.apply_topic_config(name, config)
            if elector.controller is not None:
                elector.controller.topic_config_changed(name, config)
            return
        if entity_type in (USERS, CLIENTS):
            self._apply_quota(broker, entity_type, name, config)
            return
        if entity_type != BROKERS:
            return
        if name == DEFAULT_ENTITY:
            if config == self.layers.cluster_default:
                return
            self.layers.cluster_default = dict(config)
        elif name == str(broker.broker_id):
            if config == self.layers.per_broker:
                return
            self.layers.per_broker = dict(config)
        else:
            return
        effective = self.layers.effective()
        elector.config = effective
        if elector.controller is not None:
            elector.controller.broker_config_changed(effective)
        task = asyncio.get_running_loop().create_task(broker.reconfigure(effective))
        self._applying.add(task)
        task.add_done_callback(self._applying.discard)

    @staticmethod
    def _apply_quota(broker: Broker, config_type: str, name: str, config: dict[str, str]) -> None:
        if config_type == USERS and "/" not in name:
            # SCRAM credentials live beside the user's quotas (Kafka's UserConfigHandler)
            broker.services.scram_credentials.update_user(desanitize(name), config)
        entity = entity_from_znode(config_type, name)
        if entity is None:
            log.warning("ignoring config of %s/%s: not a quota entity", config_type, name)
            return
        broker.services.client_quotas.apply_entity_config(entity, config)


def _entity(broker_id: int | None) -> str:
    return DEFAULT_ENTITY if broker_id is None else str(broker_id)
