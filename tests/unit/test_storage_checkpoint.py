"""Kafka's checkpoint and properties files: exact text, round trips, atomic writes, clear errors."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from epochlog.storage import files
from epochlog.storage.checkpoint import (
    LeaderEpochCheckpointFile,
    MetaProperties,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    kafka_uuid_str,
    parse_kafka_uuid,
    read_meta_properties,
    write_meta_properties,
)
from epochlog.storage.epoch_cache import EpochEntry
from epochlog.storage.errors import CheckpointFormatError
from epochlog.storage.files import durable_batch, write_atomically


def test_offset_checkpoint_writes_kafkas_text_format(tmp_path: Path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write({("orders", 1): 42, ("orders", 0): 7, ("a.b-c", 12): 0})
    assert path.read_text() == "0\n3\na.b-c 12 0\norders 0 7\norders 1 42\n"
    assert OffsetCheckpointFile(path).read() == {
        ("orders", 1): 42,
        ("orders", 0): 7,
        ("a.b-c", 12): 0,
    }


def test_offset_checkpoint_missing_or_empty_reads_as_no_entries(tmp_path: Path):
    path = tmp_path / "replication-offset-checkpoint"
    assert OffsetCheckpointFile(path).read() == {}
    path.write_text("")
    assert OffsetCheckpointFile(path).read() == {}
    OffsetCheckpointFile(path).write({})
    assert path.read_text() == "0\n0\n"
    assert OffsetCheckpointFile(path).read() == {}


def test_offset_checkpoint_accepts_any_whitespace_between_fields(tmp_path: Path):
    path = tmp_path / "cp"
    path.write_text("0\n1\norders \t 3   99\n")
    assert OffsetCheckpointFile(path).read() == {("orders", 3): 99}


def test_a_leftover_tmp_file_is_ignored_and_replaced(tmp_path: Path):
    path = tmp_path / "log-start-offset-checkpoint"
    OffsetCheckpointFile(path).write({("t", 0): 5})
    (tmp_path / "log-start-offset-checkpoint.tmp").write_text("garbage from a crash")
    assert OffsetCheckpointFile(path).read() == {("t", 0): 5}
    OffsetCheckpointFile(path).write({("t", 0): 6})
    assert OffsetCheckpointFile(path).read() == {("t", 0): 6}
    assert not (tmp_path / "log-start-offset-checkpoint.tmp").exists()


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("1\n0\n", 1, "unrecognised version"),
        ("0\n", 2, "entry count is missing"),
        ("0\nx\n", 2, "not a number"),
        ("0\n1\ntopic 0\n", 3, "expected 3 fields"),
        ("0\n1\ntopic zero 5\n", 3, "partition 'zero' is not an integer"),
        ("0\n1\ntopic 0 -5\n", 3, "offset -5 is below 0"),
        ("0\n2\ntopic 0 5\n", None, "promises 2 entries, the file has 1"),
        ("0\n1\ntopic 0 5\ntopic 1 6\n", None, "promises 1 entries, the file has 2"),
    ],
)
def test_malformed_offset_checkpoint_names_the_file_and_line(tmp_path, text, line, reason):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointFormatError, match=reason) as info:
        OffsetCheckpointFile(path).read()
    assert info.value.line_number == line
    assert str(path) in str(info.value)


def test_non_utf8_checkpoint_is_a_format_error(tmp_path: Path):
    path = tmp_path / "cp"
    path.write_bytes(b"0\n1\n\xff\xfe 0 1\n")
    with pytest.raises(CheckpointFormatError, match="not UTF-8"):
        OffsetCheckpointFile(path).read()


def test_leader_epoch_checkpoint_round_trip_and_text(tmp_path: Path):
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(path).write([EpochEntry(0, 0), EpochEntry(3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert LeaderEpochCheckpointFile(path).read() == [(0, 0), (3, 120)]


def test_leader_epoch_checkpoint_with_three_fields_is_malformed(tmp_path: Path):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n1\n1 2 3\n")
    with pytest.raises(CheckpointFormatError, match="line 3"):
        LeaderEpochCheckpointFile(path).read()


def test_kafka_uuid_strings_are_url_safe_base64_without_padding():
    assert kafka_uuid_str(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    value = uuid.UUID("fb8f6a4c-ffe9-4b5c-9a1f-2c5d2c0b7e3f")
    text = kafka_uuid_str(value)
    assert len(text) == 22 and "=" not in text and "+" not in text and "/" not in text
    assert parse_kafka_uuid(text) == value
    all_ones = uuid.UUID(int=2**128 - 1)
    assert kafka_uuid_str(all_ones) == "_____________________w"


@pytest.mark.parametrize("text", ["", "AAAA", "AAAAAAAAAAAAAAAAAAAAA=", "!!!!!!!!!!!!!!!!!!!!!!"])
def test_parse_kafka_uuid_rejects_what_is_not_one(text):
    with pytest.raises(ValueError):
        parse_kafka_uuid(text)


def test_partition_metadata_is_two_lines_like_kafkas(tmp_path: Path):
    topic_id = uuid.uuid4()
    file = PartitionMetadataFile(tmp_path / "partition.metadata")
    assert file.read() is None
    file.write(topic_id)
    assert (tmp_path / "partition.metadata").read_text() == (
        f"version: 0\ntopic_id: {kafka_uuid_str(topic_id)}"
    )
    assert file.read() == topic_id


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "unrecognised version"),
        ("version: 0\n", "needs both"),
        ("version: 0\ntopic_id: nope", "not a Kafka Uuid"),
        ("version 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "line 1"),
    ],
)
def test_malformed_partition_metadata_is_reported(tmp_path: Path, text, reason):
    path = tmp_path / "partition.metadata"
    path.write_text(text)
    with pytest.raises(CheckpointFormatError, match=reason):
        PartitionMetadataFile(path).read()


def test_meta_properties_round_trip_and_java_properties_syntax(tmp_path: Path):
    path = tmp_path / "meta.properties"
    write_meta_properties(path, MetaProperties(broker_id=3, cluster_id="Xy-1_z"))
    text = path.read_text()
    assert "version=0\n" in text and "broker.id=3\n" in text and "cluster.id=Xy-1_z\n" in text
    assert read_meta_properties(path) == MetaProperties(3, "Xy-1_z")
    path.write_text("#\n#Mon Jan 01 00:00:00 UTC 2024\n! note\nbroker.id : 7\nversion=0\n\n")
    assert read_meta_properties(path) == MetaProperties(7, None)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("version=0\nbroker.id\n", "line 2"),
        ("version=0\n", "broker.id must be present"),
        ("version=1\nbroker.id=1\n", "unsupported meta.properties version"),
    ],
)
def test_malformed_meta_properties_is_reported(tmp_path: Path, text, reason):
    path = tmp_path / "meta.properties"
    path.write_text(text)
    with pytest.raises(CheckpointFormatError, match=reason):
        read_meta_properties(path)


def test_write_atomically_replaces_the_file_and_leaves_no_tmp(tmp_path: Path):
    path = tmp_path / "f"
    path.write_bytes(b"old")
    write_atomically(path, b"new")
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_writes_in_a_durable_batch_skip_fsync_and_share_one_syncfs(tmp_path: Path, monkeypatch):
    fsyncs: list[int] = []
    synced: list[set[Path]] = []
    monkeypatch.setattr(files.os, "fsync", lambda fd: fsyncs.append(fd))
    real_sync = files.sync_file_systems
    monkeypatch.setattr(files, "sync_file_systems", lambda dirs: synced.append(set(dirs)))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with durable_batch():
        with durable_batch():  # nested blocks join the outer one
            write_atomically(tmp_path / "a" / "cp", b"1")
        write_atomically(tmp_path / "b" / "cp", b"2")
        assert synced == []
    assert fsyncs == []
    assert synced == [{tmp_path / "a", tmp_path / "b"}]
    assert (tmp_path / "a" / "cp").read_bytes() == b"1"
    write_atomically(tmp_path / "a" / "cp", b"3")  # outside a batch: fsync file and directory
    assert len(fsyncs) == 2
    real_sync({tmp_path / "a", tmp_path / "b", tmp_path / "gone"})  # one syncfs, missing dir ok


def test_the_batch_syncs_even_when_its_block_raises(tmp_path: Path, monkeypatch):
    synced: list[set[Path]] = []
    monkeypatch.setattr(files, "sync_file_systems", lambda dirs: synced.append(set(dirs)))
    with pytest.raises(RuntimeError), durable_batch():
        write_atomically(tmp_path / "cp", b"1")
        raise RuntimeError("boom")
    assert synced == [{tmp_path}]
