"""The produce path: leader appends with acks 0, 1 or -1 (all).

`append_records` takes the partitions of one Produce request. Each partition is looked up
(UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER), its records validated
(`produce_validation`), checked against the producer state (idempotence) and appended by the
partition; a failure touches that partition only. With acks 0 or 1 the results are final at
once. With acks=all the request then waits in the produce purgatory (`DelayedProduce`) until
the HW of every appended partition passes its last offset: the followers in the (maximal) ISR
have it. With the ISR being just the leader that is immediately. A partition that loses
leadership meanwhile answers NOT_LEADER_OR_FOLLOWER; one whose ISR shrank below
min.insync.replicas before that answers NOT_ENOUGH_REPLICAS_AFTER_APPEND (the HW stays frozen
below min.insync.replicas, so waiting longer would only time out); one still waiting when the
request's timeout expires answers REQUEST_TIMED_OUT (the records may still become committed, as
in Kafka).

A batch whose codec is not the topic's compression.type (unless that is `producer`) is rebuilt
with the topic's codec between validation and the append (`apply_topic_compression`,
`protocol/recompression.py`), as Kafka's LogValidator does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from epochlog.broker.delayed import DelayedOperation
from epochlog.broker.isr_rules import delayed_produce_status
from epochlog.broker.partition import PartitionError
from epochlog.broker.produce_validation import ProduceValidationError, validate_partition_records
from epochlog.broker.replica_manager import ReplicaManager, TopicPartition, now_ms
from epochlog.protocol.errors import CorruptRecordError, ErrorCode, InvalidRecordError
from epochlog.protocol.recompression import PRODUCER as PRODUCER_COMPRESSION
from epochlog.protocol.recompression import rebuild_batch, rebuild_codec
from epochlog.protocol.records import BatchHeader, parse_batch_header
from epochlog.storage import LogConfig, StorageError

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ProducePartitionResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    # (index of the record in its batch, message): Produce v8+ RecordErrors
    record_errors: list[tuple[int, str]] = field(default_factory=list)


def append_to_leader(
    rm: ReplicaManager,
    key: TopicPartition,
    records: bytes | None,
    required_acks: int,
    version: int,
    now: int,
    from_coordinator: bool = False,
) -> ProducePartitionResult:
    """Append one partition's batch as leader; errors become the partition's result.
    `from_coordinator`: the group coordinator's transactional offsets batch."""
    topic, index = key
    try:
        partition = rm.partition_or_error(topic, index)
        injected = rm.faults.storage_error(rm.broker_id)  # tests: a failing disk
        if injected is not None:
            raise injected
        config = partition.log.config
        rules = _rules(config)
        where = f"{topic}-{index}"
        header = validate_partition_records(
            records,
            version=version,
            max_message_bytes=rules.max_message_bytes,
            where=where,
            max_decompressed_bytes=rules.max_decompressed_bytes,
            log_append_time=rules.log_append_time,
            require_keys=rules.compact,
        )
        assert records is not None
        if rules.may_recompress:
            records, header = apply_topic_compression(records, header, config, where)
        result = partition.append_records_as_leader(
            records,
            header,
            required_acks,
            partition.settings.min_insync_replicas,
            now,
            from_coordinator=from_coordinator,
        )
    except ProduceValidationError as exc:
        level = logging.WARNING if exc.error_code in _LOUD else logging.DEBUG
        log.log(level, "produce to %s-%d: %s", topic, index, exc)
        return ProducePartitionResult(exc.error_code, str(exc), record_errors=exc.record_errors)
    except (PartitionError, StorageError) as failed:
        level = logging.WARNING if failed.error_code in _LOUD else logging.DEBUG
        log.log(level, "produce to %s-%d: %s", topic, index, failed)
        return ProducePartitionResult(failed.error_code, str(failed))
    except (CorruptRecordError, InvalidRecordError) as corrupt:
        log.warning("produce to %s-%d: %s", topic, index, corrupt)
        return ProducePartitionResult(corrupt.error_code, str(corrupt))
    except OSError as io_error:
        log.error("produce to %s-%d: cannot write the log: %s", topic, index, io_error)
        rm.on_io_error(key, io_error)  # its log dir goes offline (KIP-112)
        return ProducePartitionResult(
            ErrorCode.KAFKA_STORAGE_ERROR, f"log write failed: {io_error}"
        )
    if not result.duplicate:
        rm.on_leader_append(key, result.high_watermark_moved)
        traffic = rm.traffic
        if traffic is not None:
            traffic.record_in(topic, result.last_offset - result.first_offset + 1, len(records))
    return ProducePartitionResult(
        base_offset=result.first_offset,
        last_offset=result.last_offset,
        log_append_time=result.log_append_time,
        log_start_offset=result.log_start_offset,
    )


class _AppendRules(NamedTuple):
    """What a topic's LogConfig asks of a produced batch, read once per config object (its
    properties parse strings, and every produce asks)."""

    max_message_bytes: int
    max_decompressed_bytes: int
    log_append_time: bool
    compact: bool
    may_recompress: bool  # compression.type is not `producer`


# id(config) -> (config, rules): a LogConfig is frozen and replaced, never changed, when a
# topic's config changes; the identity check keeps a reused id from matching.
_RULES: dict[int, tuple[LogConfig, _AppendRules]] = {}
_RULES_MAX = 4096


