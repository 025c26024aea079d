"""`--command-config FILE`: Kafka's client-properties file, as kafka-topics.sh and kafka-consumer-
groups.sh take it, turned into our clients' configs.

The file is read as Java properties (`key=value`, `#` comments). Every key goes to each client
the console makes (its admin and the consumer that reads records) that takes it: security
settings (`security.protocol`, `ssl.*`, `sasl.*`) reach both, so the console works against a
secure cluster with the same file Kafka's tools use. A key no client of ours knows, or a value
a client refuses, is an error naming the file and the key, raised before the console starts.
`bootstrap.servers` on the command line wins over the file's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from epochlog.client.config import SETTINGS, Role, load_config
from epochlog.client.errors import ConfigError
from epochlog.config.broker import ConfigError as PropertiesError
from epochlog.config.broker import parse_properties


class CommandConfigError(ValueError):
    """The command-config file cannot configure our clients; the message says why."""


def read_command_config(path: str | Path) -> dict[str, str]:
    """The file's properties; a missing or malformed file raises CommandConfigError."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise CommandConfigError(f"--command-config {path}: {exc.strerror or exc}") from None
    try:
        return parse_properties(text, str(path))
    except PropertiesError as exc:
        raise CommandConfigError(f"--command-config {exc}") from None


def client_configs(
    bootstrap_servers: str, properties: Mapping[str, str], source: str = "--command-config"
) -> dict[Role, dict[str, str]]:
    """The admin's and the consumer's configs: each gets the properties its role takes.
    Checked here with the clients' own validation, so a bad file fails before anything starts."""
    unknown = sorted(k for k in properties if k not in SETTINGS)
    if unknown:
        raise CommandConfigError(f"{source}: unknown client config key {unknown[0]!r}")
    configs: dict[Role, dict[str, str]] = {}
    for role in (Role.ADMIN, Role.CONSUMER):
        config = {k: v for k, v in properties.items() if role in SETTINGS[k].roles}
        config["bootstrap.servers"] = bootstrap_servers
        try:
            load_config(role, config)
        except ConfigError as exc:
            raise CommandConfigError(f"{source}: {exc}") from None
        configs[role] = config
    return configs
