"""`epochlog groups ...`: consumer groups with kafka-consumer-groups' vocabulary.

- `list [--state S]`: the consumer groups (protocol type "consumer", or none for `assign()`
  consumers that only commit), as Kafka's `--list`; with `--state` (comma separated, any case)
  only groups in those states, shown with their state.
- `describe GROUP...`: per partition TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
  CONSUMER-ID HOST CLIENT-ID (Kafka's `--describe`: partitions assigned to a member and
  partitions with a committed offset); `--members` one row per member with its assignment;
  `--state` the coordinator, assignor, state and member count.
- `delete GROUP...`: delete groups and their offsets (only groups without members).
- `reset-offsets --group G (--topic T[:p,...] | --all-topics) (--to-earliest | --to-latest |
  --to-offset N | --shift-by N | --to-datetime ISO) [--dry-run | --execute]`: a dry run (the
  default) prints the new offsets; `--execute` commits them. Refused unless the group is Empty
  or Dead, as Kafka's tool refuses it; the plan is `offset_reset.plan_reset`.
- `delete-offsets --group G --topic T[:p,...]`: delete the group's offsets of those partitions.

Every command takes `--bootstrap-server` or `--dir`; `list`, `describe`, `reset-offsets` and
`delete-offsets` take `--json`. Errors are one line naming the group (and topic or partition).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from epochlog.cli.offset_reset import (
    LogRange,
    PartitionReset,
    ResetError,
    ResetHow,
    ResetSpec,
    check_group_resettable,
    parse_datetime_ms,
    parse_topic_partitions,
    plan_reset,
)

MISSING = "-"


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
) -> None:
    groups = sub.add_parser("groups", help="list, describe, delete consumer groups; reset offsets")
    commands = groups.add_subparsers(dest="groups_command", required=True)

    listing = commands.add_parser("list", help="the consumer groups of the cluster")
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        metavar="STATE",
        help="only groups in this state (Empty, Stable, PreparingRebalance, ...; comma separated)",
    )
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    add_bootstrap(listing)

    describe = commands.add_parser("describe", help="partitions, offsets and lag of groups")
    describe.add_argument("group", nargs="+", metavar="GROUP")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="one row per member")
    view.add_argument("--state", action="store_true", help="coordinator, assignor, state")
    describe.add_argument("--json", action="store_true", help="machine-readable output")
    add_bootstrap(describe)

    delete = commands.add_parser("delete", help="delete groups (without members) and offsets")
    delete.add_argument("group", nargs="+", metavar="GROUP")
    add_bootstrap(delete)

    reset = commands.add_parser("reset-offsets", help="move a group's committed offsets")
    reset.add_argument("--group", required=True)
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic", action="append", metavar="T[:P,...]", help="a topic, or some of its partitions"
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every partition the group has an offset for"
    )
    how = reset.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true", help="the log start offset")
    how.add_argument("--to-latest", action="store_true", help="the log end offset")
    how.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    how.add_argument("--shift-by", type=int, metavar="N", help="the committed offset + N")
    how.add_argument("--to-datetime", metavar="ISO", help="the first offset at or after this time")
    run = reset.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="print the new offsets (default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.add_argument("--json", action="store_true", help="machine-readable output")
    add_bootstrap(reset)

    delete_offsets = commands.add_parser("delete-offsets", help="delete a group's offsets")
    delete_offsets.add_argument("--group", required=True)
    delete_offsets.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="T[:P,...]",
        help="a topic or some of its partitions",
    )
    delete_offsets.add_argument("--json", action="store_true", help="machine-readable output")
    add_bootstrap(delete_offsets)


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError, client_config
    from epochlog.client import Admin, ClientError
    from epochlog.client.config import Role

    command = {
        "list": _list,
        "describe": _describe,
        "delete": _delete,
        "reset-offsets": _reset_offsets,
        "delete-offsets": _delete_offsets,
    }[args.groups_command]
    with Admin(client_config(args, Role.ADMIN)) as admin:
        try:
            return command(admin, args, console)
        except (ClientError, ResetError) as exc:
            raise CommandError(str(exc)) from None


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


def _table() -> Table:
    return Table(box=None, pad_edge=False)


def _print_table(console: Console, table: Table) -> None:
    """Print `table` as wide as its rows, never wrapped or cut (as kafka-consumer-groups prints
    plain columns), so long consumer ids stay on one line and scripts can read the rows."""
    for column in table.columns:
        column.no_wrap = True
    wide = console.options.update_width(1 << 16)
    width = max(console.measure(table, options=wide).maximum, console.width)
    Console(width=width, file=console.file, no_color=console.no_color).print(table)


def _text(value: object) -> str:
    return MISSING if value is None or value == "" else str(value)


# ----------------------------------------------------------------------------- list


def _list(admin: Any, args: argparse.Namespace, console: Console) -> int:
    states = [s.strip() for text in args.state for s in text.split(",") if s.strip()]
    listed = [g for g in admin.list_groups(states or None) if g.is_consumer_group]
    if args.json:
        _print_json(
            [
                {"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type}
                for g in listed
            ]
        )
    elif states:
        table = _table()
        for column in ("GROUP", "STATE"):
            table.add_column(column)
        for g in listed:
            table.add_row(g.group_id, _text(g.state))
        _print_table(console, table)
    else:
        for g in listed:
            print(g.group_id)
    return 0


# ----------------------------------------------------------------------------- describe


def group_report(admin: Any, group_id: str) -> dict[str, Any]:
    """A group's state, members and per-partition offsets and lag, as plain data."""
    from epochlog.cli.common import CommandError

    description = admin.describe_groups([group_id])[group_id]
    if description.state == "Dead":
        raise CommandError(f"consumer group {group_id!r} does not exist")
    committed = admin.list_group_offsets(group_id)
    owners: dict[tuple[str, int], Any] = {}
    for member in description.members:
        for tp in member.assignment:
            owners[(tp.topic, tp.partition)] = member
    partitions = sorted(set(owners) | {(tp.topic, tp.partition) for tp in committed})
    existing = set(admin.list_topics(include_internal=True))
    end_offsets = admin.log_end_offsets([tp for tp in partitions if tp[0] in existing])
    rows = []
    for tp in partitions:
        current = committed.get(tp)
        current_offset = None if current is None else current.offset
        end = end_offsets.get(tp)
        member = owners.get(tp)
        rows.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "current_offset": current_offset,
                "log_end_offset": end,
                "lag": None if current_offset is None or end is None else end - current_offset,
                "consumer_id": member.member_id if member else None,
                "host": member.host if member else None,
                "client_id": member.client_id if member else None,
            }
        )
    coordinator = description.coordinator
    return {
        "group": group_id,
        "state": description.state,
        "assignor": description.assignor,
        "protocol_type": description.protocol_type,
        "coordinator": None
        if coordinator is None
        else {"id": coordinator.node_id, "host": coordinator.host, "port": coordinator.port},
        "members": [
            {
                "consumer_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "host": m.host,
                "client_id": m.client_id,
                "assignment": [[tp.topic, tp.partition] for tp in m.assignment],
            }
            for m in description.members
        ],
        "partitions": rows,
    }


