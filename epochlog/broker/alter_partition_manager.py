"""Sending ISR changes to the controller: one AlterPartition in flight per broker (Kafka's
AlterPartitionManager, fact sheet §4b).

`AlterPartitionBatcher` is the sans-I/O core. It holds at most one unsent item per partition (a
second submit for a partition whose item is still wanted is refused, which the partition treats
as OPERATION_NOT_ATTEMPTED); `take_batch` hands out every due item when no request is in flight;
`on_answer` completes the items the controller answered and keeps the ones it left out (they go
again with the next request); `on_failure` (no answer, or a top-level error such as NOT_CONTROLLER
or STALE_BROKER_EPOCH) keeps them all for a retry. An item whose partition has moved on (a
LeaderAndIsr replaced the change) is dropped before sending.

`AlterPartitionManager` is the I/O shell: a task that sends each batch as one AlterPartition v3
to the controller named in the metadata cache, at the endpoint the cache lists for it, through a
`BrokerConnection`, consulting the fault injector first. Failures and top-level errors are
retried after 50 ms, re-resolving the controller each time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epochlog.aio import wait_for
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import ConnectionFailedError, IncompatibleBrokerError
from epochlog.client.errors import RequestTimedOutError as ClientTimeout
from epochlog.client.sasl import SaslLogin
from epochlog.faults import NO_FAULTS, FaultInjector
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

RETRY_BACKOFF_MS = 50
ALTER_PARTITION_VERSION = 3

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PartitionAnswer:
    """The controller's answer for one partition (the committed state when error is NONE)."""

    error: ErrorCode
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass(eq=False)
class AlterPartitionItem:
    """One partition's proposed ISR. `still_wanted()` False drops it unsent; `on_answer` gets
    the controller's answer exactly once."""

    key: TopicPartition
    topic_id: uuid.UUID
    leader_epoch: int
    partition_epoch: int
    isr_with_epochs: list[tuple[int, int]]
    on_answer: Callable[[PartitionAnswer], None]
    still_wanted: Callable[[], bool] = lambda: True
    not_before_ms: int = 0


@dataclass
class AlterPartitionBatcher:
    unsent: dict[TopicPartition, AlterPartitionItem] = field(default_factory=dict)
    in_flight: list[AlterPartitionItem] | None = None

    def submit(self, item: AlterPartitionItem) -> bool:
        """Queue `item`; False when the partition already has a wanted item queued."""
        existing = self.unsent.get(item.key)
        if existing is not None and existing.still_wanted():
            return False
        self.unsent[item.key] = item
        return True

    def take_batch(self, now_ms: int) -> list[AlterPartitionItem] | None:
        """Every due, wanted item, marked in flight; None when a request is already in flight
        or nothing is due."""
        if self.in_flight is not None:
            return None
        for key, item in list(self.unsent.items()):
            if not item.still_wanted():
                del self.unsent[key]
        batch = [item for item in self.unsent.values() if item.not_before_ms <= now_ms]
        if not batch:
            return None
        self.in_flight = batch
        return batch

    def next_due_ms(self) -> int | None:
        """When the earliest queued item may go (None: nothing queued)."""
        if not self.unsent:
            return None
        return min(item.not_before_ms for item in self.unsent.values())

    def on_answer(
        self, answers: dict[TopicPartition, PartitionAnswer]
    ) -> list[tuple[AlterPartitionItem, PartitionAnswer]]:
        """The per-partition answers of the in-flight request; returns (item, answer) to
        deliver. Items the answer leaves out stay queued."""
        batch, self.in_flight = self.in_flight or [], None
        delivered = []
        for item in batch:
            answer = answers.get(item.key)
            if answer is None:
                log.warning("AlterPartition answer left out %s-%d; sending again", *item.key)
                continue
            if self.unsent.get(item.key) is item:
                del self.unsent[item.key]
            delivered.append((item, answer))
        return delivered

    def on_failure(self, now_ms: int, backoff_ms: int = RETRY_BACKOFF_MS) -> None:
        """No usable answer: everything in flight goes again after the back-off."""
        batch, self.in_flight = self.in_flight or [], None
        for item in batch:
            item.not_before_ms = max(item.not_before_ms, now_ms + backoff_ms)


def build_request(
    broker_id: int, broker_epoch: int, batch: list[AlterPartitionItem]
) -> m.AlterPartitionRequest:
    R = m.AlterPartitionRequest
    topics: dict[uuid.UUID, Any] = {}
    for item in batch:
        topic = topics.get(item.topic_id)
        if topic is None:
            topic = topics[item.topic_id] = R.TopicData(topic_id=item.topic_id)
        topic.partitions.append(
            R.PartitionData(
                partition_index=item.key[1],
                leader_epoch=item.leader_epoch,
                new_isr_with_epochs=[
                    R.BrokerState(broker_id=b, broker_epoch=e) for b, e in item.isr_with_epochs
                ],
                leader_recovery_state=0,
                partition_epoch=item.partition_epoch,
            )
        )
    return R(broker_id=broker_id, broker_epoch=broker_epoch, topics=list(topics.values()))


