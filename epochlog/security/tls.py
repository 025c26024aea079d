"""TLS settings -> `ssl.SSLContext`: a listener's server side and a broker's client side.

A listener whose security protocol is SSL or SASL_SSL is served over TLS. Its settings are
Kafka's `ssl.*` broker keys, each overridable for that listener alone by
`listener.name.<listener lowercased>.ssl.*` (`BrokerConfig.for_listener`, Kafka's rule, key
by key). `TlsSettings.for_listener(config, listener)` resolves them and remembers which key each
value came from, so that an error names the key the operator wrote.

Stores are PEM only (KIP-651): the keystore is `ssl.keystore.location` (a file holding the
private key and the certificate chain) or `ssl.keystore.key` + `ssl.keystore.certificate.chain`
inline; the truststore `ssl.truststore.location` or `ssl.truststore.certificates` inline; an
encrypted key's password `ssl.key.password`. JKS and PKCS12, and a store password with PEM, are
refused naming the key. `ssl.client.auth` none | requested | required asks for a client
certificate (none: not asked; requested: verified if sent; required: the handshake fails
without one). `ssl.enabled.protocols` bounds the TLS versions; `ssl.cipher.suites` (IANA names
as Kafka takes them, or OpenSSL names) restricts the TLS 1.2 suites; OpenSSL chooses among TLS
1.3's own, which Python cannot restrict.

`server_context` is a listener's; `client_context` is what a broker connects to another with on
the inter-broker listener: its keystore as client certificate, its truststore, the peer's host
name checked when `ssl.endpoint.identification.algorithm` is https (Kafka's default).
Contexts are built once per listener at start (loading files, no sockets); a setting that does
not load is a `ConfigError` before anything listens.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.config.broker import BrokerConfig, ConfigError
from epochlog.security.principal_mapping import PrincipalMapper

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
PEM = "PEM"
_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_PROTOCOLS = ("TLS", "TLSv1.2", "TLSv1.3")
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def uses_tls(security_protocol: str) -> bool:
    return security_protocol.upper() in TLS_PROTOCOLS


@dataclass(frozen=True)
class TlsSettings:
    """The ssl.* settings one listener sees: short key -> (key it was read from, value)."""

    listener: str
    values: dict[str, tuple[str, Any]]

    @classmethod
    def for_listener(cls, config: BrokerConfig, listener: str) -> TlsSettings:
        return cls(listener.upper(), config.for_listener(listener, "ssl."))

    @classmethod
    def from_ssl_keys(cls, listener: str, values: Mapping[str, Any]) -> TlsSettings:
        """Settings from the broker's `ssl.*` keys alone, for a listener that is not a broker's
        (the proxy's). ConfigError names a key that is not an ssl.* key or is malformed."""
        for key in values:
            if not key.startswith("ssl."):
                raise ConfigError(f"{key!r} is not an ssl.* listener key")
        # BrokerConfig converts, validates and fills in the defaults of the ssl.* keys; the two
        # keys it requires are not read here.
        config = BrokerConfig.from_dict(
            {"broker.id": 0, "zookeeper.connect": "unused:2181", **values}
        )
        return cls.for_listener(config, listener)

    def __getitem__(self, key: str) -> Any:
        return self.values[key][1]

    def key(self, key: str) -> str:
        """The key as the operator wrote it (plain or listener-prefixed), for errors."""
        return self.values[key][0]

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"listener {self.listener}: config {self.key(key)}: {problem}")


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The listener's TLS server context; ConfigError names the setting that does not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _apply_protocols(context, settings)
    if not _load_keystore(context, settings):
        raise ConfigError(
            f"listener {settings.listener} is served over TLS: it needs a keystore, "
            "ssl.keystore.location (a PEM file: private key and certificate chain) or "
            "ssl.keystore.key with ssl.keystore.certificate.chain"
        )
    auth = settings["ssl.client.auth"]
    context.verify_mode = _CLIENT_AUTH[auth]
    if not _load_truststore(context, settings) and auth != "none":
        raise settings.error(
            "ssl.client.auth",
            f"{auth} needs a truststore to verify client certificates "
            "(ssl.truststore.location or ssl.truststore.certificates)",
        )
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """A broker's context for connecting to another broker on this listener."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _apply_protocols(context, settings)
    _load_keystore(context, settings)
    if not _load_truststore(context, settings):
        context.load_default_certs()
    algorithm = (settings["ssl.endpoint.identification.algorithm"] or "").strip().lower()
    if algorithm not in ("", "https"):
        raise settings.error(
            "ssl.endpoint.identification.algorithm", f"{algorithm!r} is not https or empty"
        )
    context.check_hostname = algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def inter_broker_client_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The context this broker connects to the others with, None when the inter-broker
    listener is not TLS."""
    listener = config.inter_broker_listener
    if not uses_tls(config.security_protocol(listener)):
        return None
    return client_context(TlsSettings.for_listener(config, listener))


