"""`epochlog console`: serve the web console (issue 22) until interrupted.

`--bootstrap-server` (or the local cluster through `--dir`), `--host` / `--port` to listen on,
`--command-config FILE` (Kafka's client-properties file, as every command takes it: each key
goes to the console's admin and consumer where their role takes it, checked by the client's own
validation before the server starts), `--metrics-url ID=URL` per broker or `--metrics-port` on
every broker's host for the brokers' Prometheus endpoints; with neither, a local cluster's
(`--dir`, no `--bootstrap-server`) endpoints are used.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:  # the client is imported only when the command runs
    from epochlog.client.config import Role

DEFAULT_PORT = 8080


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
) -> None:
    console = sub.add_parser("console", help="serve the web console (http://HOST:PORT)")
    console.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    console.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"({DEFAULT_PORT})")
    console.add_argument(
        "--metrics-url",
        action="append",
        default=[],
        metavar="ID=URL",
        help="broker ID's Prometheus endpoint (repeat per broker)",
    )
    console.add_argument(
        "--metrics-port", type=int, help="the brokers' Prometheus port, on each broker's host"
    )
    add_bootstrap(console)


def client_configs(args: argparse.Namespace) -> dict[Role, dict[str, Any]]:
    """The console's admin and consumer configs (`--command-config` keys each role takes),
    validated as the clients will validate them, so a bad file fails before serving."""
    from epochlog.cli.common import CommandError, client_config
    from epochlog.client.config import Role, load_config
    from epochlog.client.errors import ConfigError

    configs = {role: client_config(args, role) for role in (Role.ADMIN, Role.CONSUMER)}
    for role, config in configs.items():
        try:
            load_config(role, config)
        except ConfigError as exc:
            raise CommandError(f"--command-config: {exc}") from None
    return configs


def local_metrics_urls(args: argparse.Namespace) -> dict[int, str]:
    """The local cluster's metrics endpoints when the console was pointed at it with `--dir`."""
    if args.bootstrap_server:
        return {}
    from epochlog.node.local_cluster import ClusterError, LocalCluster

    try:
        cluster = LocalCluster.attach(args.dir)
    except ClusterError:
        return {}
    return cluster.metrics_endpoints()


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError
    from epochlog.console.metrics import parse_metrics_urls

    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be 0 to 65535, got {args.port}")
    if args.metrics_port is not None and not 1 <= args.metrics_port <= 65535:
        raise CommandError(f"--metrics-port must be 1 to 65535, got {args.metrics_port}")
    configs = client_configs(args)
    try:
        urls = parse_metrics_urls(args.metrics_url)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if not urls and args.metrics_port is None:
        urls = local_metrics_urls(args)
    from epochlog.console.app import run as serve

    serve(
        args.host,
        args.port,
        configs,
        urls,
        args.metrics_port,
        announce=lambda text: print(text, flush=True),
    )
    return 0
