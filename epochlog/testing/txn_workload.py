"""Workloads that produce a transaction history for `epochlog.testing.txn_checker`.

Written against a small producer/consumer adapter (the `TxnProducer`, `TxnConsumer` and
`CommittedReader` protocols below) so that any client can be run: the tests wrap confluent-kafka
and kafka-python (`tests/integration/txn_adapters.py`); the epochlog client's transactional
producer fits the same shape. An adapter turns its client's errors into the three kinds a
transactional application must tell apart (`ProducerFenced`, `TransactionAbortable`,
`OutcomeUnknown`), which is all the workload needs to record each transaction's outcome
honestly.

- `plan_transactions`: a seeded plan of transactions, each writing unique values to a random
  subset of partitions (over several topics) and meant to commit or abort.
- `run_transactions`: carries a plan out through a producer, calling `between(step)` before each
  commit or abort (where a test injects its fault), and returns the history.
- `consume_transform_produce`: the exactly-once loop (read_committed input, outputs and input
  offsets in one transaction with send_offsets), where `between(step)` can also crash the
  processor: its producer and consumer are abandoned mid-transaction, and a new instance with the
  same transactional id takes over from the committed offsets.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from epochlog.testing.txn_checker import Outcome, ReadRecord, Transaction, Write

TopicPartition = tuple[str, int]


class ProducerFenced(Exception):
    """A newer producer with the same transactional id took over: this one is done for good."""


class TransactionAbortable(Exception):
    """The transaction cannot commit, but the producer can abort it and go on."""


class OutcomeUnknown(Exception):
    """The producer cannot tell whether its transaction committed (a timeout, a lost answer)."""


class TxnProducer(Protocol):
    def init(self) -> None: ...
    def begin(self) -> None: ...
    def send(self, topic: str, partition: int, value: str) -> None: ...
    def flush(self) -> None: ...
    def send_offsets(self, offsets: dict[TopicPartition, int], group: object) -> None:
        """Add the consumer's positions to the transaction; `group` is what
        `TxnConsumer.group_metadata()` returned."""
        ...

    def commit(self) -> None: ...
    def abort(self) -> None: ...
    def close(self) -> None: ...


class TxnConsumer(Protocol):
    """A read_committed group member with auto commit off, assigned the input partitions."""

    def poll(self) -> list[ReadRecord]: ...
    def positions(self) -> dict[TopicPartition, int]:
        """The next offset to read of each assigned partition: after the last record polled,
        or the group's committed offset (0 if none) before any."""
        ...

    def group_metadata(self) -> object: ...
    def close(self) -> None: ...


class CommittedReader(Protocol):
    def read_all(self, partitions: Sequence[TopicPartition]) -> list[ReadRecord]:
        """Every record of `partitions` from the beginning to the last stable offset, read at
        isolation level read_committed."""
        ...


@dataclass(frozen=True)
class PlannedTransaction:
    name: str
    writes: tuple[Write, ...]
    commit: bool


def plan_transactions(
    seed: int,
    count: int,
    partitions: Sequence[TopicPartition],
    prefix: str,
    max_writes: int = 6,
    abort_ratio: float = 0.3,
) -> list[PlannedTransaction]:
    """`count` transactions, each of 2..max_writes unique values over at least two partitions
    (when there are two), about `abort_ratio` of them meant to abort."""
    if count < 0 or max_writes < 2 or not partitions or not 0 <= abort_ratio <= 1:
        raise ValueError(
            f"plan_transactions: count {count} must be >= 0, max_writes {max_writes} >= 2, "
            f"partitions non-empty ({len(partitions)}), abort_ratio {abort_ratio} in [0, 1]"
        )
    rng = random.Random(seed)
    plan: list[PlannedTransaction] = []
    for n in range(count):
        name = f"{prefix}-t{n}"
        size = rng.randint(2, max_writes)
        spread = rng.sample(list(partitions), min(len(partitions), rng.randint(2, size)))
        targets = [spread[i % len(spread)] for i in range(size)]
        writes = tuple(Write(t, p, f"{name}-w{i}") for i, (t, p) in enumerate(targets))
        plan.append(PlannedTransaction(name, writes, commit=rng.random() >= abort_ratio))
    return plan


