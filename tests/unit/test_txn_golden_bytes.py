"""`__transaction_state` keys and values byte for byte as Kafka writes them: expected bytes are
assembled by hand from Kafka's TransactionLogKey/Value JSON field order and primitive encodings
(`tests/kafka_wire.py`), never by our encoder."""

from __future__ import annotations

from dataclasses import replace

import pytest

from epochlog.coordinator.transaction.record_codec import (
    TransactionStateCodec,
    decode_value,
    encode_key,
    encode_value,
)
from epochlog.coordinator.transaction.records import TxnRecord, TxnTombstone
from epochlog.coordinator.transaction.state import TxnMetadata, TxnState
from epochlog.protocol.errors import DecodeError
from tests import kafka_wire as w

ONGOING = TxnMetadata(
    transactional_id="tx-1",
    producer_id=4000,
    producer_epoch=3,
    timeout_ms=60_000,
    state=TxnState.ONGOING,
    partitions=frozenset({("orders", 2), ("orders", 0), ("audit", 7)}),
    last_update_ms=1_700_000_000_500,
    start_ms=1_700_000_000_000,
)

KEY = w.i16(0) + w.string("tx-1")

# v0: ProducerId, ProducerEpoch, TransactionTimeoutMs, TransactionStatus, TransactionPartitions
# [Topic, PartitionIds], TransactionLastUpdateTimestampMs, TransactionStartTimestampMs.
VALUE_V0 = (
    w.i16(0)
    + w.i64(4000)
    + w.i16(3)
    + w.i32(60_000)
    + w.i8(1)
    + w.array(
        [
            w.string("audit") + w.array([w.i32(7)]),
            w.string("orders") + w.array([w.i32(0), w.i32(2)]),
        ]
    )
    + w.i64(1_700_000_000_500)
    + w.i64(1_700_000_000_000)
)

# v1: the same fields, compact, each struct and the value ending in a tagged-field section.
VALUE_V1_FIELDS = (
    w.i64(4000)
    + w.i16(3)
    + w.i32(60_000)
    + w.i8(1)
    + w.carray(
        [
            w.cstring("audit") + w.carray([w.i32(7)]) + w.NO_TAGS,
            w.cstring("orders") + w.carray([w.i32(0), w.i32(2)]) + w.NO_TAGS,
        ]
    )
    + w.i64(1_700_000_000_500)
    + w.i64(1_700_000_000_000)
)
VALUE_V1 = w.i16(1) + VALUE_V1_FIELDS + w.NO_TAGS


def test_key_is_version_0_and_the_transactional_id() -> None:
    assert encode_key("tx-1") == KEY


def test_value_v0_is_what_we_write_as_kafka_39_does() -> None:
    assert encode_value(ONGOING) == VALUE_V0
    assert decode_value("tx-1", VALUE_V0) == ONGOING


def test_value_v1_matches_kafkas_flexible_layout() -> None:
    assert encode_value(ONGOING, version=1) == VALUE_V1
    assert decode_value("tx-1", VALUE_V1) == ONGOING


def test_an_empty_ids_partitions_are_written_as_null() -> None:
    empty = replace(ONGOING, state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1)
    expected = (
        w.i16(0)
        + w.i64(4000)
        + w.i16(3)
        + w.i32(60_000)
        + w.i8(0)
        + w.array(None)
        + w.i64(1_700_000_000_500)
        + w.i64(-1)
    )
    assert encode_value(empty) == expected
    assert decode_value("tx-1", expected) == empty
    with pytest.raises(ValueError, match="Empty transaction has no partitions"):
        encode_value(replace(ONGOING, state=TxnState.EMPTY))


def test_v1_carries_the_previous_producer_id_as_tag_0() -> None:
    rotated = TxnMetadata(
        transactional_id="tx-1",
        producer_id=4001,
        producer_epoch=0,
        timeout_ms=60_000,
        state=TxnState.EMPTY,
        partitions=frozenset(),
        last_update_ms=5,
        start_ms=-1,
        previous_producer_id=4000,
    )
    expected = (
        w.i16(1)
        + w.i64(4001)
        + w.i16(0)
        + w.i32(60_000)
        + w.i8(0)
        + w.carray(None)
        + w.i64(5)
        + w.i64(-1)
        + w.uv(1)
        + w.uv(0)
        + w.uv(8)
        + w.i64(4000)
    )
    assert encode_value(rotated, version=1) == expected
    assert decode_value("tx-1", expected) == rotated
    assert decode_value("tx-1", encode_value(rotated)).previous_producer_id == -1  # v0: lost


def test_kafka_4s_client_transaction_version_tag_is_read_and_ignored() -> None:
    with_tag_2 = w.i16(1) + VALUE_V1_FIELDS + w.uv(1) + w.uv(2) + w.uv(2) + w.i16(2)
    assert decode_value("tx-1", with_tag_2) == ONGOING


def test_a_null_partition_list_reads_as_no_partitions() -> None:
    empty = (
        w.i16(0)
        + w.i64(9)
        + w.i16(0)
        + w.i32(1000)
        + w.i8(0)
        + w.array(None)
        + w.i64(1)
        + w.i64(-1)
    )
    assert decode_value("x", empty).partitions == frozenset()


@pytest.mark.parametrize(
    ("state", "byte"),
    [
        (TxnState.EMPTY, 0),
        (TxnState.ONGOING, 1),
        (TxnState.PREPARE_COMMIT, 2),
        (TxnState.PREPARE_ABORT, 3),
        (TxnState.COMPLETE_COMMIT, 4),
        (TxnState.COMPLETE_ABORT, 5),
    ],
)
def test_each_written_state_has_kafkas_byte(state: TxnState, byte: int) -> None:
    partitions = frozenset() if state is TxnState.EMPTY else ONGOING.partitions
    data = encode_value(replace(ONGOING, state=state, partitions=partitions), version=0)
    assert data[2 + 8 + 2 + 4] == byte
    assert decode_value("tx-1", data).state is state


def test_pending_and_dead_states_are_never_written() -> None:
    for state in (TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
        with pytest.raises(ValueError, match=state.kafka_name):
            encode_value(replace(ONGOING, state=state))


def test_codec_writes_a_tombstone_for_an_expired_id_and_reads_both_back() -> None:
    codec = TransactionStateCodec()
    assert codec.encode(TxnTombstone("tx-1")) == (KEY, None)
    assert codec.decode(KEY, None) == TxnTombstone("tx-1")
    assert codec.encode(TxnRecord(ONGOING)) == (KEY, VALUE_V0)
    assert codec.decode(KEY, VALUE_V1) == TxnRecord(ONGOING)


def test_bad_input_names_what_was_wrong() -> None:
    with pytest.raises(DecodeError, match="TransactionLogValue"):
        decode_value("tx-1", w.i16(9) + VALUE_V1_FIELDS)
    with pytest.raises(DecodeError, match="TransactionLogKey"):
        TransactionStateCodec().decode(b"\x00", None)
    with pytest.raises(ValueError, match="TransactionStatus 42"):
        decode_value("tx-1", VALUE_V0[:16] + w.i8(42) + VALUE_V0[17:])
