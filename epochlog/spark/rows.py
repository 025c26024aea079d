"""Spark rows <-> log records, through Arrow: the source schema and the sink's input columns.

The source's schema is Spark's Kafka source schema (key, value, topic, partition, offset,
timestamp, timestampType, and headers with includeHeaders). `records_to_batch` builds one
`pyarrow.RecordBatch` from decoded records with exactly the Arrow types Spark expects for that
schema (Spark refuses a batch whose types differ). `batch_to_records` reads the sink's input
columns (value, key, headers, topic, partition) from an Arrow batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from epochlog.client.fetch_decoder import ConsumerRecord

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
