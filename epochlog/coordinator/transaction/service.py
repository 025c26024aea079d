"""The transaction APIs on the wire, translated to and from the shard's plain values.

InitProducerId with a transactional id (22), AddPartitionsToTxn (24: v0-3 one transaction, v4
several, each possibly verify-only, KIP-890), AddOffsetsToTxn (25), EndTxn (26),
DescribeTransactions (65) and ListTransactions (66). A request whose id this broker does not
coordinate gets NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while loading), and the client
looks the coordinator up again.

As Kafka's KafkaApis, PRODUCER_FENCED (KIP-588) is answered as INVALID_PRODUCER_EPOCH to the
versions before it existed: InitProducerId v0-3, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
v0-1.
"""

from __future__ import annotations

from typing import Any

from epochlog.coordinator.transaction.operations import (
    AddOffsets,
    AddPartitions,
    AddPartitionsReply,
    EndTxn,
    ErrorReply,
    InitProducerId,
    InitProducerIdReply,
)
from epochlog.coordinator.transaction.runtime import (
    CoordinatorError,
    TransactionCoordinatorRuntime,
)
from epochlog.coordinator.transaction.state import TxnState
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey
from epochlog.protocol.errors import ErrorCode

# The first version of each API that knows PRODUCER_FENCED.
_PRODUCER_FENCED_SINCE = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
}


def _for_version(api_key: int, version: int, error: ErrorCode) -> int:
    if error is ErrorCode.PRODUCER_FENCED and version < _PRODUCER_FENCED_SINCE.get(api_key, 0):
        return int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return int(error)


