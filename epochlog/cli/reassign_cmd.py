"""`epochlog reassign ...`: partition reassignment with kafka-reassign-partitions' vocabulary.

- `--generate --topics-to-move-json-file F --broker-list 1,2,3`: prints the current assignment
  of the topics in F (`{"topics":[{"topic":"t"}],"version":1}`) and a proposed one over the
  given brokers (Kafka's round robin, same replication factor), both in the reassignment JSON
  format; changes nothing.
- `--execute --reassignment-json-file F`: prints the current assignment of F's partitions ("Save
  this to use as the --reassignment-json-file option during rollback") and starts F's
  reassignments. Refused while other reassignments run, unless `--additional`. With
  `--throttle B` (bytes/s), first, as Kafka's tool: every broker of a moving partition (its
  current and new replicas) gets leader.replication.throttled.rate and
  follower.replication.throttled.rate = B, and each topic gets
  leader.replication.throttled.replicas = partition:broker of the current replicas and
  follower.replication.throttled.replicas = those of the replicas being added
  (`throttle_plan`). `--replica-alter-log-dirs-throttle` is accepted; it would bound moves
  between log dirs, which this tool does not make, so it sets nothing.
- `--verify --reassignment-json-file F`: per partition of F, completed, still in progress, or
  "no active reassignment ... but replica set is ... rather than ...". When none is still in
  progress, the throttles are cleared (unless `--preserve-throttles`): both rates on every
  live broker and every broker of F, both throttled-replicas keys on F's topics.
- `--cancel --reassignment-json-file F`: cancels those of F's partitions that are being
  reassigned; each goes back to its original replicas.
- `--list`: the reassignments in progress.

The reassignment JSON is Kafka's: `{"version":1,"partitions":[{"topic":"t","partition":0,
"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}` (`log_dirs` optional; only "any",
since moving replicas between log dirs is AlterReplicaLogDirs' job). Messages are Kafka's.
Parsing and formatting are the pure functions below; `run` does the I/O.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from epochlog.controller.assignment import AssignmentError, assign_replicas

Assignment = dict[tuple[str, int], list[int]]

ROLLBACK_HINT = "Save this to use as the --reassignment-json-file option during rollback"
VERIFY_WARNING = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure "
    "the throttle is removed."
)
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
EXISTING_REASSIGNMENTS = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. "
    "The --additional flag can also be used to change the throttle by resubmitting the "
    "current reassignment."
)


class ReassignmentInputError(ValueError):
    """A JSON file or option that cannot be used; the message names what is wrong."""


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
) -> None:
    reassign = sub.add_parser(
        "reassign", help="move partitions between brokers (kafka-reassign-partitions)"
    )
    action = reassign.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose an assignment")
    action.add_argument("--execute", action="store_true", help="start the reassignment in F")
    action.add_argument("--verify", action="store_true", help="status of the reassignment in F")
    action.add_argument("--cancel", action="store_true", help="cancel the reassignment in F")
    action.add_argument("--list", action="store_true", help="reassignments in progress")
    reassign.add_argument("--topics-to-move-json-file", metavar="F", help="for --generate")
    reassign.add_argument("--broker-list", metavar="1,2,3", help="for --generate")
    reassign.add_argument("--reassignment-json-file", metavar="F", help="the reassignment")
    reassign.add_argument(
        "--additional", action="store_true", help="--execute while others are in progress"
    )
    reassign.add_argument(
        "--throttle",
        type=int,
        default=-1,
        metavar="B",
        help="--execute: bound the moving replicas' replication to B bytes/s",
    )
    reassign.add_argument(
        "--replica-alter-log-dirs-throttle",
        type=int,
        default=-1,
        metavar="B",
        help="--execute: bound moves between log dirs (none are made: no effect)",
    )
    reassign.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="--verify: keep the throttles after the reassignment completes",
    )
    add_bootstrap(reassign)


# ------------------------------------------------------------------------- pure functions


def _load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReassignmentInputError(f"{what} is not valid JSON: {exc}") from None


def parse_reassignment_json(text: str) -> Assignment:
    """{(topic, partition): replicas} of a reassignment JSON document, in file order."""
    doc = _load_json(text, "the reassignment JSON")
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ReassignmentInputError('the reassignment JSON needs a "partitions" list')
    if doc.get("version", 1) != 1:
        raise ReassignmentInputError(f"unsupported reassignment JSON version {doc['version']!r}")
    result: Assignment = {}
    for i, entry in enumerate(doc["partitions"]):
        where = f"partitions[{i}]"
        if not isinstance(entry, dict):
            raise ReassignmentInputError(f"{where} is not an object")
        topic, partition, replicas = (
            entry.get("topic"),
            entry.get("partition"),
            entry.get("replicas"),
        )
        if not isinstance(topic, str) or not topic:
            raise ReassignmentInputError(f'{where}: "topic" must be a topic name')
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise ReassignmentInputError(f'{where} ({topic}): "partition" must be an int >= 0')
        name = f"{topic}-{partition}"
        if (
            not isinstance(replicas, list)
            or not replicas
            or not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas)
        ):
            raise ReassignmentInputError(
                f'{where} ({name}): "replicas" must be a list of broker ids'
            )
        if len(set(replicas)) != len(replicas):
            repeated = sorted({r for r in replicas if replicas.count(r) > 1})
            raise ReassignmentInputError(
                f"Partition replica lists may not contain duplicate entries: {name} "
                f"contains multiple entries for {repeated}"
            )
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
                raise ReassignmentInputError(
                    f'{where} ({name}): "log_dirs" must list one directory per replica'
                )
            if any(d != "any" for d in log_dirs):
                raise ReassignmentInputError(
                    f'{where} ({name}): "log_dirs" other than "any" would move replicas between '
                    "log directories, which epochlog reassign does not do"
                )
        if (topic, partition) in result:
            raise ReassignmentInputError(f"the reassignment JSON lists {name} twice")
        result[(topic, partition)] = list(replicas)
    if not result:
        raise ReassignmentInputError("the reassignment JSON lists no partitions")
    return result


def parse_topics_to_move_json(text: str) -> list[str]:
    doc = _load_json(text, "the topics-to-move JSON")
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), list):
        raise ReassignmentInputError('the topics-to-move JSON needs a "topics" list')
    topics = []
    for i, entry in enumerate(doc["topics"]):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic:
            raise ReassignmentInputError(f'topics[{i}]: "topic" must be a topic name')
        topics.append(topic)
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise ReassignmentInputError(
            f"List of topics to reassign contains duplicate entries: {', '.join(duplicates)}"
        )
    if not topics:
        raise ReassignmentInputError("the topics-to-move JSON lists no topics")
    return topics


def parse_broker_list(text: str | None) -> list[int]:
    if not text:
        raise ReassignmentInputError("--generate needs --broker-list, e.g. --broker-list 1,2,3")
    try:
        brokers = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise ReassignmentInputError(
            f"--broker-list {text!r} is not a list of broker ids"
        ) from None
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise ReassignmentInputError(f"Broker list contains duplicate entries: {duplicates}")
    return brokers


def format_reassignment_json(assignment: Mapping[tuple[str, int], Sequence[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions sorted, log_dirs all "any"."""
    partitions = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def propose_assignment(
    current: Mapping[tuple[str, int], Sequence[int]],
    brokers: Sequence[int],
    rng: random.Random | None = None,
) -> Assignment:
    """Each topic spread over `brokers` with its replication factor (Kafka's calculateAssignment,
    rack-unaware, with a random start as Kafka's AdminUtils)."""
    rng = rng or random.Random()
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), replicas in current.items():
        by_topic.setdefault(topic, []).append((partition, len(replicas)))
    proposed: Assignment = {}
    n = len(brokers)
    for topic, partitions in sorted(by_topic.items()):
        factor = max(f for _, f in partitions)
        try:
            placed = assign_replicas(
                brokers, len(partitions), factor, rng.randrange(n), rng.randrange(n)
            )
        except AssignmentError as exc:
            raise ReassignmentInputError(f"topic {topic}: {exc}") from None
        for i, (partition, _) in enumerate(sorted(partitions)):
            proposed[(topic, partition)] = list(placed[i])
    return proposed


