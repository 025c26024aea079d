"""The anomalies of Jepsen's Kafka workload, found in a chaos run's `History`. Sans-I/O.

Each check is a function from the history to findings; `check` runs them all. A finding names
the anomaly, the records and offsets involved and the time (seconds into the run) it is
anchored at, so the report can print the faults around it.

- **lost write**: a send acknowledged (acks=all) whose value no final read holds.
- **duplicate**: one value at two offsets (in any read, or acknowledged at one and read at another).
- **inconsistent offset**: two observations (reads, acknowledgements) disagree on what an offset
  holds.
- **non-monotonic read** / **skipped offset**: within one reader's session, an offset at or
  below the previous one, or a jump over offsets that hold records (by the final reads; a
  read_committed reader legitimately skips aborted records and markers, which the final
  read_committed read does not hold either).
- **committed offset backwards**: a group's commit of a partition acknowledged below a commit
  acknowledged before it was sent.
- **aborted read (G1a)**, **torn transaction**, lost committed transaction, transactional
  duplicate or unknown value: `epochlog.testing.txn_checker` over the final read_committed reads.
- **aborted read** by a continuous read_committed reader (a value of an aborted transaction
  among its polls), and an input **processed twice** (two committed outputs of one input, a
  duplicate under exactly-once).
- **fenced write**: a read transaction begun by a producer after a newer incarnation of its
  transactional id had finished its InitProducerId (the coordinator should have fenced it).
- **replica divergence**: replicas' logs on disk differ below the high watermark after the heal
  (the replicas in the final ISR: one left out lags, which the run reports as not quiesced).
- **two controllers**: two brokers claimed one controller epoch.

Unavailability is a measure, not an anomaly: gaps of more than `gap_s` between successive
acknowledged sends, each charged to the faults whose span overlaps it ("none" otherwise).
"""

from __future__ import annotations

import bisect
import enum
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from epochlog.testing import txn_checker
from epochlog.testing.chaos.history import OUTPUT_SEPARATOR, History, Op, OpKind, Status


class Anomaly(enum.Enum):
    LOST_WRITE = "lost write"
    DUPLICATE = "duplicate"
    INCONSISTENT_OFFSET = "inconsistent offset"
    NONMONOTONIC_READ = "non-monotonic read"
    SKIPPED_OFFSET = "skipped offset"
    OFFSET_BACKWARDS = "committed offset backwards"
    ABORTED_READ = "aborted read (G1a)"
    TORN_TRANSACTION = "torn transaction"
    LOST_TRANSACTION = "lost committed transaction"
    UNKNOWN_VALUE = "unknown value"
    FENCED_WRITE = "fenced write"
    REPLICA_DIVERGENCE = "replica divergence"
    TWO_CONTROLLERS = "two controllers in one epoch"


_FROM_TXN_CHECKER = {
    txn_checker.Anomaly.ABORTED_READ: Anomaly.ABORTED_READ,
    txn_checker.Anomaly.TORN_TRANSACTION: Anomaly.TORN_TRANSACTION,
    txn_checker.Anomaly.DUPLICATE: Anomaly.DUPLICATE,
    txn_checker.Anomaly.LOST_COMMITTED: Anomaly.LOST_TRANSACTION,
    txn_checker.Anomaly.INCONSISTENT_OFFSET: Anomaly.INCONSISTENT_OFFSET,
    txn_checker.Anomaly.UNKNOWN_VALUE: Anomaly.UNKNOWN_VALUE,
}

Position = tuple[str, int, int]  # topic, partition, offset


@dataclass(frozen=True)
class Finding:
    anomaly: Anomaly
    detail: str
    at_s: float | None = None  # where on the run's timeline it is anchored, when known


@dataclass
class CheckResult:
    findings: list[Finding] = field(default_factory=list)
    acknowledged: int = 0
    unavailable_s: dict[str, float] = field(default_factory=dict)  # fault kind -> seconds

    @property
    def ok(self) -> bool:
        return not self.findings

    def counts(self) -> dict[Anomaly, int]:
        counts = dict.fromkeys(Anomaly, 0)
        for finding in self.findings:
            counts[finding.anomaly] += 1
        return counts