class TransactionService:
    api_keys = frozenset(
        {
            ApiKey.INIT_PRODUCER_ID,
            ApiKey.ADD_PARTITIONS_TO_TXN,
            ApiKey.ADD_OFFSETS_TO_TXN,
            ApiKey.END_TXN,
            ApiKey.DESCRIBE_TRANSACTIONS,
            ApiKey.LIST_TRANSACTIONS,
        }
    )

    def __init__(self, runtime: TransactionCoordinatorRuntime) -> None:
        self.runtime = runtime

    async def handle(self, api_key: int, version: int, body: Any) -> Any:
        if api_key == ApiKey.INIT_PRODUCER_ID:
            return await self._init_producer_id(version, body)
        if api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
            return await self._add_partitions(version, body)
        if api_key == ApiKey.ADD_OFFSETS_TO_TXN:
            return await self._add_offsets(version, body)
        if api_key == ApiKey.END_TXN:
            return await self._end_txn(version, body)
        if api_key == ApiKey.DESCRIBE_TRANSACTIONS:
            return self._describe(body)
        if api_key == ApiKey.LIST_TRANSACTIONS:
            return self._list(version, body)
        raise ValueError(f"transaction coordinator: API key {api_key} is not a transaction API")

    async def _init_producer_id(self, version: int, body: Any) -> Any:
        request = InitProducerId(
            transactional_id=body.transactional_id or "",
            timeout_ms=body.transaction_timeout_ms,
            expected_producer_id=body.producer_id if version >= 3 else -1,
            expected_producer_epoch=body.producer_epoch if version >= 3 else -1,
        )
        try:
            reply = await self.runtime.init_producer_id(request)
        except CoordinatorError as exc:
            reply = InitProducerIdReply(exc.error)
        return m.InitProducerIdResponse(
            error_code=_for_version(ApiKey.INIT_PRODUCER_ID, version, reply.error),
            producer_id=reply.producer_id,
            producer_epoch=reply.producer_epoch,
        )

    async def _one_add(self, version: int, request: AddPartitions) -> dict[tuple[str, int], int]:
        try:
            reply: AddPartitionsReply = await self.runtime.call(
                request.transactional_id,
                lambda shard, handle, now: shard.add_partitions(request, handle, now),
                after_completion=not request.verify_only,
            )
            errors = reply.errors
        except CoordinatorError as exc:
            errors = dict.fromkeys(request.partitions, exc.error)
        return {
            tp: _for_version(ApiKey.ADD_PARTITIONS_TO_TXN, version, e) for tp, e in errors.items()
        }

    async def _add_partitions(self, version: int, body: Any) -> Any:
        R = m.AddPartitionsToTxnResponse
        if version <= 3:
            request = AddPartitions(
                transactional_id=body.v3_and_below_transactional_id,
                producer_id=body.v3_and_below_producer_id,
                producer_epoch=body.v3_and_below_producer_epoch,
                partitions=_partitions(body.v3_and_below_topics),
            )
            errors = await self._one_add(version, request)
            return R(results_by_topic_v3_and_below=_topic_results(errors))
        results = []
        for txn in body.transactions:
            request = AddPartitions(
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                partitions=_partitions(txn.topics),
                verify_only=txn.verify_only,
            )
            errors = await self._one_add(version, request)
            results.append(
                R.AddPartitionsToTxnResult(
                    transactional_id=txn.transactional_id, topic_results=_topic_results(errors)
                )
            )
        return R(error_code=0, results_by_transaction=results)

    async def _add_offsets(self, version: int, body: Any) -> Any:
        request = AddOffsets(
            body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
        )
        error = await self._error_call(
            request.transactional_id,
            lambda shard, handle, now: shard.add_offsets(request, handle, now),
            after_completion=True,
        )
        return m.AddOffsetsToTxnResponse(
            error_code=_for_version(ApiKey.ADD_OFFSETS_TO_TXN, version, error)
        )

    async def _end_txn(self, version: int, body: Any) -> Any:
        request = EndTxn(
            body.transactional_id, body.producer_id, body.producer_epoch, body.committed
        )
        error = await self._error_call(
            request.transactional_id,
            lambda shard, handle, now: shard.end_txn(request, handle, now),
        )
        return m.EndTxnResponse(error_code=_for_version(ApiKey.END_TXN, version, error))

    async def _error_call(
        self, transactional_id: str, operation: Any, after_completion: bool = False
    ) -> ErrorCode:
        try:
            reply: ErrorReply = await self.runtime.call(
                transactional_id, operation, after_completion
            )
        except CoordinatorError as exc:
            return exc.error
        return reply.error

    def _describe(self, body: Any) -> Any:
        R = m.DescribeTransactionsResponse
        states = []
        for transactional_id in body.transactional_ids:
            try:
                described = self.runtime.read(transactional_id).describe([transactional_id])[0]
            except CoordinatorError as exc:
                states.append(
                    R.TransactionState(
                        error_code=int(exc.error),
                        transactional_id=transactional_id,
                        transaction_state="",
                        transaction_timeout_ms=0,
                        transaction_start_time_ms=-1,
                        producer_id=-1,
                        producer_epoch=-1,
                        topics=[],
                    )
                )
                continue
            states.append(
                R.TransactionState(
                    error_code=int(described.error),
                    transactional_id=transactional_id,
                    transaction_state=described.state,
                    transaction_timeout_ms=described.timeout_ms,
                    transaction_start_time_ms=described.start_ms,
                    producer_id=described.producer_id,
                    producer_epoch=described.producer_epoch,
                    topics=[
                        R.TopicData(topic=topic, partitions=list(partitions))
                        for topic, partitions in described.topics.items()
                    ],
                )
            )
        return R(transaction_states=states)

    def _list(self, version: int, body: Any) -> Any:
        R = m.ListTransactionsResponse
        shards, loading = self.runtime.shards()
        duration = body.duration_filter if version >= 1 else -1
        now = self.runtime.clock_ms()
        unknown: tuple[str, ...] = ()
        listed = []
        for shard in shards:
            listing = shard.list_transactions(
                body.state_filters, body.producer_id_filters, duration, now
            )
            unknown = listing.unknown_state_filters
            listed.extend(listing.transactions)
        if not shards:
            unknown = tuple(n for n in body.state_filters if TxnState.from_name(n) is None)
        return R(
            error_code=int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE),
            unknown_state_filters=list(unknown),
            transaction_states=[
                R.TransactionState(
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    transaction_state=t.state,
                )
                for t in listed
            ],
        )


def _partitions(topics: Any) -> tuple[tuple[str, int], ...]:
    return tuple((t.name, p) for t in topics for p in t.partitions)


def _topic_results(errors: dict[tuple[str, int], int]) -> list[Any]:
    R = m.AddPartitionsToTxnResponse
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), error in sorted(errors.items()):
        by_topic.setdefault(topic, []).append(
            R.AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=error)
        )
    return [
        R.AddPartitionsToTxnTopicResult(name=name, results_by_partition=results)
        for name, results in by_topic.items()
    ]
