"""`epochlog configs describe|alter`: dynamic configs with kafka-configs' vocabulary.

    epochlog configs describe --entity-type topics --entity-name t [--all]
    epochlog configs describe --entity-type brokers --entity-name 1 | --entity-default
    epochlog configs alter --entity-type topics --entity-name t \
        --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms

`describe` shows the keys set dynamically (kafka-configs' default), or every key with `--all`.
`alter` sends one IncrementalAlterConfigs: SET for each --add-config, DELETE for each
--delete-config; a value in [brackets] is a list (kafka-configs' syntax for commas in values).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

DYNAMIC_SOURCES = {"DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"}


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
) -> None:
    configs = sub.add_parser("configs", help="describe and alter topic and broker configs")
    commands = configs.add_subparsers(dest="configs_command", required=True)
    for name, text in (("describe", "show a topic's or broker's configs"), ("alter", "change")):
        command = commands.add_parser(name, help=text)
        command.add_argument("--entity-type", required=True, choices=("topics", "brokers"))
        which = command.add_mutually_exclusive_group(required=True)
        which.add_argument("--entity-name", help="the topic, or the broker id")
        which.add_argument(
            "--entity-default", action="store_true", help="the cluster-wide broker default"
        )
        if name == "describe":
            command.add_argument("--all", action="store_true", help="every key, not only set ones")
        else:
            command.add_argument("--add-config", default="", help="k=v,k2=[a,b] to set")
            command.add_argument("--delete-config", default="", help="k,k2 to remove")
            command.add_argument("--validate-only", action="store_true")
        add_bootstrap(command)


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs' k=v,k2=[a,b] syntax; a ValueError names the part it cannot read."""
    result: dict[str, str] = {}
    part, depth = "", 0
    parts: list[str] = []
    for char in text:
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += char
    parts.append(part)
    for item in (p.strip() for p in parts):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--add-config: {item!r} is not key=value")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        result[key.strip()] = value
    return result


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.commands import CommandError, _bootstrap
    from epochlog.client import Admin, KafkaError
    from epochlog.client.admin_configs import AlterOp, ConfigOp, ConfigResource, ResourceType

    kind = ResourceType.TOPIC if args.entity_type == "topics" else ResourceType.BROKER
    if kind is ResourceType.TOPIC and args.entity_default:
        raise CommandError("--entity-default applies to brokers only")
    resource = ConfigResource(kind, "" if args.entity_default else args.entity_name)
    with Admin({"bootstrap.servers": _bootstrap(args)}) as admin:
        try:
            if args.configs_command == "describe":
                entries = admin.describe_configs([resource])[resource]
                shown = [e for e in entries if args.all or e.source in DYNAMIC_SOURCES]
                title = f"{args.entity_type} {resource.name or '<default>'}"
                table = Table(title=title)
                for column in ("name", "value", "source", "read-only"):
                    table.add_column(column)
                for e in shown:
                    value = "" if e.value is None else e.value
                    table.add_row(e.name, value, e.source, "yes" if e.read_only else "")
                console.print(table)
                return 0
            try:
                added = parse_add_config(args.add_config)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            deleted = [k.strip() for k in args.delete_config.split(",") if k.strip()]
            if not added and not deleted:
                raise CommandError("configs alter needs --add-config or --delete-config")
            ops = [ConfigOp(k, v) for k, v in added.items()]
            ops += [ConfigOp(k, None, AlterOp.DELETE) for k in deleted]
            admin.incremental_alter_configs({resource: ops}, validate_only=args.validate_only)
            verb = "validated" if args.validate_only else "completed"
            console.print(
                f"alter configs for {args.entity_type} {resource.name or '<default>'}: {verb}"
            )
            return 0
        except KafkaError as exc:
            raise CommandError(str(exc)) from None
