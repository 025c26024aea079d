"""Moving a replica between log dirs: the future log, the copy while appends go on, the swap,
and what a restart does with a move it interrupted (LogManager + ReplicaMover, no broker)."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from epochlog.broker.replica_mover import ReplicaMover
from epochlog.protocol.records import RecordBatchBuilder, decode_batches
from epochlog.storage import LogConfig, LogManager, PartitionLog

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=2000)
KEY = ("orders", 0)


def make_batch(count: int, tag: str) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(NOW + i, f"{tag}{i}".encode(), b"x" * 40)
    return builder.build()


def started(*dirs: Path) -> LogManager:
    manager = LogManager(list(dirs), CONFIG)
    manager.startup(1, "c1", now_ms=NOW)
    return manager


def crash(manager: LogManager) -> None:
    """The process dies: nothing flushed, its locks released."""
    for log in list(manager.all_logs().values()) + list(manager.all_future_logs().values()):
        log.close(flush=False)
    manager._release_locks()


def values(log: PartitionLog) -> list[tuple[int, bytes]]:
    found: list[tuple[int, bytes]] = []
    offset = 0
    while offset < log.log_end_offset:
        data = log.read_for_copy(offset, 1 << 30).read_bytes()
        batches = decode_batches(data)
        found += [(r.offset, r.key) for b in batches for r in b.records]
        offset = batches[-1].next_offset
    return found


class Hosted:
    """The replica manager's part: the partition serves whatever log it was last given."""

    def __init__(self, manager: LogManager) -> None:
        self.manager = manager
        self.logs = dict(manager.all_logs())

    def hosted_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def use_moved_log(self, topic: str, partition: int, moved: PartitionLog) -> None:
        self.logs[(topic, partition)] = moved


