"""`epochlog acls add|list|remove`: ACLs with kafka-acls' vocabulary.

    epochlog acls add --allow-principal User:alice --operation Read --operation Describe \
        --topic orders --group billing
    epochlog acls add --deny-principal User:mallory --deny-host 10.0.0.9 --operation All --topic '*'
    epochlog acls add --allow-principal User:app --producer --topic orders- \
        --resource-pattern-type prefixed
    epochlog acls add --allow-principal User:app --consumer --topic orders --group billing
    epochlog acls list [--topic orders] [--principal User:alice]
    epochlog acls remove --allow-principal User:alice --operation Read --topic orders
    epochlog acls remove --topic orders          (every ACL on the literal topic orders)

`add` creates one binding per principal x host x operation x resource (hosts default to `*`).
`--producer` is Write, Describe and Create on the topics (IdempotentWrite on the cluster with
`--idempotent`, Write and Describe on a --transactional-id); `--consumer` is Read and Describe on
the topics and Read on the --group, as kafka-acls gives them. `--resource-pattern-type` is
literal (default) or prefixed; `list` and `remove` also take any and match. `remove` without a
principal or operation removes every ACL its filter matches.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from epochlog.client.admin_acls import CLUSTER_RESOURCE, AclSpec


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
) -> None:
    acls = sub.add_parser("acls", help="add, list and remove ACLs (kafka-acls)")
    commands = acls.add_subparsers(dest="acls_command", required=True)
    for name, text in (
        ("add", "create ACLs"),
        ("list", "show ACLs"),
        ("remove", "delete the ACLs a filter matches"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("--topic", action="append", default=[], help="topic (repeatable)")
        command.add_argument("--group", action="append", default=[], help="consumer group")
        command.add_argument(
            "--transactional-id", action="append", default=[], help="transactional id"
        )
        command.add_argument("--cluster", action="store_true", help="the cluster resource")
        command.add_argument(
            "--resource-pattern-type",
            default=None,
            choices=("literal", "prefixed", "any", "match"),
            help="literal (default) or prefixed; list/remove also any and match",
        )
        command.add_argument("--operation", action="append", default=[], help="e.g. Read")
        if name == "list":
            command.add_argument("--principal", action="append", default=[])
        else:
            for flag in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host"):
                command.add_argument(flag, action="append", default=[])
        if name == "add":
            command.add_argument("--producer", action="store_true", help="producer ACLs")
            command.add_argument("--consumer", action="store_true", help="consumer ACLs")
            command.add_argument(
                "--idempotent", action="store_true", help="with --producer: IdempotentWrite"
            )
        add_bootstrap(command)


def resources(args: argparse.Namespace) -> list[tuple[str, str]]:
    found = [("Topic", t) for t in args.topic]
    found += [("Group", g) for g in args.group]
    found += [("TransactionalId", t) for t in args.transactional_id]
    if args.cluster:
        found.append(("Cluster", CLUSTER_RESOURCE))
    return found


def bindings_to_add(args: argparse.Namespace) -> list[AclSpec]:
    """Every binding `acls add` creates (CommandError when something is missing)."""
    from epochlog.cli.common import CommandError

    pattern = args.resource_pattern_type or "literal"
    if pattern not in ("literal", "prefixed"):
        raise CommandError("acls add takes --resource-pattern-type literal or prefixed")
    # (resource type, name, operations)
    wanted: list[tuple[str, str, list[str]]] = []
    if args.producer or args.consumer:
        if args.operation:
            raise CommandError("--producer/--consumer take no --operation")
        if not args.topic:
            raise CommandError("--producer/--consumer need --topic")
        if args.producer:
            wanted += [("Topic", t, ["Write", "Describe", "Create"]) for t in args.topic]
            wanted += [("TransactionalId", t, ["Write", "Describe"]) for t in args.transactional_id]
            if args.idempotent:
                wanted.append(("Cluster", CLUSTER_RESOURCE, ["IdempotentWrite"]))
        if args.consumer:
            if not args.group:
                raise CommandError("--consumer needs --group")
            wanted += [("Topic", t, ["Read", "Describe"]) for t in args.topic]
            wanted += [("Group", g, ["Read"]) for g in args.group]
    else:
        if not args.operation:
            raise CommandError("acls add needs --operation (or --producer / --consumer)")
        found = resources(args)
        if not found:
            raise CommandError("acls add needs a resource: --topic, --group, --cluster, ...")
        wanted = [(rtype, name, args.operation) for rtype, name in found]
    entries = [("Allow", p, h) for p in args.allow_principal for h in args.allow_host or ["*"]]
    entries += [("Deny", p, h) for p in args.deny_principal for h in args.deny_host or ["*"]]
    if not entries:
        raise CommandError("acls add needs --allow-principal or --deny-principal")
    return [
        AclSpec(rtype, name, pattern.capitalize(), principal, host, op, permission)
        for rtype, name, ops in wanted
        for op in ops
        for permission, principal, host in entries
    ]


def filters_for(args: argparse.Namespace, *, removing: bool) -> list[AclSpec]:
    found = resources(args) or ([("Any", None)] if not removing else [])
    if not found:
        from epochlog.cli.common import CommandError

        raise CommandError("acls remove needs a resource: --topic, --group, --cluster, ...")
    pattern = (args.resource_pattern_type or ("literal" if found[0][1] else "any")).capitalize()
    operations = args.operation or ["Any"]
    if removing:
        people: list[tuple[str, str | None, str | None]] = [
            ("Allow", p, h) for p in args.allow_principal for h in args.allow_host or [None]
        ]
        people += [("Deny", p, h) for p in args.deny_principal for h in args.deny_host or [None]]
        people = people or [("Any", None, None)]
    else:
        people = [("Any", p, None) for p in args.principal] or [("Any", None, None)]
    return [
        AclSpec(rtype, name, pattern, principal, host, op, permission)
        for rtype, name in found
        for op in operations
        for permission, principal, host in people
    ]


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError, client_config
    from epochlog.client import Admin
    from epochlog.client.config import Role
    from epochlog.client.errors import ClientError

    # --command-config (or a secure local cluster's client.properties) logs the admin in
    with Admin(client_config(args, Role.ADMIN)) as admin:
        try:
            if args.acls_command == "add":
                bindings = bindings_to_add(args)
                admin.create_acls(bindings)
                for binding in bindings:
                    console.print(f"added: {binding}")
                return 0
            if args.acls_command == "remove":
                removed = admin.delete_acls(filters_for(args, removing=True))
                for binding in removed:
                    console.print(f"removed: {binding}")
                if not removed:
                    console.print("no ACL matched")
                return 0
            listed: list[AclSpec] = []
            for binding_filter in filters_for(args, removing=False):
                listed += [b for b in admin.describe_acls(binding_filter) if b not in listed]
        except ClientError as exc:
            raise CommandError(str(exc)) from None
    table = Table("resource", "pattern", "principal", "host", "operation", "permission")
    for b in sorted(listed, key=lambda b: (b.resource_type, b.resource_name or "", str(b))):
        table.add_row(
            f"{b.resource_type}:{b.resource_name}",
            b.pattern_type.upper(),
            b.principal or "",
            b.host or "",
            b.operation,
            b.permission,
        )
    console.print(table)
    return 0
