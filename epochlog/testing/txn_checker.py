"""A history checker for transactions, after the anomalies Jepsen found in other systems.

Sans-I/O: it is given what the producers did (each transaction's writes and how it ended) and
what read_committed consumers read, and answers which anomalies the history shows. Nothing here
talks to a broker; the workloads that produce the history live beside it
(`epochlog.testing.txn_workload`) and the tests that run them against a cluster in
`tests/integration/test_transactions_jepsen.py`.

Every written value is unique (the workload makes it so), which lets a read be traced back to the
one transaction that wrote it. The anomalies:

- **aborted read (G1a)**: a reader saw a value of a transaction that was aborted.
- **torn transaction**: a reader saw some but not all of a transaction's values (a transaction
  over several partitions or topics must be seen entirely or not at all). A transaction whose
  outcome the producer never learnt (`UNKNOWN`: its commit timed out, its producer was fenced or
  killed) may go either way, but still all or nothing.
- **duplicate**: a reader saw the same value more than once (at different offsets, or twice at
  one offset).
- **lost committed**: a reader that read everything saw none of a committed transaction's values.
- **inconsistent offset**: two readers saw different values at one (topic, partition, offset).
- **unknown value**: a reader saw a value no transaction wrote.

Each reader is taken to have read every partition the workload wrote, from the beginning to the
last stable offset after every transaction ended; a reader that saw only part of the log would
show lost and torn transactions that are not there.
"""

from __future__ import annotations

import enum
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


class Outcome(enum.Enum):
    COMMITTED = "committed"  # commit_transaction returned
    ABORTED = "aborted"  # abort_transaction returned, or the producer was fenced before commit
    UNKNOWN = "unknown"  # the producer never learnt: commit failed with an unknown result


class Anomaly(enum.Enum):
    ABORTED_READ = "aborted read (G1a)"
    TORN_TRANSACTION = "torn transaction"
    DUPLICATE = "duplicate"
    LOST_COMMITTED = "lost committed"
    INCONSISTENT_OFFSET = "inconsistent offset"
    UNKNOWN_VALUE = "unknown value"


@dataclass(frozen=True)
class Write:
    topic: str
    partition: int
    value: str


@dataclass(frozen=True)
class Transaction:
    """One transaction as its producer saw it: what it sent and how it ended."""

    name: str
    writes: tuple[Write, ...]
    outcome: Outcome


@dataclass(frozen=True)
class ReadRecord:
    topic: str
    partition: int
    offset: int
    value: str


@dataclass(frozen=True)
class Finding:
    anomaly: Anomaly
    detail: str


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    committed: int = 0
    aborted: int = 0
    unknown_seen: int = 0  # UNKNOWN transactions that turned out committed
    unknown_unseen: int = 0  # and those that turned out aborted

    @property
    def ok(self) -> bool:
        return not self.findings

    def anomalies(self) -> set[Anomaly]:
        return {f.anomaly for f in self.findings}

    def __str__(self) -> str:
        head = (
            f"{self.committed} committed, {self.aborted} aborted, unknown: "
            f"{self.unknown_seen} seen, {self.unknown_unseen} not seen"
        )
        return "\n".join([head, *(f"{f.anomaly.value}: {f.detail}" for f in self.findings)])


class HistoryError(ValueError):
    """The history itself is malformed (a value written twice): the checker cannot trace reads."""


def check(transactions: Sequence[Transaction], reads: Sequence[Sequence[ReadRecord]]) -> Report:
    """The anomalies in a history: `transactions` as the producers saw them, `reads` one list per
    read_committed reader, each a full read of every partition written."""
    writer: dict[str, Transaction] = {}
    for txn in transactions:
        for write in txn.writes:
            if write.value in writer:
                raise HistoryError(
                    f"value {write.value!r} written by both {writer[write.value].name!r} and "
                    f"{txn.name!r}: values must be unique"
                )
            writer[write.value] = txn
    report = Report(
        committed=sum(t.outcome is Outcome.COMMITTED for t in transactions),
        aborted=sum(t.outcome is Outcome.ABORTED for t in transactions),
    )
    for index, records in enumerate(reads):
        _check_reader(f"reader {index}", transactions, writer, records, report)
    _check_offsets_agree(reads, report)
    if reads:
        first = {r.value for r in reads[0]}
        for txn in transactions:
            if txn.outcome is Outcome.UNKNOWN:
                if any(w.value in first for w in txn.writes):
                    report.unknown_seen += 1
                else:
                    report.unknown_unseen += 1
    return report


def _check_reader(
    reader: str,
    transactions: Sequence[Transaction],
    writer: dict[str, Transaction],
    records: Sequence[ReadRecord],
    report: Report,
) -> None:
    counts = Counter(r.value for r in records)
    for value, count in sorted(counts.items()):
        if count > 1:
            offsets = sorted((r.topic, r.partition, r.offset) for r in records if r.value == value)
            report.findings.append(
                Finding(Anomaly.DUPLICATE, f"{reader} read {value!r} {count} times at {offsets}")
            )
        if value not in writer:
            report.findings.append(
                Finding(Anomaly.UNKNOWN_VALUE, f"{reader} read {value!r}, which nobody wrote")
            )
    for txn in transactions:
        seen = [w.value for w in txn.writes if w.value in counts]
        missing = [w.value for w in txn.writes if w.value not in counts]
        if txn.outcome is Outcome.ABORTED and seen:
            report.findings.append(
                Finding(Anomaly.ABORTED_READ, f"{reader} read {seen} of aborted {txn.name!r}")
            )
        elif seen and missing:
            report.findings.append(
                Finding(
                    Anomaly.TORN_TRANSACTION,
                    f"{reader} read {seen} of {txn.outcome.value} {txn.name!r} but not {missing}",
                )
            )
        elif txn.outcome is Outcome.COMMITTED and txn.writes and not seen:
            report.findings.append(
                Finding(Anomaly.LOST_COMMITTED, f"{reader} read nothing of committed {txn.name!r}")
            )


def _check_offsets_agree(reads: Iterable[Sequence[ReadRecord]], report: Report) -> None:
    at: dict[tuple[str, int, int], set[str]] = defaultdict(set)
    for records in reads:
        for r in records:
            at[(r.topic, r.partition, r.offset)].add(r.value)
    for position, values in sorted(at.items()):
        if len(values) > 1:
            report.findings.append(
                Finding(
                    Anomaly.INCONSISTENT_OFFSET,
                    f"readers disagree at {position}: {sorted(values)}",
                )
            )


@dataclass(frozen=True)
class ExactlyOnceReport:
    """Consume-transform-produce: each input's output read exactly once."""

    missing: tuple[str, ...]
    duplicated: tuple[str, ...]
    unexpected: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.unexpected)

    def __str__(self) -> str:
        return (
            f"missing {list(self.missing)}, duplicated {list(self.duplicated)}, "
            f"unexpected {list(self.unexpected)}"
        )


def check_exactly_once(
    expected_outputs: Iterable[str], outputs_read: Iterable[str]
) -> ExactlyOnceReport:
    """Compare the outputs a read_committed reader saw with the one output each input should
    have produced."""
    expected = set(expected_outputs)
    counts = Counter(outputs_read)
    return ExactlyOnceReport(
        missing=tuple(sorted(expected - counts.keys())),
        duplicated=tuple(sorted(v for v, n in counts.items() if n > 1 and v in expected)),
        unexpected=tuple(sorted(counts.keys() - expected)),
    )
