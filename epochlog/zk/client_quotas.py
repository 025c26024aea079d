"""Client quota configs in ZooKeeper: every entity under /config/users and /config/clients
(Kafka's AdminZkClient.fetchAllEntityConfigs and fetchAllChildEntityConfigs). Writing an
entity and announcing it is `config_changes.change_entity_config`, as for topics and brokers.

All functions block; run them in a thread.
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from epochlog.zk.config_changes import entity_config_path, read_entity_config
from epochlog.zk.znodes import ZNodeDecodeError

log = logging.getLogger(__name__)

USERS = "users"  # Kafka's ConfigType.User
CLIENTS = "clients"  # ConfigType.Client


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return []


def _read(client: KazooClient, config_type: str, name: str) -> dict[str, str] | None:
    try:
        return read_entity_config(client, config_type, name)
    except ZNodeDecodeError as exc:
        log.warning("ignoring %s: %s", entity_config_path(config_type, name), exc)
        return None


def read_all_quota_configs(client: KazooClient) -> list[tuple[str, str, dict[str, str]]]:
    """(config type, stored name, config) of every user, user/client and client entity;
    stored names are sanitized (`users`, `alice/clients/app`)."""
    found: list[tuple[str, str, dict[str, str]]] = []
    for user in _children(client, f"/config/{USERS}"):
        config = _read(client, USERS, user)
        if config is not None:
            found.append((USERS, user, config))
        for client_id in _children(client, f"/config/{USERS}/{user}/{CLIENTS}"):
            name = f"{user}/{CLIENTS}/{client_id}"
            config = _read(client, USERS, name)
            if config is not None:
                found.append((USERS, name, config))
    for client_id in _children(client, f"/config/{CLIENTS}"):
        config = _read(client, CLIENTS, client_id)
        if config is not None:
            found.append((CLIENTS, client_id, config))
    return found
