"""`epochlog proxy`: run the KIP-1102 proxy, switch its upstream, show its status.

    epochlog proxy --listen HOST:PORT --upstream BOOTSTRAP      run in the foreground
    epochlog proxy switch --listen HOST:PORT --upstream BOOTSTRAP
    epochlog proxy status --listen HOST:PORT

The running proxy is found by its listen address (its control socket, see `proxy.control`), or
by `--control PATH` given to both.

Security, each side on its own:
- to the brokers: `--command-config FILE`, our client's keys in Kafka's client-properties format
  (`security.protocol=SSL`, `ssl.ca.location` or `ssl.truststore.location`, a client certificate
  with `ssl.certificate.location`/`ssl.key.location` or `ssl.keystore.location`, ...);
- to clients: `--listen SSL://HOST:PORT` (Kafka's listener form; PLAINTEXT:// or no prefix is
  plaintext) with `--listener-config FILE` holding the broker's `ssl.*` listener keys
  (`ssl.keystore.location`, `ssl.key.password`, `ssl.truststore.location`, `ssl.client.auth`,
  ...), read by the broker's own TLS settings code (`security.tls`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
from typing import TYPE_CHECKING

from rich.console import Console

from epochlog.cli.common import CommandError, command_config_settings, read_command_config
from epochlog.client.config import Role

if TYPE_CHECKING:
    import ssl

    from epochlog.proxy import UpstreamSecurity

LISTEN_PROTOCOLS = ("PLAINTEXT", "SSL")


class ProxyCommandError(CommandError):
    """A proxy command that cannot do what was asked."""


def add_proxy_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    proxy = sub.add_parser("proxy", help="KIP-1102 proxy: run, switch upstream, status")
    _listen_args(proxy, upstream_required=False, listen_required=False)
    proxy.add_argument("--advertised-host", help="host clients are told (default: listen host)")
    proxy.add_argument(
        "--metadata-interval-ms",
        type=int,
        default=5000,
        help="how often the upstream's brokers and cluster id are read (5000)",
    )
    proxy.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties for the proxy's connections to the brokers (security.protocol, "
        "ssl.*)",
    )
    proxy.add_argument(
        "--listener-config",
        metavar="FILE",
        help="ssl.* listener properties for --listen SSL://HOST:PORT (ssl.keystore.location, ...)",
    )
    proxy_sub = proxy.add_subparsers(dest="proxy_command")
    switch = proxy_sub.add_parser("switch", help="tell the running proxy its upstream changed")
    _listen_args(switch, upstream_required=True)
    status = proxy_sub.add_parser("status", help="upstream, generation and connections")
    _listen_args(status, upstream_required=False)


def _listen_args(
    parser: argparse.ArgumentParser, upstream_required: bool, listen_required: bool = True
) -> None:
    # argparse checks a parent's required options before its subcommand's: the bare `proxy`
    # form checks --listen itself (run()).
    parser.add_argument("--listen", required=listen_required, metavar="[SSL://]HOST:PORT")
    parser.add_argument("--upstream", required=upstream_required, metavar="BOOTSTRAP")
    parser.add_argument("--control", metavar="PATH", help="control socket (default: derived)")


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.proxy import ProxyError, control_path, parse_servers

    if not args.listen:
        raise ProxyCommandError("--listen HOST:PORT is required")
    listen_protocol = listen_security_protocol(args.listen)
    try:
        ((host, port),) = parse_servers(args.listen, "--listen")
    except (ProxyError, ValueError) as exc:
        raise ProxyCommandError(f"--listen: expected one HOST:PORT ({exc})") from None
    path = args.control or control_path(host, port)
    try:
        if args.proxy_command == "switch":
            reply = asyncio.run(_control(path, {"op": "switch", "upstream": args.upstream}))
            console.print(
                f"switched to {reply['upstream']} (cluster {reply['cluster_id']}, "
                f"generation {reply['generation']})"
            )
            return 0
        if args.proxy_command == "status":
            reply = asyncio.run(_control(path, {"op": "status"}))
            reply.pop("ok", None)
            console.print_json(json.dumps(reply))
            return 0
        if not args.upstream:
            raise ProxyCommandError("--upstream is required to run a proxy")
        upstream = parse_servers(args.upstream)
        listener_ssl = listener_context(listen_protocol, args.listener_config)
        security = upstream_settings(args.command_config, args.upstream)
        asyncio.run(_serve((host, port), upstream, path, args, console, security, listener_ssl))
        return 0
    except ProxyError as exc:
        raise ProxyCommandError(str(exc)) from None


def listen_security_protocol(listen: str) -> str:
    """The security protocol of `--listen` (`SSL://host:port`; no prefix: PLAINTEXT)."""
    protocol, sep, _ = listen.partition("://")
    if not sep:
        return "PLAINTEXT"
    protocol = protocol.strip().upper()
    if protocol not in LISTEN_PROTOCOLS:
        raise ProxyCommandError(
            f"--listen {listen}: {protocol} is not one of {', '.join(LISTEN_PROTOCOLS)} (a "
            "client's SASL exchange passes through the proxy to the brokers: listen with SSL "
            "or PLAINTEXT)"
        )
    return protocol


def listener_context(protocol: str, listener_config: str | None) -> ssl.SSLContext | None:
    """The TLS server context of the proxy's listeners (None for PLAINTEXT), from the
    `--listener-config` file's ssl.* keys; ProxyCommandError naming the key otherwise."""
    if protocol == "PLAINTEXT":
        if listener_config:
            raise ProxyCommandError(
                "--listener-config is for a TLS listener: --listen SSL://HOST:PORT"
            )
        return None
    from epochlog.config.broker import ConfigError
    from epochlog.security.tls import TlsSettings, server_context

    values = read_command_config(listener_config) if listener_config else {}
    try:
        return server_context(TlsSettings.from_ssl_keys("PROXY", values))
    except ConfigError as exc:
        where = f"--listener-config {listener_config}" if listener_config else "--listener-config"
        raise ProxyCommandError(f"{where}: {exc}") from None