def principal_mapper(settings: TlsSettings) -> PrincipalMapper:
    """The listener's ssl.principal.mapping.rules, parsed."""
    try:
        return PrincipalMapper.from_rules(settings["ssl.principal.mapping.rules"])
    except ValueError as exc:
        raise settings.error("ssl.principal.mapping.rules", str(exc)) from None


@dataclass(frozen=True)
class ListenerTls:
    """What a TLS listener serves with: its context and its principal mapping."""

    context: ssl.SSLContext
    mapper: PrincipalMapper


def listener_tls(config: BrokerConfig) -> dict[str, ListenerTls]:
    """A `ListenerTls` for each listener whose protocol is SSL or SASL_SSL, by listener name;
    ConfigError (naming the key) for a setting that does not load."""
    found = {}
    for endpoint in config.listeners:
        if uses_tls(config.security_protocol(endpoint.listener)):
            settings = TlsSettings.for_listener(config, endpoint.listener)
            found[endpoint.listener] = ListenerTls(
                server_context(settings), principal_mapper(settings)
            )
    return found


# ------------------------------------------------------------------------------ pieces


def _apply_protocols(context: ssl.SSLContext, settings: TlsSettings) -> None:
    protocol = settings["ssl.protocol"]
    if protocol not in _PROTOCOLS:
        raise settings.error("ssl.protocol", f"{protocol!r} is not one of {', '.join(_PROTOCOLS)}")
    enabled = settings["ssl.enabled.protocols"]
    unknown = [name for name in enabled if name not in _VERSIONS]
    if unknown or not enabled:
        raise settings.error(
            "ssl.enabled.protocols",
            f"{', '.join(unknown) or 'nothing'}: the versions served are TLSv1.2 and TLSv1.3",
        )
    versions = sorted(_VERSIONS[name] for name in enabled)
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]
    suites = settings["ssl.cipher.suites"]
    if suites:
        _apply_cipher_suites(context, settings, suites)


def _apply_cipher_suites(context: ssl.SSLContext, settings: TlsSettings, suites: list[str]) -> None:
    known = {cipher["name"]: cipher["protocol"] for cipher in context.get_ciphers()}
    tls12: list[str] = []
    for suite in suites:
        name = suite if suite in known else openssl_cipher_name(suite)
        if name not in known:
            raise settings.error(
                "ssl.cipher.suites", f"{suite!r} is not a cipher suite this OpenSSL offers"
            )
        if known[name] != "TLSv1.3":
            tls12.append(name)
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError as exc:
            raise settings.error("ssl.cipher.suites", str(exc)) from None


_IANA_SUITE = re.compile(r"TLS_(?:(\w+?)_)?WITH_(\w+)")


def openssl_cipher_name(iana: str) -> str:
    """An IANA suite name as Java writes it -> OpenSSL's (TLS 1.3 names are the same in
    both): TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256."""
    match = _IANA_SUITE.fullmatch(iana.strip())
    if match is None:
        return iana
    exchange, cipher = match.group(1) or "", match.group(2)
    cipher = re.sub(r"AES_(\d+)_", r"AES\1_", cipher)
    if cipher.startswith("CHACHA20_POLY1305"):
        cipher = "CHACHA20_POLY1305"
    elif "_CBC_" in cipher:
        cipher = cipher.replace("_CBC", "")
    parts = ([exchange] if exchange and exchange != "RSA" else []) + [cipher]
    return "-".join(parts).replace("_", "-")


