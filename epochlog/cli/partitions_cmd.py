"""`epochlog topics alter`, `epochlog records delete` and `epochlog leaders elect`, in the
vocabulary of Kafka's kafka-topics --alter, kafka-delete-records and kafka-leader-election.

- `topics alter --topic T --partitions N [--replica-assignment 1:2,2:3,...]`: CreatePartitions.
  As in kafka-topics, the assignment lists every partition's replicas (comma between
  partitions, colon between brokers); the entries past the topic's current count are the new
  partitions'.
- `records delete --offset-json-file F`: DeleteRecords for the partitions and offsets of
  kafka-delete-records' JSON, `{"partitions": [{"topic": "t", "partition": 0, "offset": 3}],
  "version": 1}` (offset -1: the high watermark); prints each partition's low watermark.
- `leaders elect --election-type preferred|unclean (--topic T [--partition P] |
  --all-topic-partitions | --path-to-json-file F)`: ElectLeaders; the JSON is
  kafka-leader-election's `{"partitions": [{"topic": "t", "partition": 0}]}`.

Bad input (unreadable JSON, a missing key, a partition named twice, a malformed assignment) is a
`CommandError` naming what was wrong, before anything is sent.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from epochlog.cli.common import CommandError, client_config
from epochlog.client.config import Role


def add_parsers(
    sub: Any, topics_sub: Any, _add_bootstrap: Callable[[argparse.ArgumentParser], None]
) -> None:
    alter = topics_sub.add_parser("alter", help="add partitions to a topic (CreatePartitions)")
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, required=True, help="the new partition count")
    alter.add_argument(
        "--replica-assignment",
        help="replicas of every partition, e.g. 1:2,2:3,3:1 (the new partitions' are used)",
    )
    _add_bootstrap(alter)

    records = sub.add_parser("records", help="delete records (DeleteRecords)")
    records_sub = records.add_subparsers(dest="records_command", required=True)
    delete = records_sub.add_parser("delete", help="move partitions' log start offsets forward")
    delete.add_argument(
        "--offset-json-file",
        required=True,
        help='{"partitions": [{"topic": "t", "partition": 0, "offset": 3}], "version": 1}',
    )
    _add_bootstrap(delete)

    leaders = sub.add_parser("leaders", help="leader elections (ElectLeaders)")
    leaders_sub = leaders.add_subparsers(dest="leaders_command", required=True)
    elect = leaders_sub.add_parser("elect", help="elect preferred or (unclean) any live leaders")
    elect.add_argument("--election-type", choices=("preferred", "unclean"))
    elect.add_argument(
        "--preferred",
        action="store_const",
        const="preferred",
        dest="legacy_type",
        help="the same as --election-type preferred",
    )
    elect.add_argument("--topic", help="only this topic (with --partition: that partition)")
    elect.add_argument("--partition", type=int)
    elect.add_argument("--all-topic-partitions", action="store_true")
    elect.add_argument(
        "--path-to-json-file", help='{"partitions": [{"topic": "t", "partition": 0}]}'
    )
    _add_bootstrap(elect)


# ----------------------------------------------------------------------------- input


def parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics' --replica-assignment: "1:2,2:3" -> [[1, 2], [2, 3]]."""
    assignment = []
    for index, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.split(":")]
        except ValueError:
            raise CommandError(
                f"--replica-assignment: partition {index}'s replicas {part!r} are not broker "
                "ids separated by ':'"
            ) from None
        if len(set(brokers)) != len(brokers):
            raise CommandError(
                f"--replica-assignment: partition {index} names a broker twice: {part!r}"
            )
        assignment.append(brokers)
    return assignment


