"""Log-dir failure and return (issue 14, item 3; Kafka's KIP-112 plus the way back), on real
dirs without sockets: an I/O error takes one dir offline, only its partitions answer
KAFKA_STORAGE_ERROR, its checkpoints are skipped without raising, and a usable dir comes back."""

from __future__ import annotations

import errno
import os

import pytest

from epochlog.broker.appends import append_to_leader
from epochlog.broker.collaborators import BrokerEpochHolder
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.broker.replica_manager import ReplicaManager
from epochlog.config.broker import BrokerConfig
from epochlog.protocol.errors import ErrorCode
from epochlog.storage import LogManager
from epochlog.storage.errors import LogDirOfflineError
from epochlog.storage.layout import RECOVERY_POINT_CHECKPOINT
from epochlog.storage.log_dirs import probe_dir, probe_verdict
from tests.unit.test_broker_replica_manager import batch, lai

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def test_a_dir_is_usable_when_the_probe_works_and_enough_is_free():
    assert probe_verdict(None, 10_000, 4096) is None
    assert "probe write failed" in probe_verdict(OSError(errno.EIO, "I/O error"), 10_000, 0)
    assert probe_verdict(None, 4095, 4096) == "4095 bytes free, 4096 required"


def test_probing_a_real_dir_leaves_nothing_behind(tmp_path):
    assert probe_dir(tmp_path, 1) is None
    assert os.listdir(tmp_path) == []
    assert probe_dir(tmp_path, 2**62) is not None
    assert probe_dir(tmp_path / "missing", 1) is not None


def two_dir_rm(tmp_path, **overrides):
    dirs = [tmp_path / "a", tmp_path / "b"]
    config = BrokerConfig.from_dict(
        {
            "broker.id": 1,
            "zookeeper.connect": "zk:2181",
            "log.dirs": ",".join(map(str, dirs)),
            **overrides,
        }
    )
    log_manager = LogManager(dirs)
    log_manager.startup(1)
    return ReplicaManager(
        broker_id=1,
        config=config,
        log_manager=log_manager,
        metadata_cache=MetadataCache(),
        epoch_holder=BrokerEpochHolder(100),
    )


def test_an_io_error_takes_only_its_dir_offline_and_a_usable_dir_comes_back(tmp_path):
    rm = two_dir_rm(tmp_path, **{"epochlog.log.dir.min.free.bytes": 0})
    events = []
    rm.on_storage_event = lambda: events.append("notify")
    stopped = []
    rm.on_stop_replicas = stopped.extend
    rm.apply_leader_and_isr(lai({0: [1], 1: [1]}), 6)
    lm = rm.log_manager
    failing = lm.dir_of("t", 0)
    other = lm.dir_of("t", 1)
    assert failing != other
    for p in (0, 1):
        assert append_to_leader(rm, ("t", p), batch(), 1, 9, 1000).error is ErrorCode.NONE
    checkpoint = failing / RECOVERY_POINT_CHECKPOINT
    before = checkpoint.read_bytes() if checkpoint.exists() else b""

    rm.on_io_error(("t", 0), ENOSPC)
    rm.on_io_error(("t", 0), ENOSPC)  # once is enough
    assert lm.offline_dirs == {failing: str(ENOSPC)}
    assert events == ["notify"] and stopped == [("t", 0)]
    produced = append_to_leader(rm, ("t", 0), batch(), 1, 9, 1000)
    assert produced.error is ErrorCode.KAFKA_STORAGE_ERROR
    assert append_to_leader(rm, ("t", 1), batch(), 1, 9, 1000).error is ErrorCode.NONE
    results = rm.apply_leader_and_isr(lai({0: [1], 1: [1]}, leader_epoch=1), 6)
    assert [r[3] for r in results] == [ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NONE]
    with pytest.raises(LogDirOfflineError):
        lm.get_or_create_log("t", 0)
    assert lm.get_or_create_log("u", 0).directory.parent == other  # new ones go elsewhere
    lm.checkpoint_recovery_points()  # skips the offline dir, raises nothing
    lm.checkpoint_log_start_offsets()
    assert (checkpoint.read_bytes() if checkpoint.exists() else b"") == before

    assert rm.probe_offline_dirs() == [failing]
    assert lm.offline_dirs == {} and events == ["notify", "notify"]
    results = rm.apply_leader_and_isr(lai({0: [2, 1]}, leader_epoch=2), 6)
    assert results[0][3] is ErrorCode.NONE
    assert rm.get_partition("t", 0).log_end_offset == 2  # its records survived
    lm.shutdown()


def test_a_dir_without_enough_free_space_stays_offline(tmp_path):
    rm = two_dir_rm(tmp_path, **{"epochlog.log.dir.min.free.bytes": 2**62})
    rm.apply_leader_and_isr(lai({0: [1]}), 6)
    rm.on_io_error(("t", 0), ENOSPC)
    assert rm.probe_offline_dirs() == []
    assert rm.log_manager.is_offline("t", 0)
