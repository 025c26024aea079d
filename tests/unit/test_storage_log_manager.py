"""LogManager: log dirs, meta.properties, clean-shutdown marker, checkpoints, deletion."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from epochlog.protocol.records import RecordBatchBuilder, decode_batches
from epochlog.storage import InconsistentTopicIdError, LogConfig, LogDirError, LogManager
from epochlog.storage.checkpoint import (
    OffsetCheckpointFile,
    PartitionMetadataFile,
    read_meta_properties,
)

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=600)


def make_batch(count: int, tag: str = "r") -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(NOW + i, f"{tag}{i}".encode(), b"x" * 40)
    return builder.build()


def started(*dirs: Path, broker_id: int = 1, cluster_id: str | None = "c1") -> LogManager:
    manager = LogManager(list(dirs), CONFIG)
    manager.startup(broker_id, cluster_id, now_ms=NOW)
    return manager


def test_startup_writes_meta_properties_and_refuses_another_broker(tmp_path):
    manager = started(tmp_path / "d1")
    meta = read_meta_properties(tmp_path / "d1" / "meta.properties")
    assert (meta.broker_id, meta.cluster_id) == (1, "c1")
    manager.shutdown()
    with pytest.raises(LogDirError, match="broker.id 1"):
        started(tmp_path / "d1", broker_id=2)
    with pytest.raises(LogDirError, match="cluster c1"):
        started(tmp_path / "d1", cluster_id="other")


def test_a_log_dir_is_locked_while_a_manager_runs(tmp_path):
    manager = started(tmp_path / "d1")
    with pytest.raises(LogDirError, match="in use"):
        started(tmp_path / "d1")
    manager.shutdown()
    started(tmp_path / "d1").shutdown()


def test_logs_survive_a_clean_restart_with_their_checkpoints(tmp_path):
    manager = started(tmp_path / "d1")
    topic_id = uuid.uuid4()
    log = manager.get_or_create_log("orders", 3, topic_id)
    assert log.directory == (tmp_path / "d1" / "orders-3").resolve()
    for i in range(12):
        log.append_as_leader(make_batch(3, f"b{i}-"), 2, NOW)
    log.maybe_increment_log_start_offset(4, high_watermark=20)
    manager.write_high_watermarks({("orders", 3): 20})
    manager.shutdown()
    d1 = tmp_path / "d1"
    assert (d1 / ".kafka_cleanshutdown").exists()
    assert OffsetCheckpointFile(d1 / "recovery-point-offset-checkpoint").read() == {
        ("orders", 3): 36
    }
    assert OffsetCheckpointFile(d1 / "log-start-offset-checkpoint").read() == {("orders", 3): 4}

    manager.shutdown()  # a second shutdown must not overwrite the checkpoints with nothing
    assert OffsetCheckpointFile(d1 / "log-start-offset-checkpoint").read() == {("orders", 3): 4}

    again = started(d1)
    assert again.had_clean_shutdown[d1.resolve()] is True
    assert not (d1 / ".kafka_cleanshutdown").exists()  # a crash from now on is unclean
    log = again.get_log("orders", 3)
    assert (log.log_start_offset, log.log_end_offset) == (4, 36)
    assert log.topic_id == topic_id
    assert again.read_high_watermarks() == {("orders", 3): 20}
    assert decode_batches(log.read(4, 100).read_bytes())[0].base_offset == 3
    again.shutdown()


def test_a_crash_recovers_from_the_checkpointed_recovery_point(tmp_path):
    d1 = tmp_path / "d1"
    manager = started(d1)
    log = manager.get_or_create_log("t", 0)
    for i in range(20):
        log.append_as_leader(make_batch(2, f"b{i}-"), 0, NOW)
    manager.checkpoint_recovery_points()
    recovery_point = log.recovery_point
    assert 0 < recovery_point < log.log_end_offset
    end = log.log_end_offset
    tail = log.active_segment.log_path
    log.close()  # the process dies: no marker, no final checkpoints
    with open(tail, "r+b") as file:
        file.truncate(tail.stat().st_size - 7)
    manager._release_locks()  # the dead process's lock goes with it
    manager2 = LogManager([d1], CONFIG)
    manager2.startup(1, "c1", now_ms=NOW)
    assert manager2.had_clean_shutdown[d1.resolve()] is False
    recovered = manager2.get_log("t", 0)
    assert recovered.log_end_offset == end - 2
    assert recovered.log_end_offset >= recovery_point
    manager2.shutdown()


def test_new_partitions_spread_over_the_log_dirs(tmp_path):
    manager = started(tmp_path / "a", tmp_path / "b")
    for p in range(4):
        manager.get_or_create_log("t", p)
    assert len(list((tmp_path / "a").glob("t-*"))) == 2
    assert len(list((tmp_path / "b").glob("t-*"))) == 2
    manager.shutdown()
    again = started(tmp_path / "a", tmp_path / "b")
    assert sorted(again.all_logs()) == [("t", 0), ("t", 1), ("t", 2), ("t", 3)]
    again.shutdown()


def test_get_or_create_refuses_a_different_topic_id(tmp_path):
    manager = started(tmp_path / "d1")
    first = uuid.uuid4()
    log = manager.get_or_create_log("t", 0, first)
    assert manager.get_or_create_log("t", 0, first) is log
    with pytest.raises(InconsistentTopicIdError):
        manager.get_or_create_log("t", 0, uuid.uuid4())
    assert PartitionMetadataFile(log.directory / "partition.metadata").read() == first
    manager.shutdown()


@pytest.mark.parametrize("topic", ["", "..", "a/b", "x" * 250, "sp ace"])
def test_illegal_topic_names_never_become_directories(tmp_path, topic):
    manager = started(tmp_path / "d1")
    with pytest.raises(ValueError):
        manager.get_or_create_log(topic, 0)
    manager.shutdown()


def test_delete_log_removes_the_partition_and_a_half_deleted_dir_is_finished(tmp_path):
    d1 = tmp_path / "d1"
    manager = started(d1)
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(make_batch(3), 0, NOW)
    slice_ = log.read(0, 1000)
    assert manager.delete_log("t", 0) is True
    assert manager.delete_log("t", 0) is False
    assert not (d1 / "t-0").exists()
    assert not list(d1.glob("*-delete"))
    assert len(decode_batches(slice_.read_bytes())[0].records) == 3  # in-flight reads still work
    leftover = d1 / f"t-1.{uuid.uuid4().hex}-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"x")
    (d1 / "lost+found").mkdir()
    manager.shutdown()
    again = started(d1)
    assert not leftover.exists() and again.all_logs() == {}
    assert (d1 / "lost+found").exists()
    again.shutdown()


def test_retention_runs_only_where_the_high_watermark_is_known(tmp_path):
    manager = LogManager([tmp_path / "d1"], LogConfig(segment_bytes=600, retention_ms=1000))
    manager.startup(1, now_ms=NOW)
    for p in (0, 1):
        log = manager.get_or_create_log("t", p)
        for i in range(10):
            log.append_as_leader(make_batch(2, f"b{i}-"), 0, NOW)
    deleted = manager.cleanup_logs(NOW + 10_000, {("t", 0): manager.get_log("t", 0).log_end_offset})
    assert deleted > 0
    assert manager.get_log("t", 0).log_start_offset == manager.get_log("t", 0).log_end_offset
    assert manager.get_log("t", 1).log_start_offset == 0
    manager.shutdown()
