"""Produce validation and idempotent-producer decisions, without a log or a socket."""

from __future__ import annotations

import struct

import pytest

from epochlog.broker.produce_validation import (
    ProduceValidationError,
    has_transactional_batch,
    request_error,
    validate_partition_records,
)
from epochlog.broker.producer_state import (
    INT32_MAX,
    ProducerStateManager,
    Verdict,
)
from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import CRC_OFFSET, RecordBatchBuilder, batch_crc

MAX = 1_000_000


def batch(n=3, compression=Compression.NONE, pid=-1, epoch=-1, seq=-1, txn=False, size=10):
    b = RecordBatchBuilder(
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
    )
    for i in range(n):
        b.append(1000 + i, f"k{i}".encode(), b"v" * size, [("h", b"x")])
    return b.build()


def validate(records, version=9, max_bytes=MAX):
    return validate_partition_records(
        records, version=version, max_message_bytes=max_bytes, where="t-0"
    )


def error_of(records, **kw):
    with pytest.raises(ProduceValidationError) as info:
        validate(records, **kw)
    return info.value.error_code


def with_crc(raw: bytearray) -> bytes:
    struct.pack_into(">I", raw, CRC_OFFSET, batch_crc(raw, 0, len(raw)))
    return bytes(raw)


# -------------------------------------------------------------------- request level


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_valid_acks_pass(acks):
    assert request_error(acks, None) is None


@pytest.mark.parametrize("acks", [2, -2, 5])
def test_invalid_acks_is_invalid_required_acks(acks):
    assert request_error(acks, None).error_code is ErrorCode.INVALID_REQUIRED_ACKS


def test_transactional_batches_without_a_transactional_id_are_refused():
    problem = request_error(-1, None, has_transactional_batch([batch(pid=7, txn=True, seq=0)]))
    assert problem.error_code is ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert "transactional id" in str(problem)


def test_transactional_batches_with_a_transactional_id_pass():
    assert request_error(-1, "tx-1", True) is None
    assert request_error(-1, "tx-1", has_transactional_batch([batch()])) is None
    assert not has_transactional_batch([None, b"", batch()])


# ------------------------------------------------------------------ partition level


def test_a_single_valid_batch_passes_and_returns_its_header():
    header = validate(batch(3))
    assert header.records_count == 3


def test_no_records_is_invalid_record():
    assert error_of(None) is ErrorCode.INVALID_RECORD
    assert error_of(b"") is ErrorCode.INVALID_RECORD


def test_partial_batch_is_invalid_record():
    assert error_of(batch()[:-5]) is ErrorCode.INVALID_RECORD
    assert error_of(batch()[:8]) is ErrorCode.INVALID_RECORD


def test_batch_length_below_a_header_is_corrupt():
    raw = bytearray(batch())
    struct.pack_into(">i", raw, 8, 10)
    assert error_of(bytes(raw)) is ErrorCode.CORRUPT_MESSAGE


def test_two_batches_are_invalid_record():
    assert error_of(batch() + batch()) is ErrorCode.INVALID_RECORD


def test_old_magic_is_invalid_record():
    raw = bytearray(batch())
    raw[16] = 1
    assert error_of(bytes(raw)) is ErrorCode.INVALID_RECORD


def test_flipped_byte_fails_the_crc_with_corrupt_message():
    raw = bytearray(batch())
    raw[-3] ^= 0xFF
    assert error_of(bytes(raw)) is ErrorCode.CORRUPT_MESSAGE


def test_zstd_before_v7_is_unsupported_compression_type():
    records = batch(compression=Compression.ZSTD)
    assert error_of(records, version=6) is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert validate(records, version=7).compression is Compression.ZSTD


def test_unknown_codec_is_invalid_record():
    raw = bytearray(batch())
    raw[22] |= 0x07
    assert error_of(with_crc(raw)) is ErrorCode.INVALID_RECORD


def test_batch_above_max_message_bytes_is_message_too_large():
    records = batch(size=1000)
    assert error_of(records, max_bytes=len(records) - 1) is ErrorCode.MESSAGE_TOO_LARGE
    validate(records, max_bytes=len(records))


def test_transactional_batch_with_a_producer_id_passes():
    assert validate(batch(pid=7, epoch=0, seq=0, txn=True)).is_transactional


def test_transactional_batch_without_a_producer_id_is_invalid_record():
    assert error_of(batch(txn=True)) is ErrorCode.INVALID_RECORD


def test_control_batch_is_refused():
    raw = bytearray(batch())
    raw[22] |= 0x20
    assert error_of(with_crc(raw)) is ErrorCode.INVALID_RECORD


def test_record_count_disagreeing_with_offset_delta_is_invalid():
    raw = bytearray(batch(3))
    struct.pack_into(">i", raw, 57, 5)
    assert error_of(with_crc(raw)) is ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4])
