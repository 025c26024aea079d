"""Spark rows <-> log records, through Arrow: the source schema and the sink's input columns.

The source's schema is Spark's Kafka source schema (key, value, topic, partition, offset,
timestamp, timestampType, and headers with includeHeaders). `columns_to_batch` (and, from
record objects, `records_to_batch`) builds one `pyarrow.RecordBatch` with exactly the Arrow types
Spark expects for that schema (Spark refuses a batch whose types differ). On the sink side
`route_batch` splits an Arrow batch of the input columns (value, key, headers, topic, partition)
into per-partition key/value columns, choosing partitions as the producer does (explicit
partition, else murmur2 of the key, else one sticky partition per batch and topic);
`batch_to_records` reads the same columns as Python tuples (the exactly-once writer's path).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from epochlog.client.errors import KafkaError, MessageTooLargeError
from epochlog.client.fetch_decoder import ConsumerRecord
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import BATCH_HEADER_SIZE
from epochlog.spark.arrow_records import DecodedColumns, Headers, as_binary, murmur2_partitions

BASE_SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def source_schema_ddl(include_headers: bool) -> str:
    return BASE_SCHEMA_DDL + (", " + HEADERS_DDL if include_headers else "")


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark converts `source_schema_ddl` to (timestamps: us, UTC)."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADER_TYPE))
    return pa.schema(fields)


def records_to_batch(
    records: Sequence[ConsumerRecord], schema: pa.Schema, include_headers: bool
) -> pa.RecordBatch:
    """One Arrow batch of records, all from one topic-partition."""
    n = len(records)
    first = records[0]
    timestamps = np.fromiter((r.timestamp for r in records), dtype=np.int64, count=n) * 1000
    columns = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([first.topic] * n, pa.string()),
        pa.array(np.full(n, first.partition, dtype=np.int32)),
        pa.array(np.fromiter((r.offset for r in records), dtype=np.int64, count=n)),
        pa.array(timestamps, pa.timestamp("us", tz="UTC")),
        pa.array(np.fromiter((r.timestamp_type for r in records), dtype=np.int32, count=n)),
    ]
    if include_headers:
        columns.append(
            pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], HEADER_TYPE)
        )
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def columns_to_batch(
    columns: DecodedColumns, topic: str, partition: int, schema: pa.Schema, include_headers: bool
) -> pa.RecordBatch:
    """One Arrow batch of the decoded records of one topic-partition."""
    n = len(columns)
    name = topic.encode()
    topics = pa.Array.from_buffers(
        pa.string(),
        n,
        [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(name)), pa.py_buffer(name * n)],
    )
    arrays = [
        columns.keys,
        columns.values,
        topics,
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(columns.offsets),
        pa.array(columns.timestamps * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(columns.timestamp_types),
    ]
    if include_headers:
        assert columns.headers is not None
        arrays.append(_headers_array(columns.headers))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _headers_array(headers: Sequence[Headers]) -> pa.Array:
    counts = np.fromiter((len(h) for h in headers), dtype=np.int32, count=len(headers))
    offsets = np.zeros(len(headers) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    keys = [k for h in headers for k, _ in h]
    values = [v for h in headers for _, v in h]
    items = pa.StructArray.from_arrays(
        [pa.array(keys, pa.string()), pa.array(values, pa.binary())],
        fields=list(HEADER_TYPE.value_type),
    )
    return pa.ListArray.from_arrays(pa.array(offsets), items, type=HEADER_TYPE)


Routed = tuple[tuple[str, int], pa.Array, pa.Array, list[Headers] | None]


def route_batch(
    batch: pa.RecordBatch,
    default_topic: str | None,
    partition_count: Callable[[str], int],
    sticky: dict[str, int],
    max_request_size: int,
    rows_out: list[np.ndarray] | None = None,
) -> list[Routed]:
    """The rows of `batch` per target partition, in row order: ((topic, partition), keys,
    values, headers or None when no row has any). `sticky` keeps each topic's partition for
    rows without key and partition; it moves on with every batch (Kafka's sticky partitioner
    moves on with every producer batch). `rows_out`, if given, gets each route's row numbers
    (for columns routed alongside, such as the sink's timestamp)."""
    import pyarrow.compute as pc  # here: the source's processes need not pay its import

    names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    n = batch.num_rows

    def column(name: str) -> pa.Array | None:
        return batch.column(names[name]) if name in names else None

    values = as_binary(column("value"), n)
    keys = as_binary(column("key"), n)
    longest = pc.max(
        pc.add(pc.binary_length(values).fill_null(0), pc.binary_length(keys).fill_null(0))
    )
    size = BATCH_HEADER_SIZE + 26 + (longest.as_py() or 0)
    headers: list[Headers] | None = None
    header_column = column("headers")
    if header_column is not None and (pc.sum(pc.list_value_length(header_column)).as_py() or 0):
        headers = [
            [(h["key"], _bytes(h["value"])) for h in (row or [])]
            for row in header_column.to_pylist()
        ]
        size += max(sum(10 + len(k.encode()) + len(v or b"") for k, v in row) for row in headers)
    if size > max_request_size:
        raise MessageTooLargeError(
            f"record of about {size} bytes is larger than max.request.size={max_request_size}"
        )
    if default_topic is not None:
        groups = [(default_topic, np.arange(n))]
    else:
        topic_column = column("topic")
        if topic_column is None or topic_column.null_count:
            raise ValueError("a row has a null topic and there is no topic option")
        encoded = topic_column.dictionary_encode()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        groups = [
            (name, np.flatnonzero(codes == i))
            for i, name in enumerate(encoded.dictionary.to_pylist())
        ]
    partition_column = column("partition")
    out: list[Routed] = []
    for topic, rows in groups:
        if not len(rows):
            continue
        count = partition_count(topic)
        chosen = np.full(len(rows), -1, np.int64)
        if partition_column is not None:
            given = partition_column.take(pa.array(rows)) if len(rows) != n else partition_column
            explicit = given.is_valid().to_numpy(zero_copy_only=False)
            numbers = given.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
            bad = explicit & ((numbers < 0) | (numbers >= count))
            if bad.any():
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"partition {int(numbers[bad][0])} of {topic!r}, which has partitions "
                    f"0-{count - 1}",
                )
            chosen = np.where(explicit, numbers, -1)
        todo = chosen < 0
        if todo.any():
            group_keys = keys.take(pa.array(rows)) if len(rows) != n else keys
            chosen = np.where(todo, murmur2_partitions(group_keys, count), chosen)
            todo = chosen < 0
            if todo.any():
                current = sticky.get(topic)
                current = random.randrange(count) if current is None else current % count
                chosen[todo] = current
                sticky[topic] = current + 1
        for p in np.unique(chosen).tolist():
            selected = rows[chosen == p]
            if rows_out is not None:
                rows_out.append(selected)
            if len(selected) == n:
                out.append(((topic, p), keys, values, headers))
                continue
            take = pa.array(selected)
            out.append(
                (
                    (topic, p),
                    keys.take(take),
                    values.take(take),
                    [headers[i] for i in selected.tolist()] if headers is not None else None,
                )
            )
    return out


OutRecord = tuple[
    str | None, bytes | None, bytes | None, list[tuple[str, bytes | None]], int | None
]


def batch_to_records(batch: pa.RecordBatch, default_topic: str | None) -> Iterator[OutRecord]:
    """(topic, value, key, headers, partition) per row; the topic option overrides the column,
    as in Spark's Kafka sink."""
    names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    n = batch.num_rows

    def column(name: str) -> list[Any]:
        if name not in names:
            return [None] * n
        return batch.column(names[name]).to_pylist()

    values = [_bytes(v) for v in column("value")]
    keys = [_bytes(k) for k in column("key")]
    partitions = column("partition")
    topics = [default_topic] * n if default_topic is not None else column("topic")
    if "headers" in names:
        headers = [
            [(h["key"], _bytes(h["value"])) for h in (row or [])] for row in column("headers")
        ]
    else:
        headers = [[] for _ in range(n)]
    return zip(topics, values, keys, headers, partitions, strict=True)


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)
