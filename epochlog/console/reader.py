"""The console's reads from the cluster: the admin API, a consumer for records, and the brokers'
metrics endpoints. Thin I/O around `views`: each method asks, then hands the answers to the
pure rules there.

One `AsyncAdmin` lives as long as the console (its metadata and connections are reused across
page loads). Records are read by a short-lived `AsyncConsumer` per page (assign, seek, poll
until the page is full or the log end is reached), so a browsing user holds no group and no
connection between pages.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from epochlog.client.admin import AsyncAdmin, ControllerEvents
from epochlog.client.config import Role
from epochlog.client.consumer import AsyncConsumer
from epochlog.client.errors import KafkaError
from epochlog.console import metrics as console_metrics
from epochlog.console.views import (
    BrokerMetrics,
    BrokerRow,
    ClusterView,
    GroupRow,
    MemberRow,
    MessagesPage,
    RecordRow,
    TopicRow,
    page_start,
    partition_lags,
    partition_row,
    show_bytes,
)
from epochlog.protocol.errors import ErrorCode

METRICS_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 5.0  # the longest a page waits for records the log end says exist
MAX_PAGE = 500


class ConsoleInputError(ValueError):
    """A page was asked for with bad parameters (an unknown topic, a partition out of range)."""


class ClusterReader:
    def __init__(
        self,
        configs: Mapping[Role, Mapping[str, Any]],
        metrics_urls: Mapping[int, str] | None = None,
        metrics_port: int | None = None,
    ) -> None:
        self.configs = configs
        self.admin = AsyncAdmin(configs[Role.ADMIN])
        self.metrics_urls = dict(metrics_urls or {})
        self.metrics_port = metrics_port
        self._http: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        await self.admin.close()
        if self._http is not None:
            await self._http.close()

    # -- cluster and topics ----------------------------------------------------------------

    async def topics(self, names: list[str] | None = None) -> list[TopicRow]:
        cluster = await self.admin.describe_cluster()
        live = [b.node_id for b in cluster.brokers]
        if names is None:
            names = await self.admin.list_topics(include_internal=True)
        described = await self.admin.describe_topics(names)
        sizes = await self._sizes()
        return [
            TopicRow(
                d.name,
                d.is_internal,
                [partition_row(p, live, sizes) for p in d.partitions],
            )
            for d in (described[n] for n in names)
        ]

    async def topic(self, name: str) -> TopicRow:
        try:
            return (await self.topics([name]))[0]
        except KafkaError as exc:
            if exc.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise ConsoleInputError(f"no topic {name!r}") from None
            raise

    async def _sizes(self) -> dict[tuple[str, int, int], int]:
        """(topic, partition, broker) -> replica size, from DescribeLogDirs of live brokers.
        A broker that does not answer leaves its replicas' sizes unknown."""
        try:
            dirs = await self.admin.describe_log_dirs(timeout=READ_TIMEOUT_S)
        except KafkaError:
            return {}
        sizes: dict[tuple[str, int, int], int] = {}
        for broker, by_path in dirs.items():
            for described in by_path.values():
                for tp, replica in described.replicas.items():
                    if not replica.is_future:
                        sizes[(tp.topic, tp.partition, broker)] = replica.size
        return sizes

    async def overview(self) -> ClusterView:
        cluster = await self.admin.describe_cluster()
        pin = await self.admin.describe_controller_pin()
        topics = await self.topics()
        brokers = await asyncio.gather(
            *(self._broker_row(b, cluster.controller_id, pin.pinned) for b in cluster.brokers)
        )
        return ClusterView(
            cluster.cluster_id, cluster.controller_id, pin.summary(), brokers, topics
        )

    async def _broker_row(self, node: Any, controller: int, pinned: int | None) -> BrokerRow:
        url = console_metrics.metrics_url(
            node.node_id, node.host, self.metrics_urls, self.metrics_port
        )
        is_controller, is_pinned = node.node_id == controller, node.node_id == pinned
        if url is None:
            return BrokerRow(node, is_controller, is_pinned, None, "no endpoint configured")
        try:
            text = await self._get(url)
            values = console_metrics.summarise(text)
        except (aiohttp.ClientError, TimeoutError, console_metrics.MetricsTextError) as exc:
            return BrokerRow(node, is_controller, is_pinned, None, f"{url}: {exc or type(exc)}")
        return BrokerRow(node, is_controller, is_pinned, BrokerMetrics(url, values))

    async def _get(self, url: str) -> str:
        if self._http is None:
            self._http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=METRICS_TIMEOUT_S)
            )
        async with self._http.get(url) as response:
            response.raise_for_status()
            return await response.text()

    # -- records ---------------------------------------------------------------------------

    async def messages(
        self,
        topic: str,
        partition: int,
        *,
        offset: int | None,
        timestamp_ms: int | None,
        limit: int,
        decoding: str,
    ) -> MessagesPage:
        if not 1 <= limit <= MAX_PAGE:
            raise ConsoleInputError(f"records per page must be 1 to {MAX_PAGE}, got {limit}")
        row = await self.topic(topic)
        if not 0 <= partition < len(row.partitions):
            raise ConsoleInputError(
                f"topic {topic!r} has partitions 0 to {len(row.partitions) - 1}, not {partition}"
            )
        tp = (topic, partition)
        log_start = (await self.admin.log_start_offsets([tp]))[tp]
        log_end = (await self.admin.log_end_offsets([tp]))[tp]
        if timestamp_ms is not None:
            at = next(iter((await self.admin.list_offsets({tp: timestamp_ms})).values()))
            offset = log_end if at.offset < 0 else at.offset
        start = page_start(offset, log_start, log_end, limit)
        records = await self._read(tp, start, min(start + limit, log_end), decoding)
        return MessagesPage(
            topic,
            partition,
            len(row.partitions),
            start,
            limit,
            decoding,
            log_start,
            log_end,
            records,
            timestamp_ms,
        )

    async def _read(
        self, tp: tuple[str, int], start: int, until: int, decoding: str
    ) -> list[RecordRow]:
        """Records of [start, until): poll until the last is in, or READ_TIMEOUT_S passed."""
        if start >= until:
            return []
        config = dict(self.configs[Role.CONSUMER])
        config.pop("group.id", None)  # browsing commits nothing and joins no group
        config.update({"enable.auto.commit": "false", "auto.offset.reset": "earliest"})
        consumer = AsyncConsumer(config)
        rows: list[RecordRow] = []
        try:
            await consumer.start()
            consumer.assign([tp])
            consumer.seek(tp, start)
            deadline = time.monotonic() + READ_TIMEOUT_S
            while time.monotonic() < deadline:
                for r in await consumer.poll(timeout=0.5):
                    if start <= r.offset < until:
                        rows.append(
                            RecordRow(
                                r.offset,
                                r.timestamp,
                                show_bytes(r.key, decoding),
                                show_bytes(r.value, decoding),
                                [(k, show_bytes(v, decoding)) for k, v in r.headers],
                            )
                        )
                if rows and rows[-1].offset >= until - 1:
                    break
                if await consumer.position(tp) >= until:
                    break
        finally:
            await consumer.close()
        return rows

    # -- groups ----------------------------------------------------------------------------

    async def groups(self) -> list[GroupRow]:
        listed = await self.admin.list_groups()
        return list(await asyncio.gather(*(self.group(g.group_id) for g in listed)))

    async def group(self, group_id: str) -> GroupRow:
        try:
            described = (await self.admin.describe_groups([group_id]))[group_id]
            committed = await self.admin.list_group_offsets(group_id)
        except KafkaError as exc:
            return GroupRow(group_id, "unknown", "", "", None, [], [], str(exc))
        offsets = {
            (tp.topic, tp.partition): (o.offset if o else None) for tp, o in committed.items()
        }
        log_ends: dict[tuple[str, int], int] = {}
        if offsets:
            try:
                ends = await self.admin.log_end_offsets(list(offsets))
                log_ends = {(tp.topic, tp.partition): o for tp, o in ends.items()}
            except KafkaError:
                pass  # lag shows as unknown
        return GroupRow(
            group_id,
            described.state,
            described.protocol_type,
            described.assignor,
            None if described.coordinator is None else described.coordinator.node_id,
            [
                MemberRow(
                    m.member_id,
                    m.client_id,
                    m.host,
                    [(tp.topic, tp.partition) for tp in m.assignment],
                )
                for m in described.members
            ],
            partition_lags(offsets, log_ends),
        )

    # -- controller events -----------------------------------------------------------------

    async def controller_events(self) -> ControllerEvents:
        return await self.admin.describe_controller_events(timeout=READ_TIMEOUT_S)
