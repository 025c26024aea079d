"""What every command module shares: the error a command reports, where its cluster is, and
how its clients are configured (`--command-config`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from epochlog.client.config import SETTINGS, Role
from epochlog.config.broker import ConfigError, parse_properties

log = logging.getLogger(__name__)


class CommandError(Exception):
    """A command that cannot do what was asked; the message says why."""


def bootstrap_servers(args: argparse.Namespace) -> str:
    """`--bootstrap-server`, else the local cluster in `--dir` (`epochlog up`)."""
    if args.bootstrap_server:
        return args.bootstrap_server
    from epochlog.node.local_cluster import ClusterError, LocalCluster

    try:
        return LocalCluster.attach(args.dir).bootstrap_servers
    except ClusterError as exc:
        raise CommandError(f"{exc}, or pass --bootstrap-server") from None


def read_command_config(path: str | Path) -> dict[str, str]:
    """A client-properties file (Kafka's `--command-config` format: `key=value` lines)."""
    try:
        return parse_properties(Path(path).read_text(), str(path))
    except OSError as exc:
        raise CommandError(f"cannot read --command-config {path}: {exc.strerror}") from None
    except ConfigError as exc:
        raise CommandError(f"--command-config: {exc}") from None


def command_config_path(args: argparse.Namespace) -> str | None:
    """`--command-config`, else (no `--bootstrap-server`) the `client.properties` that
    `epochlog up --secure` wrote into the local cluster's directory `--dir`, if any."""
    path = getattr(args, "command_config", None)
    if path:
        return str(path)
    if getattr(args, "bootstrap_server", None) or not getattr(args, "dir", None):
        return None
    from epochlog.node.local_cluster import STATE_FILE
    from epochlog.node.secure_cluster import CLIENT_PROPERTIES

    directory = Path(args.dir)
    local = directory / CLIENT_PROPERTIES
    if (directory / STATE_FILE).exists() and local.exists():
        return str(local)
    return None


def client_config(args: argparse.Namespace, role: Role, **settings: Any) -> dict[str, Any]:
    """The config of a command's `role` client: the cluster's bootstrap servers, the keys of
    `--command-config` this role takes (security settings, timeouts), then `settings`. Without
    `--command-config` a secure local cluster's own client.properties is used
    (`command_config_path`).

    As Kafka's tools do with one client-properties file shared by producer, consumer and admin,
    a key another role takes is left out with a log line, not an error; a key no client knows is
    an error, since a typo in a security setting would otherwise be silently ignored."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers(args)}
    path = command_config_path(args)
    if path:
        config.update(command_config_settings(path, role))
    config.update(settings)
    return config


def command_config_settings(path: str | Path, role: Role) -> dict[str, str]:
    """The keys of the `--command-config` file at `path` a `role` client takes (see
    `client_config`: another role's key is left out, an unknown key is an error)."""
    config: dict[str, str] = {}
    for key, value in read_command_config(path).items():
        setting = SETTINGS.get(key)
        if setting is None:
            raise CommandError(f"--command-config {path}: {key!r} is not a client config key")
        if role not in setting.roles:
            log.info("--command-config: %s is not a %s setting; left out", key, role.value)
            continue
        config[key] = value
    return config
