"""`epochlog configs describe|alter`: dynamic configs and client quotas with kafka-configs'
vocabulary.

    epochlog configs describe --entity-type topics --entity-name t [--all]
    epochlog configs describe --entity-type brokers --entity-name 1 | --entity-default
    epochlog configs alter --entity-type topics --entity-name t \
        --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms
    epochlog configs alter --entity-type clients --entity-name app \
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    epochlog configs alter --entity-type users --entity-name alice \
        --entity-type clients --entity-default --delete-config producer_byte_rate
    epochlog configs describe --entity-type clients [--entity-name app | --entity-default]
    epochlog configs alter --entity-type broker-loggers --entity-name 1 \
        --add-config epochlog.broker.server=DEBUG --delete-config kazoo

`describe` shows the keys set dynamically (kafka-configs' default), or every key with `--all`.
`alter` sends one IncrementalAlterConfigs: SET for each --add-config, DELETE for each
--delete-config; a value in [brackets] is a list (kafka-configs' syntax for commas in values).
For `users` and `clients` (one, or users then clients for a user's client id) the quotas are
described and altered with DescribeClientQuotas / AlterClientQuotas; the n-th --entity-name or
--entity-default names the n-th --entity-type, and a quota describe without names lists every
entity of those types. `broker-loggers` are a broker's log levels (KIP-412), changed on that
broker only until it restarts.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

DYNAMIC_SOURCES = {
    "DYNAMIC_TOPIC_CONFIG",
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "DYNAMIC_BROKER_LOGGER_CONFIG",
}
ENTITY_TYPES = ("topics", "brokers", "broker-loggers", "users", "clients")
KINDS = {"topics": "TOPIC", "brokers": "BROKER", "broker-loggers": "BROKER_LOGGER"}
QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id"}  # kafka-configs -> the API's


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
) -> None:
    configs = sub.add_parser(
        "configs", help="describe and alter topic and broker configs, and client quotas"
    )
    commands = configs.add_subparsers(dest="configs_command", required=True)
    for name, text in (("describe", "show configs or quotas"), ("alter", "change")):
        command = commands.add_parser(name, help=text)
        command.add_argument(
            "--entity-type",
            dest="entity_types",
            action="append",
            required=True,
            choices=ENTITY_TYPES,
            help="repeat as users then clients for a user's client id",
        )
        command.add_argument(
            "--entity-name",
            dest="entity_names",
            action="append",
            help="the topic, broker id, user or client id",
        )
        command.add_argument(
            "--entity-default",
            dest="entity_names",
            action="append_const",
            const=None,
            help="the default entity (cluster-wide broker default, default user or client id)",
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


def quota_entity(types: list[str], names: list[str | None]) -> list[tuple[str, str | None]]:
    """The (API entity type, name or None for the default) pairs of a quota command; a
    ValueError names what is wrong."""
    if types not in (["users"], ["clients"], ["users", "clients"]):
        raise ValueError(
            "--entity-type: quotas are for users, clients, or users then clients, "
            f"not {' then '.join(types)}"
        )
    if len(names) > len(types):
        raise ValueError("more --entity-name/--entity-default than --entity-type")
    return [(QUOTA_ENTITY_TYPES[t], n) for t, n in zip(types, names, strict=False)]


def parse_quota_values(text: str) -> dict[str, float]:
    result: dict[str, float] = {}
    for key, value in parse_add_config(text).items():
        try:
            result[key] = float(value)
        except ValueError:
            raise ValueError(f"--add-config: {key}={value} is not a number") from None
    return result


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError

    types: list[str] = args.entity_types
    names: list[str | None] = args.entity_names or []
    if any(t in QUOTA_ENTITY_TYPES for t in types):
        return run_quotas(args, console, types, names)
    if len(types) != 1 or len(names) != 1:
        raise CommandError("topics and brokers take one --entity-type and one name or default")
    args.entity_type, args.entity_name = types[0], names[0]
    args.entity_default = names[0] is None
    return run_configs(args, console)


def run_quotas(
    args: argparse.Namespace, console: Console, types: list[str], names: list[str | None]
) -> int:
    from epochlog.cli.common import CommandError, client_config
    from epochlog.client import Admin, KafkaError
    from epochlog.client.admin_quotas import QuotaFilter, describe_entity
    from epochlog.client.config import Role

    try:
        entity = quota_entity(types, names)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    with Admin(client_config(args, Role.ADMIN)) as admin:
        try:
            if args.configs_command == "describe":
                components = []
                for i, kind in enumerate(types):
                    if i >= len(entity):  # no name: every entity of the type
                        components.append(QuotaFilter.any(QUOTA_ENTITY_TYPES[kind]))
                    elif entity[i][1] is None:
                        components.append(QuotaFilter.default(entity[i][0]))
                    else:
                        components.append(QuotaFilter.exact(entity[i][0], str(entity[i][1])))
                quotas = admin.describe_client_quotas(components, strict=True)
                table = Table(title=f"client quotas ({' then '.join(types)})")
                for column in ("entity", "quota", "value"):
                    table.add_column(column)
                for found, values in sorted(quotas.items(), key=lambda kv: str(kv[0])):
                    for key, value in sorted(values.items()):
                        shown = str(int(value)) if value.is_integer() else repr(value)
                        table.add_row(describe_entity(found), key, shown)
                console.print(table)
                return 0
            if len(entity) != len(types):
                raise CommandError("configs alter needs a name or --entity-default per type")
            try:
                added: dict[str, float | None] = dict(parse_quota_values(args.add_config))
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            deleted = [k.strip() for k in args.delete_config.split(",") if k.strip()]
            if not added and not deleted:
                raise CommandError("configs alter needs --add-config or --delete-config")
            added.update({k: None for k in deleted})
            admin.alter_client_quotas({tuple(entity): added}, validate_only=args.validate_only)
            verb = "validated" if args.validate_only else "completed"
            console.print(f"alter client quotas for {describe_entity(tuple(entity))}: {verb}")
            return 0
        except KafkaError as exc:
            raise CommandError(str(exc)) from None


def run_configs(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError, client_config
    from epochlog.client import Admin, KafkaError
    from epochlog.client.admin_configs import AlterOp, ConfigOp, ConfigResource, ResourceType
    from epochlog.client.config import Role

    kind = ResourceType[KINDS[args.entity_type]]
    if kind is not ResourceType.BROKER and args.entity_default:
        raise CommandError("--entity-default applies to brokers only")
    resource = ConfigResource(kind, "" if args.entity_default else args.entity_name)
    with Admin(client_config(args, Role.ADMIN)) as admin:
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