def check(history: History, gap_s: float = 1.0) -> CheckResult:
    sends = [op for op in history.ops if op.kind is OpKind.SEND]
    result = CheckResult(acknowledged=sum(op.status is Status.OK for op in sends))
    result.findings += lost_writes(history)
    result.findings += offset_agreement(history)
    result.findings += read_order(history)
    result.findings += committed_offsets_backwards(history)
    result.findings += transactions(history)
    result.findings += aborted_polls(history)
    result.findings += processed_twice(history)
    result.findings += fenced_writes(history)
    result.findings += replica_divergence(history)
    result.findings += two_controllers(history)
    result.unavailable_s = unavailability(history, gap_s)
    return result


def _final_values(history: History) -> set[str]:
    return {r.value for records in history.final_reads.values() for r in records}


def lost_writes(history: History) -> list[Finding]:
    if not history.final_reads:
        return []  # nothing was read at the end: nothing to compare with
    read = _final_values(history)
    return [
        Finding(
            Anomaly.LOST_WRITE,
            f"{op.process} had {op.value!r} acknowledged at {op.topic}-{op.partition}@"
            f"{op.offset} ({op.invoke_s:.2f}-{op.complete_s:.2f} s); no final read holds it",
            op.complete_s,
        )
        for op in history.ops
        if op.kind is OpKind.SEND and op.status is Status.OK and op.value not in read
    ]


def _observations(history: History) -> Iterable[tuple[str, Position, str, float | None]]:
    """(who, position, value, time) of every acknowledgement and read of a record."""
    for op in history.ops:
        if op.status is not Status.OK or op.value is None or op.offset is None or op.offset < 0:
            continue
        if op.kind in (OpKind.SEND, OpKind.POLL):
            assert op.topic is not None and op.partition is not None
            who = f"{op.process} {op.kind.value}"
            yield who, (op.topic, op.partition, op.offset), op.value, op.complete_s
    for reader, records in history.final_reads.items():
        for r in records:
            yield f"final read {reader}", (r.topic, r.partition, r.offset), r.value, None


