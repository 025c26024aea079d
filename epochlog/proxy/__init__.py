"""A Kafka-protocol-aware proxy that can tell clients to rebootstrap (KIP-1102).

`ProxyServer` fronts one upstream cluster at a time, with one listen port per upstream broker
(see `server`), rewriting Metadata and DescribeCluster so clients see only the proxy. When its
upstream changes (a `switch` over the control channel, or a new upstream cluster id), clients'
connections from before become stale: Metadata v13+ on them is answered REBOOTSTRAP_REQUIRED, and
clients that cannot read that have their connections closed (`policy`). `control` is the Unix
socket `epochlog proxy switch` talks to. `upstream` holds the upstream client settings (TLS to
the brokers); the proxy's own listeners serve TLS when given a server context.
"""

from epochlog.proxy.control import control_path, send_control, serve_control
from epochlog.proxy.server import ProxyError, ProxyServer, parse_servers, probe_upstream
from epochlog.proxy.upstream import UpstreamConfigError, UpstreamSecurity, upstream_security

__all__ = [
    "ProxyError",
    "ProxyServer",
    "control_path",
    "parse_servers",
    "probe_upstream",
    "send_control",
    "serve_control",
    "upstream_security",
    "UpstreamConfigError",
    "UpstreamSecurity",
]