def _describe(admin: Any, args: argparse.Namespace, console: Console) -> int:
    reports = [group_report(admin, g) for g in dict.fromkeys(args.group)]
    if args.json:
        _print_json(reports)
        return 0
    for report in reports:
        group = report["group"]
        if args.state:
            _print_state(report, console)
            continue
        if report["state"] in ("PreparingRebalance", "CompletingRebalance"):
            console.print(f"Warning: consumer group '{group}' is rebalancing.")
        if not report["members"]:
            console.print(f"Consumer group '{group}' has no active members.")
        if args.members:
            _print_members(report, console)
        else:
            _print_offsets(report, console)
    return 0


def _print_offsets(report: dict[str, Any], console: Console) -> None:
    columns = (
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    )
    table = _table()
    for column in columns:
        table.add_column(column)
    for row in report["partitions"]:
        table.add_row(
            report["group"],
            row["topic"],
            str(row["partition"]),
            _text(row["current_offset"]),
            _text(row["log_end_offset"]),
            _text(row["lag"]),
            _text(row["consumer_id"]),
            _text(row["host"]),
            _text(row["client_id"]),
        )
    _print_table(console, table)


def _print_members(report: dict[str, Any], console: Console) -> None:
    table = _table()
    for column in ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"):
        table.add_column(column)
    for m in report["members"]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in m["assignment"]:
            by_topic.setdefault(topic, []).append(partition)
        assignment = ", ".join(
            f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items())
        )
        table.add_row(
            report["group"],
            m["consumer_id"],
            m["host"],
            m["client_id"],
            str(len(m["assignment"])),
            _text(assignment),
        )
    _print_table(console, table)


def _print_state(report: dict[str, Any], console: Console) -> None:
    coordinator = report["coordinator"]
    where = (
        MISSING
        if coordinator is None
        else f"{coordinator['host']}:{coordinator['port']} ({coordinator['id']})"
    )
    table = _table()
    for column in ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"):
        table.add_column(column)
    table.add_row(
        report["group"],
        where,
        _text(report["assignor"]),
        report["state"],
        str(len(report["members"])),
    )
    _print_table(console, table)


