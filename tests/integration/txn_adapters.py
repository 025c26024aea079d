"""confluent-kafka, kafka-python, aiokafka and the epochlog client behind the workload's adapter
protocols (`epochlog.testing.txn_workload`): a transactional producer, a read_committed input
consumer for consume-transform-produce, and a read_committed reader of whole partitions.

Each producer adapter maps its client's errors to the three kinds the workload tells apart:
fenced (fatal), abortable, and outcome unknown."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import aiokafka
import aiokafka.errors as aerrors
import confluent_kafka as ck
import kafka
import kafka.errors as kerrors
from kafka.structs import OffsetAndMetadata

import epochlog.client as ec
from epochlog.client.transaction_manager import TransactionStateError
from epochlog.protocol.errors import ErrorCode
from epochlog.testing.txn_checker import ReadRecord
from epochlog.testing.txn_workload import (
    OutcomeUnknown,
    ProducerFenced,
    TopicPartition,
    TransactionAbortable,
)

TIMEOUT_S = 30  # a failure bound for one client call
READ_DEADLINE_S = 90  # a failure bound for one full read
COMMIT_ATTEMPTS = 5  # librdkafka: a retriable commit error means "call commit again"
CK_FENCED = {
    ck.KafkaError._FENCED,
    ck.KafkaError.PRODUCER_FENCED,
    ck.KafkaError.INVALID_PRODUCER_EPOCH,
}


@dataclass(frozen=True)
class GroupToken:
    """What `send_offsets` takes: the group's id (all kafka-python needs of a consumer that is
    assigned, not subscribed) and librdkafka's own group metadata."""

    group_id: str
    confluent_metadata: object


@contextmanager
def _ck_errors() -> Iterator[None]:
    try:
        yield
    except ck.KafkaException as exc:
        error = exc.args[0]
        if error.code() in CK_FENCED:
            raise ProducerFenced(str(error)) from exc
        if error.fatal():
            raise OutcomeUnknown(str(error)) from exc
        if error.txn_requires_abort():
            raise TransactionAbortable(str(error)) from exc
        raise OutcomeUnknown(str(error)) from exc


def _token(group: object) -> GroupToken:
    if not isinstance(group, GroupToken):
        raise TypeError(f"send_offsets takes a GroupToken, not {type(group).__name__}")
    return group


class ConfluentProducer:
    def __init__(self, bootstrap: str, transactional_id: str, **conf: Any) -> None:
        self.producer = ck.Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **conf}
        )

    def init(self) -> None:
        with _ck_errors():
            self.producer.init_transactions(TIMEOUT_S)

    def begin(self) -> None:
        with _ck_errors():
            self.producer.begin_transaction()

    def send(self, topic: str, partition: int, value: str) -> None:
        with _ck_errors():
            self.producer.produce(topic, value.encode(), partition=partition)
            self.producer.poll(0)

    def flush(self) -> None:
        with _ck_errors():
            self.producer.flush(TIMEOUT_S)

    def send_offsets(self, offsets: dict[TopicPartition, int], group: object) -> None:
        with _ck_errors():
            self.producer.send_offsets_to_transaction(
                [ck.TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                _token(group).confluent_metadata,
                TIMEOUT_S,
            )

    def commit(self) -> None:
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                self.producer.commit_transaction(TIMEOUT_S)
                return
            except ck.KafkaException as exc:
                error = exc.args[0]
                if not error.retriable() or attempt == COMMIT_ATTEMPTS - 1:
                    with _ck_errors():
                        raise
        raise AssertionError("unreachable")

    def abort(self) -> None:
        with _ck_errors():
            self.producer.abort_transaction(TIMEOUT_S)

    def close(self) -> None:
        self.producer.flush(0)


@contextmanager
def _kafka_python_errors() -> Iterator[None]:
    try:
        yield
    except (kerrors.ProducerFencedError, kerrors.InvalidProducerEpochError) as exc:
        raise ProducerFenced(str(exc)) from exc
    except kerrors.KafkaTimeoutError as exc:
        raise OutcomeUnknown(str(exc)) from exc
    except kerrors.KafkaError as exc:
        raise TransactionAbortable(str(exc)) from exc


class KafkaPythonProducer:
    def __init__(self, bootstrap: str, transactional_id: str, **conf: Any) -> None:
        self.producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap, transactional_id=transactional_id, **conf
        )

    def init(self) -> None:
        with _kafka_python_errors():
            self.producer.init_transactions()

    def begin(self) -> None:
        with _kafka_python_errors():
            self.producer.begin_transaction()

    def send(self, topic: str, partition: int, value: str) -> None:
        with _kafka_python_errors():
            self.producer.send(topic, value.encode(), partition=partition)

    def flush(self) -> None:
        with _kafka_python_errors():
            self.producer.flush(TIMEOUT_S)

    def send_offsets(self, offsets: dict[TopicPartition, int], group: object) -> None:
        with _kafka_python_errors():
            self.producer.send_offsets_to_transaction(
                {
                    kafka.TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                    for (t, p), o in offsets.items()
                },
                _token(group).group_id,
            )

    def commit(self) -> None:
        with _kafka_python_errors():
            self.producer.commit_transaction()

    def abort(self) -> None:
        with _kafka_python_errors():
            self.producer.abort_transaction()

    def close(self) -> None:
        self.producer.close(timeout=5)


