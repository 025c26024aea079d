"""The fetch path: reads for consumers and followers, size limits, and long-poll.

`read_from_local_log` reads each requested partition in request order. A consumer reads up to
the high watermark, a follower (replica id >= 0) up to the log end offset, and a follower's fetch
offset, log start offset and broker epoch are recorded in the leader's view of it (which may move
the HW, waking delayed produces and fetches, and propose adding it to the ISR). Sizes follow
KIP-74: each partition gets at most its PartitionMaxBytes and what is left of the response's
MaxBytes; the first partition that has data returns at least one whole batch even if that batch
is larger, so a consumer always progresses. A follower outside the ISR gets no data for a
partition under a replication throttle while the leader's quota is exceeded
(`replication_quotas`); the bytes of throttled partitions sent to followers are recorded.

`fetch_messages` answers at once when there is nothing to wait for (MaxWaitMs <= 0, MinBytes
reached, an error or a diverging epoch in any partition); otherwise it parks a `DelayedFetch`
in the fetch purgatory, watching the requested partitions. Appends and HW moves re-try it; it
completes with a fresh read when MinBytes is available or an error appears, or with whatever
there is when MaxWaitMs expires: the last read's answer (HW and LSO refreshed) when nothing it
read from moved and it held no records, else a fresh read.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from epochlog.broker.delayed import DelayedOperation, resolve
from epochlog.broker.partition import Partition, PartitionError
from epochlog.broker.partition_rules import DivergingEpoch
from epochlog.broker.producer_state import AbortedTxn
from epochlog.broker.replica_manager import ReplicaManager, TopicPartition, now_ms
from epochlog.broker.replication_quotas import should_leader_throttle
from epochlog.protocol.errors import ErrorCode
from epochlog.storage import FileSlice, StorageError
from epochlog.storage.errors import LogDamageError

log = logging.getLogger(__name__)

CONSUMER_REPLICA_ID = -1
DEBUG_REPLICA_ID = -2
READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class FetchParams:
    replica_id: int
    replica_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def fetch_only_from_leader(self) -> bool:
        return self.replica_id != DEBUG_REPLICA_ID


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    topic_id: uuid.UUID | None = None
    error: ErrorCode = ErrorCode.NONE  # decided before reading (e.g. UNKNOWN_TOPIC_ID)

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(slots=True)
class PartitionFetchResult:
    request: PartitionFetch
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice = FileSlice.empty()
    diverging_epoch: DivergingEpoch | None = None
    aborted_transactions: list[AbortedTxn] | None = None


def read_from_local_log(
    rm: ReplicaManager,
    params: FetchParams,
    requests: list[PartitionFetch],
    record_follower_fetch: bool = True,
) -> list[PartitionFetchResult]:
    now = now_ms()
    remaining = params.max_bytes
    min_one_batch = True
    results: list[PartitionFetchResult] = []
    for request in requests:
        if request.error is not ErrorCode.NONE:
            results.append(PartitionFetchResult(request, request.error))
            continue
        try:
            partition = rm.partition_or_error(request.topic, request.partition)
            if request.topic_id is not None and partition.topic_id not in (None, request.topic_id):
                raise PartitionError(
                    ErrorCode.INCONSISTENT_TOPIC_ID,
                    f"{partition.name} has topic id {partition.topic_id}, "
                    f"the fetch names {request.topic_id}",
                )
            leader_leo = partition.log_end_offset
            read = partition.read_records(
                fetch_offset=request.fetch_offset,
                current_leader_epoch=request.current_leader_epoch,
                last_fetched_epoch=request.last_fetched_epoch,
                max_bytes=max(0, min(request.max_bytes, remaining)),
                min_one_batch=min_one_batch,
                up_to_high_watermark=not params.is_follower,
                fetch_only_from_leader=params.fetch_only_from_leader,
                isolation_level=params.isolation_level,
            )
            if record_follower_fetch and params.is_follower and read.diverging_epoch is None:
                rm.record_follower_fetch(
                    partition,
                    params.replica_id,
                    request.fetch_offset,
                    request.log_start_offset,
                    params.replica_epoch,
                    leader_leo,
                    now,
                )
        except (PartitionError, StorageError) as exc:
            log.debug("fetch from %s-%d: %s", request.topic, request.partition, exc)
            if isinstance(exc, LogDamageError):
                damaged = rm.get_partition(request.topic, request.partition)
                if damaged is not None:
                    rm.on_log_damage(damaged, exc)
            results.append(PartitionFetchResult(request, exc.error_code))
            continue
        except OSError as exc:
            log.error(
                "fetch from %s-%d: cannot read the log: %s", request.topic, request.partition, exc
            )
            rm.on_io_error(request.key, exc)  # its log dir goes offline (KIP-112)
            results.append(PartitionFetchResult(request, ErrorCode.KAFKA_STORAGE_ERROR))
            continue
        records = read.records
        if params.is_follower and should_leader_throttle(
            rm.replication_quotas.leader,
            request.topic,
            request.partition,
            params.replica_id in partition.isr,
            now,
        ):
            records = FileSlice.empty()  # held back while the leader's throttle is exceeded
        size = len(records)
        if size:
            min_one_batch = False
            remaining -= size
        hw = partition.high_watermark if params.is_follower else read.high_watermark
        results.append(
            PartitionFetchResult(
                request,
                high_watermark=hw,
                last_stable_offset=partition.last_stable_offset,
                log_start_offset=read.log_start_offset,
                records=records,
                diverging_epoch=read.diverging_epoch,
                aborted_transactions=read.aborted_transactions,
            )
        )
    return results


def can_respond(params: FetchParams, results: list[PartitionFetchResult]) -> bool:
    """Kafka's conditions for answering a fetch without waiting."""
    if params.max_wait_ms <= 0 or not results:
        return True
    readable = 0
    for result in results:
        if result.error is not ErrorCode.NONE or result.diverging_epoch is not None:
            return True
        readable += len(result.records)
    return readable >= params.min_bytes