# ----------------------------------------------------------------------------- delete


def _delete(admin: Any, args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError

    results = admin.delete_groups(args.group)
    deleted = [g for g, error in results.items() if error is None]
    if deleted:
        names = ", ".join(f"'{g}'" for g in deleted)
        console.print(f"Deletion of requested consumer groups ({names}) was successful.")
    failed = {g: error for g, error in results.items() if error is not None}
    if failed:
        raise CommandError(
            "; ".join(f"group {g!r} could not be deleted: {e.code.name}" for g, e in failed.items())
        )
    return 0


# ----------------------------------------------------------------------------- offsets


def _partitions_of(admin: Any, topics: list[str]) -> list[tuple[str, int]]:
    """`--topic` arguments as partitions (every partition of a topic named alone)."""
    wanted: list[tuple[str, int]] = []
    for text in topics:
        topic, partitions = parse_topic_partitions(text)
        if partitions is None:
            description = admin.describe_topics([topic])[topic]
            partitions = [p.partition for p in description.partitions]
        wanted.extend((topic, p) for p in partitions)
    return list(dict.fromkeys(wanted))


def _reset_spec(args: argparse.Namespace) -> ResetSpec:
    if args.to_earliest:
        return ResetSpec(ResetHow.TO_EARLIEST)
    if args.to_latest:
        return ResetSpec(ResetHow.TO_LATEST)
    if args.to_offset is not None:
        return ResetSpec(ResetHow.TO_OFFSET, args.to_offset)
    if args.shift_by is not None:
        return ResetSpec(ResetHow.SHIFT_BY, args.shift_by)
    return ResetSpec(ResetHow.TO_DATETIME, parse_datetime_ms(args.to_datetime))


def _reset_offsets(admin: Any, args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError

    group = args.group
    spec = _reset_spec(args)
    description = admin.describe_groups([group])[group]
    check_group_resettable(group, description.state, len(description.members))
    committed = {
        (tp.topic, tp.partition): (None if o is None else o.offset)
        for tp, o in admin.list_group_offsets(group).items()
    }
    if args.all_topics:
        partitions = sorted(committed)
        if not partitions:
            raise CommandError(f"group {group!r} has no committed offsets to reset (--all-topics)")
    else:
        partitions = _partitions_of(admin, args.topic)
    starts = admin.log_start_offsets(partitions)
    ends = admin.log_end_offsets(partitions)
    logs = {tp: LogRange(starts[tp], ends[tp]) for tp in partitions}
    at_time = None
    if spec.how is ResetHow.TO_DATETIME:
        found = admin.list_offsets({tp: spec.value for tp in partitions})
        at_time = {tp: r.offset for tp, r in found.items()}
    plan = plan_reset(group, spec, partitions, committed, logs, at_time)
    warnings = Console(stderr=True)
    for item in plan:
        if item.note:
            warnings.print(f"warning: {item.topic}-{item.partition}: {item.note}")
    if args.execute:
        admin.alter_group_offsets(group, {(r.topic, r.partition): r.new for r in plan})
    if args.json:
        _print_json(
            {
                "group": group,
                "executed": bool(args.execute),
                "reset": str(spec),
                "partitions": [
                    {
                        "topic": r.topic,
                        "partition": r.partition,
                        "current_offset": r.current,
                        "new_offset": r.new,
                        "note": r.note or None,
                    }
                    for r in plan
                ],
            }
        )
    else:
        _print_plan(group, plan, console)
        if not args.execute:
            warnings.print("dry run: nothing was committed; --execute commits these offsets")
    return 0


def _print_plan(group: str, plan: list[PartitionReset], console: Console) -> None:
    table = _table()
    for column in ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"):
        table.add_column(column)
    for r in plan:
        table.add_row(group, r.topic, str(r.partition), _text(r.current), str(r.new))
    _print_table(console, table)


def _delete_offsets(admin: Any, args: argparse.Namespace, console: Console) -> int:
    group = args.group
    partitions = _partitions_of(admin, args.topic)
    admin.delete_group_offsets(group, partitions)
    if args.json:
        _print_json(
            {"group": group, "deleted": [{"topic": t, "partition": p} for t, p in partitions]}
        )
        return 0
    table = _table()
    for column in ("TOPIC", "PARTITION", "STATUS"):
        table.add_column(column)
    for topic, partition in partitions:
        table.add_row(topic, str(partition), "Successful")
    console.print(f"Deleted the offsets of group '{group}' for:")
    _print_table(console, table)
    return 0