@contextmanager
def _aiokafka_errors() -> Iterator[None]:
    try:
        yield
    except (aerrors.ProducerFenced, aerrors.InvalidProducerEpoch) as exc:
        raise ProducerFenced(str(exc)) from exc
    except (TimeoutError, aerrors.KafkaTimeoutError) as exc:
        raise OutcomeUnknown(str(exc)) from exc
    except (aerrors.KafkaError, aerrors.IllegalOperation) as exc:
        raise TransactionAbortable(str(exc)) from exc


class AiokafkaProducer:
    """aiokafka on a loop of its own, driven one call at a time (every call waits for what it
    started, so nothing is left running between calls)."""

    def __init__(self, bootstrap: str, transactional_id: str, **conf: Any) -> None:
        self.loop = asyncio.new_event_loop()

        async def create() -> aiokafka.AIOKafkaProducer:  # aiokafka binds to the running loop
            return aiokafka.AIOKafkaProducer(
                bootstrap_servers=bootstrap, transactional_id=transactional_id, **conf
            )

        self.producer = self.loop.run_until_complete(create())
        self.pending: list[asyncio.Future[Any]] = []
        self.fenced = False

    def _run(self, awaitable: Any) -> Any:
        try:
            with _aiokafka_errors():
                return self.loop.run_until_complete(asyncio.wait_for(awaitable, TIMEOUT_S))
        except ProducerFenced:
            self.fenced = True
            raise

    def init(self) -> None:
        self._run(self.producer.start())  # init_transactions happens in start()

    def begin(self) -> None:
        if self.fenced:  # aiokafka itself fails an assertion (FATAL_ERROR -> IN_TRANSACTION)
            raise ProducerFenced("fenced by a newer producer with the same transactional id")
        self._run(self.producer.begin_transaction())

    def send(self, topic: str, partition: int, value: str) -> None:
        self.pending.append(
            self._run(self.producer.send(topic, value.encode(), partition=partition))
        )

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        for delivery in pending:
            self._run(delivery)

    def send_offsets(self, offsets: dict[TopicPartition, int], group: object) -> None:
        self._run(
            self.producer.send_offsets_to_transaction(
                {aiokafka.TopicPartition(t, p): o for (t, p), o in offsets.items()},
                _token(group).group_id,
            )
        )

    def commit(self) -> None:
        self.flush()
        self._run(self.producer.commit_transaction())

    def abort(self) -> None:
        self.pending = []
        self._run(self.producer.abort_transaction())

    def close(self) -> None:
        # a fenced producer may fail to stop cleanly; the loop is closed all the same
        with suppress(TimeoutError, aerrors.KafkaError):
            self.loop.run_until_complete(asyncio.wait_for(self.producer.stop(), 10))
        self.loop.close()


EPOCHLOG_FENCED = {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH}


def _fenced_cause(exc: BaseException) -> bool:
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ec.KafkaError) and cause.code in EPOCHLOG_FENCED:
            return True
        cause = cause.__cause__
    return False


@contextmanager
def _epochlog_errors() -> Iterator[None]:
    try:
        yield
    except TransactionStateError as exc:
        if _fenced_cause(exc) or "FATAL_ERROR" in str(exc):
            raise ProducerFenced(str(exc)) from exc
        raise TransactionAbortable(str(exc)) from exc
    except (TimeoutError, ec.DeliveryTimeoutError) as exc:
        raise OutcomeUnknown(str(exc)) from exc
    except ec.ClientError as exc:
        if _fenced_cause(exc):
            raise ProducerFenced(str(exc)) from exc
        raise TransactionAbortable(str(exc)) from exc


class EpochlogProducer:
    """The epochlog client's transactional producer (`epochlog.client.Producer`)."""

    def __init__(self, bootstrap: str, transactional_id: str, **conf: Any) -> None:
        self.producer = ec.Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **conf}
        )

    def init(self) -> None:
        with _epochlog_errors():
            self.producer.init_transactions(TIMEOUT_S)

    def begin(self) -> None:
        with _epochlog_errors():
            self.producer.begin_transaction()

    def send(self, topic: str, partition: int, value: str) -> None:
        with _epochlog_errors():
            self.producer.send(topic, value.encode(), partition=partition)

    def flush(self) -> None:
        with _epochlog_errors():
            self.producer.flush(TIMEOUT_S)

    def send_offsets(self, offsets: dict[TopicPartition, int], group: object) -> None:
        with _epochlog_errors():
            self.producer.send_offsets_to_transaction(
                offsets, ec.ConsumerGroupMetadata(_token(group).group_id), TIMEOUT_S
            )

    def commit(self) -> None:
        with _epochlog_errors():
            self.producer.commit_transaction(TIMEOUT_S)

    def abort(self) -> None:
        with _epochlog_errors():
            self.producer.abort_transaction(TIMEOUT_S)

    def close(self) -> None:
        with suppress(ec.ClientError, TimeoutError):
            self.producer.close(5)


