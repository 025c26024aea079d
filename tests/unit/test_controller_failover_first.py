"""A new controller's failover is its first event, before any request that arrived meanwhile.

A broker passes CreateTopics to its controller from the moment the controller is active, which
is while it still loads the context from ZooKeeper. Such a request used to be queued before the
failover event and handled first: the new topic's LeaderAndIsr went out before the brokers had
the controller's full metadata. Kafka queues the failover first; so does epochlog now.
"""

from __future__ import annotations

import asyncio
from typing import Any
from unittest.mock import MagicMock

import pytest

from epochlog.config.broker import BrokerConfig
from epochlog.controller import controller as controller_module
from epochlog.controller import events as ev
from epochlog.controller.controller import Controller
from epochlog.protocol import messages as m
from epochlog.zk.controller_zk import ElectionResult

CONFIG = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}


class NoWatch:
    def cancel(self) -> None:
        pass


def test_a_request_arriving_during_the_load_is_handled_after_the_failover(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("watch_data", "watch_broker_ids", "watch_topics", "watch_topic_deletions"):
        monkeypatch.setattr(controller_module, name, lambda *_args, **_kw: NoWatch())
    config = BrokerConfig.from_dict({**CONFIG, "auto.leader.rebalance.enable": "false"})
    controller = Controller(1, MagicMock(), ElectionResult(1, 1, 0), config)
    handled: list[str] = []
    loaded = asyncio.Event()

    async def load() -> None:
        await loaded.wait()

    async def record(event: Any) -> str:
        handled.append(type(event).__name__)
        return type(event).__name__

    controller._load = load  # type: ignore[method-assign]
    controller._handlers = {ev.Failover: record, ev.CreateTopics: record}
    controller._watch_log_dir_events = lambda _loop: NoWatch()  # type: ignore[method-assign]
    controller._watch_zk_reassignments = lambda _loop: NoWatch()  # type: ignore[method-assign]

    async def scenario() -> str:
        starting = asyncio.create_task(controller.start())
        await asyncio.sleep(0)  # the controller is active and loading
        assert controller.is_active
        creating = asyncio.create_task(controller.create_topics(m.CreateTopicsRequest(), 7))
        await asyncio.sleep(0)
        loaded.set()
        await starting
        answer = await creating
        await controller.stop()
        return answer

    assert asyncio.run(scenario()) == "CreateTopics"
    assert handled == ["Failover", "CreateTopics"]