# What a parked fetch's read depends on, per requested partition: the partition object (None:
# not hosted), its leader and leader epoch, log end and start offsets, and for a consumer the HW.
_ReadState = list[tuple[object, int, int, int, int, int]]


def read_state(
    rm: ReplicaManager, params: FetchParams, requests: list[PartitionFetch]
) -> _ReadState:
    """The state `read_from_local_log` reads from, for `same_read_state`. A follower's read
    stops at the log end, not the HW, so its HW is left out: the HW moves each time the other
    follower fetches, and a parked follower fetch re-read on each such move was half the
    re-reads of a 3-replica cluster taking records, all of them finding nothing new."""
    follower = params.is_follower
    state: _ReadState = []
    for request in requests:
        partition = rm.get_partition(request.topic, request.partition)
        if partition is None:
            state.append((None, -1, -1, -1, -1, -1))
        else:
            state.append(
                (
                    partition,
                    partition.leader_id,
                    partition.leader_epoch,
                    partition.log_end_offset,
                    partition.log_start_offset,
                    -1 if follower else partition.high_watermark,
                )
            )
    return state


def same_read_state(a: _ReadState, b: _ReadState) -> bool:
    """Whether a read would find what it found before (partitions compared by identity)."""
    return len(a) == len(b) and all(
        x[0] is y[0] and x[1:] == y[1:] for x, y in zip(a, b, strict=True)
    )


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        rm: ReplicaManager,
        params: FetchParams,
        requests: list[PartitionFetch],
        future: asyncio.Future[list[PartitionFetchResult]],
        first: list[PartitionFetchResult],
    ) -> None:
        super().__init__(params.max_wait_ms)
        self.rm = rm
        self.params = params
        self.requests = requests
        self.future = future
        self._results: list[PartitionFetchResult] | None = None
        # Parked right after a read that could not answer: the state that read saw and what it
        # found. A re-try reads again only when that state changed (Kafka's DelayedFetch
        # compares offsets too), and so does the answer at expiry.
        self._seen = read_state(rm, params, requests)
        self._last = first

    def try_complete(self) -> bool:
        state = read_state(self.rm, self.params, self.requests)
        if same_read_state(state, self._seen):
            return False
        self._seen = state
        results = self._last = read_from_local_log(self.rm, self.params, self.requests, False)
        if can_respond(self.params, results):
            self._results = results
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        results = self._results
        if results is None:  # expired or forced: answer with what there is now
            results = self._unchanged_answer()
        if results is None:
            results = read_from_local_log(self.rm, self.params, self.requests, False)
        resolve(self.future, results)

    def _unchanged_answer(self) -> list[PartitionFetchResult] | None:
        """The last read's answer when nothing it read from moved since and it holds no records
        (an idle follower's long poll, every replica.fetch.wait.max.ms): a follower's HW and
        LSO, left out of the read state, are refreshed. None: read again."""
        if any(r.records for r in self._last):
            return None  # a held slice may refer to a segment the cleaner has replaced since
        state = read_state(self.rm, self.params, self.requests)
        if not same_read_state(state, self._seen):
            return None
        if self.params.is_follower:
            for result, seen in zip(self._last, state, strict=True):
                partition = seen[0]
                if result.error is ErrorCode.NONE and isinstance(partition, Partition):
                    result.high_watermark = partition.high_watermark
                    result.last_stable_offset = partition.last_stable_offset
        return self._last


async def fetch_messages(
    rm: ReplicaManager, params: FetchParams, requests: list[PartitionFetch]
) -> list[PartitionFetchResult]:
    results = read_from_local_log(rm, params, requests)
    if not can_respond(params, results):
        future: asyncio.Future[list[PartitionFetchResult]] = (
            asyncio.get_running_loop().create_future()
        )
        op = DelayedFetch(rm, params, requests, future, results)
        rm.fetch_purgatory.try_complete_else_watch(op, {r.key for r in requests})
        results = await future
    if params.is_follower:
        record_leader_replication(rm, results)
    return results


def record_leader_replication(rm: ReplicaManager, results: list[PartitionFetchResult]) -> None:
    """Count a follower's answer against the leader's replication quota: the bytes of every
    throttled partition, in-sync follower or not (Kafka's sizeOfThrottledPartitions)."""
    quota = rm.replication_quotas.leader
    size = sum(
        len(r.records)
        for r in results
        if r.records and quota.is_throttled(r.request.topic, r.request.partition)
    )
    if size:
        quota.record(size, now_ms())