def upstream_settings(command_config: str | None, upstream: str) -> UpstreamSecurity:
    """The proxy's upstream connection settings from `--command-config` (keys an admin client
    takes; any other client's key is left out with a log line, an unknown key is an error)."""
    from epochlog.proxy import UpstreamConfigError, upstream_security

    settings = command_config_settings(command_config, Role.ADMIN) if command_config else {}
    try:
        return upstream_security(settings, upstream)
    except UpstreamConfigError as exc:
        where = f"--command-config {command_config}" if command_config else "upstream"
        raise ProxyCommandError(f"{where}: {exc}") from None


async def _control(path: str, request: dict) -> dict:
    from epochlog.proxy import send_control

    return await send_control(path, request)


async def _serve(
    listen: tuple[str, int],
    upstream: list[tuple[str, int]],
    path: str,
    args: argparse.Namespace,
    console: Console,
    security: UpstreamSecurity,
    listener_ssl: ssl.SSLContext | None,
) -> None:
    from epochlog.proxy import ProxyServer, serve_control

    proxy = ProxyServer(
        listen,
        upstream,
        advertised_host=args.advertised_host,
        metadata_interval_ms=args.metadata_interval_ms,
        upstream_security=security,
        listener_ssl=listener_ssl,
    )
    try:
        await proxy.start()
    except OSError as exc:
        raise ProxyCommandError(f"cannot listen on {listen[0]}:{listen[1]}: {exc}") from None
    control = await serve_control(proxy, path)
    console.print(
        f"proxy listening on {proxy.listener_security}://{proxy.listen_host}:{proxy.listen_port} "
        f"for {proxy.upstream_text} ({security.security_protocol}, cluster "
        f"{proxy.upstream.cluster_id}); control socket {path}",
        highlight=False,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        control.close()
        await proxy.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
