"""The wire side of the exactly-once sink (`exactly_once` has the decisions and the story).

- `TransactionalSender` (executor, cached per Python worker): a `BatchSender` whose producer id
  and epoch come from InitProducerId with the task's transactional id, whose Produce requests
  carry that id and whose batches are transactional. It adds each partition to the transaction
  (AddPartitionsToTxn) before the first batch goes there, reads the group's committed batch
  (OffsetFetch, require_stable) and commits the batch marker inside the transaction
  (AddOffsetsToTxn, then TxnOffsetCommit to the group coordinator). A fenced producer is fatal
  to the task, never silently replaced by a new producer id.
- `end_transactions` (driver): EndTxn for each task's (id, producer id, epoch), sent to the id's
  transaction coordinator (FindCoordinator key type 1), all in parallel.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.network import NetworkClient
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode
from epochlog.spark.clients import _cached, _drop, producer_settings
from epochlog.spark.exactly_once import (
    TaskTransaction,
    TransactionFencedError,
    TxnAction,
    already_committed,
    committed_batch,
    marker_offsets,
    txn_action,
)
from epochlog.spark.options import SinkOptions
from epochlog.spark.raw_clients import BatchSender, _LoopThread

CLIENT_ADD_PARTITIONS_MAX_VERSION = 3  # v4+ is the brokers' batched (KIP-890) form
GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1
MAX_PENDING_BATCHES = 64
TXN_CALL_TIMEOUT_S = 60.0  # a failure bound for one coordinator call with its retries


async def _find_coordinator(net: NetworkClient, key: str, key_type: int, timeout_ms: int) -> int:
    """The node id of `key`'s group (0) or transaction (1) coordinator."""
    conn = await net.least_loaded_connection(timeout_ms)
    version = conn.version_for(ApiKey.FIND_COORDINATOR)
    if version >= 4:
        request = m.FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
    else:
        request = m.FindCoordinatorRequest(key=key, key_type=key_type)
    response = await conn.send(request, api_key=ApiKey.FIND_COORDINATOR, version=version)
    if version >= 4:
        (answer,) = [c for c in response.coordinators if c.key == key]
        error, node = ErrorCode.of(answer.error_code), answer.node_id
    else:
        error, node = ErrorCode.of(response.error_code), response.node_id
    if error is not ErrorCode.NONE:
        raise KafkaError(error, f"FindCoordinator(key_type={key_type}, key={key!r})")
    return node


async def _coordinator_call(
    net: NetworkClient,
    key: str,
    key_type: int,
    what: str,
    call: Any,
    backoff_s: float,
    timeout_ms: int,
) -> Any:
    """`await call(conn)` on `key`'s coordinator until its error code means done; `call`
    returns (error code, result). Retries as `txn_action` says, within TXN_CALL_TIMEOUT_S."""
    deadline = time.monotonic() + TXN_CALL_TIMEOUT_S
    node: int | None = None
    last: ErrorCode | str = "no attempt"
    while time.monotonic() < deadline:
        try:
            if node is None:
                node = await _find_coordinator(net, key, key_type, timeout_ms)
            conn = await net.ready(node)
            error, result = await call(conn)
        except KafkaError as exc:
            error, result = exc.code, None
        except ClientError as exc:
            if not exc.retriable:
                raise
            error, result = ErrorCode.NETWORK_EXCEPTION, None
            node = None
        action = txn_action(error)
        if action is TxnAction.DONE:
            return result
        if action is TxnAction.FENCED:
            raise TransactionFencedError(
                f"{what} for transactional id {key!r}: {error.name} (a newer attempt of this "
                "task fenced it; the batch must run again)"
            )
        if action is TxnAction.FAIL:
            raise KafkaError(error, f"{what} for {key!r}")
        if action is TxnAction.FIND_COORDINATOR:
            node = None
        last = error
        await asyncio.sleep(backoff_s)
    raise TimeoutError(f"{what} for {key!r}: still {last} after {TXN_CALL_TIMEOUT_S:.0f} s")


