"""How the proxy reaches its upstream brokers: the upstream client settings, checked once.

The settings are our client's keys (`epochlog proxy --command-config FILE`, Kafka's client
properties format), validated as the admin client validates them, so a bad one fails before the
proxy listens and names its key. What the proxy's connections use of them: `security.protocol`
and the `ssl.*` keys (`client/tls.py`: librdkafka's PEM files or Java's PEM stores) make every
upstream connection TLS; `client.id` names the proxy's own requests.

Two kinds of upstream connection use them. The proxy's own (`probe_upstream`: Metadata for the
brokers and the cluster id, at start, every `metadata_interval_ms` and at a switch), and one per
client session, which carries that client's requests byte for byte. SASL: a session's upstream
connection is not logged in by the proxy. A client's own SaslHandshake and SaslAuthenticate are
requests like any other and pass through, so the broker authenticates the client itself (its
principal, its ACLs); only the probe connection logs in as the proxy, with the `sasl.*`
keys (`login`), so that it may read Metadata on a SASL listener.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.client.config import ClientConfig, Role, load_config
from epochlog.client.errors import ConfigError
from epochlog.client.sasl import SaslLogin, login_from_config
from epochlog.client.tls import client_ssl_context

DEFAULT_CLIENT_ID = "epochlog-proxy"


class UpstreamConfigError(ValueError):
    """An upstream client setting that is wrong; the message names the key."""


@dataclass(frozen=True)
class UpstreamSecurity:
    """What every upstream connection is opened with."""

    security_protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (upper-cased)
    ssl_context: ssl.SSLContext | None  # None: plaintext
    client_id: str
    login: SaslLogin | None = None  # the proxy's own (probes only; SASL_PLAINTEXT or SASL_SSL)

    @property
    def uses_tls(self) -> bool:
        return self.ssl_context is not None


def upstream_security(settings: Mapping[str, Any] | None, bootstrap: str) -> UpstreamSecurity:
    """`settings` (client keys) checked as an admin client's, and the TLS context built from
    them; UpstreamConfigError naming the key otherwise."""
    try:
        config: ClientConfig = load_config(
            Role.ADMIN, {**(settings or {}), "bootstrap.servers": bootstrap}
        )
        context = client_ssl_context(config)
        login = login_from_config(config)
    except ConfigError as exc:
        raise UpstreamConfigError(f"upstream client config: {exc}") from None
    return UpstreamSecurity(
        security_protocol=str(config["security.protocol"]).upper(),
        ssl_context=context,
        client_id=config["client.id"] or DEFAULT_CLIENT_ID,
        login=login,
    )


PLAINTEXT = UpstreamSecurity("PLAINTEXT", None, DEFAULT_CLIENT_ID)
