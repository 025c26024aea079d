"""The client's TLS context from its config: `security.protocol` SSL (or SASL_SSL) and the keys
librdkafka and Java's clients take for PEM files.

Trusted CAs: `ssl.ca.location` (librdkafka) or `ssl.truststore.location` with
`ssl.truststore.type=PEM` (Java); neither: the system's CAs. A client certificate (for
`ssl.client.auth=requested|required` listeners): `ssl.certificate.location` +
`ssl.key.location` (librdkafka; the key may be in the certificate file), or
`ssl.keystore.location` with `ssl.keystore.type=PEM` (Java: the key and chain in one file). An
encrypted key's password is `ssl.key.password`. The broker's host name is checked against its
certificate unless `ssl.endpoint.identification.algorithm` is `none` (librdkafka) or empty
(Java). JKS and PKCS12 stores are refused naming the key. Every problem is a `ConfigError`
naming the key, raised when the client is created, before it connects anywhere.

Lives in client/ (which imports only protocol/): the broker's own builder is security/tls.py.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from typing import Any

from epochlog.client.errors import ConfigError

TLS_PROTOCOLS = frozenset({"ssl", "sasl_ssl"})


def client_ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The context for connections to brokers; None unless security.protocol is SSL or
    SASL_SSL."""
    if str(config["security.protocol"]).lower() not in TLS_PROTOCOLS:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_trusted(context, config)
    _load_certificate(context, config)
    context.check_hostname = config["ssl.endpoint.identification.algorithm"] == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _pem_only(config: Mapping[str, Any], key: str) -> None:
    store_type = str(config[key]).strip().upper()
    if store_type != "PEM":
        raise ConfigError(key, f"{store_type} stores are not read; PEM is what epochlog supports")


def _file(config: Mapping[str, Any], key: str) -> str:
    path = str(config[key])
    if not os.path.isfile(path):
        raise ConfigError(key, f"no file {path}")
    return path


def _load_trusted(context: ssl.SSLContext, config: Mapping[str, Any]) -> None:
    if config["ssl.ca.location"] and config["ssl.truststore.location"]:
        raise ConfigError(
            "ssl.truststore.location", "give either ssl.ca.location or ssl.truststore.location"
        )
    key = "ssl.ca.location" if config["ssl.ca.location"] else "ssl.truststore.location"
    if not config[key]:
        context.load_default_certs()
        return
    if key == "ssl.truststore.location":
        _pem_only(config, "ssl.truststore.type")
    trusted_file = _file(config, key)  # ConfigError is a ValueError: outside the try
    try:
        context.load_verify_locations(cafile=trusted_file)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(key, f"no PEM certificates load: {exc}") from None


def _load_certificate(context: ssl.SSLContext, config: Mapping[str, Any]) -> None:
    password = config["ssl.key.password"] or None
    if config["ssl.keystore.location"]:
        if config["ssl.certificate.location"] or config["ssl.key.location"]:
            raise ConfigError(
                "ssl.keystore.location",
                "give either ssl.keystore.location or ssl.certificate.location/ssl.key.location",
            )
        _pem_only(config, "ssl.keystore.type")
        certificate_key, keyfile = "ssl.keystore.location", None
    elif config["ssl.certificate.location"]:
        certificate_key = "ssl.certificate.location"
        keyfile = _file(config, "ssl.key.location") if config["ssl.key.location"] else None
    elif config["ssl.key.location"]:
        raise ConfigError("ssl.key.location", "needs ssl.certificate.location too")
    else:
        return
    certificate_file = _file(config, certificate_key)  # (as above)
    try:
        context.load_cert_chain(certificate_file, keyfile, password=password)
    except (ssl.SSLError, ValueError) as exc:
        hint = "wrong ssl.key.password?" if password else "an encrypted key needs ssl.key.password"
        raise ConfigError(
            certificate_key, f"the certificate and private key do not load ({hint}): {exc}"
        ) from None
