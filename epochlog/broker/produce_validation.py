"""Checks on a Produce request before anything is appended; pure, no state.

Request level (every partition gets the same answer):
- acks must be 0, 1 or -1, else INVALID_REQUIRED_ACKS.
- Transactional batches in a request without a TransactionalId:
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka's KafkaApis answers. A request with a
  TransactionalId is accepted as Kafka before KIP-890 accepts it (the leader does not ask the
  coordinator); until epochlog has a transaction coordinator, InitProducerId refuses
  transactional ids, so clients stop there.

Partition level, Kafka's order (`ProduceRequest.validateRecords`, then `LogValidator`):
- v3+ must carry exactly one whole magic-2 batch: none, a partial one, more than one, or another
  magic is INVALID_RECORD; a batch length below the header size is CORRUPT_MESSAGE.
- zstd before v7 is UNSUPPORTED_COMPRESSION_TYPE; an unknown codec id is INVALID_RECORD.
- A batch bigger than max.message.bytes is MESSAGE_TOO_LARGE.
- The CRC-32C must match: CORRUPT_MESSAGE.
- Control batches, transactional batches without a producer id, counts that disagree with the
  offset delta, and a producer id without a base sequence are INVALID_RECORD.
- Then every record is walked, a compressed batch decompressed as a stream that stops at
  `max_decompressed_bytes` (`protocol.record_validation`): a payload that does not decompress or
  records that do not parse are CORRUPT_MESSAGE; a record count, offset delta, record size or
  max timestamp that disagrees with the header, or an expansion past the bound, INVALID_RECORD.
- On a compacted topic (`require_keys`) a record without a key is INVALID_RECORD, with Kafka's
  message for each such record: "Compacted topic cannot accept message without key in topic
  partition <topic>-<partition>."
A failed check raises `ProduceValidationError` carrying the code, a message naming the
partition and what was wrong, and (for one record's fault) Kafka's per-record error: its index in
the batch and the message; the caller appends nothing for that partition.
"""

from __future__ import annotations

from collections.abc import Iterable

from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.record_validation import (
    MissingKeyError,
    RecordsError,
    check_batch_records,
)
from epochlog.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    TRANSACTIONAL_MASK,
    BatchHeader,
    batch_crc,
    parse_batch_header,
    read_offset_and_length,
)
from epochlog.storage.config import DEFAULT_DECOMPRESSED_MAX_MULTIPLE

VALID_ACKS = (0, 1, -1)
ZSTD_MIN_PRODUCE_VERSION = 7
MAGIC_OFFSET = 16


