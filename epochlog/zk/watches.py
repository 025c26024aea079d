"""Typed ZooKeeper watches for the controller and the brokers, delivered onto an asyncio loop.

Each helper wraps `session.watch_children` / `session.watch_data` (kazoo's ChildrenWatch and
DataWatch, which fire now, on every change, and re-arm after reconnects and session loss) and
decodes what it sees before calling back on the loop: broker ids (BrokerChange), the controller
id (controller failover and election), topic names (TopicChange), topics queued for deletion, and
KIP-39's pinned and ready-to-serve broker ids. Setting a watch up blocks briefly (it reads the
node); run it from a thread or with `session.run_blocking`. Each returns a `WatchHandle` whose
`cancel()` stops the callbacks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.states import ZnodeStat

from epochlog.zk.session import WatchHandle, watch_children, watch_data
from epochlog.zk.znodes import (
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    NEXT_CONTROLLER_PATH,
    READY_TO_SERVE_PATH,
    ZNodeDecodeError,
    decode_broker_id_node,
    decode_controller,
    parse_broker_id,
)

log = logging.getLogger(__name__)


def watch_broker_ids(
    client: KazooClient, loop: asyncio.AbstractEventLoop, callback: Callable[[list[int]], Any]
) -> WatchHandle:
    """`callback(sorted broker ids)` on every change of /brokers/ids (BrokerChange)."""

    def deliver(children: list[str]) -> None:
        ids = []
        for child in children:
            try:
                ids.append(parse_broker_id(child))
            except ZNodeDecodeError:
                log.warning("ignoring non-numeric child %r of %s", child, BROKER_IDS_PATH)
        callback(sorted(ids))

    return watch_children(client, BROKER_IDS_PATH, loop, deliver)


def watch_controller(
    client: KazooClient, loop: asyncio.AbstractEventLoop, callback: Callable[[int | None], Any]
) -> WatchHandle:
    """`callback(controller id or None)` now and whenever /controller changes or vanishes."""

    def deliver(data: bytes | None, stat: ZnodeStat | None) -> None:
        if stat is None:
            callback(None)
            return
        try:
            callback(decode_controller(data).broker_id)
        except ZNodeDecodeError:
            log.warning("unreadable %s: %r", CONTROLLER_PATH, data)
            callback(None)

    return watch_data(client, CONTROLLER_PATH, loop, deliver)


def watch_topics(
    client: KazooClient, loop: asyncio.AbstractEventLoop, callback: Callable[[list[str]], Any]
) -> WatchHandle:
    """`callback(sorted topic names)` on every change of /brokers/topics (TopicChange)."""
    return watch_children(client, BROKER_TOPICS_PATH, loop, callback)


def watch_topic_deletions(
    client: KazooClient, loop: asyncio.AbstractEventLoop, callback: Callable[[list[str]], Any]
) -> WatchHandle:
    """`callback(sorted topics)` on every change of /admin/delete_topics (TopicDeletion)."""
    return watch_children(client, DELETE_TOPICS_PATH, loop, callback)


def _broker_id_watch(
    client: KazooClient,
    path: str,
    loop: asyncio.AbstractEventLoop,
    callback: Callable[[int | None], Any],
) -> WatchHandle:
    def deliver(data: bytes | None, stat: ZnodeStat | None) -> None:
        if stat is None:
            callback(None)
            return
        try:
            callback(decode_broker_id_node(data, path))
        except ZNodeDecodeError:
            log.warning("unreadable %s: %r", path, data)
            callback(None)

    return watch_data(client, path, loop, deliver)


def watch_next_controller(
    client: KazooClient, loop: asyncio.AbstractEventLoop, callback: Callable[[int | None], Any]
) -> WatchHandle:
    """`callback(pinned broker id or None)` now and on every change of /admin/next_controller."""
    return _broker_id_watch(client, NEXT_CONTROLLER_PATH, loop, callback)


def watch_ready_to_serve(
    client: KazooClient, loop: asyncio.AbstractEventLoop, callback: Callable[[int | None], Any]
) -> WatchHandle:
    """`callback(ready broker id or None)` now and on every change of the KIP-39 ready node."""
    return _broker_id_watch(client, READY_TO_SERVE_PATH, loop, callback)
