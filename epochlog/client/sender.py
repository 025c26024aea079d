"""The producer's sender: the task that turns queued batches into Produce requests and their
answers into completions (Kafka's Sender). The decisions it applies live elsewhere, sans-I/O:
which batches go (`accumulator`, through the drain gate: `idempotence`, `transaction_manager`),
what an answer means (`retries`), how records learn it (`delivery`).

How it works. One task loops: with idempotence it first obtains a producer id (InitProducerId,
to the least loaded broker) and, when a reset was requested, waits until nothing is in flight
and obtains a new one; a transactional producer's `TransactionalSender` has its turn instead. It
fails queued batches older than `delivery.timeout.ms`; asks the accumulator which leaders have
data ready; drains batches for those whose connection is ready and which have fewer than
`max.in.flight.requests.per.connection` requests in flight; and sends one Produce request per
leader (`produce_request`). Each request is awaited in a task of its own; its answer is split
per batch (`batch_results`), and each batch's verdict (`retries.decide_produce`) is applied:
completed, re-queued for a retry after `retry.backoff.ms`, split, or failed; errors that
invalidate metadata trigger a refresh, so a retry goes to the new leader. With acks=0 nothing
comes back and every record succeeds with offset -1, as in Kafka. The loop sleeps until a new
batch, a response, a connection or metadata change, or the next linger or backoff deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any, NamedTuple

from epochlog.aio import wait_for
from epochlog.client.accumulator import DrainGate, RecordAccumulator
from epochlog.client.config import ClientConfig
from epochlog.client.delivery import fail_batch, succeed_batch
from epochlog.client.errors import ClientError, IncompatibleBrokerError, KafkaError
from epochlog.client.idempotence import IdempotenceManager
from epochlog.client.metadata import TopicPartition
from epochlog.client.network import NetworkClient
from epochlog.client.producer_batch import ProducerBatch
from epochlog.client.retries import Action, RetryPolicy, decide_produce
from epochlog.client.transaction_manager import TransactionManager
from epochlog.client.transactional_sender import TransactionalSender
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

PRODUCE_REQUEST_OVERHEAD = 256  # headers, topic name and array framing around the batches


class BatchResult(NamedTuple):
    """One batch's part of a Produce answer."""

    error: ErrorCode
    base_offset: int
    log_append_time: int
    exc: Exception | None


_ACKS_0 = BatchResult(ErrorCode.NONE, -1, -1, None)


def produce_request(
    batches: Iterable[ProducerBatch], acks: int, timeout_ms: int, transactional_id: str | None
) -> m.ProduceRequest:
    """One Produce request carrying `batches`, grouped by topic."""
    by_topic: dict[str, list[Any]] = {}
    for b in batches:
        by_topic.setdefault(b.tp.topic, []).append(
            m.ProduceRequest.PartitionProduceData(index=b.tp.partition, records=b.data)
        )
    return m.ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            m.ProduceRequest.TopicProduceData(name=t, partition_data=p)
            for t, p in by_topic.items()
        ],
    )


def batch_results(
    batches: list[ProducerBatch], response: Any | None, node: int
) -> list[BatchResult]:
    """Each batch's result in a Produce `response` (None: acks=0, every batch succeeds); a
    partition the response does not mention is an UNKNOWN_SERVER_ERROR naming the node."""
    if response is None:
        return [_ACKS_0] * len(batches)
    by_partition: dict[TopicPartition, Any] = {}
    for t in response.responses:
        for p in t.partition_responses:
            by_partition[TopicPartition(t.name, p.index)] = p
    results = []
    for b in batches:
        p = by_partition.get(b.tp)
        if p is None:
            missing = ClientError(f"produce response from node {node} has no result for {b.tp}")
            results.append(BatchResult(ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, missing))
        elif p.error_code == 0:  # the common case: no exception to build
            results.append(BatchResult(ErrorCode.NONE, p.base_offset, p.log_append_time_ms, None))
        else:
            exc = KafkaError(p.error_code, f"produce to {b.tp}", getattr(p, "error_message", None))
            results.append(BatchResult(exc.code, p.base_offset, p.log_append_time_ms, exc))
    return results


