"""The producer's record batch builder: `RecordBatchBuilder` with a faster `append`.

The bytes are exactly those of `epochlog.protocol.records.RecordBatchBuilder` (a unit test
compares them); only the per-record work differs, because at 100-byte records the producer spends
most of its time here. Small varints (every length, offset delta and timestamp delta below
16384, which is nearly all of them) come from a precomputed table instead of being encoded, and
each record is assembled with one concatenation instead of a dozen bytearray appends.
`append_plain`, for records without headers, joins the pieces in one call with the record's
length computed from a table of varint sizes, without building the body first; it also checks
the batch's room, so that the producer's fast path is a single call
(`ProducerBatch.try_append_plain`).
"""

from __future__ import annotations

from collections.abc import Sequence

from epochlog.protocol.records import BATCH_HEADER_SIZE, Header, RecordBatchBuilder
from epochlog.protocol.varint import encode_varint

_TABLE = 1 << 14
_VARINTS = [encode_varint(i) for i in range(_TABLE)]  # zig-zag varints of 0..16383
_SIZES = [len(v) for v in _VARINTS]
_NULL = b"\x01"  # varint -1: a null key, value or header value
_EMPTY = b""
_NO_HEADERS = b"\x00"


def _varint(n: int) -> bytes:
    return _VARINTS[n] if 0 <= n < _TABLE else encode_varint(n)


def _encode_headers(headers: Sequence[Header | tuple[str, bytes | None]]) -> bytes:
    out = bytearray(_varint(len(headers)))
    for h in headers:
        hkey, hvalue = (h.key, h.value) if isinstance(h, Header) else h
        raw_key = hkey.encode()
        out += _varint(len(raw_key))
        out += raw_key
        if hvalue is None:
            out += _NULL
        else:
            out += _varint(len(hvalue))
            out += hvalue
    return bytes(out)


class ProducerBatchBuilder(RecordBatchBuilder):
    """`RecordBatchBuilder` whose `append` is tuned for the producer's hot path."""

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header | tuple[str, bytes | None]] = (),
    ) -> int:
        base = self._base_timestamp
        if base is None:
            base = self._base_timestamp = timestamp
        delta = self._count
        table = _VARINTS
        ts_delta = timestamp - base
        body = (
            b"\x00"
            + (table[ts_delta] if 0 <= ts_delta < _TABLE else encode_varint(ts_delta))
            + (table[delta] if delta < _TABLE else encode_varint(delta))
        )
        if key is None:
            body += _NULL
        else:
            n = len(key)
            body += (table[n] if n < _TABLE else encode_varint(n)) + key
        if value is None:
            body += _NULL
        else:
            n = len(value)
            body += (table[n] if n < _TABLE else encode_varint(n)) + value
        body += _encode_headers(headers) if headers else _NO_HEADERS
        n = len(body)
        records = self._records
        records += table[n] if n < _TABLE else encode_varint(n)
        records += body
        self._count = delta + 1
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return delta

    def append_plain(
        self, timestamp: int, key: bytes | None, value: bytes | None, batch_size: int
    ) -> int:
        """`append` for a record without headers, to a batch that already has a record, if
        the batch stays within `batch_size` by the accumulator's bound (26 bytes plus key and
        value, `record_size_upper_bound`). Returns the bytes added, negated when the batch has
        now reached `batch_size`; 0 when the record did not fit and nothing changed."""
        records = self._records
        before = len(records)
        table, sizes = _VARINTS, _SIZES
        if key is None:
            key_v, key = _NULL, _EMPTY
            n = 1
        else:
            k = len(key)
            key_v = table[k] if k < _TABLE else encode_varint(k)
            n = len(key_v) + k
        if value is None:
            value_v, value = _NULL, _EMPTY
            n += 1
        else:
            v = len(value)
            value_v = table[v] if v < _TABLE else encode_varint(v)
            n += len(value_v) + v
        if BATCH_HEADER_SIZE + before + 26 + len(key) + len(value) > batch_size:
            return 0
        delta = self._count
        ts_delta = timestamp - self._base_timestamp  # type: ignore[operator]
        if 0 <= ts_delta < _TABLE and delta < _TABLE:
            ts_v, delta_v = table[ts_delta], table[delta]
            # attributes byte + header count byte + the two deltas
            n += 2 + sizes[ts_delta] + sizes[delta]
        else:
            ts_v, delta_v = encode_varint(ts_delta), encode_varint(delta)
            n += 2 + len(ts_v) + len(delta_v)
        records += _EMPTY.join(
            (
                table[n] if n < _TABLE else encode_varint(n),
                b"\x00",
                ts_v,
                delta_v,
                key_v,
                key,
                value_v,
                value,
                _NO_HEADERS,
            )
        )
        self._count = delta + 1
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        after = len(records)
        return before - after if BATCH_HEADER_SIZE + after >= batch_size else after - before
