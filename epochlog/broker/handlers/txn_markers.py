"""WriteTxnMarkers (v0-1): a transaction coordinator has partition leaders end transactions.

As Kafka's `KafkaApis.handleWriteTxnMarkersRequest`: for each marker (producer id and epoch,
COMMIT when TransactionResult is true, the coordinator epoch) and each named partition, the
leader appends the control batch (`Partition.append_marker_as_leader`) and the answer waits,
as an acks=all append, until the HW passes the marker. Per-partition errors: a partition this
broker does not lead NOT_LEADER_OR_FOLLOWER (or UNKNOWN_TOPIC_OR_PARTITION), an older producer
epoch INVALID_PRODUCER_EPOCH, an older coordinator epoch than the last marker's
TRANSACTION_COORDINATOR_FENCED; the coordinator retries the first kind and drops the others.

A marker written and replicated in a `__consumer_offsets` partition is reported to this broker's
group coordinator (`GroupCoordinatorGateway.transaction_completed`, Kafka's
`onTransactionCompleted`), so the producer's transactional offsets there become the group's
committed offsets (COMMIT) or are dropped (ABORT) before the coordinator hears back.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from epochlog.broker.appends import DelayedProduce, ProducePartitionResult
from epochlog.broker.handlers.context import BrokerServices, ConnectionInfo
from epochlog.broker.handlers.groups import OFFSETS_TOPIC
from epochlog.broker.partition import PartitionError
from epochlog.broker.replica_manager import ReplicaManager, TopicPartition, now_ms
from epochlog.protocol import messages as m
from epochlog.protocol.api import Request
from epochlog.protocol.control_records import ControlType, EndTxnMarker
from epochlog.protocol.errors import ErrorCode
from epochlog.storage import StorageError

log = logging.getLogger(__name__)

R = m.WriteTxnMarkersResponse
# Kafka appends markers with request.timeout.ms (default 30 s) as the acks=all timeout.
MARKER_APPEND_TIMEOUT_MS = 30_000


def append_marker(
    rm: ReplicaManager, key: TopicPartition, producer_id: int, producer_epoch: int,
    marker: EndTxnMarker, now: int,
) -> ProducePartitionResult:
    """Append one partition's marker as leader; errors become the partition's result."""
    try:
        partition = rm.partition_or_error(*key)
        result = partition.append_marker_as_leader(producer_id, producer_epoch, marker, now)
    except (PartitionError, StorageError) as exc:
        log.info("WriteTxnMarkers to %s-%d: %s", key[0], key[1], exc)
        return ProducePartitionResult(exc.error_code, str(exc))
    except OSError as exc:
        log.error("WriteTxnMarkers to %s-%d: cannot write the log: %s", key[0], key[1], exc)
        rm.on_io_error(key, exc)
        return ProducePartitionResult(ErrorCode.KAFKA_STORAGE_ERROR, f"log write failed: {exc}")
    rm.on_leader_append(key, result.high_watermark_moved)
    return ProducePartitionResult(base_offset=result.first_offset, last_offset=result.last_offset)


async def _append_and_wait(
    rm: ReplicaManager, results: dict[TopicPartition, ProducePartitionResult]
) -> None:
    required = {
        key: result.last_offset + 1
        for key, result in results.items()
        if result.error is ErrorCode.NONE
    }
    if not required:
        return
    future: asyncio.Future[dict[TopicPartition, ProducePartitionResult]] = (
        asyncio.get_running_loop().create_future()
    )
    op = DelayedProduce(MARKER_APPEND_TIMEOUT_MS, rm, required, results, future)
    rm.produce_purgatory.try_complete_else_watch(op, list(required))
    await future


def _report_to_group_coordinator(
    services: BrokerServices,
    producer_id: int,
    end: EndTxnMarker,
    results: dict[TopicPartition, ProducePartitionResult],
) -> None:
    coordinator = services.group_coordinator
    if coordinator is None:
        return
    for (topic, index), result in results.items():
        if topic == OFFSETS_TOPIC and result.error is ErrorCode.NONE:
            coordinator.transaction_completed(index, producer_id, end.is_commit)


async def handle_write_txn_markers(
    services: BrokerServices, request: Request, connection: ConnectionInfo
) -> Any:
    return await write_txn_markers(services, request.body)


async def write_txn_markers(services: BrokerServices, body: Any) -> Any:
    """Write a WriteTxnMarkersRequest's markers here and answer as the handler does; also
    called directly by this broker's transaction coordinator for the partitions it leads."""
    rm = services.replica_manager
    now = now_ms()
    appended: list[tuple[Any, EndTxnMarker, dict[TopicPartition, ProducePartitionResult]]] = []
    for marker in body.markers:
        control = ControlType.COMMIT if marker.transaction_result else ControlType.ABORT
        end = EndTxnMarker(control, marker.coordinator_epoch)
        results: dict[TopicPartition, ProducePartitionResult] = {}
        for topic in marker.topics:
            for index in topic.partition_indexes:
                results[(topic.name, index)] = append_marker(
                    rm, (topic.name, index), marker.producer_id, marker.producer_epoch, end, now
                )
        appended.append((marker, end, results))

    async def replicated(
        marker: Any, end: EndTxnMarker, results: dict[TopicPartition, ProducePartitionResult]
    ) -> None:
        await _append_and_wait(rm, results)
        _report_to_group_coordinator(services, marker.producer_id, end, results)

    # Every marker appended first, then all replicated together: a request carrying the
    # markers of many transactions (the coordinator batches them per broker) waits for one
    # replication round, not one per marker.
    await asyncio.gather(*(replicated(*entry) for entry in appended))
    answers = [
        R.WritableTxnMarkerResult(
            producer_id=marker.producer_id,
            topics=[
                R.WritableTxnMarkerTopicResult(
                    name=topic.name,
                    partitions=[
                        R.WritableTxnMarkerPartitionResult(
                            partition_index=index,
                            error_code=results[(topic.name, index)].error,
                        )
                        for index in topic.partition_indexes
                    ],
                )
                for topic in marker.topics
            ],
        )
        for marker, _end, results in appended
    ]
    return R(markers=answers)
