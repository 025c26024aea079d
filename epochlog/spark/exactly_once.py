"""Exactly-once streaming writes: stage in tasks, publish in the driver's commit, resumably.

Why not the broker's idempotence. A broker deduplicates an idempotent producer's batches by
(producer id, epoch, sequence), but it allocates producer ids itself (InitProducerId) and keeps
only the last five batches per producer and partition, so a re-executed task (a new producer id)
or a re-committed micro-batch (sequences far behind) is not recognised as a replay. So the sink
is a two-phase write whose second phase can be resumed after a crash:

1. `write()` (executor) stages the task's rows in an Arrow IPC file under
   `<stagingLocation>/<batchId>/` (default stagingLocation: `<checkpointLocation>/epochlog-sink`)
   and returns its path. Nothing reaches the log. A failed or speculative attempt only leaves a
   file that no commit names.
2. `commit(messages, batchId)` (driver) publishes. The first commit of a batch writes a manifest
   (`_manifest.json`): the staged files of the successful attempts, each target partition's
   end offset, and each topic's partition count. Every record's partition is fixed from the
   manifest alone (explicit partition column, murmur2 of the key, or round robin by position),
   so the records bound for each partition form one ordered list. They are produced by one
   idempotent producer (acks=all) with a header `epochlog.spark.batch=<sink id>:<batchId>`; then
   `_published` is written and the staged files deleted.
3. A re-commit of the same batchId (Spark re-runs the batch after a crash, with new messages)
   ignores the new messages when a manifest exists and publishes the manifest's files again, but
   first counts, per partition, the records already carrying this batch's header past the
   manifest's offsets: an idempotent producer's records land in a partition in order and without
   gaps (the broker refuses a sequence gap), so they are a prefix of that partition's list, and
   exactly the rest is produced. `_published` makes later re-commits a no-op.

The staging location must be visible to the executors and the driver (on a cluster: a shared
file system, like the checkpoint itself). Consumers see the extra header on each record. All
rows of a micro-batch pass through the driver, so this mode suits modest rates (aggregates,
alerts), not bulk copies; at-least-once mode produces from the executors.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from epochlog.client import Consumer
from epochlog.client.partitioner import partition_for_key
from epochlog.spark.clients import BulkProducer, consumer_settings, wait_acked
from epochlog.spark.options import SinkOptions
from epochlog.spark.rows import OutRecord, batch_to_records

log = logging.getLogger(__name__)

BATCH_HEADER = "epochlog.spark.batch"
MANIFEST = "_manifest.json"
PUBLISHED = "_published"


@dataclass
class StagedFile(WriterCommitMessage):
    path: str
    rows: int


def sink_id(staging_location: str) -> str:
    """A short stable id of the sink (its staging location), part of every record's tag."""
    return hashlib.sha1(os.path.abspath(staging_location).encode()).hexdigest()[:16]


def batch_dir(staging_location: str, batch_id: int) -> Path:
    return Path(staging_location) / str(batch_id)


def _task_batch_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    value = context.getLocalProperty("streaming.sql.batchId") if context else None
    if value is None:
        raise RuntimeError("exactly-once writes need a streaming query (no micro-batch id)")
    return int(value)


def stage_rows(
    staging_location: str, batch_id: int, task: str, batches: Iterator[pa.RecordBatch]
) -> StagedFile:
    """Write the task's rows to one Arrow IPC file (atomically: a temp name, then rename)."""
    directory = batch_dir(staging_location, batch_id)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{task}-{uuid.uuid4().hex[:8]}.arrow"
    temp = directory / f".{final.name}.tmp"
    rows = 0
    writer = None
    try:
        for batch in batches:
            if writer is None:
                writer = ipc.new_file(str(temp), batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        return StagedFile("", 0)
    os.replace(temp, final)
    return StagedFile(str(final), rows)


def read_staged(path: str, default_topic: str | None) -> Iterator[OutRecord]:
    with pa.memory_map(path) as source:
        reader = ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield from batch_to_records(reader.get_batch(i), default_topic)


def route(
    records: list[OutRecord], partition_counts: dict[str, int]
) -> dict[tuple[str, int], list[OutRecord]]:
    """Each record's partition, decided from its content and position only."""
    out: dict[tuple[str, int], list[OutRecord]] = {}
    round_robin: dict[str, int] = {}
    for record in records:
        topic, _value, key, _headers, partition = record
        assert topic is not None
        count = partition_counts[topic]
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, count)
            else:
                partition = round_robin.get(topic, 0) % count
                round_robin[topic] = partition + 1
        out.setdefault((topic, partition), []).append(record)
    return out