def offset_agreement(history: History) -> list[Finding]:
    """Duplicates (a value at two offsets) and inconsistent offsets (an offset, two values)."""
    at: dict[Position, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    where: dict[str, dict[Position, list[str]]] = defaultdict(lambda: defaultdict(list))
    first_seen: dict[Position, float | None] = {}
    for who, position, value, at_s in _observations(history):
        at[position][value].append(who)
        where[value][position].append(who)
        first_seen.setdefault(position, at_s)
    findings: list[Finding] = []
    for value, positions in sorted(where.items()):
        if len(positions) > 1:
            shown = "; ".join(f"{p} by {sorted(set(w))}" for p, w in sorted(positions.items()))
            findings.append(
                Finding(
                    Anomaly.DUPLICATE,
                    f"{value!r} at {len(positions)} offsets: {shown}",
                    first_seen[min(positions)],
                )
            )
    for position, values in sorted(at.items()):
        if len(values) > 1:
            shown = "; ".join(f"{v!r} by {sorted(set(w))}" for v, w in sorted(values.items()))
            findings.append(
                Finding(
                    Anomaly.INCONSISTENT_OFFSET, f"{position} holds {shown}", first_seen[position]
                )
            )
    return findings


def read_order(history: History) -> list[Finding]:
    """Within a reader's session, per partition: offsets strictly increase and skip only
    offsets that hold no record in the final reads."""
    held: dict[tuple[str, int], list[int]] = defaultdict(list)
    for records in history.final_reads.values():
        for r in records:
            held[(r.topic, r.partition)].append(r.offset)
    for offsets in held.values():
        offsets.sort()
    last: dict[tuple[str, int, str, int], Op] = {}
    findings: list[Finding] = []
    for op in history.ops:
        if op.kind is not OpKind.POLL or op.status is not Status.OK or op.offset is None:
            continue
        assert op.topic is not None and op.partition is not None
        key = (op.process, op.session, op.topic, op.partition)
        prev = last.get(key)
        last[key] = op
        if prev is None or prev.offset is None:
            continue
        tp = f"{op.topic}-{op.partition}"
        if op.offset <= prev.offset:
            findings.append(
                Finding(
                    Anomaly.NONMONOTONIC_READ,
                    f"{op.process} (session {op.session}) read {tp}@{op.offset} {op.value!r} "
                    f"after {tp}@{prev.offset} {prev.value!r}",
                    op.complete_s,
                )
            )
            continue
        offsets = held.get((op.topic, op.partition), [])
        lo = bisect.bisect_right(offsets, prev.offset)
        hi = bisect.bisect_left(offsets, op.offset)
        if hi > lo:
            findings.append(
                Finding(
                    Anomaly.SKIPPED_OFFSET,
                    f"{op.process} (session {op.session}) read {tp}@{op.offset} right after "
                    f"@{prev.offset}, skipping {hi - lo} records at {offsets[lo:hi][:10]}",
                    op.complete_s,
                )
            )
    return findings


def committed_offsets_backwards(history: History) -> list[Finding]:
    """A commit acknowledged below one acknowledged before it was sent."""
    commits: dict[tuple[str | None, str | None, int | None], list[Op]] = defaultdict(list)
    for op in history.ops:
        if op.kind is OpKind.COMMIT and op.status is Status.OK and op.offset is not None:
            commits[(op.group, op.topic, op.partition)].append(op)
    findings: list[Finding] = []
    for (group, topic, partition), ops in sorted(commits.items(), key=lambda kv: str(kv[0])):
        by_completion = sorted(ops, key=lambda o: o.complete_s)
        completed = [o.complete_s for o in by_completion]
        best: list[Op] = []  # best[i]: the highest commit among by_completion[: i + 1]
        for o in by_completion:
            best.append(o if not best or o.offset > best[-1].offset else best[-1])  # type: ignore[operator]
        for o in ops:
            i = bisect.bisect_left(completed, o.invoke_s)
            if i == 0:
                continue
            before = best[i - 1]
            assert before.offset is not None and o.offset is not None
            if o.offset < before.offset:
                findings.append(
                    Finding(
                        Anomaly.OFFSET_BACKWARDS,
                        f"group {group} {topic}-{partition}: {o.process} committed {o.offset} "
                        f"at {o.complete_s:.2f} s after {before.process} committed "
                        f"{before.offset} at {before.complete_s:.2f} s",
                        o.complete_s,
                    )
                )
    return findings


def _committed_reads(history: History) -> list[list[txn_checker.ReadRecord]]:
    return [
        [r for r in records if r.topic in history.transactional_topics]
        for records in history.final_reads.values()
        if any(r.topic in history.transactional_topics for r in records)
    ]


def transactions(history: History) -> list[Finding]:
    if not history.txns:
        return []
    report = txn_checker.check([t.transaction for t in history.txns], _committed_reads(history))
    at = {t.transaction.name: t.invoke_s for t in history.txns}
    findings = []
    for f in report.findings:
        anchor = next((s for name, s in at.items() if repr(name) in f.detail), None)
        findings.append(Finding(_FROM_TXN_CHECKER[f.anomaly], f.detail, anchor))
    return findings


def aborted_polls(history: History) -> list[Finding]:
    """Values of aborted transactions among what read_committed readers polled."""
    aborted = {
        w.value: t.transaction.name
        for t in history.txns
        if t.transaction.outcome is txn_checker.Outcome.ABORTED
        for w in t.transaction.writes
    }
    return [
        Finding(
            Anomaly.ABORTED_READ,
            f"{op.process} read {op.value!r} of aborted {aborted[op.value]!r} at "
            f"{op.topic}-{op.partition}@{op.offset}",
            op.complete_s,
        )
        for op in history.ops
        if op.kind is OpKind.POLL
        and op.topic in history.transactional_topics
        and op.value in aborted
    ]


def processed_twice(history: History) -> list[Finding]:
    """Exactly-once: one committed output per input."""
    outputs: dict[str, list[str]] = defaultdict(list)
    for records in _committed_reads(history)[:1]:
        for r in records:
            source, sep, _ = r.value.rpartition(OUTPUT_SEPARATOR)
            if sep:
                outputs[source].append(r.value)
    return [
        Finding(Anomaly.DUPLICATE, f"input {source!r} processed twice: {sorted(values)}")
        for source, values in sorted(outputs.items())
        if len(values) > 1
    ]


def fenced_writes(history: History) -> list[Finding]:
    read = {r.value for records in _committed_reads(history) for r in records}
    inits: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for inc in history.incarnations:
        inits[inc.transactional_id].append((inc.number, inc.init_ok_s))
    findings: list[Finding] = []
    for t in history.txns:
        fencer = next(
            (
                (number, ok_s)
                for number, ok_s in sorted(inits.get(t.transactional_id, []))
                if number > t.incarnation and ok_s < t.invoke_s
            ),
            None,
        )
        seen = [w.value for w in t.transaction.writes if w.value in read]
        if fencer is not None and seen:
            findings.append(
                Finding(
                    Anomaly.FENCED_WRITE,
                    f"{t.transaction.name!r} of {t.transactional_id} incarnation {t.incarnation} "
                    f"began at {t.invoke_s:.2f} s, after incarnation {fencer[0]} was initialised "
                    f"at {fencer[1]:.2f} s, and {seen[:5]} were read committed",
                    t.invoke_s,
                )
            )
    return findings


def replica_divergence(history: History) -> list[Finding]:
    findings: list[Finding] = []
    for (topic, partition), by_broker in sorted(history.replicas.items()):
        hw = history.high_watermarks.get((topic, partition))
        if history.final_isr is not None:
            # a replica out of the ISR may lag (the run said it did not quiesce)
            isr = set(history.final_isr.get((topic, partition), []))
            by_broker = {b: r for b, r in by_broker.items() if b in isr}
        if hw is None or len(by_broker) < 2:
            continue
        logs = {
            b: {r.offset: r.value for r in records if r.offset < hw}
            for b, records in by_broker.items()
        }
        offsets = sorted(set().union(*(set(log) for log in logs.values())))
        differing = []
        for offset in offsets:
            values = {b: log.get(offset) for b, log in logs.items()}
            if len(set(values.values())) > 1:
                differing.append((offset, values))
        if differing:
            sample = "; ".join(
                f"@{o}: " + ", ".join(f"broker {b} {v!r}" for b, v in sorted(vs.items()))
                for o, vs in differing[:5]
            )
            findings.append(
                Finding(
                    Anomaly.REPLICA_DIVERGENCE,
                    f"{topic}-{partition} (high watermark {hw}): replicas differ at "
                    f"{len(differing)} offsets below it, e.g. {sample}",
                )
            )
    return findings


def two_controllers(history: History) -> list[Finding]:
    by_epoch: dict[int, set[int]] = defaultdict(set)
    for claim in history.controller_claims:
        by_epoch[claim.epoch].add(claim.broker_id)
    return [
        Finding(
            Anomaly.TWO_CONTROLLERS,
            f"controller epoch {epoch} claimed by brokers {sorted(brokers)}",
        )
        for epoch, brokers in sorted(by_epoch.items())
        if len(brokers) > 1
    ]


def unavailability(history: History, gap_s: float = 1.0) -> dict[str, float]:
    """Seconds without an acknowledged send, per fault kind overlapping each gap."""
    acks = sorted(
        op.complete_s for op in history.ops if op.kind is OpKind.SEND and op.status is Status.OK
    )
    start = history.load_start_s if history.load_start_s is not None else 0.0
    end = history.load_end_s
    if end is None:
        end = history.duration_s or (acks[-1] if acks else 0.0)
    edges = [start, *(a for a in acks if start <= a <= end), end]
    charged: dict[str, float] = defaultdict(float)
    for a, b in zip(edges, edges[1:], strict=False):
        if b - a <= gap_s:
            continue
        kinds = {f.kind for f in history.faults if f.start_s < b and f.end_s > a} or {"none"}
        for kind in kinds:
            charged[kind] += b - a
    return dict(charged)
