"""A broker's SASL settings, resolved per listener the way Kafka resolves them.

For a SASL_PLAINTEXT or SASL_SSL listener: the mechanisms it offers (`sasl.enabled.mechanisms`,
or `listener.name.<l>.sasl.enabled.mechanisms`), the users PLAIN accepts (the `user_<name>`
options of the PlainLoginModule entry in the first of `listener.name.<l>.plain.sasl.jaas.config`,
`listener.name.<l>.sasl.jaas.config`, `sasl.jaas.config`) and the session lifetime
(`connections.max.reauth.ms`, KIP-368). SCRAM users are not here: they live in ZooKeeper.

For the inter-broker listener, when it is SASL: the mechanism brokers log in with
(`sasl.mechanism.inter.broker.protocol`) and the `username`/`password` of that listener's JAAS
entry for it. A setting that cannot work fails at start with a ConfigError naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from epochlog.config.broker import BrokerConfig, ConfigError
from epochlog.protocol.jaas import PLAIN_LOGIN_MODULE, JaasEntry, parse_jaas_config

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class ListenerSasl:
    listener: str
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)
    reauth_ms: int = 0


@dataclass(frozen=True)
class SaslLogin:
    """What a broker authenticates with to other brokers."""

    mechanism: str
    username: str
    password: str = field(repr=False)


def is_sasl(config: BrokerConfig, listener: str) -> bool:
    return config.security_protocol(listener) in SASL_PROTOCOLS


def jaas_entry(config: BrokerConfig, listener: str, mechanism: str) -> tuple[str, JaasEntry] | None:
    """(the key it came from, the entry) of the JAAS config for `mechanism` on `listener`."""
    candidates = [
        config.scoped_value(listener, f"{mechanism.lower()}.sasl.jaas.config"),
        config.scoped_value(listener, "sasl.jaas.config"),
        ("sasl.jaas.config", config["sasl.jaas.config"]),
    ]
    for found in candidates:
        if found is None or found[1] is None:
            continue
        key, text = found
        try:
            entries = parse_jaas_config(text)
        except ValueError as exc:
            raise ConfigError(f"config {key}: {exc}") from None
        if len(entries) != 1:
            raise ConfigError(f"config {key}: exactly one login module expected")
        return key, entries[0]
    return None


def listener_sasl(config: BrokerConfig, listener: str) -> ListenerSasl:
    key = "sasl.enabled.mechanisms"
    enabled = tuple(m.strip().upper() for m in config.listener_value(listener, key) or [])
    unsupported = [m for m in enabled if m not in SUPPORTED_MECHANISMS]
    if unsupported or not enabled:
        raise ConfigError(
            f"config {key} for SASL listener {listener}: {', '.join(unsupported) or 'none'} "
            f"given; epochlog serves {', '.join(SUPPORTED_MECHANISMS)}"
        )
    plain_users: dict[str, str] = {}
    if "PLAIN" in enabled:
        found = jaas_entry(config, listener, "PLAIN")
        if found is None or found[1].login_module != PLAIN_LOGIN_MODULE:
            raise ConfigError(
                f"PLAIN is enabled on listener {listener} but no "
                f"listener.name.{listener.lower()}.plain.sasl.jaas.config (or sasl.jaas.config) "
                f"holds a {PLAIN_LOGIN_MODULE} entry"
            )
        plain_users = found[1].plain_users
    reauth_ms = int(config.listener_value(listener, "connections.max.reauth.ms") or 0)
    return ListenerSasl(listener, enabled, plain_users, reauth_ms)


def inter_broker_login(config: BrokerConfig) -> SaslLogin | None:
    """The inter-broker login, or None when the inter-broker listener is not SASL."""
    listener = config.inter_broker_listener
    if not is_sasl(config, listener):
        return None
    key = "sasl.mechanism.inter.broker.protocol"
    mechanism = str(config[key]).upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(f"config {key}={mechanism}: epochlog serves {SUPPORTED_MECHANISMS}")
    found = jaas_entry(config, listener, mechanism)
    if found is None:
        raise ConfigError(
            f"the inter-broker listener {listener} is SASL but no "
            f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config gives the "
            "broker's username and password"
        )
    where, entry = found
    if "username" not in entry.options or "password" not in entry.options:
        raise ConfigError(f"config {where}: username and password options are required")
    return SaslLogin(mechanism, entry.options["username"], entry.options["password"])