def _atomic_write(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


class ExactlyOncePublisher:
    """The driver side of one micro-batch's commit (see the module docstring)."""

    def __init__(self, options: SinkOptions, batch_id: int) -> None:
        assert options.staging_location is not None
        self.options = options
        self.batch_id = batch_id
        self.directory = batch_dir(options.staging_location, batch_id)
        self.tag = f"{sink_id(options.staging_location)}:{batch_id}".encode()

    def publish(
        self,
        messages: list[WriterCommitMessage | None],
        on_progress: Callable[[int], None] | None = None,
        chunk_records: int = 50_000,
    ) -> int:
        """Publish the batch; how many records this call produced. `on_progress(n)` runs after
        each acknowledged chunk of `chunk_records` with the count so far (tests inject crashes
        there)."""
        if (self.directory / PUBLISHED).exists():
            return 0
        producer = BulkProducer.cached(self.options.client)
        manifest_path = self.directory / MANIFEST
        if manifest_path.exists():
            manifest = json.loads(manifest_path.read_text())
        else:
            files = sorted(m.path for m in messages if isinstance(m, StagedFile) and m.path)
            records = self._records(files)
            topics = sorted({r[0] for r in records if r[0] is not None})
            counts = {t: producer.partition_count(t) for t in topics}
            targets = sorted(route(records, counts))
            ends = self._end_offsets(targets)
            manifest = {
                "files": files,
                "partition_counts": counts,
                "start_offsets": [[t, p, ends[(t, p)]] for t, p in targets],
            }
            self.directory.mkdir(parents=True, exist_ok=True)
            _atomic_write(manifest_path, json.dumps(manifest))
        routed = route(self._records(manifest["files"]), manifest["partition_counts"])
        starts = {(t, p): o for t, p, o in manifest["start_offsets"]}
        produced = 0
        try:
            for tp in sorted(routed):
                present = self._count_published(tp, starts[tp])
                if present:
                    log.info(
                        "batch %s: %s-%s already has %d of its %d records",
                        self.batch_id,
                        tp[0],
                        tp[1],
                        present,
                        len(routed[tp]),
                    )
                todo = routed[tp][present:]
                for i in range(0, len(todo), chunk_records):
                    tagged = [
                        (t, v, k, h + [(BATCH_HEADER, self.tag)], tp[1])
                        for t, v, k, h, _ in todo[i : i + chunk_records]
                    ]
                    futures = producer.send_all(tagged)
                    producer.flush()
                    wait_acked(futures)
                    produced += len(tagged)
                    if on_progress is not None:
                        on_progress(produced)
        except BaseException:
            BulkProducer.forget(self.options.client)
            raise
        _atomic_write(self.directory / PUBLISHED, str(produced))
        self._clean()
        return produced

    def _records(self, files: list[str]) -> list[OutRecord]:
        return [r for path in files for r in read_staged(path, self.options.topic)]

    def _end_offsets(self, targets: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        if not targets:
            return {}
        consumer = self._consumer()
        try:
            found = consumer.end_offsets(targets)
        finally:
            consumer.close()
        return {(tp.topic, tp.partition): o for tp, o in found.items()}

    def _consumer(self) -> Consumer:
        settings = consumer_settings(self.options.client)
        return Consumer(settings)

    def _count_published(self, tp: tuple[str, int], start: int) -> int:
        """Records of this batch already in `tp` at or after `start`."""
        consumer = self._consumer()
        try:
            end = next(iter(consumer.end_offsets([tp]).values()))
            if end <= start:
                return 0
            consumer.assign([tp])
            consumer.seek(tp, start)
            count = 0
            while consumer.position(tp) < end:
                for record in consumer.poll(1.0):
                    if record.offset < end and any(
                        k == BATCH_HEADER and v == self.tag for k, v in record.headers
                    ):
                        count += 1
            return count
        finally:
            consumer.close()

    def _clean(self) -> None:
        """Drop this batch's staged files and what older batches left behind."""
        for path in self.directory.glob("*.arrow"):
            path.unlink(missing_ok=True)
        root = self.directory.parent
        for child in root.iterdir():
            if child.is_dir() and child.name.isdigit() and int(child.name) < self.batch_id - 1:
                shutil.rmtree(child, ignore_errors=True)


class ExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFile:
        from pyspark import TaskContext

        context = TaskContext.get()
        task = f"part-{context.partitionId()}-{context.attemptNumber()}" if context else "part-0-0"
        assert self.options.staging_location is not None
        return stage_rows(self.options.staging_location, _task_batch_id(), task, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        ExactlyOncePublisher(self.options, batchId).publish(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        # pyspark passes None for every message here, so files are found by directory; a batch
        # with a manifest keeps its files, since a later re-commit publishes from them.
        assert self.options.staging_location is not None
        directory = batch_dir(self.options.staging_location, batchId)
        if directory.exists() and not (directory / MANIFEST).exists():
            shutil.rmtree(directory, ignore_errors=True)
