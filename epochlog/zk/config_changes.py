"""Dynamic configs in ZooKeeper, as Kafka's ZooKeeper mode keeps them (AdminZkClient,
ZkConfigManager, ZkNodeChangeNotificationListener).

- Entity configs: `/config/topics/<t>`, `/config/brokers/<id>` and `/config/brokers/<default>`
  (the cluster-wide default), each `{"version":1,"config":{...}}` (`ConfigEntityZNode`).
- Each change is announced with a persistent sequential
  `/config/changes/config_change_<10 digits>` holding `{"version":2,"entity_path":"topics/<t>"}`
  (or `brokers/<id>`, `brokers/<default>`; `ConfigEntityChangeNotificationSequenceZNode`).
  The broker that received the AlterConfigs writes both (Kafka's AdminZkClient), the entity
  first: a notification always finds the config it announces.
- `ConfigChangeListener`: every broker watches `/config/changes`; on a change it reads the
  notifications it has not handled yet (sequence above the last one handled; all of them at
  start, as Kafka's listener starts from -1), calls back with the entity's type and name and its
  config, and deletes notifications older than 15 minutes (Kafka's changeExpirationMs).

All functions block; run them in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from epochlog.zk.session import WatchHandle, on_loop, watch_children
from epochlog.zk.znodes import ZNodeDecodeError, decode_topic_config, encode_topic_config

log = logging.getLogger(__name__)

CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONFIG_CHANGE_VERSION = 2
DEFAULT_ENTITY = "<default>"  # Kafka's ZooKeeperInternals.DEFAULT_STRING
TOPICS = "topics"
BROKERS = "brokers"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def entity_config_path(entity_type: str, name: str) -> str:
    return f"/config/{entity_type}/{name}"


def encode_config_change(entity_path: str) -> bytes:
    """Kafka's ConfigEntityChangeNotificationSequenceZNode.encode."""
    return json.dumps(
        {"version": CONFIG_CHANGE_VERSION, "entity_path": entity_path}, separators=(",", ":")
    ).encode()


def decode_config_change(data: bytes | None, path: str) -> tuple[str, str]:
    """(entity type, entity name) of a notification; version 1 ({"entity_type", "entity_name"})
    is read too, as Kafka does."""
    try:
        obj = json.loads((data or b"").decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ZNodeDecodeError(path, f"not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ZNodeDecodeError(path, "not a JSON object")
    version = obj.get("version")
    if version == 1:
        entity_type, name = obj.get("entity_type"), obj.get("entity_name")
    elif version == 2:
        entity_path = obj.get("entity_path")
        if not isinstance(entity_path, str) or "/" not in entity_path:
            raise ZNodeDecodeError(path, f"entity_path {entity_path!r} is not <type>/<name>")
        entity_type, name = entity_path.split("/", 1)
    else:
        raise ZNodeDecodeError(path, f"unsupported version {version!r} (1 and 2 are known)")
    if not isinstance(entity_type, str) or not isinstance(name, str) or not name:
        raise ZNodeDecodeError(path, "no entity type and name")
    return entity_type, name


def read_entity_config(client: KazooClient, entity_type: str, name: str) -> dict[str, str]:
    path = entity_config_path(entity_type, name)
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return {}
    return decode_topic_config(data, path)


def change_entity_config(
    client: KazooClient, entity_type: str, name: str, config: Mapping[str, str]
) -> str:
    """Write the entity's whole config, then announce it; returns the notification's path."""
    path = entity_config_path(entity_type, name)
    data = encode_topic_config(config)
    try:
        client.set(path, data)
    except NoNodeError:
        try:
            client.create(path, data, makepath=True)
        except NodeExistsError:
            client.set(path, data)
    return client.create(
        f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}",
        encode_config_change(f"{entity_type}/{name}"),
        sequence=True,
        makepath=True,
    )


def change_number(name: str) -> int:
    return int(name[len(CONFIG_CHANGE_PREFIX) :])


class ConfigChangeListener:
    """Calls `on_change(entity_type, name, config)` on the loop for every notification not yet
    handled (see the module docstring)."""

    def __init__(
        self,
        client: KazooClient,
        loop: asyncio.AbstractEventLoop,
        on_change: Callable[[str, str, dict[str, str]], Any],
        *,
        expiration_ms: int = CHANGE_EXPIRATION_MS,
    ) -> None:
        self.client = client
        self.loop = loop
        self.expiration_ms = expiration_ms
        self._deliver = on_loop(loop, on_change)
        self._last_handled = -1
        self._lock = threading.Lock()  # kazoo's watch thread and a start-up read
        self._handle: WatchHandle | None = None

    def start(self) -> None:
        """Set the watch (handles the pending notifications at once). Blocking."""
        self._handle = watch_children(
            self.client, CONFIG_CHANGES_PATH, self.loop, self._on_children
        )

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()

    def _on_children(self, children: list[str]) -> None:
        # On the loop: read in a thread, never blocking the loop on ZooKeeper.
        self.loop.run_in_executor(None, self.process, children)

    def process(self, children: list[str]) -> None:
        with self._lock:
            names = sorted(c for c in children if c.startswith(CONFIG_CHANGE_PREFIX))
            now = int(time.time() * 1000)
            for name in names:
                try:
                    number = change_number(name)
                except ValueError:
                    continue
                if number <= self._last_handled:
                    continue
                self._handle_one(name)
                self._last_handled = number
            self._purge(names, now)

    def _handle_one(self, name: str) -> None:
        path = f"{CONFIG_CHANGES_PATH}/{name}"
        try:
            data, _ = self.client.get(path)
            entity_type, entity = decode_config_change(data, path)
            config = read_entity_config(self.client, entity_type, entity)
        except NoNodeError:
            return
        except (ZNodeDecodeError, ValueError) as exc:
            log.warning("ignoring config change %s: %s", path, exc)
            return
        # SCRAM credentials (under users) are logged as [hidden], as Kafka logs them
        shown = {k: "[hidden]" if k.startswith("SCRAM-") else v for k, v in config.items()}
        log.info("config change %s: %s/%s = %s", name, entity_type, entity, shown)
        self._deliver(entity_type, entity, config)

    def _purge(self, names: list[str], now_ms: int) -> None:
        for name in names:
            path = f"{CONFIG_CHANGES_PATH}/{name}"
            try:
                _, stat = self.client.get(path)
            except NoNodeError:
                continue
            if now_ms - stat.ctime > self.expiration_ms:
                with contextlib.suppress(NoNodeError):
                    self.client.delete(path)
