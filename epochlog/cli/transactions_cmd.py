"""`epochlog transactions ...`: find and abort hanging transactions, with kafka-transactions.sh's
options and columns (Kafka 3.9 `TransactionsCommand`, KIP-664).

- `list [--duration-filter MS]`: every transaction the coordinators know (ListTransactions to
  every broker): TransactionalId, Coordinator, ProducerId, TransactionState.
- `describe --transactional-id ID`: CoordinatorId, TransactionalId, ProducerId, ProducerEpoch,
  TransactionState, TransactionTimeoutMs, CurrentTransactionStartTimeMs, TransactionDurationMs,
  TopicPartitions ("None" for the times when no transaction is ongoing).
- `describe-producers --topic T --partition P [--broker-id B]`: the partition's producer state
  on its leader (or replica B): ProducerId, ProducerEpoch, LatestCoordinatorEpoch,
  LastSequence, LastTimestamp, CurrentTransactionStartOffset.
- `abort --topic T --partition P (--start-offset O | --producer-id --producer-epoch
  --coordinator-epoch)`: an ABORT marker on the partition for the transaction open at O (its
  producer found with DescribeProducers), or for the producer given (a coordinator epoch < 0
  is sent as 0, as Kafka does).
- `find-hanging (--broker-id B | --topic T [--partition P]) [--max-transaction-timeout MIN]`:
  open transactions on those partitions (DescribeProducers) older than the timeout (15 min by
  default) whose producer id no coordinator lists, or whose coordinator does not count the
  partition in its transaction: Topic, Partition, ProducerId, ProducerEpoch,
  CoordinatorEpoch, StartOffset, LastTimestamp, Duration(min).

Tables are Kafka's `ToolsUtils.prettyPrintTable`: columns padded to their widest cell, each
followed by a tab. The decisions (which argument combination, which transactions hang, the
rows) are plain functions; `run` does the I/O with the admin client.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from epochlog.cli.common import CommandError

DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCERS_HEADERS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)
HANGING_HEADERS = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
)


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
) -> None:
    txns = sub.add_parser(
        "transactions", help="list, describe and abort transactions; find hanging ones"
    )
    commands = txns.add_subparsers(dest="transactions_command", required=True)
    listing = commands.add_parser("list", help="list transactions")
    listing.add_argument(
        "--duration-filter",
        type=int,
        help="only transactions running longer than this many ms (< 0: all)",
    )
    add_bootstrap(listing)
    describe = commands.add_parser("describe", help="describe the state of a transactional id")
    describe.add_argument("--transactional-id", required=True)
    add_bootstrap(describe)
    producers = commands.add_parser(
        "describe-producers", help="the active producers of a topic partition"
    )
    producers.add_argument("--broker-id", type=int, help="ask this replica (default: the leader)")
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    add_bootstrap(producers)
    abort = commands.add_parser("abort", help="abort a hanging transaction")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="start offset of the transaction")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    add_bootstrap(abort)
    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int, help="search the partitions this broker hosts")
    hanging.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
        help="only transactions open longer than this many minutes (default 15)",
    )
    hanging.add_argument("--topic", help="search this topic (required with --partition)")
    hanging.add_argument("--partition", type=int)
    add_bootstrap(hanging)


# ------------------------------------------------------------------------------ decisions


@dataclass(frozen=True)
class AbortSpec:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


@dataclass(frozen=True)
class OpenTransaction:
    topic: str
    partition: int
    producer: Any  # ProducerState (DescribeProducers)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Kafka's `ToolsUtils.prettyPrintTable`: each cell left-aligned to its column's widest,
    then a tab; one line per row, the headers first."""
    lines = [list(headers), *(list(r) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(
        "".join(cell.ljust(width) + "\t" for cell, width in zip(line, widths, strict=True))
        for line in lines
    )


def abort_spec_from_args(args: argparse.Namespace) -> AbortSpec | None:
    """The abort asked for by producer id, epoch and coordinator epoch; None when it is asked
    by `--start-offset` (the producer is then looked up). Missing pieces are an error."""
    if args.start_offset is None and args.producer_id is None:
        raise CommandError(
            "The transaction to abort must be identified either with --start-offset (for "
            "brokers on 3.0 or above) or with --producer-id, --producer-epoch, and "
            "--coordinator-epoch (for older brokers)"
        )
    if args.start_offset is not None:
        return None
    if args.producer_epoch is None:
        raise CommandError("Missing required argument --producer-epoch")
    if args.coordinator_epoch is None:
        raise CommandError("Missing required argument --coordinator-epoch")
    # a transaction that hung before its producer's first marker has coordinator epoch -1;
    # 0 is at most any leader epoch (Kafka's comment)
    return AbortSpec(
        args.topic,
        args.partition,
        args.producer_id,
        args.producer_epoch,
        max(args.coordinator_epoch, 0),
    )


def abort_spec_at_offset(
    topic: str, partition: int, start_offset: int, producers: Iterable[Any]
) -> AbortSpec:
    """The abort of the transaction open at `start_offset` among the partition's producers."""
    for p in producers:
        if p.current_txn_start_offset >= 0 and p.current_txn_start_offset == start_offset:
            return AbortSpec(
                topic, partition, p.producer_id, p.producer_epoch, max(p.coordinator_epoch, 0)
            )
    raise CommandError(
        f"Could not find any open transactions starting at offset {start_offset} on "
        f"partition {topic}-{partition}"
    )


def check_find_hanging_args(args: argparse.Namespace) -> None:
    if args.topic is None and args.broker_id is None:
        raise CommandError(
            "The `find-hanging` command requires either --topic or --broker-id to limit the "
            "scope of the search"
        )
    if args.partition is not None and args.topic is None:
        raise CommandError("The --partition argument requires --topic to be provided")
    if args.max_transaction_timeout < 0:
        raise CommandError(
            f"--max-transaction-timeout must be at least 0 minutes, not "
            f"{args.max_transaction_timeout}"
        )


def candidate_open_transactions(
    producers_by_partition: Mapping[Any, Iterable[Any]], now_ms: int, max_timeout_ms: int
) -> list[OpenTransaction]:
    """Open transactions whose producer last wrote more than `max_timeout_ms` ago: no
    coordinator lets a transaction run that long, so its marker should have come."""
    return [
        OpenTransaction(tp[0], tp[1], p)
        for tp, producers in sorted(producers_by_partition.items())
        for p in producers
        if p.current_txn_start_offset >= 0 and now_ms - p.last_timestamp > max_timeout_ms
    ]


def hanging_transactions(
    candidates: Iterable[OpenTransaction],
    transactional_ids: Mapping[int, str],
    descriptions: Mapping[str, Any | None],
) -> list[OpenTransaction]:
    """Kafka's filter: a candidate hangs when no coordinator lists its producer id, its
    transactional id is not found, or its transaction does not include the partition (the
    coordinator will write no marker there)."""
    hanging = []
    for txn in candidates:
        tid = transactional_ids.get(txn.producer.producer_id)
        description = descriptions.get(tid) if tid is not None else None
        if description is None or (txn.topic, txn.partition) not in {
            (tp[0], tp[1]) for tp in description.partitions
        }:
            hanging.append(txn)
    return hanging


def hanging_rows(hanging: Iterable[OpenTransaction], now_ms: int) -> list[list[str]]:
    return [
        [
            t.topic,
            str(t.partition),
            str(t.producer.producer_id),
            str(t.producer.producer_epoch),
            str(t.producer.coordinator_epoch),
            str(t.producer.current_txn_start_offset),
            str(t.producer.last_timestamp),
            str((now_ms - t.producer.last_timestamp) // 60_000),
        ]
        for t in hanging
    ]


def describe_row(d: Any, now_ms: int) -> list[str]:
    started = d.transaction_start_time_ms
    return [
        str(d.coordinator_id),
        d.transactional_id,
        str(d.producer_id),
        str(d.producer_epoch),
        d.state,
        str(d.transaction_timeout_ms),
        str(started) if started >= 0 else "None",
        str(now_ms - started) if started >= 0 else "None",
        ",".join(f"{tp[0]}-{tp[1]}" for tp in d.partitions),
    ]


def producer_row(p: Any) -> list[str]:
    start = p.current_txn_start_offset
    return [
        str(p.producer_id),
        str(p.producer_epoch),
        str(p.coordinator_epoch),
        str(p.last_sequence),
        str(p.last_timestamp),
        str(start) if start >= 0 else "None",
    ]


# ------------------------------------------------------------------------------------ I/O


def run(args: argparse.Namespace, console: Console) -> int:
    from epochlog.cli.common import client_config
    from epochlog.client import Admin, ClientError
    from epochlog.client.config import Role

    command = {
        "list": _list,
        "describe": _describe,
        "describe-producers": _describe_producers,
        "abort": _abort,
        "find-hanging": _find_hanging,
    }[args.transactions_command]
    if args.transactions_command == "abort":
        abort_spec_from_args(args)  # bad arguments fail before any connection
    if args.transactions_command == "find-hanging":
        check_find_hanging_args(args)
    with Admin(client_config(args, Role.ADMIN)) as admin:
        try:
            return command(admin, args)
        except ClientError as exc:
            raise CommandError(str(exc)) from None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _list(admin: Any, args: argparse.Namespace) -> int:
    duration = args.duration_filter if args.duration_filter is not None else -1
    listings = admin.list_transactions(duration_ms=duration)
    rows = [
        [t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state] for t in listings
    ]
    print(format_table(LIST_HEADERS, rows))
    return 0


def _describe(admin: Any, args: argparse.Namespace) -> int:
    tid = args.transactional_id
    try:
        described = admin.describe_transactions([tid])[tid]
    except Exception as exc:
        raise CommandError(
            f"Failed to describe transaction state of transactional-id `{tid}`: {exc}"
        ) from None
    print(format_table(DESCRIBE_HEADERS, [describe_row(described, _now_ms())]))
    return 0


def _describe_producers(admin: Any, args: argparse.Namespace) -> int:
    tp = (args.topic, args.partition)
    try:
        producers = admin.describe_producers([tp], broker_id=args.broker_id)
    except Exception as exc:
        where = f"broker {args.broker_id}" if args.broker_id is not None else "leader"
        raise CommandError(
            f"Failed to describe producers for partition {tp[0]}-{tp[1]} on {where}: {exc}"
        ) from None
    rows = [producer_row(p) for states in producers.values() for p in states]
    print(format_table(PRODUCERS_HEADERS, rows))
    return 0


def _abort(admin: Any, args: argparse.Namespace) -> int:
    spec = abort_spec_from_args(args)
    if spec is None:
        producers = admin.describe_producers([(args.topic, args.partition)])
        states = [p for ps in producers.values() for p in ps]
        spec = abort_spec_at_offset(args.topic, args.partition, args.start_offset, states)
    try:
        admin.abort_transaction(
            spec.topic,
            spec.partition,
            spec.producer_id,
            spec.producer_epoch,
            spec.coordinator_epoch,
        )
    except Exception as exc:
        raise CommandError(f"Failed to abort transaction {spec}: {exc}") from None
    return 0


def _find_hanging(admin: Any, args: argparse.Namespace) -> int:
    if args.topic is not None and args.partition is not None:
        partitions = [(args.topic, args.partition)]
    else:
        topics = (
            [args.topic]
            if args.topic is not None
            else sorted(admin.list_topics(include_internal=True))
        )
        described = admin.describe_topics(topics)
        partitions = [
            (name, p.partition)
            for name, topic in sorted(described.items())
            for p in topic.partitions
            if args.broker_id is None or args.broker_id in p.replicas
        ]
    producers = admin.describe_producers(partitions, broker_id=args.broker_id) if partitions else {}
    now = _now_ms()
    candidates = candidate_open_transactions(
        {(tp[0], tp[1]): states for tp, states in producers.items()},
        now,
        args.max_transaction_timeout * 60_000,
    )
    hanging: list[OpenTransaction] = []
    if candidates:
        pids = sorted({c.producer.producer_id for c in candidates})
        listings = admin.list_transactions(producer_ids=pids)
        ids = {t.producer_id: t.transactional_id for t in listings if t.producer_id in pids}
        descriptions: dict[str, Any | None] = {}
        for tid in sorted(set(ids.values())):
            try:
                descriptions[tid] = admin.describe_transactions([tid])[tid]
            except Exception as exc:
                if "TRANSACTIONAL_ID_NOT_FOUND" not in str(exc):
                    raise
                descriptions[tid] = None
        hanging = hanging_transactions(candidates, ids, descriptions)
    print(format_table(HANGING_HEADERS, hanging_rows(hanging, _now_ms())))
    return 0