class ConfluentInputConsumer:
    """A read_committed consumer of the input partitions, assigned (not subscribed, so an
    abandoned predecessor holds nothing up) from the group's committed offsets, which
    librdkafka reads with require_stable (KIP-447)."""

    def __init__(self, bootstrap: str, group: str, partitions: Sequence[TopicPartition]) -> None:
        self.group = group
        self.consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )
        committed = self.consumer.committed(
            [ck.TopicPartition(t, p) for t, p in partitions], TIMEOUT_S
        )
        self._positions = {(c.topic, c.partition): max(c.offset, 0) for c in committed}
        self.consumer.assign([ck.TopicPartition(t, p, o) for (t, p), o in self._positions.items()])

    def poll(self) -> list[ReadRecord]:
        records: list[ReadRecord] = []
        for message in self.consumer.consume(num_messages=20, timeout=0.5):
            if message.error():
                raise AssertionError(message.error())
            key = (message.topic(), message.partition())
            self._positions[key] = message.offset() + 1
            records.append(ReadRecord(*key, message.offset(), message.value().decode()))
        return records

    def positions(self) -> dict[TopicPartition, int]:
        return dict(self._positions)

    def group_metadata(self) -> object:
        return GroupToken(self.group, self.consumer.consumer_group_metadata())

    def close(self) -> None:
        self.consumer.close()


def wait_until_settled(bootstrap: str, partitions: Sequence[TopicPartition]) -> None:
    """Wait until no transaction is open on `partitions`: each one's last stable offset has
    reached its high watermark. A transaction's commit returns once the coordinator has logged
    PrepareCommit; its markers reach the partitions after, one partition at a time, so a final
    read started at once can stop at an LSO that has passed one partition's marker and not yet
    another's, and report a torn transaction where there is none."""
    tps = [kafka.TopicPartition(t, p) for t, p in partitions]
    committed = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    uncommitted = kafka.KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + READ_DEADLINE_S
        while True:
            stable, high = committed.end_offsets(tps), uncommitted.end_offsets(tps)
            if stable == high:
                return
            still_open = {
                f"{tp.topic}-{tp.partition}": (stable[tp], high[tp])
                for tp in tps
                if stable[tp] != high[tp]
            }
            assert time.monotonic() < deadline, f"transactions still open (LSO, HW): {still_open}"
            time.sleep(0.1)
    finally:
        committed.close()
        uncommitted.close()


class ConfluentReader:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def read_all(self, partitions: Sequence[TopicPartition]) -> list[ReadRecord]:
        wait_until_settled(self.bootstrap, partitions)
        consumer = ck.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "jepsen-reader",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
            }
        )
        consumer.assign([ck.TopicPartition(t, p, ck.OFFSET_BEGINNING) for t, p in partitions])
        records: list[ReadRecord] = []
        at_end: set[TopicPartition] = set()
        deadline = time.monotonic() + READ_DEADLINE_S
        try:
            while len(at_end) < len(partitions):
                assert time.monotonic() < deadline, f"read_committed never reached {partitions}"
                message = consumer.poll(0.5)
                if message is None:
                    continue
                key = (message.topic(), message.partition())
                if message.error():
                    if message.error().code() == ck.KafkaError._PARTITION_EOF:
                        at_end.add(key)
                        continue
                    raise AssertionError(message.error())
                at_end.discard(key)
                records.append(ReadRecord(*key, message.offset(), message.value().decode()))
        finally:
            consumer.close()
        return records


class KafkaPythonReader:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def read_all(self, partitions: Sequence[TopicPartition]) -> list[ReadRecord]:
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
        )
        tps = [kafka.TopicPartition(t, p) for t, p in partitions]
        wait_until_settled(self.bootstrap, partitions)
        try:
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            end = consumer.end_offsets(tps)  # the LSO at read_committed
            records: list[ReadRecord] = []
            deadline = time.monotonic() + READ_DEADLINE_S
            while any(consumer.position(tp) < end[tp] for tp in tps):
                assert time.monotonic() < deadline, f"kafka-python never reached {end}"
                for tp, messages in consumer.poll(timeout_ms=500).items():
                    records.extend(
                        ReadRecord(tp.topic, tp.partition, m.offset, m.value.decode())
                        for m in messages
                    )
        finally:
            consumer.close()
        return records


ProducerFactory = Callable[[str, str], Any]  # (bootstrap, transactional id) -> adapter

PRODUCERS: dict[str, ProducerFactory] = {
    "confluent-kafka": ConfluentProducer,
    "kafka-python": KafkaPythonProducer,
    "aiokafka": AiokafkaProducer,
    "epochlog": EpochlogProducer,
}
