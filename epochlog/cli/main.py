"""The `epochlog` command: local clusters, brokers, topics, groups, console producer and consumer.

Local-cluster commands (`up`, `down`, `status`, `broker stop|kill|start|bounce ID`) work on the
cluster directory (`--dir`, default `./.epochlog`). Commands that talk to brokers take
`--bootstrap-server`, or find the local cluster's brokers through `--dir` (and, for a cluster
started with `up --secure`, its `client.properties` when no `--command-config` is given).
"""

from __future__ import annotations

import argparse
import logging
import sys

from rich.console import Console
from rich.logging import RichHandler

from epochlog.cli import (
    acls_cmd,
    chaos_cmd,
    configs_cmd,
    console_cmd,
    controller_cmd,
    groups_cmd,
    log_dirs_cmd,
    partitions_cmd,
    reassign_cmd,
    transactions_cmd,
    users_cmd,
)

DEFAULT_DIR = ".epochlog"


def _add_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=DEFAULT_DIR, help=f"cluster directory ({DEFAULT_DIR})")


def _add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", help="host:port[,host:port] of the cluster")
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties (security settings and the like), as Kafka's tools take them; "
        "default: the client.properties of a secure local cluster in --dir (epochlog up --secure)",
    )
    _add_dir(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="epochlog", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start a local cluster: ZooKeeper + N brokers")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--zookeeper", help="use this ZooKeeper (HOST:PORT) instead of starting one")
    up.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="broker setting"
    )
    up.add_argument(
        "--secure",
        action="store_true",
        help="TLS + SASL/SCRAM-SHA-512 (SASL_SSL) only, ACLs on, super user admin with a "
        "generated password, ZooKeeper locked down; writes DIR/client.properties",
    )
    _add_dir(up)

    down = sub.add_parser("down", help="stop the local cluster")
    _add_dir(down)

    status = sub.add_parser("status", help="controller, brokers and partitions")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--zookeeper", help="read this ZooKeeper instead of the local cluster's")
    _add_dir(status)

    broker = sub.add_parser("broker", help="run or operate brokers")
    broker_sub = broker.add_subparsers(dest="broker_command", required=True)
    start = broker_sub.add_parser("start", help="start a broker (foreground with --config)")
    start.add_argument("id", nargs="?", type=int, help="local-cluster broker id")
    start.add_argument("--config", help="server.properties: run this broker in the foreground")
    _add_dir(start)
    for name, text in (
        ("stop", "controlled shutdown (SIGTERM)"),
        ("kill", "crash (SIGKILL)"),
        ("bounce", "stop, then start again"),
    ):
        op = broker_sub.add_parser(name, help=text)
        op.add_argument("id", type=int)
        _add_dir(op)

    topics = sub.add_parser("topics", help="create, list, describe, delete topics")
    topics_sub = topics.add_subparsers(dest="topics_command", required=True)
    create = topics_sub.add_parser("create")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=-1)
    create.add_argument("--replication-factor", type=int, default=-1)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    _add_bootstrap(create)
    listing = topics_sub.add_parser("list")
    _add_bootstrap(listing)
    describe = topics_sub.add_parser("describe")
    describe.add_argument("--topic")
    _add_bootstrap(describe)
    delete = topics_sub.add_parser("delete")
    delete.add_argument("--topic", required=True)
    _add_bootstrap(delete)

    partitions_cmd.add_parsers(sub, topics_sub, _add_bootstrap)  # alter, records, leaders

    produce = sub.add_parser("produce", help="console producer: one record per stdin line")
    produce.add_argument("topic")
    produce.add_argument("--key-separator", help="split each line into key and value at this")
    produce.add_argument("--acks", default="all")
    _add_bootstrap(produce)

    consume = sub.add_parser("consume", help="console consumer")
    consume.add_argument("topic")
    consume.add_argument("--from-beginning", action="store_true")
    consume.add_argument("--max-messages", type=int)
    consume.add_argument("--timeout-ms", type=int, help="exit after this long without records")
    consume.add_argument("--print-key", action="store_true")
    consume.add_argument(
        "--group", help="consume as a member of this group (subscribe), committing what it read"
    )
    _add_bootstrap(consume)

    from epochlog.cli.proxy_cmd import add_proxy_parser

    add_proxy_parser(sub)

    controller_cmd.add_parser(sub, _add_bootstrap)
    groups_cmd.add_parser(sub, _add_bootstrap)
    configs_cmd.add_parser(sub, _add_bootstrap)
    acls_cmd.add_parser(sub, _add_bootstrap)
    log_dirs_cmd.add_parser(sub, _add_bootstrap)
    reassign_cmd.add_parser(sub, _add_bootstrap)
    transactions_cmd.add_parser(sub, _add_bootstrap)
    users_cmd.add_parser(sub, _add_bootstrap)
    chaos_cmd.add_parser(sub)
    console_cmd.add_parser(sub, _add_bootstrap)

    demo = sub.add_parser("demo", help="run the demo and print a summary")
    demo.add_argument("--storage", action="store_true", help="the storage crash-recovery demo")
    demo.add_argument(
        "--no-spark",
        action="store_true",
        help="the cluster demo without Spark (records produced and read back, a leader killed)",
    )
    demo.add_argument("--events", type=int, help="events to produce (Spark demo: 9000)")
    demo.add_argument("--rate", type=float, help="events per second (Spark demo: 250)")
    _add_dir(demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=False)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=Console(stderr=True), show_path=False)],
    )
    from epochlog.cli import commands

    try:
        if args.command == "proxy":
            from epochlog.cli import proxy_cmd

            return proxy_cmd.run(args, console)
        if args.command == "groups":
            return groups_cmd.run(args, console)
        if args.command == "configs":
            return configs_cmd.run(args, console)
        if args.command == "acls":
            return acls_cmd.run(args, console)
        if args.command == "log-dirs":
            return log_dirs_cmd.run(args, console)
        if args.command == "reassign":
            return reassign_cmd.run(args, console)
        if args.command == "transactions":
            return transactions_cmd.run(args, console)
        if args.command == "users":
            return users_cmd.run(args, console)
        if args.command == "chaos":
            return chaos_cmd.run(args, console)
        if args.command == "console":
            return console_cmd.run(args, console)
        return commands.run(args, console)
    except commands.CommandError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] {exc}")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
