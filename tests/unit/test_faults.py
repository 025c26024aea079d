"""Fault rules: the first matching rule delays, drops or holds a request; counts run out."""

from __future__ import annotations

import asyncio

from epochlog.protocol.api import ApiKey
from epochlog.testing.faults import FaultInjector, FaultRules


async def test_no_rules_file_means_every_request_goes(tmp_path) -> None:
    injector = FaultInjector(tmp_path / "absent.json")
    assert await injector.before_send(ApiKey.ALTER_PARTITION, 1, 2)


async def test_drop_matches_api_and_brokers_and_counts_down(tmp_path) -> None:
    path = tmp_path / "faults.json"
    FaultRules.write(path, [{"api": "ALTER_PARTITION", "source": 1, "action": "drop", "count": 2}])
    injector = FaultInjector(path)
    assert await injector.before_send(ApiKey.ALTER_PARTITION, 2, 1)  # other source
    assert await injector.before_send(ApiKey.FETCH, 1, 2)  # other API
    assert not await injector.before_send(ApiKey.ALTER_PARTITION, 1, 3)
    assert not await injector.before_send(ApiKey.ALTER_PARTITION, 1, 3)
    assert await injector.before_send(ApiKey.ALTER_PARTITION, 1, 3)  # count used up


async def test_hold_waits_until_the_rule_is_removed(tmp_path) -> None:
    path = tmp_path / "faults.json"
    FaultRules.write(path, [{"api": "STOP_REPLICA", "destination": 3, "action": "hold"}])
    injector = FaultInjector(path)
    held = asyncio.create_task(injector.before_send(ApiKey.STOP_REPLICA, 1, 3))
    await asyncio.sleep(0.2)
    assert not held.done()
    FaultRules.write(path, [])
    assert await asyncio.wait_for(held, 2)


async def test_delay_sleeps_then_sends(tmp_path) -> None:
    path = tmp_path / "faults.json"
    FaultRules.write(path, [{"api": "FETCH", "action": "delay", "seconds": 0.2}])
    injector = FaultInjector(path)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await injector.before_send(ApiKey.FETCH, 2, 1)
    assert loop.time() - started >= 0.19
