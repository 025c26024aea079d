"""What a chaos run observed, as plain values: the history the checker reads.

Every operation a workload performs is an `Op`: which process did it, what kind of operation,
the unique value it concerns, where it landed (topic, partition, offset) and how it ended, with
the times it was invoked and completed. As in Jepsen, an operation ends `OK` (it happened), `FAIL`
(it certainly did not) or `INFO` (nobody knows: a timeout, a crash). Reads are `Op`s too, one
per record a consumer returned, with a `session` that changes whenever the reader's position
may legitimately move back (a new assignment, a restart), so that ordering checks compare only
reads of one session.

Transactions reuse `epochlog.testing.txn_checker`'s model (`Transaction`, `ReadRecord`); this
module adds what a chaos run needs beside them: the producer incarnations of each
transactional id (to find a write by a producer that had already been fenced), the final reads
of every partition, each replica's log read from disk after the cluster stopped, the controller
epochs the brokers claimed, and the faults with their spans.

`History` is filled by many workload threads at once; `record` takes a lock. Times are seconds
since the run started (`time.monotonic()` based), so the timeline and the checker agree.
"""

from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass, field

from epochlog.testing.txn_checker import ReadRecord, Transaction

# a transactional output value is `<input value><OUTPUT_SEPARATOR><transaction name>`, so that
# an input processed twice shows as two committed outputs naming one input
OUTPUT_SEPARATOR = ">"


class OpKind(enum.Enum):
    SEND = "send"  # a non-transactional acks=all produce of one value
    POLL = "poll"  # one record a consumer returned
    COMMIT = "commit"  # a consumer group's offset commit of one partition (offset = next to read)


class Status(enum.Enum):
    OK = "ok"
    FAIL = "fail"
    INFO = "info"  # indeterminate


@dataclass(frozen=True)
class Op:
    process: str  # e.g. "producer-ck-0", "reader-1", "group-member-2"
    kind: OpKind
    status: Status
    invoke_s: float
    complete_s: float
    value: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None  # where a send landed / a poll read / a commit points
    session: int = 0  # reads: changes when the position may legitimately move back
    group: str | None = None  # commits
    error: str | None = None  # why a FAIL or INFO ended so


@dataclass(frozen=True)
class Incarnation:
    """One producer instance of a transactional id: `number` grows with each init; its
    InitProducerId answered at `init_ok_s`, fencing every older incarnation from then on."""

    transactional_id: str
    number: int
    init_ok_s: float


@dataclass(frozen=True)
class TxnOp:
    """A transaction with who made it and when it began (for the fenced-write check)."""

    transaction: Transaction
    transactional_id: str
    incarnation: int
    invoke_s: float
    complete_s: float


@dataclass(frozen=True)
class ReplicaRecord:
    offset: int
    value: str


@dataclass(frozen=True)
class ControllerClaim:
    """A broker's log line saying it became the controller in an epoch."""

    broker_id: int
    epoch: int
    line: str


@dataclass(frozen=True)
class FaultSpan:
    kind: str
    detail: str
    start_s: float
    end_s: float  # when its heal finished (the run's end if never healed)


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)
    txns: list[TxnOp] = field(default_factory=list)
    incarnations: list[Incarnation] = field(default_factory=list)
    faults: list[FaultSpan] = field(default_factory=list)
    # after the heal: every record of every partition, read from the beginning to the high
    # watermark; one list per final reader (read_uncommitted for plain topics, read_committed
    # for the transactional ones)
    final_reads: dict[str, list[ReadRecord]] = field(default_factory=dict)
    high_watermarks: dict[tuple[str, int], int] = field(default_factory=dict)
    # (topic, partition) -> broker id -> the data records in that replica's log on disk
    replicas: dict[tuple[str, int], dict[int, list[ReplicaRecord]]] = field(default_factory=dict)
    # the ISR of each partition when the run ended; None when it could not be read
    final_isr: dict[tuple[str, int], list[int]] | None = None
    controller_claims: list[ControllerClaim] = field(default_factory=list)
    # topics whose final read is read_committed (so skipped offsets may be aborted records)
    transactional_topics: set[str] = field(default_factory=set)
    duration_s: float = 0.0
    # while the writers ran (unavailability is measured between them)
    load_start_s: float | None = None
    load_end_s: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _start: float = field(default_factory=time.monotonic, repr=False)

    def now(self) -> float:
        return time.monotonic() - self._start

    def record(self, op: Op) -> None:
        with self._lock:
            self.ops.append(op)

    def record_txn(self, op: TxnOp) -> None:
        with self._lock:
            self.txns.append(op)

    def record_incarnation(self, incarnation: Incarnation) -> None:
        with self._lock:
            self.incarnations.append(incarnation)

    def record_fault(self, span: FaultSpan) -> None:
        with self._lock:
            self.faults.append(span)

    def of_kind(self, kind: OpKind) -> list[Op]:
        with self._lock:
            return [op for op in self.ops if op.kind is kind]
