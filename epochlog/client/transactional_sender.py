"""The transactional producer's I/O: the requests `TransactionManager` decides on, sent.

How it works. The producer's sender loop calls `poll(now)` on every pass. It fails the batches
still queued once the transaction can no longer commit (Kafka's abortUndrainedBatches), then,
unless a transactional request is in flight or backing off, takes the manager's next call and
sends it in a task of its own, so produce requests keep flowing meanwhile:

- InitProducerId (with the transactional id and `transaction.timeout.ms`; with the current
  producer id and epoch for a KIP-360 bump), AddPartitionsToTxn (v0-3, the client's form),
  AddOffsetsToTxn and EndTxn go to the transaction coordinator, found by FindCoordinator with
  key type 1 over a `CoordinatorConnection`;
- TxnOffsetCommit goes to the group's coordinator (key type 0), v3+ carrying the member id,
  generation and group instance id, so a zombie member of an older generation is refused.

The answer, or the failure to get one, goes back to the manager, whose `Next` says whether to
go on, retry after `retry.backoff.ms`, or forget the coordinator first.

`TransactionCalls` holds the producer's transaction calls (`init_transactions`, ...): each asks
the manager for an operation and waits for it (up to `max.block.ms` unless given a timeout; a
timed-out call made again waits for the same operation, as in Kafka).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from epochlog.aio import wait_for
from epochlog.client.accumulator import RecordAccumulator
from epochlog.client.config import ClientConfig
from epochlog.client.connection import BrokerConnection
from epochlog.client.coordinator_connection import CoordinatorConnection
from epochlog.client.errors import ClientClosedError, ClientError, IncompatibleBrokerError
from epochlog.client.group_admin_protocol import GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE
from epochlog.client.group_offsets import ConsumerGroupMetadata, OffsetAndMetadata
from epochlog.client.metadata import TopicPartition
from epochlog.client.network import NetworkClient
from epochlog.client.transaction_manager import (
    AddOffsetsCall,
    AddPartitionsCall,
    EndTxnCall,
    InitProducerIdCall,
    Next,
    Target,
    TransactionManager,
    TransactionStateError,
    TxnCall,
    TxnOffsetCommitCall,
    TxnOperation,
    TxnResult,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28
CLIENT_MAX_ADD_PARTITIONS_VERSION = 3  # v4+ is the brokers' batched form (KIP-890)


class TransactionalSender:
    """Sends the manager's calls; see the module docstring."""

    def __init__(
        self,
        manager: TransactionManager,
        config: ClientConfig,
        net: NetworkClient,
        fail_queued: Callable[[Exception], None],
        wakeup: Callable[[], None],
    ) -> None:
        self.manager = manager
        self._config = config
        self._net = net
        self._fail_queued = fail_queued
        self._wakeup = wakeup
        self._backoff_ms: float = config["retry.backoff.ms"]
        self._coordinator = CoordinatorConnection(
            manager.transactional_id,
            config,
            net,
            on_found=_nothing,
            on_lost=_nothing,
            key_type=TRANSACTION_KEY_TYPE,
        )
        self._group_coordinators: dict[str, CoordinatorConnection] = {}
        self._task: asyncio.Task[None] | None = None
        self._retry_at_ms = 0.0
        self.last_failure: str | None = None  # why the last call must be retried, for errors

    def poll(self, now: float, batches_pending: bool) -> float | None:
        """One look at the transaction; returns how long the sender may sleep (ms) for it,
        None if it has nothing to wait for."""
        manager = self.manager
        if manager.fails_queued_batches:
            error = manager.last_error or ClientError("the transaction is being aborted")
            self._fail_queued(error)
        if self._task is not None and not self._task.done():
            return None
        if now < self._retry_at_ms:
            return self._retry_at_ms - now
        call = manager.next_call(batches_pending)
        if call is None:
            return None
        self._task = asyncio.get_running_loop().create_task(
            self._send(call), name=f"transactional {type(call).__name__}"
        )
        return None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._coordinator.close()
        for coordinator in self._group_coordinators.values():
            await coordinator.close()

    def _coordinator_for(self, call: TxnCall) -> CoordinatorConnection:
        if call.target is Target.TRANSACTION_COORDINATOR:
            return self._coordinator
        assert isinstance(call, TxnOffsetCommitCall)
        group_id = call.group.group_id
        coordinator = self._group_coordinators.get(group_id)
        if coordinator is None:
            coordinator = self._group_coordinators[group_id] = CoordinatorConnection(
                group_id, self._config, self._net, _nothing, _nothing, GROUP_KEY_TYPE
            )
        return coordinator

    async def _send(self, call: TxnCall) -> None:
        coordinator = self._coordinator_for(call)
        try:
            conn = await coordinator.ready()
            result = await self._exchange(conn, call)
        except IncompatibleBrokerError as exc:
            result = TxnResult(ErrorCode.UNSUPPORTED_VERSION, transport_error=None)
            log.warning("%s: %s", type(call).__name__, exc)
        except ClientError as exc:
            log.debug("%s to the %s failed: %s", type(call).__name__, call.target.value, exc)
            refused = coordinator.find_error
            if refused is not None and not refused.retriable:
                # FindCoordinator's own answer (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ...)
                # decides, as in Kafka's FindCoordinatorHandler
                result = TxnResult(refused)
            else:
                result = TxnResult(transport_error=exc)
        step = self.manager.on_response(call, result)
        if step is not Next.CONTINUE:
            reason = result.transport_error or _errors(result)
            self.last_failure = f"{type(call).__name__} to the {call.target.value}: {reason}"
        if step is Next.REFIND_COORDINATOR:
            coordinator.lost(f"{type(call).__name__}: {result.error.name}")
        if step is not Next.CONTINUE:
            self._retry_at_ms = self._net.now_ms() + self._backoff_ms
        self._wakeup()

    async def _exchange(self, conn: BrokerConnection, call: TxnCall) -> TxnResult:
        manager = self.manager
        tid = manager.transactional_id
        pid, epoch = manager.producer_id, manager.producer_epoch
        if isinstance(call, InitProducerIdCall):
            response = await conn.send(
                m.InitProducerIdRequest(
                    transactional_id=tid,
                    transaction_timeout_ms=manager.transaction_timeout_ms,
                    producer_id=call.producer_id,
                    producer_epoch=call.producer_epoch,
                ),
                api_key=ApiKey.INIT_PRODUCER_ID,
            )
            return TxnResult(
                ErrorCode.of(response.error_code),
                producer_id=response.producer_id,
                producer_epoch=response.producer_epoch,
            )
        if isinstance(call, AddPartitionsCall):
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(call.partitions):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            R = m.AddPartitionsToTxnRequest
            version = conn.version_for(ADD_PARTITIONS_TO_TXN, CLIENT_MAX_ADD_PARTITIONS_VERSION)
            response = await conn.send(
                R(
                    v3_and_below_transactional_id=tid,
                    v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=[
                        R.AddPartitionsToTxnTopic(name=t, partitions=p)
                        for t, p in by_topic.items()
                    ],
                ),
                api_key=ADD_PARTITIONS_TO_TXN,
                version=version,
            )
            errors = {
                TopicPartition(t.name, r.partition_index): ErrorCode.of(r.partition_error_code)
                for t in response.results_by_topic_v3_and_below
                for r in t.results_by_partition
            }
            return TxnResult(partition_errors=errors)
        if isinstance(call, AddOffsetsCall):
            response = await conn.send(
                m.AddOffsetsToTxnRequest(
                    transactional_id=tid,
                    producer_id=pid,
                    producer_epoch=epoch,
                    group_id=call.group.group_id,
                ),
                api_key=ADD_OFFSETS_TO_TXN,
            )
            return TxnResult(ErrorCode.of(response.error_code))
        if isinstance(call, TxnOffsetCommitCall):
            return await self._txn_offset_commit(conn, call)
        assert isinstance(call, EndTxnCall)
        response = await conn.send(
            m.EndTxnRequest(
                transactional_id=tid,
                producer_id=pid,
                producer_epoch=epoch,
                committed=call.committed,
            ),
            api_key=END_TXN,
        )
        return TxnResult(ErrorCode.of(response.error_code))

    async def _txn_offset_commit(
        self, conn: BrokerConnection, call: TxnOffsetCommitCall
    ) -> TxnResult:
        R = m.TxnOffsetCommitRequest
        by_topic: dict[str, list[object]] = {}
        for tp, committed in sorted(call.offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                R.TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=committed.offset,
                    committed_leader_epoch=committed.leader_epoch,
                    committed_metadata=committed.metadata,
                )
            )
        group = call.group
        response = await conn.send(
            R(
                transactional_id=self.manager.transactional_id,
                group_id=group.group_id,
                producer_id=self.manager.producer_id,
                producer_epoch=self.manager.producer_epoch,
                generation_id=group.generation_id,
                member_id=group.member_id,
                group_instance_id=group.group_instance_id,
                topics=[
                    R.TxnOffsetCommitRequestTopic(name=t, partitions=p)
                    for t, p in by_topic.items()
                ],
            ),
            api_key=TXN_OFFSET_COMMIT,
        )
        errors = {
            TopicPartition(t.name, p.partition_index): ErrorCode.of(p.error_code)
            for t in response.topics
            for p in t.partitions
        }
        return TxnResult(partition_errors=errors)