def run_transactions(
    make_producer: Callable[[], TxnProducer],
    plan: Sequence[PlannedTransaction],
    between: Callable[[int], None] = lambda step: None,
) -> list[Transaction]:
    """Carry out `plan`, one transaction at a time, and record what each one's producer learnt.
    A fenced or confused producer is replaced by a new one (which fences it and resolves its last
    transaction); the history says UNKNOWN wherever the producer could not tell."""
    history: list[Transaction] = []
    producer = make_producer()
    producer.init()
    try:
        for step, planned in enumerate(plan):
            outcome = _one_transaction(producer, planned, step, between)
            history.append(Transaction(planned.name, planned.writes, outcome))
            if outcome is Outcome.UNKNOWN:
                producer.close()
                producer = make_producer()
                producer.init()
    finally:
        producer.close()
    return history


def _one_transaction(
    producer: TxnProducer, planned: PlannedTransaction, step: int, between: Callable[[int], None]
) -> Outcome:
    try:
        producer.begin()
        for write in planned.writes:
            producer.send(write.topic, write.partition, write.value)
        producer.flush()
        between(step)
        if not planned.commit:
            producer.abort()
            return Outcome.ABORTED
        producer.commit()
        return Outcome.COMMITTED
    except TransactionAbortable:
        try:
            producer.abort()
        except (TransactionAbortable, OutcomeUnknown, ProducerFenced):
            return Outcome.UNKNOWN
        return Outcome.ABORTED
    except (OutcomeUnknown, ProducerFenced):
        return Outcome.UNKNOWN


@dataclass
class Processor:
    producer: TxnProducer
    consumer: TxnConsumer


def _start_processor(
    make_producer: Callable[[], TxnProducer], make_consumer: Callable[[], TxnConsumer]
) -> Processor:
    """The producer first: its init ends the predecessor's transaction, whose pending offsets
    would otherwise hold up the consumer's committed offsets (UNSTABLE_OFFSET_COMMIT)."""
    producer = make_producer()
    producer.init()
    return Processor(producer, make_consumer())


def consume_transform_produce(
    make_producer: Callable[[], TxnProducer],
    make_consumer: Callable[[], TxnConsumer],
    input_end: dict[TopicPartition, int],
    output_topic: str,
    between: Callable[[int], bool] = lambda step: False,
    max_steps: int = 10_000,
) -> list[Transaction]:
    """Read the input (read_committed), write `out-<value>` for each input record to the same
    partition number of `output_topic`, and commit outputs and input offsets in one transaction,
    until a processor starts at, or commits, every input partition's `input_end`. `between(step)`
    runs before each commit; when it returns True the processor crashes there (nothing closed,
    nothing aborted) and a new one takes over. Returns the history of the output transactions."""
    history: list[Transaction] = []
    processor = _start_processor(make_producer, make_consumer)
    step = 0
    try:
        while not _reached(processor.consumer.positions(), input_end):
            step += 1
            if step > max_steps:
                raise AssertionError(f"input not consumed to {input_end} in {max_steps} steps")
            records = processor.consumer.poll()
            if not records:
                continue
            writes = tuple(Write(output_topic, r.partition, f"out-{r.value}") for r in records)
            name = f"ctp-{step}"
            try:
                processor.producer.begin()
                for write in writes:
                    processor.producer.send(write.topic, write.partition, write.value)
                processor.producer.send_offsets(
                    processor.consumer.positions(), processor.consumer.group_metadata()
                )
                processor.producer.flush()
                if between(step):
                    history.append(Transaction(name, writes, Outcome.UNKNOWN))
                    # the old one is abandoned, not closed
                    processor = _start_processor(make_producer, make_consumer)
                    continue
                processor.producer.commit()
            except (TransactionAbortable, OutcomeUnknown, ProducerFenced):
                history.append(Transaction(name, writes, Outcome.UNKNOWN))
                processor.producer.close()
                processor.consumer.close()
                # rewinds to the committed offsets
                processor = _start_processor(make_producer, make_consumer)
                continue
            history.append(Transaction(name, writes, Outcome.COMMITTED))
    finally:
        processor.producer.close()
        processor.consumer.close()
    return history


def _reached(positions: dict[TopicPartition, int], end: dict[TopicPartition, int]) -> bool:
    return all(positions.get(tp, 0) >= offset for tp, offset in end.items())