class ProduceValidationError(Exception):
    def __init__(
        self,
        error_code: ErrorCode,
        message: str,
        record_errors: list[tuple[int, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        # (index of the record in its batch, what was wrong with it): Produce v8+ RecordErrors
        self.record_errors = record_errors or []


def request_error(
    acks: int, transactional_id: str | None, has_transactional_batches: bool = False
) -> ProduceValidationError | None:
    """A request-level problem that applies to every partition, or None."""
    if acks not in VALID_ACKS:
        return ProduceValidationError(
            ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks}; it must be 0, 1 or -1"
        )
    if has_transactional_batches and transactional_id is None:
        return ProduceValidationError(
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "transactional batches in a produce request without a transactional id",
        )
    return None


def has_transactional_batch(
    records: Iterable[bytes | bytearray | memoryview | None],
) -> bool:
    """Whether any partition's (first) magic-2 batch is flagged transactional, from the low byte
    of its attributes alone (what is wrong with any other batch, validation names)."""
    for raw in records:
        if (
            raw is not None
            and len(raw) >= BATCH_HEADER_SIZE
            and raw[MAGIC_OFFSET] == MAGIC_V2
            and raw[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK
        ):
            return True
    return False


def validate_partition_records(
    records: bytes | bytearray | memoryview | None,
    *,
    version: int,
    max_message_bytes: int,
    where: str,
    max_decompressed_bytes: int | None = None,
    log_append_time: bool = False,
    require_keys: bool = False,
) -> BatchHeader:
    """Check one partition's records; return the header of its single batch.

    `max_decompressed_bytes` bounds the decompressed records (by default
    DEFAULT_DECOMPRESSED_MAX_MULTIPLE times `max_message_bytes`); with `log_append_time` the
    header's max timestamp is not compared with the records', since the broker overwrites it."""
    if not records:
        raise ProduceValidationError(ErrorCode.INVALID_RECORD, f"{where}: no record batch")
    total = len(records)
    if total < LOG_OVERHEAD:
        raise ProduceValidationError(
            ErrorCode.INVALID_RECORD, f"{where}: {total} bytes do not hold a record batch"
        )
    _, batch_length = read_offset_and_length(records, 0)
    if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise ProduceValidationError(
            ErrorCode.CORRUPT_MESSAGE,
            f"{where}: batch length {batch_length} is smaller than a batch header",
        )
    size = batch_length + LOG_OVERHEAD
    if size > total:
        raise ProduceValidationError(
            ErrorCode.INVALID_RECORD,
            f"{where}: the batch says {size} bytes, the request holds {total}; "
            "Produce v3+ needs exactly one whole batch",
        )
    magic = records[MAGIC_OFFSET]
    if magic != MAGIC_V2:
        raise ProduceValidationError(
            ErrorCode.INVALID_RECORD,
            f"{where}: record batch magic {magic}; Produce v3+ accepts only magic 2",
        )
    if size != total:
        raise ProduceValidationError(
            ErrorCode.INVALID_RECORD,
            f"{where}: more than one record batch ({total - size} bytes after the first); "
            "Produce v3+ accepts exactly one",
        )
    header = parse_batch_header(records, 0)
    codec = header.attributes & COMPRESSION_MASK
    if codec > Compression.ZSTD:
        raise ProduceValidationError(
            ErrorCode.INVALID_RECORD, f"{where}: unknown compression codec id {codec}"
        )
    if codec == Compression.ZSTD and version < ZSTD_MIN_PRODUCE_VERSION:
        raise ProduceValidationError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"{where}: zstd needs Produce v{ZSTD_MIN_PRODUCE_VERSION}+, the request is v{version}",
        )
    if size > max_message_bytes:
        raise ProduceValidationError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"{where}: batch of {size} bytes exceeds max.message.bytes {max_message_bytes}",
        )
    crc = batch_crc(records, 0, size)
    if crc != header.crc:
        raise ProduceValidationError(
            ErrorCode.CORRUPT_MESSAGE,
            f"{where}: batch fails its CRC: stored {header.crc:#010x}, computed {crc:#010x}",
        )
    if header.is_control:
        raise ProduceValidationError(
            ErrorCode.INVALID_RECORD, f"{where}: producers may not send control batches"
        )
    if header.is_transactional and header.producer_id < 0:
        raise ProduceValidationError(
            ErrorCode.INVALID_RECORD, f"{where}: transactional batch without a producer id"
        )
    if header.records_count < 1 or header.records_count != header.last_offset_delta + 1:
        raise ProduceValidationError(
            ErrorCode.INVALID_RECORD,
            f"{where}: {header.records_count} records but last offset delta "
            f"{header.last_offset_delta}",
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise ProduceValidationError(
            ErrorCode.INVALID_RECORD,
            f"{where}: producer id {header.producer_id} without a base sequence",
        )
    if max_decompressed_bytes is None:
        max_decompressed_bytes = DEFAULT_DECOMPRESSED_MAX_MULTIPLE * max_message_bytes
    try:
        check_batch_records(
            records,
            header,
            max_decompressed_bytes=max_decompressed_bytes,
            check_max_timestamp=not log_append_time,
            require_keys=require_keys,
        )
    except MissingKeyError as exc:
        message = f"Compacted topic cannot accept message without key in topic partition {where}."
        raise ProduceValidationError(
            ErrorCode.INVALID_RECORD, message, [(index, message) for index in exc.record_indexes]
        ) from None
    except RecordsError as invalid:
        # not `codec`: that holds an int above, and compiled code would keep this one an int too
        compression = header.compression
        kind = "uncompressed" if compression is Compression.NONE else compression.name.lower()
        message = f"{where}: {kind} batch: {invalid}"
        record_errors = [] if invalid.record_index is None else [(invalid.record_index, message)]
        raise ProduceValidationError(invalid.error_code, message, record_errors) from None
    return header