class TransactionalSender(BatchSender):
    """See the module docstring. One transaction at a time (`begin` ... `add_marker`)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        super().__init__(settings)
        self.acks = -1  # a transaction needs acks=all
        self.idempotent = True
        self._added: set[tuple[str, int]] = set()
        self._fenced: str | None = None

    # ---- BatchSender's producer id: fixed per transaction, never replaced

    async def _init_producer_id(self) -> None:
        raise TransactionFencedError(
            f"transactional id {self.transactional_id!r}: {self._fenced or 'no producer id'}"
        )

    def _reset_producer_id(self, generation: int) -> None:
        if generation == self._generation:
            self._fenced = "the broker refused the producer (fenced or expired)"
            self._producer_id = -1

    # ---- the transaction

    def _retry(self, key: str, key_type: int, what: str, call: Any) -> Any:
        c = self.config
        return self._thread.run(
            _coordinator_call(
                self._net,
                key,
                key_type,
                what,
                call,
                c["retry.backoff.ms"] / 1000,
                c["request.timeout.ms"],
            )
        )

    def begin(self, transactional_id: str, timeout_ms: int) -> tuple[int, int]:
        """InitProducerId for `transactional_id`: (producer id, epoch), fencing older ones."""

        async def init(conn: Any) -> tuple[ErrorCode, Any]:
            response = await conn.send(
                m.InitProducerIdRequest(
                    transactional_id=transactional_id, transaction_timeout_ms=timeout_ms
                ),
                api_key=ApiKey.INIT_PRODUCER_ID,
            )
            return ErrorCode.of(response.error_code), response

        response = self._retry(transactional_id, TRANSACTION_KEY_TYPE, "InitProducerId", init)
        self.transactional_id = transactional_id
        self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
        self._generation += 1
        self._added = set()
        self._fenced = None
        return self._producer_id, self._producer_epoch

    def committed_batch(self, group: str, topic: str | None) -> int | None:
        """The last batch the group's committed offsets record (OffsetFetch of `topic`'s
        partition 0 where the sink has one topic, else of all the group's offsets; stable where
        the broker has v7: an offset still in an open transaction is waited for)."""

        async def fetch(conn: Any) -> tuple[ErrorCode, Any]:
            version = conn.version_for(ApiKey.OFFSET_FETCH, 7)
            topics = None  # all: the marker's topic is the first one a task wrote to
            if topic is not None:
                topics = [
                    m.OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])
                ]
            request = m.OffsetFetchRequest(group_id=group, topics=topics)
            if version >= 7:
                request.require_stable = True
            response = await conn.send(request, api_key=ApiKey.OFFSET_FETCH, version=version)
            error = ErrorCode.of(response.error_code) if version >= 2 else ErrorCode.NONE
            found: dict[tuple[str, int], tuple[int, str | None]] = {}
            for t in response.topics or []:
                for p in t.partitions:
                    code = ErrorCode.of(p.error_code)
                    if code is not ErrorCode.NONE:
                        error = code
                    elif p.committed_offset >= 0:
                        found[(t.name, p.partition_index)] = (p.committed_offset, p.metadata)
            return error, found

        return committed_batch(self._retry(group, GROUP_KEY_TYPE, "OffsetFetch", fetch))

    def add_partitions(self, tps: list[tuple[str, int]]) -> None:
        """AddPartitionsToTxn for those of `tps` not yet in the transaction."""
        new = sorted(set(tps) - self._added)
        if not new:
            return
        txn_id = self.transactional_id
        assert txn_id is not None
        by_topic: dict[str, list[int]] = {}
        for topic, partition in new:
            by_topic.setdefault(topic, []).append(partition)

        async def add(conn: Any) -> tuple[ErrorCode, None]:
            version = conn.version_for(
                ApiKey.ADD_PARTITIONS_TO_TXN, CLIENT_ADD_PARTITIONS_MAX_VERSION
            )
            request = m.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=txn_id,
                v3_and_below_producer_id=self._producer_id,
                v3_and_below_producer_epoch=self._producer_epoch,
                v3_and_below_topics=[
                    m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()
                ],
            )
            response = await conn.send(
                request, api_key=ApiKey.ADD_PARTITIONS_TO_TXN, version=version
            )
            errors = [
                ErrorCode.of(p.partition_error_code)
                for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition
            ]
            # OPERATION_NOT_ATTEMPTED marks the partitions held back by another's error
            real = [
                e for e in errors if e not in (ErrorCode.NONE, ErrorCode.OPERATION_NOT_ATTEMPTED)
            ]
            return (real[0] if real else ErrorCode.NONE), None

        self._retry(txn_id, TRANSACTION_KEY_TYPE, "AddPartitionsToTxn", add)
        self._added.update(new)

    def add_marker(self, group: str, offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
        """AddOffsetsToTxn for `group`, then TxnOffsetCommit of `offsets` in the transaction."""
        txn_id = self.transactional_id
        assert txn_id is not None
        pid, epoch = self._producer_id, self._producer_epoch

        async def add(conn: Any) -> tuple[ErrorCode, None]:
            request = m.AddOffsetsToTxnRequest(
                transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group
            )
            response = await conn.send(request, api_key=ApiKey.ADD_OFFSETS_TO_TXN)
            return ErrorCode.of(response.error_code), None

        async def commit(conn: Any) -> tuple[ErrorCode, None]:
            by_topic: dict[str, list[Any]] = {}
            for (topic, partition), (offset, metadata) in offsets.items():
                by_topic.setdefault(topic, []).append(
                    m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                        partition_index=partition,
                        committed_offset=offset,
                        committed_metadata=metadata,
                    )
                )
            request = m.TxnOffsetCommitRequest(
                transactional_id=txn_id,
                group_id=group,
                producer_id=pid,
                producer_epoch=epoch,
                topics=[
                    m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()
                ],
            )
            response = await conn.send(request, api_key=ApiKey.TXN_OFFSET_COMMIT)
            errors = [
                ErrorCode.of(p.error_code)
                for t in response.topics
                for p in t.partitions
                if p.error_code != ErrorCode.NONE
            ]
            return (errors[0] if errors else ErrorCode.NONE), None

        self._retry(txn_id, TRANSACTION_KEY_TYPE, "AddOffsetsToTxn", add)
        self._retry(group, GROUP_KEY_TYPE, "TxnOffsetCommit", commit)


def transactional_sender(client: Mapping[str, Any]) -> TransactionalSender:
    settings = producer_settings(client)
    return _cached("txn-sender", settings, lambda: TransactionalSender(settings))


def write_in_transaction(
    options: SinkOptions,
    txn_id: str,
    batch_id: int,
    sink: str,
    batches: Iterator[pa.RecordBatch],
) -> TaskTransaction:
    """A task's whole part (`exactly_once`, step 2): its transaction, left open."""
    from epochlog.spark.arrow_records import encode_records
    from epochlog.spark.rows import route_batch
    from epochlog.spark.writer import record_timestamps

    sender = transactional_sender(options.client)
    try:
        pid, epoch = sender.begin(txn_id, options.transaction_timeout_ms)
        if already_committed(sender.committed_batch(txn_id, options.topic), batch_id):
            return TaskTransaction(txn_id, pid, epoch, batch_id, 0, already_committed=True)
        counts: dict[str, int] = {}
        sticky: dict[str, int] = {}

        def partition_count(topic: str) -> int:
            if topic not in counts:
                counts[topic] = sender.partition_count(topic)
            return counts[topic]

        written = 0
        first_topic: str | None = None
        pending: deque = deque()
        for batch in batches:
            if batch.num_rows == 0:
                continue
            now = int(time.time() * 1000)
            stamps = record_timestamps(batch, now)
            rows: list = []
            routed = route_batch(
                batch, options.topic, partition_count, sticky, sender.max_request_size, rows
            )
            sender.add_partitions([tp for tp, *_ in routed])
            for (tp, keys, values, headers), selected in zip(routed, rows, strict=True):
                first_topic = first_topic or options.topic or tp[0]
                encoded = encode_records(
                    keys,
                    values,
                    now if stamps is None else stamps[selected],
                    headers=headers,
                    max_batch_bytes=sender.max_batch_bytes,
                    compression=sender.compression,
                )
                pending.extend(sender.send(tp, encoded))
            written += batch.num_rows
            while len(pending) > MAX_PENDING_BATCHES:
                pending.popleft().result()
        while pending:
            pending.popleft().result()
        if first_topic is not None:
            sender.add_marker(txn_id, marker_offsets(first_topic, batch_id, sink))
        return TaskTransaction(txn_id, pid, epoch, batch_id, written)
    except BaseException:
        _drop("txn-sender", producer_settings(options.client))  # it may hold this task's batches
        raise