def _rules(config: LogConfig) -> _AppendRules:
    cached = _RULES.get(id(config))
    if cached is not None and cached[0] is config:
        return cached[1]
    rules = _AppendRules(
        config.max_message_bytes,
        config.max_decompressed_bytes,
        config.log_append_time,
        config.compact,
        config.compression_type != PRODUCER_COMPRESSION,
    )
    if len(_RULES) >= _RULES_MAX:
        _RULES.clear()
    _RULES[id(config)] = (config, rules)
    return rules


def apply_topic_compression(
    records: bytes, header: BatchHeader, config: LogConfig, where: str
) -> tuple[bytes, BatchHeader]:
    """The validated batch as the topic's compression.type stores it: as sent, or rebuilt with
    the topic's codec (Kafka's LogValidator). A rebuilt batch past max.message.bytes is
    MESSAGE_TOO_LARGE, as Kafka's UnifiedLog checks a batch whose size may have changed."""
    codec = rebuild_codec(header.compression, config.compression_type)
    if codec is None:
        return records, header
    rebuilt = rebuild_batch(
        records,
        header,
        codec,
        max_decompressed_bytes=config.max_decompressed_bytes,
        level=config.compression_level(codec),
    )
    if len(rebuilt) > config.max_message_bytes:
        raise ProduceValidationError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"{where}: message batch size is {len(rebuilt)} bytes once rebuilt with "
            f"compression.type={config.compression_type}, which exceeds max.message.bytes "
            f"{config.max_message_bytes}",
        )
    return rebuilt, parse_batch_header(rebuilt, 0)


_LOUD = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.INVALID_RECORD,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


class DelayedProduce(DelayedOperation):
    """Waits until each partition's HW reaches its required offset (last offset + 1)."""

    def __init__(
        self,
        timeout_ms: int,
        rm: ReplicaManager,
        required_offsets: dict[TopicPartition, int],
        results: dict[TopicPartition, ProducePartitionResult],
        future: asyncio.Future[Any],
        respond: Respond | None = None,
    ) -> None:
        super().__init__(timeout_ms)
        self.rm = rm
        self.pending = dict(required_offsets)
        self.results = results
        self.future = future
        self.respond = respond

    def try_complete(self) -> bool:
        for key, required in list(self.pending.items()):
            partition = self.rm.get_partition(*key)
            if partition is None or not partition.is_leader:
                self.results[key].error = ErrorCode.NOT_LEADER_OR_FOLLOWER
                self.results[key].message = "leadership moved before the append was replicated"
                del self.pending[key]
            else:
                status = delayed_produce_status(
                    high_watermark=partition.high_watermark,
                    required_offset=required,
                    maximal_isr_size=len(partition.maximal_isr),
                    min_insync_replicas=partition.settings.min_insync_replicas,
                )
                if status is None:
                    continue
                if status is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
                    self.results[key].error = status
                    self.results[key].message = (
                        f"ISR {list(partition.maximal_isr)} shrank below min.insync.replicas "
                        f"{partition.settings.min_insync_replicas}"
                    )
                del self.pending[key]
        if not self.pending:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        for key in self.pending:
            self.results[key].error = ErrorCode.REQUEST_TIMED_OUT
            self.results[key].message = "the append was not replicated within the timeout"
        _settle(self.future, self.results, self.respond)


def start_append_records(
    rm: ReplicaManager,
    *,
    timeout_ms: int,
    required_acks: int,
    entries: list[tuple[TopicPartition, bytes | None]],
    version: int,
    from_coordinator: bool = False,
    respond: Respond | None = None,
) -> asyncio.Future[Any]:
    """Append every partition now; the future gets the results (or `respond(results)`, or the
    exception it raises), at once or (acks=all) once they are replicated."""
    now = now_ms()
    results = {
        key: append_to_leader(rm, key, records, required_acks, version, now, from_coordinator)
        for key, records in entries
    }
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    required = {
        key: result.last_offset + 1
        for key, result in results.items()
        if result.error is ErrorCode.NONE
    }
    if required_acks != -1 or not required:
        _settle(future, results, respond)
        return future
    op = DelayedProduce(timeout_ms, rm, required, results, future, respond)
    rm.produce_purgatory.try_complete_else_watch(op, list(required))
    return future


Respond = Callable[[dict[TopicPartition, "ProducePartitionResult"]], Any]


def _settle(
    future: asyncio.Future[Any],
    results: dict[TopicPartition, ProducePartitionResult],
    respond: Respond | None,
) -> None:
    """Resolve `future` with the results, or with what `respond` makes of them."""
    if future.done():
        return  # its waiter has gone (connection closed, task cancelled)
    if respond is None:
        future.set_result(results)
        return
    try:
        future.set_result(respond(results))
    except Exception as exc:  # CloseConnection, or a bug reported to the server
        future.set_exception(exc)


async def append_records(
    rm: ReplicaManager,
    *,
    timeout_ms: int,
    required_acks: int,
    entries: list[tuple[TopicPartition, bytes | None]],
    version: int,
) -> dict[TopicPartition, ProducePartitionResult]:
    """Append every partition; with acks=all, wait until they are replicated."""
    return await start_append_records(
        rm, timeout_ms=timeout_ms, required_acks=required_acks, entries=entries, version=version
    )
