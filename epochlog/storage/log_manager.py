"""All partition logs of a broker, across its log dirs, and the per-dir files around them.

At startup each log dir is locked (`.lock`, so two brokers never share a dir), its
`meta.properties` is checked against the broker id and cluster id (or written), and every
`<topic>-<partition>` dir is loaded. The `.kafka_cleanshutdown` marker says how: present means
the previous shutdown flushed everything, so segments are trusted; absent means a crash, so each
log is recovered from its entry in `recovery-point-offset-checkpoint` (0 when missing). The marker
is removed once loading is done, so a crash from then on counts as unclean. `shutdown()` flushes
and closes every log, writes the recovery points and log start offsets, and puts the marker back.

New partitions go to the log dir holding the fewest. Deleting a partition renames its dir to
`<topic>-<partition>.<uuid>-delete` first, as Kafka does, so a crash half-way through leaves a
dir that the next startup finishes removing rather than a half-deleted log.

A log dir whose logs hit an I/O error (a full disk, EIO) goes offline (`handle_io_error`, Kafka's
LogDirFailureChannel, KIP-112): its logs are closed without flushing, its partitions are no longer
served (`get_log` None, `is_offline` True, creating them elsewhere is refused with
LogDirOfflineError) and its checkpoints are skipped; the listener (the replica manager) is told
once. `reload_dir` brings it back once usable (see `log_dirs.probe_dir`): its logs are recovered
from the recovery points they had, as after a crash, since the last writes may be torn.

A replica can move to another of the broker's log dirs (AlterReplicaLogDirs, Kafka's way): a
future log `<topic>-<p>.<uuid hex>-future` is created in the target dir and filled from the
current log by the replica manager's mover; `replace_current_with_future` swaps it in. The swap
renames the current dir `-delete` first (the commit point), then the future dir to
`<topic>-<p>`, so a crash in between leaves a future dir with no current log, which the next
startup promotes; a future dir found beside its current log is discarded and the move is
resumed from the start (`resumed_moves`). A partition's preferred dir (named by
AlterReplicaLogDirs before the replica existed) is where it is created.

Compacted logs are cleaned by the manager's `LogCleaner` (`cleaner.py`), which the broker starts
once it can run work on the event loop; its `cleaner-offset-checkpoint` sits in each log dir too.

The high watermarks belong to the replica manager; it writes and reads them here
(`replication-offset-checkpoint`) because the file sits in each log dir.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from epochlog.storage.checkpoint import (
    MetaProperties,
    OffsetCheckpointFile,
    read_meta_properties,
    write_meta_properties,
)
from epochlog.storage.cleaner import CleanerConfig, LogCleaner
from epochlog.storage.config import LogConfig
from epochlog.storage.errors import CheckpointFormatError, LogDirError, LogDirOfflineError
from epochlog.storage.files import fsync_dir, fsync_dir_or_batch
from epochlog.storage.layout import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    LOCK_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    future_dir_name,
    parse_future_dir_name,
    parse_partition_dir_name,
    partition_dir_name,
    validate_topic_name,
)
from epochlog.storage.log import PartitionLog

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PlannedLog:
    """A partition log to create: its dir chosen on the owner (`plan_new_logs`), its files made
    in a worker thread (`open_planned_logs`), registered on the owner (`adopt_planned_logs`)."""

    key: TopicPartition
    log_dir: Path
    config: LogConfig
    topic_id: uuid.UUID | None
    log: PartitionLog | None = None
    error: Exception | None = None


def open_planned_logs(plans: Iterable[PlannedLog]) -> None:
    """Create each planned log's dir and files (any thread: it touches only its own files).
    A failure is kept on the plan; `get_or_create_log` meets it again on the owner."""
    for plan in plans:
        try:
            plan.log = PartitionLog.open(
                plan.log_dir / partition_dir_name(*plan.key),
                plan.config,
                had_clean_shutdown=True,
                topic_id=plan.topic_id,
            )
        except Exception as exc:  # reported where the log is asked for, per partition
            plan.error = exc


class LogManager:
    """Loads, creates, deletes and checkpoints the partition logs of one broker."""

    def __init__(
        self,
        log_dirs: Sequence[str | Path],
        default_config: LogConfig | None = None,
        config_for_topic: Callable[[str], LogConfig] | None = None,
        cleaner_config: CleanerConfig | None = None,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("log.dirs is empty")
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self._config_for_topic = config_for_topic
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        # How many partitions each dir holds (where a new one goes), kept with _log_dir_of by
        # _place/_unplace: counting on every creation was quadratic (35 s for 6,667 partitions).
        self._dir_load: Counter[Path] = Counter()
        self._checkpointed: dict[Path, dict[TopicPartition, int]] = {}  # last written, per file
        self._locks: dict[Path, int] = {}
        self.had_clean_shutdown: dict[Path, bool] = {}
        # Offline dirs -> why; and the offsets their logs had when they went offline.
        self.offline_dirs: dict[Path, str] = {}
        self._offline_offsets: dict[TopicPartition, tuple[int, int]] = {}
        # Told (dir, partitions) once when a dir goes offline (the replica manager).
        self.on_dir_offline: Callable[[Path, list[TopicPartition]], None] | None = None
        # Replicas being moved to another dir: their future logs and the dirs holding them;
        # where a replica not yet created should go; moves a restart interrupted, to resume.
        self._future_logs: dict[TopicPartition, PartitionLog] = {}
        self._future_dir_of: dict[TopicPartition, Path] = {}
        self.preferred_dirs: dict[TopicPartition, Path] = {}
        self.resumed_moves: dict[TopicPartition, Path] = {}
        self._future_dirs_found: list[tuple[TopicPartition, Path]] = []
        if now_ms is None:
            self.cleaner = LogCleaner(self, cleaner_config)
        else:
            self.cleaner = LogCleaner(self, cleaner_config, now_ms=now_ms)

    # ---------------------------------------------------------------------------- startup

    def startup(
        self, broker_id: int, cluster_id: str | None = None, now_ms: int | None = None
    ) -> None:
        """Lock the dirs, check meta.properties, load every partition log."""
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        try:
            for log_dir in self.log_dirs:
                log_dir.mkdir(parents=True, exist_ok=True)
                self._lock(log_dir)
                self._check_meta_properties(log_dir, broker_id, cluster_id)
            self.cleaner.load_checkpoints()
            for log_dir in self.log_dirs:
                self._load_dir(log_dir, now)
            self._settle_future_dirs(now)
        except BaseException:
            for log in self._logs.values():
                log.close(flush=False)
            self._logs.clear()
            self._log_dir_of.clear()
            self._dir_load.clear()
            self._release_locks()
            raise

    def _lock(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirError(f"log dir {log_dir} is in use by another process") from None
        self._locks[log_dir] = fd

    def _check_meta_properties(self, log_dir: Path, broker_id: int, cluster_id: str | None) -> None:
        path = log_dir / META_PROPERTIES
        meta = read_meta_properties(path)
        if meta is None:
            write_meta_properties(path, MetaProperties(broker_id, cluster_id))
            return
        if meta.broker_id != broker_id:
            raise LogDirError(
                f"{path} belongs to broker.id {meta.broker_id}, this broker is {broker_id}"
            )
        if cluster_id is not None and meta.cluster_id not in (None, cluster_id):
            raise LogDirError(
                f"{path} belongs to cluster {meta.cluster_id}, this cluster is {cluster_id}"
            )
        if cluster_id is not None and meta.cluster_id is None:
            write_meta_properties(path, MetaProperties(broker_id, cluster_id))

    def _read_offsets(self, path: Path) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except CheckpointFormatError as exc:
            # Without it every log is recovered from its start: slow, never wrong.
            logger.warning("%s; ignoring the file", exc)
            return {}

    def _load_dir(self, log_dir: Path, now_ms: int) -> None:
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[log_dir] = clean
        recovery_points = self._read_offsets(log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT)
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            if not entry.is_dir() or entry.name.startswith("."):
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                logger.info("finishing the deletion of %s", entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            future_key = parse_future_dir_name(entry.name)
            if future_key is not None:
                self._future_dirs_found.append((future_key, Path(entry.path)))
                continue
            try:
                key = parse_partition_dir_name(entry.name)
            except ValueError:
                logger.warning("%s is not a partition dir; leaving it alone", entry.path)
                continue
            if key in self._logs:
                raise LogDirError(
                    f"partition {key[0]}-{key[1]} has dirs in both {self._log_dir_of[key]} "
                    f"and {log_dir}"
                )
            config = self._config(key[0])
            log = PartitionLog.open(
                Path(entry.path),
                config,
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=start_offsets.get(key, 0),
                had_clean_shutdown=clean,
                now_ms=now_ms,
                dense_offsets=self._dense_offsets(key, config),
            )
            self._logs[key] = log
            self._place(key, log_dir)
        if clean:
            marker.unlink()
            fsync_dir(log_dir)

    def _settle_future_dirs(self, now_ms: int) -> None:
        """Future dirs left by a restart: promote one whose current log is gone (the swap had
        passed its commit point), discard the others and remember their moves to resume."""
        found, self._future_dirs_found = self._future_dirs_found, []
        for key, path in found:
            log_dir = path.parent
            if key in self._logs:
                logger.warning(
                    "discarding %s: the move of %s-%d to %s was interrupted; it restarts when "
                    "the replica is served again",
                    path,
                    key[0],
                    key[1],
                    log_dir,
                )
                shutil.rmtree(path, ignore_errors=True)
                if self._log_dir_of[key] != log_dir:
                    self.resumed_moves[key] = log_dir
                continue
            target = log_dir / partition_dir_name(*key)
            logger.warning("finishing the move of %s-%d: %s becomes %s", *key, path, target)
            os.rename(path, target)
            fsync_dir(log_dir)
            config = self._config(key[0])
            self._logs[key] = PartitionLog.open(
                target,
                config,
                had_clean_shutdown=False,
                now_ms=now_ms,
                dense_offsets=self._dense_offsets(key, config),
            )
            self._place(key, log_dir)

    def _place(self, key: TopicPartition, log_dir: Path) -> None:
        self._unplace(key)
        self._log_dir_of[key] = log_dir
        self._dir_load[log_dir] += 1

    def _unplace(self, key: TopicPartition) -> Path | None:
        log_dir = self._log_dir_of.pop(key, None)
        if log_dir is not None:
            self._dir_load[log_dir] -= 1
        return log_dir

    # --------------------------------------------------------------- moves between dirs

    def future_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._future_logs.get((topic, partition))

    def future_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._future_dir_of.get((topic, partition))

    def all_future_logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._future_logs)

    def dir_for(self, path: str | Path) -> Path | None:
        """The configured log dir that `path` names (absolute), or None."""
        try:
            wanted = Path(path).resolve()
        except (OSError, RuntimeError):
            return None
        return wanted if wanted in self.log_dirs else None

    def set_preferred_dir(self, topic: str, partition: int, log_dir: Path) -> None:
        """Create the replica in `log_dir` when it is created (Kafka's maybeUpdatePreferredLogDir:
        not remembered when its current or future log is there already)."""
        key = (topic, partition)
        if self._log_dir_of.get(key) == log_dir or self._future_dir_of.get(key) == log_dir:
            return
        self.preferred_dirs[key] = log_dir

    def create_future_log(self, topic: str, partition: int, log_dir: Path) -> PartitionLog:
        """An empty future log for the replica in `log_dir`, starting where the current log's
        first segment starts (batches are then copied in as a follower appends them)."""
        key = (topic, partition)
        current = self._logs.get(key)
        if current is None:
            raise LogDirOfflineError(f"{topic}-{partition}: no current log to move")
        if log_dir in self.offline_dirs or log_dir not in self.log_dirs:
            raise LogDirOfflineError(f"{topic}-{partition}: log dir {log_dir} is not usable")
        self.remove_future_log(topic, partition)
        directory = log_dir / future_dir_name(topic, partition, uuid.uuid4().hex)
        future = PartitionLog.open(
            directory,
            current.config,
            had_clean_shutdown=True,
            topic_id=current.topic_id,
            dense_offsets=current.dense_offsets,
        )
        start = current.segments[0].base_offset
        if start != future.log_end_offset:
            future.truncate_fully_and_start_at(start)
        fsync_dir(log_dir)
        self._future_logs[key] = future
        self._future_dir_of[key] = log_dir
        return future

    def remove_future_log(self, topic: str, partition: int) -> bool:
        """Abandon the replica's move: close and delete its future log."""
        key = (topic, partition)
        future = self._future_logs.pop(key, None)
        log_dir = self._future_dir_of.pop(key, None)
        if future is None or log_dir is None:
            return False
        with contextlib.suppress(OSError):
            future.close(flush=False)
        if log_dir not in self.offline_dirs:
            shutil.rmtree(future.directory, ignore_errors=True)
        return True

    def replace_current_with_future(self, topic: str, partition: int) -> PartitionLog:
        """Swap the caught-up future log in for the current one; returns the new current log.

        The caller checked that the future log holds exactly the current log's batches, and
        runs this on the logs' owner with nothing in between (Kafka's partition lock). Order:
        the future log is flushed and closed; the current dir is renamed `-delete` (the commit
        point: from here a restart promotes the future dir); the future dir is renamed to the
        partition's dir name; the new log is opened from it; the old one is closed and deleted.
        """
        key = (topic, partition)
        current = self._logs[key]
        future = self._future_logs[key]
        old_dir = self._log_dir_of[key]
        new_dir = self._future_dir_of[key]
        for entry in current.leader_epoch_cache.entries:
            future.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
        log_start = current.log_start_offset
        future.close(flush=True)
        doomed = old_dir / f"{current.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.rename(current.directory, doomed)
        fsync_dir(old_dir)
        target = new_dir / partition_dir_name(topic, partition)
        os.rename(future.directory, target)
        fsync_dir(new_dir)
        moved = PartitionLog.open(
            target,
            current.config,
            log_start_offset=log_start,
            had_clean_shutdown=True,
            dense_offsets=current.dense_offsets,
        )
        moved.recovery_point = moved.log_end_offset  # flushed by the close above
        del self._future_logs[key], self._future_dir_of[key]
        self._logs[key] = moved
        self._place(key, new_dir)
        self.preferred_dirs.pop(key, None)
        with contextlib.suppress(OSError):
            current.close(flush=False)
        shutil.rmtree(doomed, ignore_errors=True)
        logger.info("%s-%d moved from %s to %s", topic, partition, old_dir, new_dir)
        return moved

    # --------------------------------------------------------------------- offline dirs

    def dir_of(self, topic: str, partition: int) -> Path | None:
        return self._log_dir_of.get((topic, partition))

    def is_offline(self, topic: str, partition: int) -> bool:
        """The partition has a log in a dir that is offline."""
        log_dir = self._log_dir_of.get((topic, partition))
        return log_dir is not None and log_dir in self.offline_dirs

    def handle_io_error(self, log_dir: Path | None, error: OSError) -> None:
        """An I/O error in `log_dir`: take it offline (once)."""
        if log_dir is None or log_dir in self.offline_dirs:
            return
        self.mark_dir_offline(log_dir, str(error))

    def mark_dir_offline(self, log_dir: Path, reason: str) -> list[TopicPartition]:
        """Close the dir's logs (no flush: the dir is failing), stop serving and checkpointing
        it, tell the listener. Returns its partitions."""
        self.offline_dirs[log_dir] = reason
        keys = sorted(k for k, d in self._log_dir_of.items() if d == log_dir)
        for key in keys:
            log = self._logs.pop(key, None)
            if log is None:
                continue
            self._offline_offsets[key] = (log.recovery_point, log.log_start_offset)
            with contextlib.suppress(OSError):  # the descriptors go with the objects anyway
                log.close(flush=False)
        for key in [k for k, d in self._future_dir_of.items() if d == log_dir]:
            self.remove_future_log(*key)  # the move is abandoned; its dir is failing
        logger.error(
            "log dir %s is offline (%s): its %d partitions answer KAFKA_STORAGE_ERROR and its "
            "checkpoints are skipped until it is usable again",
            log_dir,
            reason,
            len(keys),
        )
        if self.on_dir_offline is not None:
            self.on_dir_offline(log_dir, keys)
        return keys

    def reload_dir(self, log_dir: Path, now_ms: int | None = None) -> list[TopicPartition]:
        """Bring an offline dir back: recover each of its logs from the recovery point it had
        (its last writes may be torn), serve them again. Returns its partitions."""
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        keys = sorted(k for k, d in self._log_dir_of.items() if d == log_dir)
        for key in keys:
            recovery_point, start = self._offline_offsets.pop(key, (0, 0))
            config = self._config(key[0])
            self._logs[key] = PartitionLog.open(
                log_dir / partition_dir_name(*key),
                config,
                recovery_point=recovery_point,
                log_start_offset=start,
                had_clean_shutdown=False,
                now_ms=now,
                dense_offsets=self._dense_offsets(key, config),
            )
        del self.offline_dirs[log_dir]
        logger.warning("log dir %s is online again with %d partitions", log_dir, len(keys))
        return keys

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def _dense_offsets(self, key: TopicPartition, config: LogConfig) -> bool:
        """A hole in a log's offsets is damage unless the log is compacted, or was (the cleaner
        has a checkpoint for it: its topic may have gone back to `delete` since)."""
        return not config.compact and self.cleaner.checkpoint_of(key) is None

    def _config(self, topic: str) -> LogConfig:
        if self._config_for_topic is not None:
            return self._config_for_topic(topic)
        return self.default_config

    # ------------------------------------------------------------------------------- logs

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._logs)

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None = None,
        config: LogConfig | None = None,
    ) -> PartitionLog:
        """The partition's log, created empty in the least-loaded log dir if it has none.
        A topic id different from the one recorded raises InconsistentTopicIdError."""
        key = (topic, partition)
        log = self._logs.get(key)
        if log is not None:
            if topic_id is not None:
                log.assign_topic_id(topic_id)
            if config is not None:
                log.config = config
            return log
        offline = self._log_dir_of.get(key)
        if offline is not None:
            raise LogDirOfflineError(
                f"{topic}-{partition}: log dir {offline} is offline ({self.offline_dirs[offline]})"
            )
        validate_topic_name(topic)
        if partition < 0:
            raise ValueError(f"partition {partition} of {topic} is negative")
        if not self.online_dirs:
            raise LogDirOfflineError(f"{topic}-{partition}: every log dir is offline")
        preferred = self.preferred_dirs.pop(key, None)
        if preferred is not None and preferred in self.online_dirs:
            log_dir = preferred
        else:
            log_dir = min(self.online_dirs, key=lambda d: self._dir_load[d])
        directory = log_dir / partition_dir_name(topic, partition)
        log = PartitionLog.open(
            directory,
            config or self._config(topic),
            had_clean_shutdown=True,
            topic_id=topic_id,
        )
        fsync_dir_or_batch(log_dir)
        self._logs[key] = log
        self._place(key, log_dir)
        return log

    def plan_new_logs(
        self, specs: Iterable[tuple[str, int, uuid.UUID | None, LogConfig]]
    ) -> list[PlannedLog]:
        """Choose a dir for each (topic, partition, topic id, config) that has no log yet and
        could get one; the others are left to `get_or_create_log`, which reports why not.
        The chosen dirs count as holding the partitions until `adopt_planned_logs`."""
        plans: list[PlannedLog] = []
        online = self.online_dirs
        if not online:
            return plans
        for topic, partition, topic_id, config in specs:
            key = (topic, partition)
            if key in self._logs or key in self._log_dir_of or partition < 0:
                continue
            try:
                validate_topic_name(topic)
            except ValueError:
                continue
            preferred = self.preferred_dirs.get(key)
            if preferred is not None and preferred in online:
                log_dir = preferred
            else:
                log_dir = min(online, key=lambda d: self._dir_load[d])
            self._dir_load[log_dir] += 1
            plans.append(PlannedLog(key, log_dir, config, topic_id))
        return plans

    def adopt_planned_logs(self, plans: Iterable[PlannedLog]) -> None:
        """Register the logs `open_planned_logs` created; a failed one is left to
        `get_or_create_log`. Their dirs' creation joins the current durable batch."""
        for plan in plans:
            self._dir_load[plan.log_dir] -= 1
            log = plan.log
            if log is None:
                continue
            if plan.key in self._logs or plan.log_dir in self.offline_dirs:
                # Created meanwhile by someone else, or its dir failed: not ours to register.
                with contextlib.suppress(OSError):
                    log.close(flush=False)
                continue
            self.preferred_dirs.pop(plan.key, None)
            fsync_dir_or_batch(plan.log_dir)
            self._logs[plan.key] = log
            self._place(plan.key, plan.log_dir)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove a partition's log and dir; False if there was none."""
        key = (topic, partition)
        self.remove_future_log(topic, partition)
        self.preferred_dirs.pop(key, None)
        self.resumed_moves.pop(key, None)
        log = self._logs.pop(key, None)
        if log is None:
            return False
        log_dir = self._unplace(key)
        assert log_dir is not None
        self.cleaner.forget(key)
        log.close(flush=False)
        doomed = log_dir / f"{log.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.rename(log.directory, doomed)
        fsync_dir_or_batch(log_dir)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def cleanup_logs(self, now_ms: int, high_watermarks: Mapping[TopicPartition, int]) -> int:
        """Retention for every log whose high watermark is known; segments deleted."""
        deleted = 0
        for key, log in self._logs.items():
            high_watermark = high_watermarks.get(key)
            if high_watermark is not None:
                deleted += log.delete_old_segments(now_ms, high_watermark)
        return deleted

    def flush_all(self) -> None:
        for log in self._logs.values():
            log.flush()

    # ------------------------------------------------------------------------ checkpoints

    def _per_dir(self, logs: Iterable[TopicPartition]) -> dict[Path, list[TopicPartition]]:
        """The online dirs with their partitions among `logs` (offline dirs are skipped)."""
        result: dict[Path, list[TopicPartition]] = {d: [] for d in self.online_dirs}
        for key in logs:
            keys = result.get(self._log_dir_of[key])
            if keys is not None:
                keys.append(key)
        return result

    def _write_checkpoint(self, path: Path, offsets: Mapping[TopicPartition, int]) -> None:
        """Write one dir's checkpoint; an I/O error takes the dir offline instead of raising.
        What this manager last wrote there unchanged (an idle broker, every interval) is not
        written again: each write is a temporary file, an fsync and a rename."""
        content = dict(offsets)
        if self._checkpointed.get(path) == content and path.exists():
            return
        self._checkpointed.pop(path, None)
        try:
            OffsetCheckpointFile(path).write(content)
        except OSError as exc:
            self.handle_io_error(path.parent, exc)
            return
        self._checkpointed[path] = content

    def flush_dirty_logs(self, now_ms: int) -> int:
        """Kafka's log flusher: fsync the logs whose flush.ms has passed; how many. An I/O
        error takes that log's dir offline."""
        flushed = 0
        for key, log in list(self._logs.items()):
            try:
                flushed += log.flush_if_due(now_ms)
            except OSError as exc:
                self.handle_io_error(self._log_dir_of.get(key), exc)
        return flushed

    def checkpoint_recovery_points(self) -> None:
        for log_dir, keys in self._per_dir(self._logs).items():
            self._write_checkpoint(
                log_dir / RECOVERY_POINT_CHECKPOINT,
                {key: self._logs[key].recovery_point for key in keys},
            )

    def checkpoint_log_start_offsets(self) -> None:
        for log_dir, keys in self._per_dir(self._logs).items():
            self._write_checkpoint(
                log_dir / LOG_START_OFFSET_CHECKPOINT,
                {key: self._logs[key].log_start_offset for key in keys},
            )

    def write_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """replication-offset-checkpoint of every online dir, for the partitions it holds."""
        known = [key for key in high_watermarks if key in self._log_dir_of]
        for log_dir, keys in self._per_dir(known).items():
            self._write_checkpoint(
                log_dir / REPLICATION_OFFSET_CHECKPOINT, {key: high_watermarks[key] for key in keys}
            )

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        result: dict[TopicPartition, int] = {}
        for log_dir in self.log_dirs:
            result.update(self._read_offsets(log_dir / REPLICATION_OFFSET_CHECKPOINT))
        return result

    # --------------------------------------------------------------------------- shutdown

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint, and mark each dir cleanly shut down."""
        if not self._locks:
            return  # never started, or already shut down: the checkpoints on disk stand
        self.cleaner.shutdown()
        for key, future in list(self._future_logs.items()):
            # Left on disk: the next startup discards it and resumes the move.
            with contextlib.suppress(OSError):
                future.close(flush=False)
            self.resumed_moves[key] = self._future_dir_of[key]
        self._future_logs.clear()
        self._future_dir_of.clear()
        for key, log in list(self._logs.items()):
            try:
                log.close()
            except OSError as exc:
                self.handle_io_error(self._log_dir_of.get(key), exc)
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        for log_dir in self.online_dirs:  # an offline dir recovers at the next start
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            with open(marker, "wb") as out:
                os.fsync(out.fileno())
            fsync_dir(log_dir)
        self._logs.clear()
        self._log_dir_of.clear()
        self._dir_load.clear()
        self._release_locks()

    def _release_locks(self) -> None:
        for fd in self._locks.values():
            os.close(fd)
        self._locks.clear()
