"""Partition logs on disk in Kafka's layout: segments, indexes, checkpoints, leader epochs,
recovery after a crash, retention, and the log manager over a broker's log dirs.

The broker uses `LogManager` to find or create a `PartitionLog`, appends raw record batches to it,
and reads back `FileSlice`s to send with sendfile. Files only; no sockets, no clocks of its own
(callers pass `now_ms`).
"""

from epochlog.storage.config import LogConfig
from epochlog.storage.epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)
from epochlog.storage.errors import (
    CheckpointFormatError,
    InconsistentTopicIdError,
    LeaderEpochRegressionError,
    LogDirError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from epochlog.storage.files import FileSlice
from epochlog.storage.log import AppendInfo, PartitionLog
from epochlog.storage.log_manager import LogManager
from epochlog.storage.segment import TimestampAndOffset

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AppendInfo",
    "CheckpointFormatError",
    "EpochEntry",
    "FileSlice",
    "InconsistentTopicIdError",
    "LeaderEpochCache",
    "LeaderEpochRegressionError",
    "LogConfig",
    "LogDirError",
    "LogManager",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "StorageError",
    "TimestampAndOffset",
    "UnexpectedAppendOffsetError",
]