def with_log(tmp_path: Path, batches: int) -> tuple[LogManager, PartitionLog, Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    manager = started(a, b)
    manager.preferred_dirs[KEY] = a.resolve()
    log = manager.get_or_create_log(*KEY, uuid.uuid4())
    for i in range(batches):
        log.append_as_leader(make_batch(5, f"b{i}-"), 3, NOW)
    return manager, log, a.resolve(), b.resolve()


def test_a_replica_moves_while_appends_go_on_and_the_old_dir_is_left_empty_of_it(tmp_path):
    manager, log, a, b = with_log(tmp_path, 30)
    hosted = Hosted(manager)
    mover = ReplicaMover(manager, hosted, chunk_bytes=700)

    async def move_while_appending() -> int:
        mover.start(*KEY, b)
        future = manager.future_log(*KEY)
        assert future is not None and future.directory.name.endswith("-future")
        assert future.directory.parent == b
        appended = 0
        while mover.is_moving(KEY):
            hosted.logs[KEY].append_as_leader(make_batch(2, f"late{appended}-"), 4, NOW)
            appended += 1
            await asyncio.sleep(0)
        return appended

    appended = asyncio.run(move_while_appending())
    assert appended > 0 and mover.moves_done == 1
    moved = hosted.logs[KEY]
    assert manager.get_log(*KEY) is moved and manager.dir_of(*KEY) == b
    assert moved.directory == b / "orders-0"
    assert manager.future_log(*KEY) is None
    assert [p.name for p in a.iterdir() if p.name.startswith("orders")] == []
    offsets = [o for o, _ in values(moved)]
    assert offsets == list(range(30 * 5 + appended * 2))  # every record, once, in order
    assert moved.leader_epoch_cache.entries == log.leader_epoch_cache.entries
    moved.append_as_leader(make_batch(1, "after"), 4, NOW)  # it serves on
    end = moved.log_end_offset
    manager.shutdown()
    again = started(tmp_path / "a", tmp_path / "b")
    assert again.dir_of(*KEY) == b and again.get_log(*KEY).log_end_offset == end
    again.shutdown()


def test_a_move_restarts_when_the_current_log_is_truncated(tmp_path):
    manager, log, a, b = with_log(tmp_path, 20)
    hosted = Hosted(manager)
    mover = ReplicaMover(manager, hosted, chunk_bytes=500)

    async def truncate_during_the_move() -> None:
        mover.start(*KEY, b)
        while (manager.future_log(*KEY) or log).log_end_offset < 30:
            await asyncio.sleep(0)
        # A follower truncation below what was copied, then the new leader's batches.
        log.truncate_to(10)
        log.append_as_follower(_epoch_batch(10, 5, "new"))
        while mover.is_moving(KEY):
            await asyncio.sleep(0)

    asyncio.run(truncate_during_the_move())
    moved = hosted.logs[KEY]
    assert manager.dir_of(*KEY) == b
    keys = [k for _, k in values(moved)]
    assert keys == [f"b{i}-{j}".encode() for i in range(2) for j in range(5)] + [b"new0", b"new1"]
    manager.shutdown()


def _epoch_batch(base_offset: int, epoch: int, tag: str) -> bytes:
    builder = RecordBatchBuilder(base_offset=base_offset, partition_leader_epoch=epoch)
    for i in range(2):
        builder.append(NOW + i, f"{tag}{i}".encode(), b"y" * 10)
    return builder.build()


def test_a_crash_after_the_commit_point_promotes_the_future_log(tmp_path):
    manager, log, a, b = with_log(tmp_path, 10)
    future = manager.create_future_log(*KEY, b)
    while future.log_end_offset < log.log_end_offset:
        future.append_as_follower(log.read_for_copy(future.log_end_offset, 1 << 30).read_bytes())
    future.flush()
    expected = values(log)
    # The swap's commit point: the current dir is renamed -delete; then the process dies.
    os.rename(log.directory, a / f"orders-0.{uuid.uuid4().hex}-delete")
    crash(manager)
    again = started(tmp_path / "a", tmp_path / "b")
    assert again.dir_of(*KEY) == b
    assert values(again.get_log(*KEY)) == expected
    assert sorted(p.name for p in b.iterdir() if p.name.startswith("orders")) == ["orders-0"]
    assert not [p for p in a.iterdir() if p.name.startswith("orders")]
    assert again.resumed_moves == {}
    again.shutdown()


def test_a_future_log_beside_its_current_log_is_discarded_and_the_move_resumed(tmp_path):
    manager, log, a, b = with_log(tmp_path, 10)
    future = manager.create_future_log(*KEY, b)
    future.append_as_follower(log.read_for_copy(0, 300).read_bytes())
    crash(manager)
    again = started(tmp_path / "a", tmp_path / "b")
    assert again.dir_of(*KEY) == a
    assert len(values(again.get_log(*KEY))) == 50
    assert not [p for p in b.iterdir() if p.name.endswith("-future")]
    assert again.resumed_moves == {KEY: b}
    again.shutdown()


def test_a_preferred_dir_is_where_a_new_replica_is_created(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    manager = started(a, b)
    manager.get_or_create_log("other", 0)
    crowded = manager.dir_of("other", 0)
    empty = b.resolve() if crowded == a.resolve() else a.resolve()
    manager.set_preferred_dir("other", 1, crowded)
    manager.get_or_create_log("other", 1)
    assert manager.dir_of("other", 1) == crowded  # not the least loaded dir
    assert manager.dir_of("other", 1) != empty
    assert manager.preferred_dirs == {}
    manager.shutdown()


def test_abandoning_a_move_deletes_the_future_log(tmp_path):
    manager, log, a, b = with_log(tmp_path, 5)
    future = manager.create_future_log(*KEY, b)
    assert future.directory.exists()
    assert manager.remove_future_log(*KEY)
    assert not future.directory.exists() and manager.future_log(*KEY) is None
    assert manager.dir_of(*KEY) == a
    manager.shutdown()
