"""The chaos run's workloads, each a thread writing what it sees into the `History`.

- `CkProducer` / `EpochlogProducer`: acks=all (idempotent) producers of unique values
  `<process>-<n>` round-robin over the partitions of the data topic, with confluent-kafka and
  with our client. A delivery report with an offset is `OK`; an error is `INFO`, since a
  timed-out or failed send may still have been written.
- `CkReader` / `EpochlogReader`: assign-mode readers of every partition from the beginning
  (the data topic at read_uncommitted, the transactional output at read_committed).
- `GroupMembers`: a consumer group on the data topic whose members commit what they read
  (synchronously, per partition) and join and leave on a seeded schedule; a member's session
  changes with each assignment, since a new assignment starts at the committed offset.
- `TxnLoop`: consume-transform-produce with transactions (read_committed input, outputs and
  input offsets in one transaction). Each producer instance is an `Incarnation`; any error ends
  the processor (the transaction is aborted if it can be, else its outcome is unknown) and a new
  one starts from the committed offsets. `fence_between_transactions` is the zombie fault's
  hook: a second producer with the same transactional id initialises while the loop is between
  transactions, so the loop's producer is a zombie from then on.

Values stay unique across retries: the output of input `v` in transaction `ctp-k` is `v>ctp-k`,
so the checker can trace an output to one transaction and find an input processed twice.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka as ck

from epochlog.testing.chaos.history import (
    OUTPUT_SEPARATOR,
    History,
    Incarnation,
    Op,
    OpKind,
    Status,
    TxnOp,
)
from epochlog.testing.txn_checker import Outcome, Transaction, Write

DATA_TOPIC = "chaos"
OUT_TOPIC = "chaos-out"
GROUP = "chaos-group"
CTP_GROUP = "chaos-ctp"
TRANSACTIONAL_ID = "chaos-ctp-tx"
# librdkafka logs every lost connection at error level; the faults make many
CK_QUIET = {"log_level": 2}
TXN_API_TIMEOUT_S = 30.0
# librdkafka's send_offsets_to_transaction waits for its background operation without a limit
# (rd_kafka_txn_op_req1(..., RD_POLL_INFINITE): "timeout is enforced by" the operation), and the
# operation's group-coordinator lookup never checks its deadline (confluentinc/librdkafka#5456,
# #5511): after a coordinator's broker died it can wait for a broker state change that never
# comes. The loop gives the call this long, then abandons that producer.
STALL_S = TXN_API_TIMEOUT_S + 15.0


class ClientStall(Exception):
    """A client call still blocked well past its own timeout."""


def call_with_stall_limit(call: Callable[[], None], limit_s: float, what: str) -> None:
    """Run `call` on a daemon thread; raise ClientStall if it has not returned after `limit_s`
    (the thread is left blocked), else whatever it raised."""
    done = threading.Event()
    raised: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)
        finally:
            done.set()

    threading.Thread(target=target, name=f"stalled? {what}", daemon=True).start()
    if not done.wait(limit_s):
        raise ClientStall(f"{what} still blocked after {limit_s:.0f} s")
    if raised:
        raise raised[0]


class Workload(threading.Thread):
    """A daemon thread running `step()` until stopped; unexpected exceptions are kept."""

    def __init__(self, name: str, history: History, bootstrap: str) -> None:
        super().__init__(name=name, daemon=True)
        self.history = history
        self.bootstrap = bootstrap
        self.stopping = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            self.setup()
            while not self.stopping.is_set():
                try:
                    self.step()
                except Exception as exc:  # a client error the workload did not expect
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    time.sleep(0.5)
        except Exception as exc:
            self.errors.append(f"setup: {type(exc).__name__}: {exc}")
        finally:
            try:
                self.teardown()
            except Exception as exc:
                self.errors.append(f"teardown: {type(exc).__name__}: {exc}")

    def setup(self) -> None:
        pass

    def step(self) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        pass

    def stop(self, timeout_s: float = 60.0) -> None:
        self.stopping.set()
        self.join(timeout_s)


class CkProducer(Workload):
    def __init__(
        self, name: str, history: History, bootstrap: str, partitions: int, rate: float = 40.0
    ) -> None:
        super().__init__(name, history, bootstrap)
        self.partitions = partitions
        self.interval = 1.0 / rate
        self.counter = itertools.count()
        self.producer: Any = None

    def setup(self) -> None:
        self.producer = ck.Producer(
            {
                **CK_QUIET,
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 30000,
                "linger.ms": 5,
            }
        )

    def step(self) -> None:
        n = next(self.counter)
        value = f"{self.name}-{n}"
        partition = n % self.partitions
        invoked = self.history.now()

        def delivered(err: Any, msg: Any) -> None:
            done = self.history.now()
            if err is None:
                op = Op(
                    self.name,
                    OpKind.SEND,
                    Status.OK,
                    invoked,
                    done,
                    value,
                    DATA_TOPIC,
                    partition,
                    msg.offset(),
                )
            else:
                op = Op(
                    self.name,
                    OpKind.SEND,
                    Status.INFO,
                    invoked,
                    done,
                    value,
                    DATA_TOPIC,
                    partition,
                    error=str(err),
                )
            self.history.record(op)

        try:
            self.producer.produce(
                DATA_TOPIC, value.encode(), partition=partition, on_delivery=delivered
            )
        except BufferError:
            self.producer.poll(0.5)
            return
        self.producer.poll(0)
        time.sleep(self.interval)

    def teardown(self) -> None:
        if self.producer is not None:
            self.producer.flush(40)


class EpochlogProducer(CkProducer):
    def setup(self) -> None:
        from epochlog.client import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "delivery.timeout.ms": 30000,
                "request.timeout.ms": 10000,
                "linger.ms": 5,
            }
        )

    def step(self) -> None:
        n = next(self.counter)
        value = f"{self.name}-{n}"
        partition = n % self.partitions
        invoked = self.history.now()

        def delivered(metadata: Any, error: BaseException | None) -> None:
            done = self.history.now()
            if error is None and metadata is not None and metadata.offset >= 0:
                op = Op(
                    self.name,
                    OpKind.SEND,
                    Status.OK,
                    invoked,
                    done,
                    value,
                    DATA_TOPIC,
                    partition,
                    metadata.offset,
                )
            else:
                op = Op(
                    self.name,
                    OpKind.SEND,
                    Status.INFO,
                    invoked,
                    done,
                    value,
                    DATA_TOPIC,
                    partition,
                    error=repr(error),
                )
            self.history.record(op)

        self.producer.send(DATA_TOPIC, value.encode(), partition=partition, on_delivery=delivered)
        time.sleep(self.interval)

    def teardown(self) -> None:
        if self.producer is not None:
            try:
                self.producer.flush(40)
            finally:
                self.producer.close()


class CkReader(Workload):
    """Assign mode, every partition of `topic` from the beginning."""

    def __init__(
        self,
        name: str,
        history: History,
        bootstrap: str,
        topic: str,
        partitions: int,
        read_committed: bool = False,
    ) -> None:
        super().__init__(name, history, bootstrap)
        self.topic = topic
        self.partitions = partitions
        self.read_committed = read_committed
        self.consumer: Any = None

    def setup(self) -> None:
        self.consumer = ck.Consumer(
            {
                **CK_QUIET,
                "bootstrap.servers": self.bootstrap,
                "group.id": f"{self.name}-unused",  # assign mode: no group membership
                "enable.auto.commit": False,
                "isolation.level": "read_committed" if self.read_committed else "read_uncommitted",
            }
        )
        self.consumer.assign(
            [ck.TopicPartition(self.topic, p, ck.OFFSET_BEGINNING) for p in range(self.partitions)]
        )

    def step(self) -> None:
        for msg in self.consumer.consume(200, 0.5):
            if msg.error() is not None:
                continue
            at = self.history.now()
            self.history.record(
                Op(
                    self.name,
                    OpKind.POLL,
                    Status.OK,
                    at,
                    at,
                    msg.value().decode(),
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                )
            )

    def teardown(self) -> None:
        if self.consumer is not None:
            self.consumer.close()


class EpochlogReader(CkReader):
    def setup(self) -> None:
        from epochlog.client import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.auto.commit": False,
                "isolation.level": "read_committed" if self.read_committed else "read_uncommitted",
            }
        )
        tps = [(self.topic, p) for p in range(self.partitions)]
        self.consumer.assign(tps)
        self.consumer.seek_to_beginning(tps)

    def step(self) -> None:
        for record in self.consumer.poll(0.5):
            at = self.history.now()
            self.history.record(
                Op(
                    self.name,
                    OpKind.POLL,
                    Status.OK,
                    at,
                    at,
                    (record.value or b"").decode(),
                    record.topic,
                    record.partition,
                    record.offset,
                )
            )


class GroupMembers(Workload):
    """`size` members of GROUP in one thread (each polled in turn); every `churn_s` on average
    one leaves (closing, so the group rebalances at once) and a new one joins."""

    def __init__(
        self,
        name: str,
        history: History,
        bootstrap: str,
        rng: random.Random,
        size: int = 2,
        churn_s: float = 8.0,
    ) -> None:
        super().__init__(name, history, bootstrap)
        self.rng = rng
        self.size = size
        self.churn_s = churn_s
        self.members: list[tuple[str, Any, list[int]]] = []  # name, consumer, [session]
        self.ids = itertools.count()
        self.next_churn = 0.0

    def _join(self) -> None:
        name = f"member-{next(self.ids)}"
        session = [0]

        def assigned(consumer: Any, partitions: list[Any]) -> None:
            session[0] += 1

        consumer = ck.Consumer(
            {
                **CK_QUIET,
                "bootstrap.servers": self.bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
            }
        )
        consumer.subscribe([DATA_TOPIC], on_assign=assigned, on_revoke=assigned)
        self.members.append((name, consumer, session))

    def setup(self) -> None:
        for _ in range(self.size):
            self._join()
        self.next_churn = time.monotonic() + self.rng.expovariate(1 / self.churn_s)

    def step(self) -> None:
        if time.monotonic() > self.next_churn:
            name, consumer, _ = self.members.pop(self.rng.randrange(len(self.members)))
            consumer.close()
            self._join()
            self.next_churn = time.monotonic() + self.rng.expovariate(1 / self.churn_s)
        for name, consumer, session in list(self.members):
            self._poll_and_commit(name, consumer, session)

    def _poll_and_commit(self, name: str, consumer: Any, session: list[int]) -> None:
        latest: dict[int, int] = {}
        for msg in consumer.consume(100, 0.2):
            if msg.error() is not None:
                continue
            at = self.history.now()
            self.history.record(
                Op(
                    name,
                    OpKind.POLL,
                    Status.OK,
                    at,
                    at,
                    msg.value().decode(),
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    session[0],
                )
            )
            latest[msg.partition()] = msg.offset() + 1
        if not latest:
            return
        offsets = [ck.TopicPartition(DATA_TOPIC, p, o) for p, o in sorted(latest.items())]
        invoked = self.history.now()
        try:
            answered = consumer.commit(offsets=offsets, asynchronous=False)
        except ck.KafkaException as exc:
            done = self.history.now()
            for tp in offsets:
                self.history.record(
                    Op(
                        name,
                        OpKind.COMMIT,
                        Status.INFO,
                        invoked,
                        done,
                        None,
                        DATA_TOPIC,
                        tp.partition,
                        tp.offset,
                        session[0],
                        GROUP,
                        str(exc),
                    )
                )
            return
        done = self.history.now()
        for tp in answered or []:
            status = Status.OK if tp.error is None else Status.INFO
            self.history.record(
                Op(
                    name,
                    OpKind.COMMIT,
                    status,
                    invoked,
                    done,
                    None,
                    DATA_TOPIC,
                    tp.partition,
                    tp.offset,
                    session[0],
                    GROUP,
                    None if tp.error is None else str(tp.error),
                )
            )

    def teardown(self) -> None:
        for _, consumer, _ in self.members:
            consumer.close()


class TxnLoop(Workload):
    """Consume-transform-produce from DATA_TOPIC to OUT_TOPIC, exactly once."""

    def __init__(
        self,
        name: str,
        history: History,
        bootstrap: str,
        partitions: int,
        client_log: Path | None = None,
    ) -> None:
        super().__init__(name, history, bootstrap)
        self.partitions = partitions
        # librdkafka's transaction and broker debug log ("eos,broker": the coordinator lookups
        # are logged under "broker"), for a loop that gets stuck
        self.client_logger: logging.Logger | None = None
        if client_log is not None:
            self.client_logger = logging.getLogger(f"chaos.ctp.{id(self)}")
            self.client_logger.propagate = False
            self.client_logger.setLevel(logging.DEBUG)
            self.client_logger.addHandler(logging.FileHandler(client_log))
        self.incarnations = itertools.count()
        self.transactions = itertools.count()
        self.between_transactions = threading.Lock()  # held while a transaction is open
        self.producer: Any = None
        self.consumer: Any = None
        self.incarnation = -1
        self.stalls: list[str] = []  # client calls abandoned past their timeout

    def _producer(self) -> tuple[Any, int]:
        producer = ck.Producer(
            {
                **CK_QUIET,
                "bootstrap.servers": self.bootstrap,
                "transactional.id": TRANSACTIONAL_ID,
                "transaction.timeout.ms": 20000,
                "message.timeout.ms": 20000,
                **(
                    {"debug": "eos,broker", "log_level": 7, "logger": self.client_logger}
                    if self.client_logger is not None
                    else {}
                ),
            }
        )
        producer.init_transactions(TXN_API_TIMEOUT_S)
        number = next(self.incarnations)
        self.history.record_incarnation(Incarnation(TRANSACTIONAL_ID, number, self.history.now()))
        return producer, number

    def _start(self) -> None:
        self.producer, self.incarnation = self._producer()
        self.consumer = ck.Consumer(
            {
                **CK_QUIET,
                "bootstrap.servers": self.bootstrap,
                "group.id": CTP_GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        self.consumer.assign([ck.TopicPartition(DATA_TOPIC, p) for p in range(self.partitions)])

    def _stop_processor(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
        self.consumer = None
        self.producer = None  # dropped, not closed: a crashed processor's producer

    def step(self) -> None:
        if self.producer is None:
            try:
                self._start()
            except ck.KafkaException as exc:
                self.errors.append(f"init: {exc}")
                self._stop_processor()
                time.sleep(1)
                return
        records = [m for m in self.consumer.consume(50, 0.5) if m.error() is None]
        if not records:
            return
        with self.between_transactions:
            self._transaction(records)

    def _transaction(self, records: list[Any]) -> None:
        name = f"ctp-{next(self.transactions)}"
        writes = tuple(
            Write(OUT_TOPIC, m.partition(), f"{m.value().decode()}{OUTPUT_SEPARATOR}{name}")
            for m in records
        )
        offsets: dict[int, int] = {}
        for m in records:
            offsets[m.partition()] = m.offset() + 1
        invoked = self.history.now()
        committing = False
        try:
            self.producer.begin_transaction()
            for w in writes:
                self.producer.produce(OUT_TOPIC, w.value.encode(), partition=w.partition)
            producer = self.producer
            positions = [ck.TopicPartition(DATA_TOPIC, p, o) for p, o in sorted(offsets.items())]
            metadata = self.consumer.consumer_group_metadata()
            call_with_stall_limit(
                lambda: producer.send_offsets_to_transaction(
                    positions, metadata, TXN_API_TIMEOUT_S
                ),
                STALL_S,
                f"{name}: send_offsets_to_transaction(timeout {TXN_API_TIMEOUT_S:.0f} s)",
            )
            committing = True
            self.producer.commit_transaction(TXN_API_TIMEOUT_S)
            outcome = Outcome.COMMITTED
        except ClientStall as exc:
            # The stuck call can never be cancelled; the producer is dropped with it (if the call
            # ever returns, nothing follows it), and the next incarnation's InitProducerId
            # fences and aborts this transaction. Its outcome stays unknown to the checker.
            outcome = Outcome.UNKNOWN
            with contextlib.suppress(Exception):
                self.producer.poll(0)  # writes the log lines librdkafka queued, for the record
            self.stalls.append(f"{exc} (incarnation {self.incarnation}; producer abandoned)")
            self._stop_processor()
        except ck.KafkaException as exc:
            outcome = Outcome.UNKNOWN
            if not committing or exc.args[0].txn_requires_abort():
                try:
                    self.producer.abort_transaction(TXN_API_TIMEOUT_S)
                    outcome = Outcome.ABORTED
                except ck.KafkaException:
                    pass
            self._stop_processor()  # the next step starts again from the committed offsets
        self.history.record_txn(
            TxnOp(
                Transaction(name, writes, outcome),
                TRANSACTIONAL_ID,
                self.incarnation,
                invoked,
                self.history.now(),
            )
        )

    def fence_between_transactions(self) -> str:
        """The zombie fault: a new producer with the loop's transactional id initialises while
        no transaction is open, so the loop's producer should be fenced from then on."""
        with self.between_transactions:
            producer, number = self._producer()
        del producer
        return (
            f"{TRANSACTIONAL_ID} incarnation {number} initialised; {self.incarnation} is a zombie"
        )

    def teardown(self) -> None:
        self._stop_processor()


def start_all(workloads: list[Workload]) -> None:
    for w in workloads:
        w.start()


def stop_all(
    workloads: list[Workload],
    pick: Callable[[Workload], bool] = lambda w: True,
    timeout_s: float = 60.0,
) -> list[str]:
    """Stop the chosen workloads; returns, for each still running after `timeout_s`, its name
    and where it is stuck."""
    chosen = [w for w in workloads if pick(w)]
    for w in chosen:
        w.stopping.set()
    deadline = time.monotonic() + timeout_s
    for w in chosen:
        w.join(max(0.0, deadline - time.monotonic()))
    frames = sys._current_frames()
    stuck = []
    for w in chosen:
        if w.is_alive() and w.ident in frames:
            where = "".join(traceback.format_stack(frames[w.ident])[-4:])
            stuck.append(f"{w.name} still running after {timeout_s:.0f} s, at:\n{where}")
    return stuck