class _TxnEnder:
    """The driver's client for EndTxn: a NetworkClient on its own loop thread."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        from epochlog.client.config import Role, load_config

        self.config = load_config(Role.PRODUCER, settings)
        self._thread = _LoopThread("epochlog-spark-txn-ender")
        try:
            self._net: NetworkClient = self._thread.run(self._make())
        except BaseException:
            self._thread.stop()
            raise

    async def _make(self) -> NetworkClient:
        net = NetworkClient(self.config, allow_auto_topic_creation=False)
        await net.start()
        return net

    def end_all(self, transactions: list[TaskTransaction], commit: bool) -> None:
        self._thread.run(self._end_all(transactions, commit))

    async def _end_all(self, transactions: list[TaskTransaction], commit: bool) -> None:
        results = await asyncio.gather(
            *(self._end(t, commit) for t in transactions), return_exceptions=True
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures and commit:
            raise failures[0]

    async def _end(self, txn: TaskTransaction, commit: bool) -> None:
        async def end(conn: Any) -> tuple[ErrorCode, None]:
            request = m.EndTxnRequest(
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                committed=commit,
            )
            response = await conn.send(request, api_key=ApiKey.END_TXN)
            return ErrorCode.of(response.error_code), None

        c = self.config
        await _coordinator_call(
            self._net,
            txn.transactional_id,
            TRANSACTION_KEY_TYPE,
            "EndTxn(commit)" if commit else "EndTxn(abort)",
            end,
            c["retry.backoff.ms"] / 1000,
            c["request.timeout.ms"],
        )

    def close(self) -> None:
        try:
            self._thread.run(self._net.close(), 30)
        finally:
            self._thread.stop()


def end_transactions(
    client: Mapping[str, Any], transactions: list[TaskTransaction], *, commit: bool
) -> None:
    """Commit (or abort) every task's transaction; a commit raises the first failure (a fenced
    transaction: `TransactionFencedError`), an abort is best effort."""
    if not transactions:
        return
    settings = producer_settings(client)
    ender = _cached("txn-ender", settings, lambda: _TxnEnder(settings))
    try:
        ender.end_all(transactions, commit)
    except (KafkaError, ClientError, TimeoutError):
        _drop("txn-ender", settings)
        raise
