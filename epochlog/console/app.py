"""The console's web server: aiohttp routes, each one read (`reader`) and one page (`pages`).

| path                         | page                                                       |
|------------------------------|------------------------------------------------------------|
| /                            | brokers with epochs, controller and pin, unhealthy partitions |
| /topics, /topics/{topic}     | topics; one topic's partitions, leaders, ISRs, sizes       |
| /topics/{topic}/messages     | records by partition and offset (or time), decoded, paged  |
| /groups, /groups/{group}     | consumer groups; one group's members and lag per partition |
| /controller/events           | the controller's recent events                             |

Query parameters are checked before anything is read: a bad one gets 400 with a page naming it.
A cluster that cannot answer gets 502 with the client's error, and the console keeps serving.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from aiohttp import web

from epochlog.client.config import Role
from epochlog.client.errors import ClientError, KafkaError
from epochlog.console import pages
from epochlog.console.reader import ClusterReader, ConsoleInputError
from epochlog.console.views import DECODINGS

log = logging.getLogger(__name__)

READER: web.AppKey[ClusterReader] = web.AppKey("reader", ClusterReader)
DEFAULT_PAGE = 20


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html")


def _int_param(request: web.Request, name: str, default: int | None) -> int | None:
    raw = request.query.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConsoleInputError(f"{name} must be a whole number, got {raw!r}") from None


def parse_timestamp(raw: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 time (UTC unless it says otherwise)."""
    text = raw.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConsoleInputError(
            f"timestamp must be milliseconds or an ISO time such as 2026-11-26T10:00:00Z, "
            f"got {raw!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.now().astimezone().tzinfo)
    return int(when.timestamp() * 1000)


Handler = Callable[[web.Request], Awaitable[web.Response]]


def _page(title: str, build: Callable[[web.Request, ClusterReader], Awaitable[str]]) -> Handler:
    """A route: build the page; bad input is 400, a cluster that cannot answer is 502."""

    async def handle(request: web.Request) -> web.Response:
        reader = request.app[READER]
        try:
            return _html(await build(request, reader))
        except ConsoleInputError as exc:
            return _html(pages.error_page(title, str(exc)), 400)
        except (KafkaError, ClientError) as exc:
            log.warning("%s: %s", request.path, exc)
            return _html(pages.error_page(title, f"the cluster did not answer: {exc}"), 502)

    return handle


async def _overview(request: web.Request, reader: ClusterReader) -> str:
    return pages.overview_page(await reader.overview())


async def _topics(request: web.Request, reader: ClusterReader) -> str:
    return pages.topics_page(await reader.topics(), reader.admin.cluster_id)


async def _topic(request: web.Request, reader: ClusterReader) -> str:
    topic = await reader.topic(request.match_info["topic"])
    return pages.topic_page(topic, reader.admin.cluster_id)


async def _messages(request: web.Request, reader: ClusterReader) -> str:
    decoding = request.query.get("decode", "auto")
    if decoding not in DECODINGS:
        raise ConsoleInputError(f"decode must be one of {', '.join(DECODINGS)}, got {decoding!r}")
    raw_time = request.query.get("timestamp", "").strip()
    page = await reader.messages(
        request.match_info["topic"],
        _int_param(request, "partition", 0) or 0,
        offset=_int_param(request, "offset", None),
        timestamp_ms=parse_timestamp(raw_time) if raw_time else None,
        limit=_int_param(request, "limit", DEFAULT_PAGE) or DEFAULT_PAGE,
        decoding=decoding,
    )
    return pages.messages_page(page, reader.admin.cluster_id)


async def _groups(request: web.Request, reader: ClusterReader) -> str:
    return pages.groups_page(await reader.groups(), reader.admin.cluster_id)


async def _group(request: web.Request, reader: ClusterReader) -> str:
    group = await reader.group(request.match_info["group"])
    return pages.group_page(group, reader.admin.cluster_id)


async def _events(request: web.Request, reader: ClusterReader) -> str:
    found = await reader.controller_events()
    return pages.events_page(found.broker_id, found.events, reader.admin.cluster_id)


def make_app(reader: ClusterReader) -> web.Application:
    app = web.Application()
    app[READER] = reader
    app.router.add_get("/", _page("Cluster overview", _overview))
    app.router.add_get("/topics", _page("Topics", _topics))
    app.router.add_get("/topics/{topic}", _page("Topic", _topic))
    app.router.add_get("/topics/{topic}/messages", _page("Messages", _messages))
    app.router.add_get("/groups", _page("Consumer groups", _groups))
    app.router.add_get("/groups/{group}", _page("Consumer group", _group))
    app.router.add_get("/controller/events", _page("Controller events", _events))

    async def close_reader(app: web.Application) -> None:
        await app[READER].close()

    app.on_cleanup.append(close_reader)
    return app


def run(
    host: str,
    port: int,
    configs: Mapping[Role, Mapping[str, Any]],
    metrics_urls: Mapping[int, str],
    metrics_port: int | None,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve until SIGINT or SIGTERM; `announce` gets the address once the port is bound."""

    async def build() -> web.Application:
        # the reader's clients belong to the server's event loop: made inside it
        return make_app(ClusterReader(configs, metrics_urls, metrics_port))

    web.run_app(
        build(),
        host=host,
        port=port,
        print=lambda _banner: announce(f"epochlog console at http://{host}:{port}/"),
        access_log=None,
        handle_signals=True,
    )
