"""`epochlog proxy`: run the KIP-1102 proxy, switch its upstream, show its status.

    epochlog proxy --listen HOST:PORT --upstream BOOTSTRAP      run in the foreground
    epochlog proxy switch --listen HOST:PORT --upstream BOOTSTRAP
    epochlog proxy status --listen HOST:PORT

The running proxy is found by its listen address (its control socket, see `proxy.control`), or
by `--control PATH` given to both.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal

from rich.console import Console

from epochlog.cli.common import CommandError


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
    parser.add_argument("--listen", required=listen_required, metavar="HOST:PORT")
    parser.add_argument("--upstream", required=upstream_required, metavar="BOOTSTRAP")
    parser.add_argument("--control", metavar="PATH", help="control socket (default: derived)")


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.proxy import ProxyError, control_path, parse_servers

    if not args.listen:
        raise ProxyCommandError("--listen HOST:PORT is required")
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
        asyncio.run(_serve((host, port), upstream, path, args, console))
        return 0
    except ProxyError as exc:
        raise ProxyCommandError(str(exc)) from None


async def _control(path: str, request: dict) -> dict:
    from epochlog.proxy import send_control

    return await send_control(path, request)


async def _serve(
    listen: tuple[str, int],
    upstream: list[tuple[str, int]],
    path: str,
    args: argparse.Namespace,
    console: Console,
) -> None:
    from epochlog.proxy import ProxyServer, serve_control

    proxy = ProxyServer(
        listen,
        upstream,
        advertised_host=args.advertised_host,
        metadata_interval_ms=args.metadata_interval_ms,
    )
    try:
        await proxy.start()
    except OSError as exc:
        raise ProxyCommandError(f"cannot listen on {listen[0]}:{listen[1]}: {exc}") from None
    control = await serve_control(proxy, path)
    console.print(
        f"proxy listening on {proxy.listen_host}:{proxy.listen_port} for {proxy.upstream_text} "
        f"(cluster {proxy.upstream.cluster_id}); control socket {path}",
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