def parse_answers(
    response: Any, batch: list[AlterPartitionItem]
) -> dict[TopicPartition, PartitionAnswer]:
    """Per-partition answers keyed by (topic name, partition), names taken from the batch."""
    names = {(item.topic_id, item.key[1]): item.key for item in batch}
    answers: dict[TopicPartition, PartitionAnswer] = {}
    for topic in response.topics:
        for p in topic.partitions:
            key = names.get((topic.topic_id, p.partition_index))
            if key is not None:
                answers[key] = PartitionAnswer(
                    ErrorCode.of(p.error_code),
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.isr),
                    p.partition_epoch,
                )
    return answers


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class AlterPartitionManager:
    """Sends queued ISR changes to the controller, one request at a time."""

    def __init__(
        self,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        metadata_cache: MetadataCache,
        listener: str = "PLAINTEXT",
        request_timeout_ms: int = 30000,
        faults: FaultInjector = NO_FAULTS,
        sasl: SaslLogin | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.sasl = sasl  # the inter-broker listener's login (SASL listeners)
        self.broker_epoch = broker_epoch
        self.ssl_context = ssl_context  # the inter-broker listener is TLS
        self.metadata_cache = metadata_cache
        self.listener = listener
        self.request_timeout_ms = request_timeout_ms
        self.faults = faults
        self.batcher = AlterPartitionBatcher()
        self.requests_sent = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: BrokerConnection | None = None
        self._connection_target: tuple[int, str, int] | None = None

    def submit(self, item: AlterPartitionItem, delay_ms: int = 0) -> bool:
        """Queue an ISR change (see `AlterPartitionBatcher.submit`), to go no sooner than
        `delay_ms` from now, and wake the sender."""
        item.not_before_ms = _now_ms() + delay_ms if delay_ms > 0 else 0
        if not self.batcher.submit(item):
            return False
        self._wake.set()
        return True

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"alter-partition-{self.broker_id}"
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._close()

    async def _run(self) -> None:
        while True:
            batch = self.batcher.take_batch(_now_ms())
            if batch is None:
                await self._sleep_until_due()
                continue
            try:
                answers = await self._send(batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure means: try again shortly
                log.info("AlterPartition to the controller failed (%s); retrying", exc)
                self.batcher.on_failure(_now_ms())
                await self._close()
                continue
            if answers is None:
                self.batcher.on_failure(_now_ms())
                continue
            for item, answer in self.batcher.on_answer(answers):
                try:
                    item.on_answer(answer)
                except Exception:
                    log.exception("handling the AlterPartition answer for %s-%d", *item.key)

    async def _sleep_until_due(self) -> None:
        due = self.batcher.next_due_ms()
        self._wake.clear()
        timeout = None if due is None else max(0.0, (due - _now_ms()) / 1000)
        if timeout == 0.0:
            await asyncio.sleep(0.001)
            return
        with contextlib.suppress(TimeoutError):
            await wait_for(self._wake.wait(), timeout)

    async def _send(
        self, batch: list[AlterPartitionItem]
    ) -> dict[TopicPartition, PartitionAnswer] | None:
        """One AlterPartition; the per-partition answers, or None to retry everything."""
        controller_id = self.metadata_cache.controller_id
        broker = self.metadata_cache.broker(controller_id) if controller_id >= 0 else None
        endpoint = broker.endpoint_for(self.listener) if broker is not None else None
        if endpoint is None:
            log.info("no controller known (controller id %d); AlterPartition waits", controller_id)
            return None
        request = build_request(self.broker_id, self.broker_epoch(), batch)
        if not await self.faults.before_send(ApiKey.ALTER_PARTITION, self.broker_id, controller_id):
            log.info("AlterPartition to controller %d dropped by a fault rule", controller_id)
            return None
        connection = await self._connect(controller_id, endpoint.host, endpoint.port)
        self.requests_sent += 1
        response = await connection.send(
            request, api_key=ApiKey.ALTER_PARTITION, version=ALTER_PARTITION_VERSION
        )
        error = ErrorCode.of(response.error_code)
        if error is not ErrorCode.NONE:
            log.info("AlterPartition answered %s by controller %d", error.name, controller_id)
            if error is ErrorCode.NOT_CONTROLLER:
                await self._close()
            return None
        return parse_answers(response, batch)

    async def _connect(self, controller_id: int, host: str, port: int) -> BrokerConnection:
        target = (controller_id, host, port)
        connection = self._connection
        if connection is not None and connection.connected and self._connection_target == target:
            return connection
        await self._close()
        connection = BrokerConnection(
            host,
            port,
            node_id=controller_id,
            client_id=f"broker-{self.broker_id}-alter-partition",
            request_timeout_ms=self.request_timeout_ms,
            sasl=self.sasl,
            ssl_context=self.ssl_context,
        )
        try:
            await wait_for(connection.connect(), self.request_timeout_ms / 1000)
        except (ConnectionFailedError, IncompatibleBrokerError, ClientTimeout, TimeoutError):
            await connection.close()
            raise
        self._connection, self._connection_target = connection, target
        return connection

    async def _close(self) -> None:
        connection, self._connection = self._connection, None
        self._connection_target = None
        if connection is not None:
            await connection.close()
