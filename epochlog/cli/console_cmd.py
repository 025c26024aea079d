"""`epochlog console`: serve the web console (issue 22) until interrupted.

`--bootstrap-server` (or the local cluster through `--dir`), `--host` / `--port` to listen on,
`--command-config FILE` (Kafka's client-properties file, as Kafka's tools take it: security
settings and other client keys), `--metrics-url ID=URL` per broker or `--metrics-port` on every
broker's host for the brokers' Prometheus endpoints.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console

DEFAULT_PORT = 8080


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
) -> None:
    console = sub.add_parser("console", help="serve the web console (http://HOST:PORT)")
    console.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    console.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"({DEFAULT_PORT})")
    console.add_argument(
        "--command-config", metavar="FILE", help="client properties (security.protocol, ...)"
    )
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


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError, bootstrap_servers
    from epochlog.console.command_config import (
        CommandConfigError,
        client_configs,
        read_command_config,
    )
    from epochlog.console.metrics import parse_metrics_urls

    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be 0 to 65535, got {args.port}")
    if args.metrics_port is not None and not 1 <= args.metrics_port <= 65535:
        raise CommandError(f"--metrics-port must be 1 to 65535, got {args.metrics_port}")
    try:
        properties = read_command_config(args.command_config) if args.command_config else {}
        configs = client_configs(bootstrap_servers(args), properties)
        urls = parse_metrics_urls(args.metrics_url)
    except (CommandConfigError, ValueError) as exc:
        raise CommandError(str(exc)) from None
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
