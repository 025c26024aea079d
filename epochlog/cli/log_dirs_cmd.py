"""`epochlog log-dirs ...`: brokers' log dirs, with kafka-log-dirs' vocabulary.

- `describe [--broker-list 1,2] [--topic-list t1,t2] [--json]`: every log dir of the brokers
  (all by default; a broker the cluster does not have is an error naming it), with its error,
  volume sizes and replicas: size, offset lag, whether it is a future replica being moved
  there. A table by default; `--json` prints kafka-log-dirs' `--describe` JSON
  (`{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":...,"error":null,"partitions":
  [{"partition":"t-0","size":...,"offsetLag":...,"isFuture":false}]}]}]}`), without its two
  progress lines, so scripts can read it as it is.
- `move --topic T --partition P --broker B --log-dir D`: move one replica to another log dir of its
  broker (AlterReplicaLogDirs; the one-replica form of kafka-reassign-partitions' `log_dirs`).
  The move runs in the background on the broker; `describe` shows it as a future replica with
  its lag until it has replaced the current one.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

# What kafka-log-dirs prints for a dir's error: the Java exception's class name.
_EXCEPTION_NAMES = {
    "KAFKA_STORAGE_ERROR": "org.apache.kafka.common.errors.KafkaStorageException",
    "LOG_DIR_NOT_FOUND": "org.apache.kafka.common.errors.LogDirNotFoundException",
    "UNKNOWN_SERVER_ERROR": "org.apache.kafka.common.errors.UnknownServerException",
}


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
) -> None:
    log_dirs = sub.add_parser("log-dirs", help="describe brokers' log dirs; move replicas")
    commands = log_dirs.add_subparsers(dest="log_dirs_command", required=True)
    describe = commands.add_parser("describe", help="log dirs, their sizes and replicas")
    describe.add_argument("--broker-list", help="brokers to query, e.g. 1,2 (default: all)")
    describe.add_argument("--topic-list", help="topics to show, e.g. t1,t2 (default: all)")
    describe.add_argument("--json", action="store_true", help="kafka-log-dirs' JSON output")
    add_bootstrap(describe)
    move = commands.add_parser("move", help="move a replica to another log dir of its broker")
    move.add_argument("--topic", required=True)
    move.add_argument("--partition", type=int, required=True)
    move.add_argument("--broker", type=int, required=True)
    # `--dir` is the local cluster's directory in every command, hence `--log-dir`.
    move.add_argument("--log-dir", required=True, help="absolute target log dir")
    add_bootstrap(move)


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError, client_config
    from epochlog.client import Admin, ClientError
    from epochlog.client.config import Role

    command = {"describe": _describe, "move": _move}[args.log_dirs_command]
    with Admin(client_config(args, Role.ADMIN)) as admin:
        try:
            return command(admin, args, console)
        except ClientError as exc:
            raise CommandError(str(exc)) from None


def parse_id_list(text: str | None, what: str) -> list[int]:
    from epochlog.cli.common import CommandError

    if not text:
        return []
    try:
        return sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise CommandError(f"{what}: {text!r} is not a comma-separated list of ids") from None


def describe_as_json(described: dict[int, dict[str, Any]], topics: set[str]) -> dict[str, Any]:
    """kafka-log-dirs' `--describe` document for `Admin.describe_log_dirs`' answer."""
    brokers = []
    for broker, dirs in sorted(described.items()):
        log_dirs = []
        for path, info in sorted(dirs.items()):
            error = None
            if info.error is not None:
                name = info.error.code.name
                error = _EXCEPTION_NAMES.get(name, name)
            log_dirs.append(
                {
                    "logDir": path,
                    "error": error,
                    "partitions": [
                        {
                            "partition": f"{tp.topic}-{tp.partition}",
                            "size": replica.size,
                            "offsetLag": replica.offset_lag,
                            "isFuture": replica.is_future,
                        }
                        for tp, replica in sorted(info.replicas.items())
                        if not topics or tp.topic in topics
                    ],
                }
            )
        brokers.append({"broker": broker, "logDirs": log_dirs})
    return {"version": 1, "brokers": brokers}


def _human(size: int) -> str:
    if size < 0:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(size)


def _describe(admin: Any, args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError

    wanted = parse_id_list(args.broker_list, "--broker-list")
    topics = {t.strip() for t in (args.topic_list or "").split(",") if t.strip()}
    cluster = {b.node_id for b in admin.describe_cluster().brokers}
    missing = sorted(set(wanted) - cluster)
    if missing:
        raise CommandError(
            f"the given brokers do not exist from --broker-list: "
            f"{','.join(map(str, missing))}; current brokers: {','.join(map(str, sorted(cluster)))}"
        )
    described = admin.describe_log_dirs(wanted or sorted(cluster))
    document = describe_as_json(described, topics)
    if args.json:
        print(json.dumps(document))
        return 0
    table = Table(box=None, pad_edge=False)
    for column in ("BROKER", "LOG-DIR", "ERROR", "USABLE", "TOTAL", "PARTITION", "SIZE", "LAG"):
        table.add_column(column)
    table.add_column("FUTURE")
    for broker, dirs in sorted(described.items()):
        for path, info in sorted(dirs.items()):
            error = info.error.code.name if info.error is not None else "-"
            sizes = (_human(info.usable_bytes), _human(info.total_bytes))
            rows = [
                (f"{tp.topic}-{tp.partition}", r)
                for tp, r in sorted(info.replicas.items())
                if not topics or tp.topic in topics
            ]
            if not rows:
                table.add_row(str(broker), path, error, *sizes, "-", "-", "-", "-")
            for name, replica in rows:
                table.add_row(
                    str(broker),
                    path,
                    error,
                    *sizes,
                    name,
                    _human(replica.size),
                    str(replica.offset_lag),
                    "yes" if replica.is_future else "",
                )
    console.print(table)
    return 0


def _move(admin: Any, args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError
    from epochlog.client.admin_log_dirs import TopicPartitionReplica

    replica = TopicPartitionReplica(args.topic, args.partition, args.broker)
    results = admin.alter_replica_log_dirs({replica: args.log_dir})
    error = results[replica]
    if error is not None:
        raise CommandError(
            f"moving {args.topic}-{args.partition} on broker {args.broker} to {args.log_dir}: "
            f"{error}"
        )
    console.print(
        f"moving {args.topic}-{args.partition} on broker {args.broker} to {args.log_dir} "
        "(`epochlog log-dirs describe` shows its progress)"
    )
    return 0