def verify_lines(
    targets: Mapping[tuple[str, int], Sequence[int]],
    ongoing: set[tuple[str, int]],
    current: Mapping[tuple[str, int], Sequence[int]],
) -> list[str]:
    """Kafka's partitionReassignmentStatesToString."""
    lines = ["Status of partition reassignment:"]
    for (topic, partition), target in sorted(targets.items()):
        name = f"{topic}-{partition}"
        if (topic, partition) in ongoing:
            lines.append(f"Reassignment of partition {name} is still in progress.")
        elif list(current.get((topic, partition), [])) == list(target):
            lines.append(f"Reassignment of partition {name} is completed.")
        else:
            have = ",".join(str(r) for r in current.get((topic, partition), []))
            want = ",".join(str(r) for r in target)
            lines.append(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{have} rather than {want}."
            )
    return lines


def throttle_plan(
    targets: Mapping[tuple[str, int], Sequence[int]],
    current: Mapping[tuple[str, int], Sequence[int]],
) -> tuple[dict[str, dict[str, str]], list[int]]:
    """The throttled-replicas configs per topic and the brokers to rate-limit, as Kafka's
    calculateProposedMoveMap / calculateLeaderThrottles / calculateFollowerThrottles: leaders
    may be any current replica of a moving partition, followers are the replicas it gains;
    the entries are "partition:broker", sorted as text (Kafka's TreeSet)."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    brokers: set[int] = set()
    for (topic, partition), target in targets.items():
        sources = list(current.get((topic, partition), []))
        destinations = [r for r in target if r not in sources]
        leaders.setdefault(topic, set()).update(f"{partition}:{b}" for b in sources)
        followers.setdefault(topic, set()).update(f"{partition}:{b}" for b in destinations)
        brokers.update(sources)
        brokers.update(destinations)
    topics = sorted(set(leaders) | set(followers))
    configs = {
        topic: {
            LEADER_REPLICAS: ",".join(sorted(leaders.get(topic, ()))),
            FOLLOWER_REPLICAS: ",".join(sorted(followers.get(topic, ()))),
        }
        for topic in topics
    }
    return configs, sorted(brokers)


def check_throttle(value: int, option: str) -> None:
    if value < -1:
        raise ReassignmentInputError(
            f"{option} {value}: a throttle is a rate in bytes/s (>= 0), or -1 for none"
        )


# ------------------------------------------------------------------------- I/O


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import CommandError, client_config
    from epochlog.client import Admin, ClientError
    from epochlog.client.config import Role

    try:
        with Admin(client_config(args, Role.ADMIN)) as admin:
            if args.generate:
                return _generate(admin, args)
            if args.list:
                return _list(admin)
            text = _read_file(args.reassignment_json_file, "--reassignment-json-file")
            targets = parse_reassignment_json(text)
            if args.execute:
                check_throttle(args.throttle, "--throttle")
                check_throttle(
                    args.replica_alter_log_dirs_throttle, "--replica-alter-log-dirs-throttle"
                )
                return _execute(admin, targets, args.additional, args.throttle)
            if args.verify:
                return _verify(admin, targets, args.preserve_throttles)
            return _cancel(admin, targets)
    except (ClientError, ReassignmentInputError) as exc:
        raise CommandError(str(exc)) from None


def _read_file(path: str | None, option: str) -> str:
    if not path:
        raise ReassignmentInputError(f"this action needs {option} F")
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise ReassignmentInputError(f"{option} {path}: {exc.strerror or exc}") from None


def _current_assignment(admin: Any, topics: Sequence[str]) -> Assignment:
    from epochlog.client import KafkaError

    try:
        described = admin.describe_topics(sorted(set(topics)))
    except KafkaError as exc:
        raise ReassignmentInputError(str(exc)) from None
    return {
        (name, p.partition): list(p.replicas)
        for name, description in described.items()
        for p in description.partitions
    }


def _generate(admin: Any, args: argparse.Namespace) -> int:
    text = _read_file(args.topics_to_move_json_file, "--topics-to-move-json-file")
    topics = parse_topics_to_move_json(text)
    brokers = parse_broker_list(args.broker_list)
    known = {b.node_id for b in admin.describe_cluster().brokers}
    unknown = [b for b in brokers if b not in known]
    if unknown:
        raise ReassignmentInputError(f"Unknown broker id {unknown[0]}")
    current = _current_assignment(admin, topics)
    proposed = propose_assignment(current, brokers)
    print(f"Current partition replica assignment\n{format_reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}")
    return 0


def _execute(admin: Any, targets: Assignment, additional: bool, throttle: int = -1) -> int:
    if not additional and admin.list_partition_reassignments():
        raise ReassignmentInputError(EXISTING_REASSIGNMENTS)
    known = {b.node_id for b in admin.describe_cluster().brokers}
    unknown = sorted({b for r in targets.values() for b in r} - known)
    if unknown:
        raise ReassignmentInputError(f"Unknown broker id {unknown[0]}")
    current = _current_assignment(admin, [t for t, _ in targets])
    missing = sorted(tp for tp in targets if tp not in current)
    if missing:
        raise ReassignmentInputError(
            "Unable to find partition(s): " + ",".join(f"{t}-{p}" for t, p in missing)
        )
    rollback = {tp: current[tp] for tp in targets}
    print(f"Current partition replica assignment\n\n{format_reassignment_json(rollback)}\n")
    print(ROLLBACK_HINT)
    if throttle >= 0:
        print(VERIFY_WARNING)
        _set_throttles(admin, targets, current, throttle)
        print(f"The inter-broker throttle limit was set to {throttle} B/s")
    results = admin.alter_partition_reassignments(targets)
    errors = {tp: e for tp, e in results.items() if e is not None}
    if errors:
        raise ReassignmentInputError(
            "Error reassigning partition(s):\n"
            + "\n".join(f"{t}-{p}: {errors[(t, p)]}" for t, p in sorted(errors))
        )
    names = ",".join(f"{t}-{p}" for t, p in sorted(targets))
    plural = "" if len(targets) == 1 else "s"
    print(f"Successfully started partition reassignment{plural} for {names}")
    return 0


def _set_throttles(admin: Any, targets: Assignment, current: Assignment, throttle: int) -> None:
    from epochlog.client.admin_configs import ConfigOp, ConfigResource, ResourceType

    topic_configs, brokers = throttle_plan(targets, current)
    for topic, values in topic_configs.items():
        resource = ConfigResource(ResourceType.TOPIC, topic)
        admin.incremental_alter_configs({resource: [ConfigOp(k, v) for k, v in values.items()]})
    for broker in brokers:
        resource = ConfigResource(ResourceType.BROKER, str(broker))
        ops = [ConfigOp(LEADER_RATE, str(throttle)), ConfigOp(FOLLOWER_RATE, str(throttle))]
        admin.incremental_alter_configs({resource: ops})


def _verify(admin: Any, targets: Assignment, preserve_throttles: bool = False) -> int:
    ongoing = set(admin.list_partition_reassignments(list(targets)))
    current = _current_assignment(admin, [t for t, _ in targets])
    print("\n".join(verify_lines(targets, ongoing, current)))
    if not ongoing and not preserve_throttles:
        _clear_throttles(admin, targets)
    return 0


def _clear_throttles(admin: Any, targets: Assignment) -> None:
    """Kafka's clearAllThrottles: it cannot know which brokers earlier runs throttled, so every
    live broker and every broker named in the file."""
    from epochlog.client.admin_configs import AlterOp, ConfigOp, ConfigResource, ResourceType

    live = [b.node_id for b in admin.describe_cluster().brokers]
    brokers = list(dict.fromkeys([*live, *(b for r in targets.values() for b in r)]))
    plural = "" if len(brokers) == 1 else "s"
    print(f"Clearing broker-level throttles on broker{plural} {','.join(map(str, brokers))}")
    for broker in brokers:
        resource = ConfigResource(ResourceType.BROKER, str(broker))
        ops = [ConfigOp(k, None, AlterOp.DELETE) for k in (LEADER_RATE, FOLLOWER_RATE)]
        admin.incremental_alter_configs({resource: ops})
    topics = list(dict.fromkeys(t for t, _ in targets))
    plural = "" if len(topics) == 1 else "s"
    print(f"Clearing topic-level throttles on topic{plural} {','.join(topics)}")
    for topic in topics:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        ops = [ConfigOp(k, None, AlterOp.DELETE) for k in (LEADER_REPLICAS, FOLLOWER_REPLICAS)]
        admin.incremental_alter_configs({resource: ops})


def _cancel(admin: Any, targets: Assignment) -> int:
    active = sorted(admin.list_partition_reassignments(list(targets)))
    if not active:
        print("None of the specified partition reassignments are active.")
        return 0
    results = admin.alter_partition_reassignments(dict.fromkeys(active))
    errors = {tp: e for tp, e in results.items() if e is not None}
    if errors:
        plural = "" if len(errors) == 1 else "s"
        raise ReassignmentInputError(
            f"Error cancelling partition reassignment{plural} for:\n"
            + "\n".join(f"{t}-{p}: {errors[(t, p)]}" for t, p in sorted(errors))
        )
    plural = "" if len(active) == 1 else "s"
    names = ",".join(f"{t}-{p}" for t, p in active)
    print(f"Successfully cancelled partition reassignment{plural} for: {names}")
    return 0


def _list(admin: Any) -> int:
    reassignments = admin.list_partition_reassignments()
    if not reassignments:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (topic, partition), r in sorted(reassignments.items()):
        line = f"{topic}-{partition}: replicas: {','.join(map(str, r.replicas))}."
        if r.adding_replicas:
            line += f" adding: {','.join(map(str, r.adding_replicas))}."
        if r.removing_replicas:
            line += f" removing: {','.join(map(str, r.removing_replicas))}."
        print(line)
    return 0
