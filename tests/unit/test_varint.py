"""Varints: zig-zag and unsigned forms round-trip over their whole range; bad ones fail fast."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochlog.protocol.errors import DecodeError
from epochlog.protocol.varint import (
    decode_uvarint,
    decode_varint,
    encode_uvarint,
    encode_varint,
    size_of_uvarint,
    size_of_varint,
)


@given(st.integers(-(2**63), 2**63 - 1))
def test_zigzag_varint_round_trips(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value) <= 10
    assert decode_varint(encoded + b"\xff", 0) == (value, len(encoded))


@given(st.integers(0, 2**64 - 1))
def test_unsigned_varint_round_trips(value: int) -> None:
    encoded = encode_uvarint(value)
    assert len(encoded) == size_of_uvarint(value)
    assert decode_uvarint(b"\x00" + encoded, 1) == (value, len(encoded) + 1)


def test_known_encodings() -> None:
    assert encode_varint(-1) == b"\x01"
    assert encode_varint(1) == b"\x02"
    assert encode_varint(-64) == b"\x7f"
    assert encode_varint(64) == b"\x80\x01"
    assert encode_uvarint(300) == b"\xac\x02"


def test_an_endless_varint_is_refused_after_ten_bytes() -> None:
    with pytest.raises(DecodeError, match="longer than 10 bytes"):
        decode_uvarint(b"\xff" * 20, 0)


def test_a_truncated_varint_raises_index_error_for_the_codec_to_report() -> None:
    with pytest.raises(IndexError):
        decode_uvarint(b"\xff\xff", 0)


def test_negative_values_cannot_be_unsigned() -> None:
    with pytest.raises(ValueError):
        encode_uvarint(-1)
