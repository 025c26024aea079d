"""A LeaderAndIsr for many partitions applied in steps (issue 20, item 3): the same results as
the one-step apply, new logs created off the loop and spread over the log dirs, and the loop
free to serve between steps."""

from __future__ import annotations

import asyncio
import uuid

from epochlog.broker.collaborators import BrokerEpochHolder
from epochlog.broker.harness import leader_and_isr_request
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.broker.replica_manager import ReplicaManager
from epochlog.config.broker import BrokerConfig
from epochlog.protocol.errors import ErrorCode
from epochlog.storage import LogManager
from epochlog.storage.config import LogConfig
from epochlog.storage.log_manager import open_planned_logs

TOPIC_ID = uuid.uuid4()


def make_rm(*dirs):
    config = BrokerConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "zk:2181", "log.dirs": ",".join(map(str, dirs))}
    )
    log_manager = LogManager(list(dirs))
    log_manager.startup(1)
    return ReplicaManager(
        broker_id=1,
        config=config,
        log_manager=log_manager,
        metadata_cache=MetadataCache(),
        epoch_holder=BrokerEpochHolder(100),
    )


def request(partitions, leader_epoch=0):
    return leader_and_isr_request(
        topic="t",
        topic_id=TOPIC_ID,
        assignment={p: [1, 2] if p % 2 else [2, 1] for p in range(partitions)},
        leader_epoch=leader_epoch,
        controller_id=1,
        controller_epoch=1,
    )


def test_steps_give_the_one_step_results_and_partitions(tmp_path):
    one, stepped = make_rm(tmp_path / "a"), make_rm(tmp_path / "b")
    expected = one.apply_leader_and_isr(request(25), 6)
    got = asyncio.run(stepped.apply_leader_and_isr_in_steps(request(25), 6, step_size=4))
    assert got == expected and all(e is ErrorCode.NONE for *_, e in got)
    assert sorted(stepped.partitions) == sorted(one.partitions)
    assert [p.is_leader for _, p in sorted(stepped.partitions.items())] == [
        p.is_leader for _, p in sorted(one.partitions.items())
    ]
    assert stepped.get_partition("t", 3).topic_id == TOPIC_ID
    # A repeat of the same epoch is refused per partition, as in one step.
    again = asyncio.run(stepped.apply_leader_and_isr_in_steps(request(25), 6, step_size=4))
    assert {e for *_, e in again} == {ErrorCode.STALE_CONTROLLER_EPOCH}


def test_each_step_is_complete_before_the_loop_serves_again(tmp_path):
    rm = make_rm(tmp_path)
    seen_between_steps: list[int] = []
    leaders_per_call: list[int] = []
    rm.on_become_leader = lambda partitions: leaders_per_call.append(len(partitions))

    async def main() -> list[object]:
        async def other_task() -> None:
            while True:  # what the loop would serve meanwhile: it sees whole steps only
                seen_between_steps.append(len(rm.partitions))
                await asyncio.sleep(0)

        other = asyncio.create_task(other_task())
        try:
            return await rm.apply_leader_and_isr_in_steps(request(20), 6, step_size=5)
        finally:
            other.cancel()

    results = asyncio.run(main())
    assert len(results) == 20
    assert leaders_per_call == [2, 3, 2, 3]  # the odd partitions are led here; steps of 5
    assert set(seen_between_steps) - {0, 5, 10, 15, 20} == set()
    assert {5, 10, 15} <= set(seen_between_steps)


def test_planned_logs_spread_over_the_dirs_and_register_once_opened(tmp_path):
    rm = make_rm(tmp_path / "d1", tmp_path / "d2")
    manager = rm.log_manager
    plans = manager.plan_new_logs([("t", p, TOPIC_ID, LogConfig()) for p in range(6)])
    assert sorted(str(p.log_dir.name) for p in plans) == ["d1"] * 3 + ["d2"] * 3
    assert manager.get_log("t", 0) is None  # nothing registered before the files exist
    open_planned_logs(plans)
    manager.adopt_planned_logs(plans)
    assert all(manager.get_log("t", p) is not None for p in range(6))
    assert manager.get_log("t", 0).topic_id == TOPIC_ID
    # The counts follow: the next partition goes to the dir with fewer.
    manager.delete_log("t", 0)
    assert manager.get_or_create_log("t", 9).directory.parent == plans[0].log_dir


def test_a_bad_planned_name_is_left_to_the_one_that_reports_it(tmp_path):
    rm = make_rm(tmp_path)
    plans = rm.log_manager.plan_new_logs(
        [("bad/name", 0, None, LogConfig()), ("t", -1, None, LogConfig())]
    )
    assert plans == []


def test_stop_replica_in_steps_stops_and_deletes_every_partition(tmp_path):
    rm = make_rm(tmp_path)
    rm.apply_leader_and_isr(request(7), 6)
    stopped: list[tuple[str, int]] = []
    rm.on_stop_replicas = stopped.extend
    entries = [("t", p, 0, True) for p in range(7)] + [("t", 3, 0, True)]
    results = asyncio.run(rm.stop_replicas_in_steps(entries, step_size=3))
    assert results == [("t", p, ErrorCode.NONE) for p in range(7)] + [("t", 3, ErrorCode.NONE)]
    assert sorted(stopped) == [("t", p) for p in range(7)]
    assert rm.partitions == {} and rm.log_manager.all_logs() == {}
    assert not any(d.name.startswith("t-") for d in tmp_path.iterdir())
