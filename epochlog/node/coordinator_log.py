"""A coordinator's internal topic (`__consumer_offsets`, `__transaction_state`) seen through
the replica manager: what both coordinators' runtimes need of the partition layer.

- `append` writes one batch to a partition this broker leads and returns once it is committed
  (acks=all); a failure raises `CoordinatorError` with the coordinator's answer for it (each
  coordinator maps append errors its own way, as Kafka's GroupMetadataManager and
  TransactionStateManager do). A producer's transactional batch (the group coordinator's
  TxnOffsetCommit) is appended as Kafka's coordinator appends: base sequence 0, no sequence
  checks, an older epoch refused.
- `batches` reads a partition from its log start to its end, each batch with the offset the
  read stood at (records below it were read already, in an earlier chunk).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence

from epochlog.broker.appends import start_append_records
from epochlog.broker.broker import Broker
from epochlog.coordinator.common import CoordinatorError, EncodedRecord
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import RecordBatch, RecordBatchBuilder, decode_batches

READ_CHUNK_BYTES = 1 << 20
PRODUCE_VERSION = 9

TxnProducer = tuple[int, int]  # producer id, producer epoch of a transactional batch


class CoordinatorTopicLog:
    def __init__(
        self,
        broker: Broker,
        topic: str,
        timeout_ms: int,
        append_errors: Mapping[ErrorCode, ErrorCode],
    ) -> None:
        self.rm = broker.replica_manager
        self.topic = topic
        self.timeout_ms = timeout_ms
        self.append_errors = append_errors

    async def append(
        self,
        partition: int,
        records: Sequence[EncodedRecord],
        producer: TxnProducer | None = None,
    ) -> None:
        if producer is None:
            builder = RecordBatchBuilder()
        else:
            builder = RecordBatchBuilder(
                producer_id=producer[0],
                producer_epoch=producer[1],
                base_sequence=0,
                is_transactional=True,
            )
        now = int(time.time() * 1000)
        for key, value in records:
            builder.append(now, key, value)
        key = (self.topic, partition)
        results = await start_append_records(
            self.rm,
            timeout_ms=self.timeout_ms,
            required_acks=-1,
            entries=[(key, builder.build())],
            version=PRODUCE_VERSION,
            from_coordinator=producer is not None,
        )
        error = results[key].error
        if error is not ErrorCode.NONE:
            raise CoordinatorError(
                self.append_errors.get(error, ErrorCode.UNKNOWN_SERVER_ERROR),
                f"{self.topic}-{partition}: append failed with {error.name}",
            )

    async def batches(self, partition: int) -> AsyncIterator[tuple[RecordBatch, int]]:
        found = self.rm.get_partition(self.topic, partition)
        if found is None:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        log_ = found.log
        offset = log_.log_start_offset
        while offset < log_.log_end_offset:
            chunk = log_.read(offset, READ_CHUNK_BYTES)
            data = await asyncio.to_thread(chunk.read_bytes)
            batches = decode_batches(data)
            if not batches:
                break
            for batch in batches:
                yield batch, offset
            offset = max(offset, batches[-1].next_offset)