def test_keyless_records_on_a_compacted_topic_are_refused_with_kafkas_message(compression):
    builder = RecordBatchBuilder(compression)
    for i, key in enumerate([b"a", None, b"c", None]):
        builder.append(1000 + i, key, b"v")
    records = builder.build()
    validate(records)  # keys are optional on other topics
    with pytest.raises(ProduceValidationError) as info:
        validate_partition_records(
            records, version=9, max_message_bytes=MAX, where="orders-3", require_keys=True
        )
    message = "Compacted topic cannot accept message without key in topic partition orders-3."
    assert info.value.error_code is ErrorCode.INVALID_RECORD
    assert str(info.value) == message
    assert info.value.record_errors == [(1, message), (3, message)]
    validate_partition_records(
        batch(), version=9, max_message_bytes=MAX, where="orders-3", require_keys=True
    )


def test_producer_id_without_sequence_is_invalid():
    assert error_of(batch(pid=7, epoch=0, seq=-1)) is ErrorCode.INVALID_RECORD


# ------------------------------------------------------------------- idempotence


def state_with(pid=7, epoch=0, batches=((0, 4, 100),)):
    """A producer state where `pid` wrote (first seq, last seq, first offset) batches."""
    state = ProducerStateManager("t-0")
    for first, last, offset in batches:
        state.record(pid, epoch, first, last, offset, offset + last - first, 1)
    return state


def test_non_idempotent_batches_always_append():
    assert state_with().check(-1, -1, -1, -1).verdict is Verdict.APPEND


def test_unknown_producer_appends_whatever_its_sequence():
    state = ProducerStateManager("t-0")
    assert state.check(7, 0, 0, 4).verdict is Verdict.APPEND
    # Kafka 3.x: its state may have gone with retention, so any sequence is accepted
    assert state.check(8, 0, 42, 45).verdict is Verdict.APPEND


def test_next_sequence_appends():
    assert state_with().check(7, 0, 5, 9).verdict is Verdict.APPEND


def test_exact_retry_of_a_cached_batch_is_a_duplicate_with_its_offsets():
    check = state_with(batches=((0, 4, 100), (5, 9, 105))).check(7, 0, 0, 4)
    assert check.verdict is Verdict.DUPLICATE
    assert (check.duplicate.first_offset, check.duplicate.last_offset) == (100, 104)
    assert check.error is ErrorCode.NONE


def test_sequence_gap_is_out_of_order():
    check = state_with().check(7, 0, 7, 9)
    assert (check.verdict, check.error) == (Verdict.REJECT, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)


def test_overlapping_but_not_identical_batch_is_out_of_order():
    check = state_with().check(7, 0, 2, 6)
    assert check.error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_older_producer_epoch_is_invalid_producer_epoch():
    check = state_with(epoch=3).check(7, 2, 5, 9)
    assert check.error is ErrorCode.INVALID_PRODUCER_EPOCH


def test_new_epoch_must_start_at_sequence_zero():
    state = state_with(epoch=0)
    assert state.check(7, 1, 0, 3).verdict is Verdict.APPEND
    assert state.check(7, 1, 5, 9).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_new_epoch_forgets_the_old_epochs_batches():
    state = state_with(epoch=0)
    state.record(7, 1, 0, 3, 200, 203, 2)
    assert state.check(7, 1, 0, 3).duplicate.first_offset == 200
    assert state.check(7, 0, 0, 4).error is ErrorCode.INVALID_PRODUCER_EPOCH


def test_sequence_wraps_after_int32_max():
    state = state_with(batches=((INT32_MAX - 4, INT32_MAX, 100),))
    assert state.check(7, 0, 0, 3).verdict is Verdict.APPEND


def test_only_the_last_five_batches_are_remembered():
    batches = [(i * 2, i * 2 + 1, i * 2) for i in range(6)]
    state = state_with(batches=batches)
    assert state.check(7, 0, 2, 3).verdict is Verdict.DUPLICATE
    assert state.check(7, 0, 0, 1).verdict is Verdict.REJECT


def test_rebuild_from_headers_restores_duplicate_detection():
    from epochlog.protocol.records import parse_batch_header, stamp_batch

    headers = []
    offset = 0
    for seq in (0, 3, 6):
        raw = bytearray(batch(3, pid=9, epoch=2, seq=seq))
        stamp_batch(raw, 0, offset, 0)
        headers.append(parse_batch_header(raw))
        offset += 3
    headers.append(parse_batch_header(batch(2)))  # not idempotent: ignored
    state = ProducerStateManager("t-0")
    state.rebuild(headers, now_ms=5)
    check = state.check(9, 2, 3, 5)
    assert check.verdict is Verdict.DUPLICATE and check.duplicate.first_offset == 3
    assert state.check(9, 2, 9, 11).verdict is Verdict.APPEND


def test_idle_producers_expire():
    state = state_with()
    assert state.remove_expired(now_ms=1 + 999, expiration_ms=1000) == 0
    assert state.remove_expired(now_ms=1 + 1000, expiration_ms=1000) == 1
    assert state.entry(7) is None