def _read_json(path: str, option: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise CommandError(f"{option}: cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise CommandError(f"{option}: {path} is not JSON: {exc}") from None


def _partition_entries(data: Any, option: str, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise CommandError(f'{option}: the JSON needs a "partitions" list')
    entries = []
    for index, entry in enumerate(data["partitions"]):
        if not isinstance(entry, dict):
            raise CommandError(f"{option}: partitions[{index}] is not an object")
        for key in keys:
            value = entry.get(key)
            wanted = str if key == "topic" else int
            if not isinstance(value, wanted) or isinstance(value, bool):
                raise CommandError(
                    f"{option}: partitions[{index}] needs {key!r} as "
                    f"{'a string' if wanted is str else 'an integer'}"
                )
        entries.append(entry)
    seen: set[tuple[str, int]] = set()
    twice = sorted(
        f"{e['topic']}-{e['partition']}"
        for e in entries
        if (e["topic"], e["partition"]) in seen or seen.add((e["topic"], e["partition"]))
    )
    if twice:
        raise CommandError(f"{option}: duplicate topic partitions: {', '.join(twice)}")
    return entries


def read_offsets_json(path: str) -> dict[tuple[str, int], int]:
    """kafka-delete-records' --offset-json-file: {(topic, partition): offset}."""
    entries = _partition_entries(
        _read_json(path, "--offset-json-file"),
        "--offset-json-file",
        ("topic", "partition", "offset"),
    )
    for e in entries:
        if e["offset"] < -1:
            raise CommandError(
                f"--offset-json-file: offset {e['offset']} of {e['topic']}-{e['partition']} "
                "is below -1"
            )
    return {(e["topic"], e["partition"]): e["offset"] for e in entries}


# ----------------------------------------------------------------------------- commands


def alter_topic(admin: Any, args: argparse.Namespace, console: Console) -> None:
    from epochlog.client import NewPartitions

    assignments = None
    if args.replica_assignment:
        everything = parse_replica_assignment(args.replica_assignment)
        current = len(admin.describe_topics([args.topic])[args.topic].partitions)
        assignments = everything[current:]
    result = admin.create_partitions({args.topic: NewPartitions(args.partitions, assignments)})[
        args.topic
    ]
    if result is not None:
        raise result
    console.print(f"Topic {args.topic} now has {args.partitions} partitions.")


def cmd_records(args: argparse.Namespace, console: Console) -> int:
    from epochlog.client import Admin, KafkaError

    offsets = read_offsets_json(args.offset_json_file)
    if not offsets:
        raise CommandError("--offset-json-file lists no partitions")
    print("Executing records delete operation")
    with Admin(client_config(args, Role.ADMIN)) as admin:
        try:
            results = admin.delete_records(offsets)
        except KafkaError as exc:
            raise CommandError(str(exc)) from None
    print("Records delete operation completed:")
    failed = 0
    for tp, answer in sorted(results.items()):
        if answer.error is None:
            print(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {answer.low_watermark}")
        else:
            failed += 1
            print(f"partition: {tp.topic}-{tp.partition}\terror: {answer.error}")
    return 1 if failed else 0


def cmd_elect(args: argparse.Namespace, console: Console) -> int:
    from epochlog.client import Admin, ElectionType, KafkaError
    from epochlog.protocol.errors import ErrorCode

    kind_name = args.election_type or args.legacy_type
    if kind_name is None:
        raise CommandError("--election-type preferred|unclean is required")
    if args.election_type and args.legacy_type and args.election_type != args.legacy_type:
        raise CommandError("--preferred contradicts --election-type unclean")
    sources = [bool(args.topic), args.all_topic_partitions, bool(args.path_to_json_file)]
    if sum(sources) != 1:
        raise CommandError(
            "give exactly one of --topic, --all-topic-partitions or --path-to-json-file"
        )
    if args.partition is not None and not args.topic:
        raise CommandError("--partition needs --topic")
    kind = ElectionType.PREFERRED if kind_name == "preferred" else ElectionType.UNCLEAN
    with Admin(client_config(args, Role.ADMIN)) as admin:
        try:
            partitions: list[tuple[str, int]] | None = None
            if args.path_to_json_file:
                entries = _partition_entries(
                    _read_json(args.path_to_json_file, "--path-to-json-file"),
                    "--path-to-json-file",
                    ("topic", "partition"),
                )
                partitions = [(e["topic"], e["partition"]) for e in entries]
            elif args.topic:
                described = admin.describe_topics([args.topic])[args.topic]
                partitions = [
                    (args.topic, p.partition)
                    for p in described.partitions
                    if args.partition is None or p.partition == args.partition
                ]
                if not partitions:
                    raise CommandError(f"topic {args.topic!r} has no partition {args.partition}")
            results = admin.elect_leaders(kind, partitions)
            summary = None
            if kind is ElectionType.PREFERRED and partitions is not None:
                topics = sorted({t for t, _ in partitions})
                described_all = admin.describe_topics(topics)
                on_preferred = sum(
                    1
                    for t, p in partitions
                    for info in described_all[t].partitions
                    if info.partition == p and info.replicas and info.leader == info.replicas[0]
                )
                summary = (
                    f"{on_preferred} of {len(partitions)} partitions are led by their "
                    "preferred replica"
                )
        except KafkaError as exc:
            raise CommandError(str(exc)) from None
    label = kind.name
    done = [tp for tp, e in sorted(results.items()) if e is None]
    not_needed = [
        tp
        for tp, e in sorted(results.items())
        if e is not None and e.code is ErrorCode.ELECTION_NOT_NEEDED
    ]
    failed = {
        tp: e
        for tp, e in sorted(results.items())
        if e is not None and e.code is not ErrorCode.ELECTION_NOT_NEEDED
    }
    if done:
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in done)
        print(f"Successfully completed leader election ({label}) for partitions {names}")
    if not_needed:
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in not_needed)
        print(f"Valid replica already elected for partitions {names}")
    for tp, error in failed.items():
        print(
            f"Error completing leader election ({label}) for partition: "
            f"{tp.topic}-{tp.partition}: {error}"
        )
    if not results:
        print(f"No partition needed a leader election ({label})")
    if summary:
        print(summary)
    if failed:
        raise CommandError(f"{len(failed)} replica(s) could not be elected")
    return 0