class Sender:
    """The producer's I/O; see the module docstring. `sent` holds the batches drained and not
    answered yet (the accumulator holds the others)."""

    def __init__(
        self,
        config: ClientConfig,
        net: NetworkClient,
        accumulator: RecordAccumulator,
        gate: DrainGate,
        sequences: IdempotenceManager | None,
        transaction: TransactionManager | None,
        wakeup: asyncio.Event,
    ) -> None:
        self._net = net
        self._acc = accumulator
        self._gate = gate
        self._idem = sequences
        self._txn = transaction
        self._acks: int = config["acks"]
        self._request_timeout_ms: int = config["request.timeout.ms"]
        self._max_request_size: int = config["max.request.size"]
        self._max_in_flight: int = config["max.in.flight.requests.per.connection"]
        self._retry_backoff_ms = float(config["retry.backoff.ms"])
        self._transactional_id: str | None = transaction.transactional_id if transaction else None
        self.policy = RetryPolicy(config["retries"], config["delivery.timeout.ms"])
        self.transactional: TransactionalSender | None = None
        if transaction is not None:
            self.transactional = TransactionalSender(
                transaction, config, net, self.fail_queued, self.wake
            )
        self.wakeup = wakeup  # set by the accumulator, the network client and the answers
        self.sent: set[ProducerBatch] = set()
        self.in_flight: dict[int, int] = {}  # requests per node
        self.closing = False
        self.fatal: Exception | None = None  # the producer can send nothing more
        self._task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        self.wakeup.set()

    def unresolved_batches(self) -> list[ProducerBatch]:
        """The batches whose records are not all completed: queued or sent."""
        return [*self._acc.queued_batches(), *self.sent]

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="sender")

    async def close(self, error: Exception) -> None:
        """Stop: what is still queued fails with `error` (the caller flushed first)."""
        self.closing = True
        self.fail_queued(error)
        if self._task is not None:
            self.wakeup.set()
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.transactional is not None:
            await self.transactional.close()

    def cluster_changed(self, old: str | None, new: str | None) -> None:
        """Metadata now names another cluster (after a rebootstrap or a proxy's switch): our
        producer id and sequences mean nothing there, so take a new id before sending more."""
        if self._idem is not None and self._txn is None:  # a transaction's coordinator decides
            self._idem.request_reset()
        self.wakeup.set()

    def fail_queued(self, error: Exception) -> None:
        """Fail every queued batch: the producer is closing, or the transaction cannot commit.
        A batch that was sent before (queued again for a retry) may or may not be in the log:
        its sequence is lost, so idempotence resets (inside a transaction: the abort bumps the
        epoch, KIP-360)."""
        for batch in self._acc.abort_all():
            if batch.has_sequence and self._idem is not None:
                self._idem.request_reset()
            fail_batch(batch, error)

    # ---------------------------------------------------------------- the loop

    def _now(self) -> float:
        return self._net.now_ms()

    def _leader_of(self, tp: TopicPartition) -> int | None:
        return self._net.cluster.leader_for(tp)

    async def _run(self) -> None:
        # The loop also checks the flag because Python 3.11's wait_for can swallow a
        # cancellation that races with the wakeup it waits on.
        while not self.closing:
            self.wakeup.clear()
            try:
                wait_ms = await self._run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("producer sender iteration failed")
                wait_ms = 100.0
            if wait_ms > 0:
                with contextlib.suppress(TimeoutError):
                    await wait_for(self.wakeup.wait(), wait_ms / 1000)

    async def _run_once(self) -> float:
        """One pass of the sender; returns how long it may sleep (ms) absent a wakeup."""
        now = self._now()
        for batch in self._acc.expire(now, self.policy.delivery_timeout_ms):
            expired = self.policy.expired(batch)
            if self._txn is not None:
                self._txn.on_batch_failed(batch, ErrorCode.REQUEST_TIMED_OUT, expired)
            fail_batch(batch, expired)
            if self._idem is not None and batch.has_sequence:
                self._idem.request_reset()
        if self.transactional is not None:
            assert self._txn is not None
            pending = bool(self.sent) or self._acc.has_queued()
            txn_wait = self.transactional.poll(now, pending)
            if not self._txn.in_transaction:
                return 1000.0 if txn_wait is None else txn_wait
            wait_ms = self._send_ready(now)
            return wait_ms if txn_wait is None else min(wait_ms, txn_wait)
        if self._idem is not None and not self._idem.has_producer_id:
            # at once, as Kafka's producer does, not when the first batch is ready
            if any(self.in_flight.values()) or self.fatal:
                return 1000.0
            return await self._init_producer_id()
        return self._send_ready(now)

    def _send_ready(self, now: float) -> float:
        """Send what is ready to nodes with room for another request; returns how long the
        sender may sleep (ms). Called by the loop, and by a response's handler as soon as it
        has freed a slot (a turn of the loop sooner than waking the sender).

        It drains again while nodes have room for more requests: the sender shares its loop
        with the application, which may give it a turn only now and then (a burst of
        send_nowait, or the blocking facade's caller holding the GIL), so one turn should send
        all that is ready, not one request per node. Not after a retry, though: retried and
        split batches go one request at a time, so they cannot overtake one another. The drain
        gate holds everything back while idempotence waits for a producer id."""
        wait_ms = 1000.0
        for attempt in range(self._max_in_flight):
            check = self._acc.ready(now, self._leader_of)
            if attempt == 0 and check.unknown_leader_topics:
                self._net.want_topics(check.unknown_leader_topics)
                self._net.request_update()
            wait_ms = min(wait_ms, check.next_check_ms)
            sendable = []
            for node in check.nodes:
                if self.in_flight.get(node, 0) >= self._max_in_flight:
                    continue
                if self._net.try_ready(node) is None:
                    delay = self._net.connection_delay(node)
                    if delay != float("inf"):
                        wait_ms = min(wait_ms, max(delay, 1.0))
                    continue
                sendable.append(node)
            if not sendable:
                break
            drained = self._acc.drain(
                now,
                sendable,
                self._leader_of,
                self._max_request_size - PRODUCE_REQUEST_OVERHEAD,
                self._gate,
            )
            if not drained:
                break
            retried = False
            for node, batches in drained.items():
                self.in_flight[node] = self.in_flight.get(node, 0) + 1
                self.sent.update(batches)
                asyncio.get_running_loop().create_task(
                    self._produce(node, batches), name=f"produce to node {node}"
                )
                retried = retried or any(b.attempts for b in batches)
            if retried:
                break
        return wait_ms

    async def _init_producer_id(self) -> float:
        """One InitProducerId attempt; returns how long to wait before the next one (ms).

        Retriable failures (no broker reachable, coordinator loading, ...) are retried for as
        long as it takes, queued records expiring by delivery.timeout.ms meanwhile; a broker
        without idempotence support or a non-retriable error is fatal for the producer."""
        assert self._idem is not None
        try:
            conn = await self._net.least_loaded_connection(self._request_timeout_ms)
            response = await conn.send(
                m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=2**31 - 1),
                api_key=ApiKey.INIT_PRODUCER_ID,
            )
        except IncompatibleBrokerError as exc:
            self._set_fatal(ClientError(f"idempotent producer not supported: {exc}"))
            return 0.0
        except ClientError as exc:
            log.debug("InitProducerId failed: %s", exc)
            return self._retry_backoff_ms
        error = ErrorCode.of(response.error_code)
        if error is ErrorCode.NONE:
            self._idem.set_producer_id(response.producer_id, response.producer_epoch)
            log.debug("producer id %d epoch %d", response.producer_id, response.producer_epoch)
            return 0.0
        if not error.retriable:
            self._set_fatal(KafkaError(error, "InitProducerId"))
            return 0.0
        return self._retry_backoff_ms

    def _set_fatal(self, error: Exception) -> None:
        self.fatal = error
        for batch in self._acc.abort_all():
            fail_batch(batch, error)

    # ---------------------------------------------------------------- requests and answers

    async def _produce(self, node: int, batches: list[ProducerBatch]) -> None:
        request = produce_request(
            batches, self._acks, self._request_timeout_ms, self._transactional_id
        )
        try:
            conn = self._net.connection(node)
            if conn is None:
                raise ClientError(f"connection to node {node} is gone")
            response = await conn.send(
                request, api_key=ApiKey.PRODUCE, expect_response=self._acks != 0
            )
        except ClientError as exc:
            for b in batches:
                self._complete(b, BatchResult(ErrorCode.NETWORK_EXCEPTION, -1, -1, exc))
        else:
            for b, result in zip(batches, batch_results(batches, response, node), strict=True):
                self._complete(b, result)
        finally:
            self.in_flight[node] -= 1
            if not self.closing and self.fatal is None:
                try:
                    self._send_ready(self._now())
                except Exception:
                    log.exception("sending after a response failed")  # the loop will retry
            self.wakeup.set()

    def _complete(self, batch: ProducerBatch, result: BatchResult) -> None:
        """Apply the verdict on one batch's answer (`retries.decide_produce`)."""
        self.sent.discard(batch)
        self._gate.on_complete(batch)
        now = self._now()
        error = result.error
        if error is ErrorCode.NONE and self._idem is None:  # the common case, decided inline
            succeed_batch(batch, result.base_offset, result.log_append_time)
            return
        may_retry = self.policy.may_retry(batch, now, self.closing)
        verdict = decide_produce(
            batch, error, may_retry, self.closing, self._idem, self._txn is not None
        )
        if self._idem is not None:
            self._idem.resolve(batch, verdict)
        action = verdict.action
        if action is Action.SPLIT:
            self._split(batch, now)
            return
        self._net.handle_error_code(error)
        if action is Action.SUCCESS:
            base_offset = -1 if error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER else result.base_offset
            succeed_batch(batch, base_offset, result.log_append_time)
        elif action is Action.RETRY:
            log.debug("retrying %s after %s", batch, error.name)
            self._acc.reenqueue(batch, now)
        else:
            exc = self.policy.failure(batch, error, result.exc, now)
            if self._txn is not None:
                self._txn.on_batch_failed(batch, error, exc)
            fail_batch(batch, exc)

    def _split(self, batch: ProducerBatch, now: float) -> None:
        """Retry the records of a batch refused as too large in two halves (its sequence
        numbers were given up by the verdict)."""
        log.info("%s refused as too large; splitting it", batch)
        self._acc.requeue_split(batch.split(), now)
