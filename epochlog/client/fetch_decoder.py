"""From the record bytes of one partition in a Fetch response to consumer records: sans-I/O.

`decode_partition_records` decodes every whole batch (a partial batch at the end, cut by the
fetch size limits, is ignored), and returns the records at or after the fetch offset (a
compressed batch may start before it) plus the offset to fetch next: the end of the last whole
batch, so control batches and compacted gaps are skipped even when they yield no record.

Control batches (transaction markers) never reach the caller. With read_committed, records of
aborted transactions are dropped as Kafka's Fetcher does: walking batches in offset order, a
producer id enters the aborted set when the batch reaches the first offset of one of its aborted
transactions (from the response's AbortedTransactions), and leaves it at that transaction's abort
marker; transactional batches of producers in the set are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from epochlog.protocol.records import BatchHeader, Header, Record, RecordMaker, decode_batches


@dataclass(slots=True)
class ConsumerRecord:
    """One record as `poll` returns it. Not frozen, though nothing changes it: a frozen
    dataclass costs 4 us per record to build here, a plain one 0.6 us, and a consumer builds
    hundreds of thousands a second."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_type: int = 0  # 0 CreateTime, 1 LogAppendTime
    leader_epoch: int = -1


class TransactionFilter:
    """Which batches of one partition's fetched data a consumer skips, walked in offset order:
    control batches always; with read_committed, transactional batches of a producer inside one
    of its aborted transactions (`aborted`: the response's (producer id, first offset) pairs)."""

    def __init__(self, read_committed: bool, aborted: Sequence[tuple[int, int]]) -> None:
        self._read_committed = read_committed
        self._pending = sorted(aborted, key=lambda a: a[1]) if read_committed else []
        self._aborted_pids: set[int] = set()

    def skips(self, header: BatchHeader, is_abort_marker: Callable[[], bool]) -> bool:
        """`is_abort_marker()` reads a control batch's marker (called only when needed)."""
        if not self._read_committed:
            return header.is_control
        while self._pending and self._pending[0][1] <= header.last_offset:
            self._aborted_pids.add(self._pending.pop(0)[0])
        if header.is_control:
            if is_abort_marker():
                self._aborted_pids.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self._aborted_pids


@dataclass(frozen=True, slots=True)
class DecodedPartition:
    records: list[ConsumerRecord]
    next_offset: int  # where the next fetch starts; == fetch offset if nothing whole arrived
    last_epoch: int  # partition leader epoch of the last batch, -1 if none


def decode_partition_records(
    topic: str,
    partition: int,
    data: bytes | None,
    fetch_offset: int,
    *,
    read_committed: bool = False,
    aborted: Sequence[tuple[int, int]] = (),
    check_crcs: bool = True,
) -> DecodedPartition:
    """`aborted` is the response's (producer id, first offset) pairs; `check_crcs` is the
    consumer's check.crcs (librdkafka's mock cluster writes control batches with CRC 0)."""
    if not data:
        return DecodedPartition([], fetch_offset, -1)

    def maker(header: BatchHeader) -> RecordMaker:
        if header.is_control:
            return Record  # read for its marker type only
        ts_type = 1 if header.is_log_append_time else 0
        epoch = header.partition_leader_epoch

        def make(
            offset: int,
            timestamp: int,
            key: bytes | None,
            value: bytes | None,
            headers: list[Header],
        ) -> ConsumerRecord:
            return ConsumerRecord(
                topic,
                partition,
                offset,
                timestamp,
                key,
                value,
                [(h.key, h.value) for h in headers] if headers else [],
                ts_type,
                epoch,
            )

        return make

    batches = decode_batches(data, maker, check_crcs)
    transactions = TransactionFilter(read_committed, aborted)
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    last_epoch = -1
    for batch in batches:
        header = batch.header
        next_offset = max(next_offset, header.next_offset)
        last_epoch = header.partition_leader_epoch
        if transactions.skips(header, partial(_is_abort_marker, batch.records)):
            continue
        if header.base_offset >= fetch_offset:
            out.extend(batch.records)
        else:  # a compressed batch may start before the fetch offset
            out.extend(r for r in batch.records if r.offset >= fetch_offset)
    return DecodedPartition(out, next_offset, last_epoch)


def _is_abort_marker(records: Sequence[object]) -> bool:
    """A control record's key is (version int16, type int16); type 0 is ABORT, 1 COMMIT."""
    for r in records:
        key = getattr(r, "key", None)
        if key is not None and len(key) >= 4:
            return int.from_bytes(key[2:4], "big", signed=True) == 0
    return False
