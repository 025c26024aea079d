"""Kafka's primitive encodings written out by hand (Type.java, big-endian), for golden-byte tests.

Expected bytes in tests are assembled from these and the field order of Kafka's message JSON,
never by epochlog's encoder, so a schema transcription mistake shows up as a byte difference.
"""

from __future__ import annotations

import struct


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def uv(n: int) -> bytes:
    """UNSIGNED_VARINT: base-128, low groups first."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def string(s: str | None) -> bytes:
    """STRING / NULLABLE_STRING: int16 length (-1 = null)."""
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def cstring(s: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING: uvarint length + 1 (0 = null)."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return uv(len(b) + 1) + b


def bytes_(b: bytes | None) -> bytes:
    """BYTES / NULLABLE_BYTES: int32 length (-1 = null)."""
    return i32(-1) if b is None else i32(len(b)) + b


def cbytes(b: bytes | None) -> bytes:
    """COMPACT_(NULLABLE_)BYTES: uvarint length + 1 (0 = null)."""
    return b"\x00" if b is None else uv(len(b) + 1) + b


def array(items: list[bytes] | None) -> bytes:
    """ARRAY: int32 count (-1 = null)."""
    return i32(-1) if items is None else i32(len(items)) + b"".join(items)


def carray(items: list[bytes] | None) -> bytes:
    """COMPACT_ARRAY: uvarint count + 1 (0 = null)."""
    return b"\x00" if items is None else uv(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"  # an empty tagged-field section: uvarint count 0