def _load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> bool:
    """Load the key and chain; False when none is configured."""
    store_type = str(settings["ssl.keystore.type"]).upper()
    location = settings["ssl.keystore.location"]
    inline_key = settings["ssl.keystore.key"]
    inline_chain = settings["ssl.keystore.certificate.chain"]
    if location is None and inline_key is None and inline_chain is None:
        return False
    if store_type != PEM:
        raise settings.error(
            "ssl.keystore.type", f"{store_type} stores are not read; PEM is what epochlog supports"
        )
    if settings["ssl.keystore.password"] is not None:
        raise settings.error(
            "ssl.keystore.password",
            "cannot be given with a PEM keystore; an encrypted key's password is ssl.key.password",
        )
    password = settings["ssl.key.password"]
    if location is not None:
        if inline_key is not None or inline_chain is not None:
            raise settings.error(
                "ssl.keystore.location",
                "give either a keystore file or ssl.keystore.key with "
                "ssl.keystore.certificate.chain, not both",
            )
        if not os.path.isfile(location):
            raise settings.error("ssl.keystore.location", f"no file {location}")
        try:
            context.load_cert_chain(location, password=password or None)
        except (ssl.SSLError, ValueError) as exc:
            raise settings.error(
                "ssl.keystore.location",
                f"cannot load a private key and certificate chain from {location}: "
                f"{_reason(exc, password)}",
            ) from None
        return True
    if inline_key is None or inline_chain is None:
        missing = "ssl.keystore.key" if inline_key is None else "ssl.keystore.certificate.chain"
        present = "ssl.keystore.certificate.chain" if inline_key is None else "ssl.keystore.key"
        raise settings.error(present, f"needs {missing} too")
    with _private_file(inline_chain + "\n" + inline_key) as path:
        try:
            context.load_cert_chain(path, password=password or None)
        except (ssl.SSLError, ValueError) as exc:
            raise settings.error(
                "ssl.keystore.key",
                f"ssl.keystore.key and ssl.keystore.certificate.chain do not load: "
                f"{_reason(exc, password)}",
            ) from None
    return True


def _load_truststore(context: ssl.SSLContext, settings: TlsSettings) -> bool:
    """Load the trusted certificates; False when none are configured."""
    store_type = str(settings["ssl.truststore.type"]).upper()
    location = settings["ssl.truststore.location"]
    inline = settings["ssl.truststore.certificates"]
    if location is None and inline is None:
        return False
    if store_type != PEM:
        raise settings.error(
            "ssl.truststore.type",
            f"{store_type} stores are not read; PEM is what epochlog supports",
        )
    if settings["ssl.truststore.password"] is not None:
        raise settings.error("ssl.truststore.password", "cannot be given with a PEM truststore")
    if location is not None and inline is not None:
        raise settings.error(
            "ssl.truststore.location",
            "give either a truststore file or ssl.truststore.certificates, not both",
        )
    try:
        if location is not None:
            if not os.path.isfile(location):
                raise settings.error("ssl.truststore.location", f"no file {location}")
            context.load_verify_locations(cafile=location)
        else:
            context.load_verify_locations(cadata=inline)
    except (ssl.SSLError, ValueError) as exc:
        key = "ssl.truststore.location" if location is not None else "ssl.truststore.certificates"
        raise settings.error(key, f"no PEM certificates load: {exc}") from None
    return True


def _reason(exc: Exception, password: str | None) -> str:
    text = str(exc)
    if "PEM lib" not in text:
        return text
    if password is not None:
        return f"{text}: the private key does not decrypt with ssl.key.password, or is missing"
    return f"{text}: no PEM private key and certificate, or an encrypted key (ssl.key.password)"


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[str]:
    """Inline PEM text in a file only this user reads, for the ssl module (which loads keys
    from files only), removed at once."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        yield path
    finally:
        os.unlink(path)
