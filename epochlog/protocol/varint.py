"""Variable-length integers as Kafka writes them.

VARINT / VARLONG are protobuf's zig-zag base-128 forms (record fields, record lengths);
UNSIGNED_VARINT is plain base-128 (compact lengths and tagged fields in flexible versions).
Decoders take (buffer, position) and return (value, next position); they stop after 10 bytes,
so corrupt input can never loop.
"""

from __future__ import annotations

from epochlog.protocol.errors import DecodeError

_MAX_VARINT_BYTES = 10


def encode_uvarint(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    for i in range(1, _MAX_VARINT_BYTES):
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + i + 1
        shift += 7
    raise DecodeError("varint", None, None, f"varint at byte {pos} is longer than 10 bytes")


def encode_varint(value: int) -> bytes:
    """Zig-zag varint (works for int32 and int64 alike)."""
    return encode_uvarint((value << 1) ^ (value >> 63))


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    b2 = buf[pos + 1]
    if b2 < 0x80:  # two bytes: lengths up to 8 KiB, the next most common case
        raw = (b & 0x7F) | (b2 << 7)
        return (raw >> 1) ^ -(raw & 1), pos + 2
    raw, pos = decode_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def size_of_uvarint(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def size_of_varint(value: int) -> int:
    return size_of_uvarint((value << 1) ^ (value >> 63))
