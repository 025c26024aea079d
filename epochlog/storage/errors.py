"""The exceptions of the storage layer, each carrying the Kafka error code a broker answers with.

A batch that fails its CRC or framing is reported with the protocol's `CorruptRecordError`
(CORRUPT_MESSAGE) and a batch a broker must refuse with `InvalidRecordError` (INVALID_RECORD);
this module adds what only storage can say: an offset outside the log, a batch too large for the
topic or the segment, an append at the wrong offset, and a damaged file on disk. Every message
names the file or partition and the offending value.
"""

from __future__ import annotations

from pathlib import Path

from epochlog.protocol.errors import ErrorCode


class StorageError(Exception):
    """Base of storage errors. A broker that cannot use a log dir answers KAFKA_STORAGE_ERROR."""

    error_code: ErrorCode = ErrorCode.KAFKA_STORAGE_ERROR


class OffsetOutOfRangeError(StorageError):
    """A fetch or lookup offset below the log start offset or above the log end offset."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class RecordTooLargeError(StorageError):
    """A batch larger than the topic's max.message.bytes."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(StorageError):
    """An append larger than a whole segment (segment.bytes), which could never be stored."""

    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose offsets do not continue the log at its end offset."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


class LeaderEpochRegressionError(StorageError):
    """An append whose leader epoch is below the epoch of the log's last batch. Epochs never go
    down along a log (recovery treats a drop as corruption), so such an append is refused: a
    leader with it has been fenced, a follower with it has not truncated first."""

    error_code = ErrorCode.FENCED_LEADER_EPOCH


class InconsistentTopicIdError(StorageError):
    """A partition dir whose partition.metadata names another topic id than the one given."""

    error_code = ErrorCode.INCONSISTENT_TOPIC_ID


class CorruptIndexError(StorageError):
    """An offset or time index that fails its sanity check; the segment rebuilds it."""


class CheckpointFormatError(StorageError):
    """A checkpoint or properties file that does not parse; names the file and the line."""

    def __init__(self, path: Path, line_number: int | None, reason: str) -> None:
        self.path = path
        self.line_number = line_number
        where = f"{path}" if line_number is None else f"{path}, line {line_number}"
        super().__init__(f"malformed checkpoint file {where}: {reason}")


class LogDamageError(StorageError):
    """A batch on disk that cannot be read where the log says one starts: bad magic, an
    impossible length, a header or batch torn by the end of the segment, or (when verified) a
    failed CRC. Everything from `position` of the segment at `segment_base` on is untrusted.

    The partition answers KAFKA_STORAGE_ERROR (never the bytes), and the log is cut at the damage
    by `PartitionLog.recover_from_damage`, as recovery after a crash would have cut it."""

    def __init__(self, message: str, segment_base: int, position: int) -> None:
        super().__init__(message)
        self.segment_base = segment_base
        self.position = position


class LogDirOfflineError(StorageError):
    """The log dir holding a partition is offline (an I/O error or a full disk, KIP-112):
    the partition answers KAFKA_STORAGE_ERROR until the dir is usable again."""


class LogDirError(StorageError):
    """A log dir that cannot be used: locked by another process, or it belongs to another broker
    or cluster (meta.properties)."""