class TransactionCalls:
    """The transaction calls of `AsyncProducer` (mixed into it), over the producer's
    `TransactionManager` and `TransactionalSender`."""

    _txn: TransactionManager | None
    _txn_sender: TransactionalSender | None
    _acc: RecordAccumulator
    _wakeup: asyncio.Event
    _max_block_ms: int
    _closing: bool

    if TYPE_CHECKING:

        async def start(self) -> None: ...

    def _transaction_manager(self, what: str) -> TransactionManager:
        if self._txn is None:
            raise TransactionStateError(f"{what} needs a transactional producer (transactional.id)")
        if self._closing:
            raise ClientClosedError("producer is closed")
        return self._txn

    async def _wait_for(self, operation: TxnOperation, timeout: float | None) -> None:
        """Wait for a transactional operation (None: max.block.ms); a timed-out call may be
        made again and waits for the same operation, as in Kafka."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        operation.add_done_callback(lambda _: done.done() or done.set_result(None))
        self._wakeup.set()
        limit = self._max_block_ms / 1000 if timeout is None else timeout
        try:
            await wait_for(asyncio.shield(done), limit)
        except TimeoutError:
            sender = self._txn_sender
            why = f" (last: {sender.last_failure})" if sender and sender.last_failure else ""
            raise TimeoutError(f"{operation.name} not done within {limit}s{why}") from None
        if operation.error is not None:
            raise operation.error

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Get the producer id and epoch of `transactional.id` from its coordinator, fencing
        older producers with the same id and finishing (aborting) their open transaction."""
        txn = self._transaction_manager("init_transactions")
        await self.start()
        await self._wait_for(txn.initialize(), timeout)

    def begin_transaction(self) -> None:
        self._transaction_manager("begin_transaction").begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's `offsets` (the next offset to read, per partition) as part
        of the transaction: they count only if it commits. `group_metadata` is the consumer's
        `group_metadata()`, so a member fenced by a rebalance cannot commit."""
        txn = self._transaction_manager("send_offsets_to_transaction")
        if not isinstance(group_metadata, ConsumerGroupMetadata):
            raise TypeError(
                "group_metadata must be a consumer's group_metadata(), "
                f"not {type(group_metadata).__name__}"
            )
        by_partition: dict[TopicPartition, OffsetAndMetadata] = {}
        for (topic, partition), value in offsets.items():
            committed = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            offset = committed.offset
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ValueError(f"offset for {topic}-{partition} must be an int >= 0: {offset!r}")
            by_partition[TopicPartition(topic, partition)] = committed
        await self._wait_for(txn.send_offsets(by_partition, group_metadata), timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush the transaction's records, then commit it (EndTxn). A failure leaves the
        producer needing `abort_transaction()` (or, if fatal, only `close()`)."""
        operation = self._transaction_manager("commit_transaction").commit()
        self._acc.begin_flush()
        try:
            await self._wait_for(operation, timeout)
        finally:
            self._acc.end_flush()

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records not yet sent, wait for those in flight, and abort (EndTxn); after
        a lost sequence the producer's epoch is bumped too (KIP-360)."""
        await self._wait_for(self._transaction_manager("abort_transaction").abort(), timeout)



def _errors(result: TxnResult) -> str:
    codes = {result.error, *result.partition_errors.values()} - {ErrorCode.NONE}
    return ", ".join(sorted(code.name for code in codes)) or "no answer"


def _nothing() -> None:
    pass
