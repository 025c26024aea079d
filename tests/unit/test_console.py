"""The web console without a cluster: page builders given admin answers, the rules in `views`
(unhealthy partitions, sizes, lag, decoding, paging), the metrics summary, `--command-config`
reaching the clients, the routes' answers to bad input and to a cluster that does not answer,
and the controller's recent events (ring, wire, handler)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from epochlog.client.config import Role
from epochlog.client.consumer import AsyncConsumer
from epochlog.client.errors import KafkaError
from epochlog.client.metadata import BrokerNode, PartitionInfo
from epochlog.console import pages
from epochlog.console.app import make_app, parse_timestamp
from epochlog.console.metrics import (
    MetricsTextError,
    metrics_url,
    parse_metrics_urls,
    summarise,
)
from epochlog.console.reader import ClusterReader, ConsoleInputError
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
from epochlog.controller import events as ev
from epochlog.controller.recent_events import RecentEvents, describe_event
from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, decode_response, encode_response
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.messages.pin_controller import ControllerEventRecord, PinStatus


def info(topic: str, p: int, leader: int, replicas: tuple, isr: tuple) -> PartitionInfo:
    return PartitionInfo(topic, p, leader, 4, replicas, isr)


SIZES = {("t", 0, 1): 2048, ("t", 0, 2): 2000, ("t", 1, 3): 10}


# -- views ------------------------------------------------------------------------------------


def test_partition_rows_flag_under_replicated_and_offline_and_take_the_leaders_size() -> None:
    healthy = partition_row(info("t", 0, 1, (1, 2, 3), (1, 2, 3)), [1, 2, 3], SIZES)
    assert (healthy.under_replicated, healthy.offline, healthy.size_bytes) == (False, False, 2048)
    shrunk = partition_row(info("t", 0, 1, (1, 2, 3), (1, 2)), [1, 2], SIZES)
    assert (shrunk.under_replicated, shrunk.offline) == (True, False)
    leaderless = partition_row(info("t", 1, -1, (3,), (3,)), [1, 2], SIZES)
    assert leaderless.offline and leaderless.size_bytes == 10  # the only replica reported
    dead_leader = partition_row(info("t", 0, 3, (3, 1), (3, 1)), [1, 2], SIZES)
    assert dead_leader.offline and dead_leader.size_bytes == 2048  # largest known replica
    assert partition_row(info("u", 0, 1, (1,), (1,)), [1], SIZES).size_bytes is None


def test_lag_is_log_end_minus_committed_and_unknown_without_either() -> None:
    lags = partition_lags({("t", 0): 4, ("t", 1): None, ("t", 2): 9}, {("t", 0): 10, ("t", 1): 3})
    assert [(p.partition, p.lag) for p in lags] == [(0, 6), (1, None), (2, None)]
    group = GroupRow("g", "Empty", "consumer", "", 2, [], lags)
    assert group.total_lag == 6
    assert GroupRow("g", "Empty", "", "", None, [], []).total_lag is None


@pytest.mark.parametrize(
    ("data", "decoding", "kind", "text"),
    [
        (b'{"a": [1, 2]}', "auto", "json", '{\n  "a": [\n    1,\n    2\n  ]\n}'),
        (b"hello", "auto", "text", "hello"),
        (b"hello", "json", "text", "hello"),
        (b"\x00\x01\xff", "auto", "hex", "00 01 ff"),
        (b"\x00\x01\xff", "text", "hex", "00 01 ff"),
        (b"tab\tok", "text", "text", "tab\tok"),
        (b"bell\x07", "auto", "hex", "62 65 6c 6c 07"),
        (b'{"a": 1}', "hex", "hex", "7b 22 61 22 3a 20 31 7d"),
        (None, "auto", "null", "null"),
    ],
)
def test_bytes_are_shown_as_json_text_or_hex(
    data: bytes | None, decoding: str, kind: str, text: str
) -> None:
    shown = show_bytes(data, decoding)
    assert (shown.kind, shown.text) == (kind, text)


def test_an_unknown_decoding_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'base64'"):
        show_bytes(b"x", "base64")


def test_pages_start_where_asked_inside_the_log_and_link_both_ways() -> None:
    assert page_start(None, 0, 100, 20) == 80  # the newest page by default
    assert page_start(None, 5, 10, 20) == 5
    assert page_start(-3, 5, 10, 20) == 5 and page_start(50, 5, 10, 20) == 10
    shown = show_bytes(b"v")
    records = [RecordRow(o, 0, shown, shown, []) for o in (20, 21)]
    page = MessagesPage("t", 0, 1, 20, 2, "auto", 10, 30, records)
    assert (page.previous_start, page.next_start) == (18, 22)
    last = MessagesPage("t", 0, 1, 28, 2, "auto", 10, 30, [RecordRow(29, 0, shown, shown, [])])
    assert last.next_start is None
    first = MessagesPage("t", 0, 1, 10, 2, "auto", 10, 30, [])
    assert first.previous_start is None


# -- pages ------------------------------------------------------------------------------------


def cluster_view() -> ClusterView:
    brokers = [
        BrokerRow(BrokerNode(1, "h1", 9092, None, 300), True, True, None, "no endpoint"),
        BrokerRow(
            BrokerNode(2, "h2", 9092, "rack-b", 301),
            False,
            False,
            BrokerMetrics("http://h2:9100/metrics", {"messages in": 12.0, "bytes in": None}),
        ),
    ]
    topic = TopicRow(
        "orders<x>",
        False,
        [
            partition_row(info("orders<x>", 0, 1, (1, 2, 3), (1, 2, 3)), [1, 2], {}),
            partition_row(info("orders<x>", 1, 2, (2, 3), (2,)), [1, 2], {}),
            partition_row(info("orders<x>", 2, -1, (3,), (3,)), [1, 2], {}),
        ],
    )
    return ClusterView("cid", 1, "pinned to broker 1 (in force)", brokers, [topic])


def test_overview_page_holds_brokers_epochs_controller_pin_and_unhealthy_partitions() -> None:
    html = pages.overview_page(cluster_view())
    assert "Controller: <b>broker 1</b>, pinned to broker 1 (in force)" in html
    row1 = html[html.index('id="broker-1"') : html.index('id="broker-2"')]
    assert ">300<" in row1 and "controller, pinned" in row1 and "metrics unavailable" in row1
    row2 = html[html.index('id="broker-2"') :]
    assert ">301<" in row2 and "rack-b" in row2 and "messages in 12, bytes in —" in row2
    assert "1 under-replicated" in html and "1 offline" in html
    unhealthy = html[html.index('id="unhealthy-partitions"') :]
    assert unhealthy.count("<tr>") == 3  # header + partitions 1 and 2, not the healthy 0
    assert "orders&lt;x&gt;" in unhealthy and "orders<x>" not in html  # escaped


def test_topic_pages_list_partitions_leaders_isrs_and_link_to_messages() -> None:
    view = cluster_view()
    listing = pages.topics_page(view.topics)
    assert 'href="/topics/orders%3Cx%3E"' in listing
    html = pages.topic_page(view.topics[0])
    part1 = html[html.index('id="partition-1"') : html.index('id="partition-2"')]
    assert "[2, 3]" in part1 and "<td>[2]</td>" in part1 and "under-replicated" in part1
    assert 'href="/topics/orders%3Cx%3E/messages?partition=1"' in part1
    assert '<span class="bad">none</span>' in html[html.index('id="partition-2"') :]


def test_messages_page_shows_each_record_decoded_at_its_offset_with_paging() -> None:
    value = show_bytes(b'{"id": 7, "note": "<b>"}')
    page = MessagesPage(
        "t",
        1,
        3,
        5,
        1,
        "auto",
        0,
        9,
        [RecordRow(5, 1_790_000_000_000, show_bytes(b"k"), value, [("h", show_bytes(b"1"))])],
    )
    html = pages.messages_page(page)
    row = html[html.index('id="record-5"') :]
    assert '<pre class="json">{\n  &quot;id&quot;: 7,\n  &quot;note&quot;: &quot;&lt;b&gt;' in row
    assert '<pre class="text">k</pre>' in row and "h: " in row
    assert "offset=4" in html and "offset=6" in html  # previous and next pages
    assert '<option value="1" selected>' in html and '<option value="2">' in html


def test_group_page_shows_members_and_lag_per_partition() -> None:
    group = GroupRow(
        "billing",
        "Stable",
        "consumer",
        "range",
        3,
        [MemberRow("m-1", "app", "/10.0.0.1", [("t", 0), ("t", 1)])],
        partition_lags({("t", 0): 4, ("t", 1): None}, {("t", 0): 10, ("t", 1): 2}),
    )
    html = pages.group_page(group)
    assert '<b id="total-lag">6</b>' in html and "t-0, t-1" in html
    lag0 = html[html.index('id="lag-t-0"') :]
    assert '<td class="num lag">6</td>' in lag0[: lag0.index("</tr>")]
    lag1 = html[html.index('id="lag-t-1"') :]
    assert ">none<" in lag1[: lag1.index("</tr>")]
    listing = pages.groups_page([group])
    assert 'href="/groups/billing"' in listing and "Stable" in listing
    failed = pages.group_page(GroupRow("x", "unknown", "", "", None, [], [], "GROUP_ID_NOT_FOUND"))
    assert 'id="error"' in failed and "GROUP_ID_NOT_FOUND" in failed


def test_events_page_lists_the_controller_events_newest_first() -> None:
    events = [
        ControllerEventRecord("Failover", "3 partitions", 1_000, 1500),
        ControllerEventRecord("BrokerChange", "new [], dead [2], bounced []", 2_000, 250, None),
        ControllerEventRecord("TopicChange", "", 3_000, 90, "ZookeeperError: gone"),
    ]
    html = pages.events_page(1, events)
    assert html.index("TopicChange") < html.index("BrokerChange") < html.index("Failover")
    assert "dead [2]" in html and "ZookeeperError: gone" in html and ">1.5<" in html
    assert "controller, broker 1" in html


# -- metrics ----------------------------------------------------------------------------------

EXPOSITION = """# HELP kafka_server_brokertopicmetrics_messagesin_total Messages in
# TYPE kafka_server_brokertopicmetrics_messagesin_total counter
kafka_server_brokertopicmetrics_messagesin_total{topic="a"} 5.0
kafka_server_brokertopicmetrics_messagesin_total{topic="b"} 7.0
# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge
kafka_server_replicamanager_underreplicatedpartitions 2.0
"""


def test_metrics_are_summed_over_labels_and_missing_ones_are_none() -> None:
    values = summarise(EXPOSITION)
    assert values["messages in"] == 12.0 and values["under-replicated"] == 2.0
    assert values["bytes out"] is None


def test_metrics_text_that_is_not_exposition_format_is_an_error() -> None:
    with pytest.raises(MetricsTextError):
        summarise("<html>not metrics</html> {")


def test_metrics_urls_given_per_broker_or_by_port() -> None:
    urls = parse_metrics_urls(["1=http://a:9100/metrics"])
    assert metrics_url(1, "h", urls, 9200) == "http://a:9100/metrics"
    assert metrics_url(2, "h", urls, 9200) == "http://h:9200/metrics"
    assert metrics_url(2, "h", urls, None) is None
    for bad in ("x=http://a", "1:http://a", "1=a:9100"):
        with pytest.raises(ValueError, match="--metrics-url"):
            parse_metrics_urls([bad])


# -- --command-config -------------------------------------------------------------------------


def console_args(tmp_path: Path, properties: str) -> Any:
    from epochlog.cli.main import build_parser

    path = tmp_path / "client.properties"
    path.write_text(properties)
    return build_parser().parse_args(
        ["console", "--bootstrap-server", "b:9092", "--command-config", str(path)]
    )


def test_command_config_keys_reach_the_admin_and_the_consumer(tmp_path: Path) -> None:
    from epochlog.cli.console_cmd import client_configs

    args = console_args(
        tmp_path,
        "# as for kafka-topics.sh --command-config\n"
        "client.id=console-7\nrequest.timeout.ms = 12345\n"
        "isolation.level=read_committed\n",
    )
    configs = client_configs(args)
    reader = ClusterReader(configs)  # the console's clients, as its server makes them
    assert reader.admin.config["client.id"] == "console-7"
    assert reader.admin.config["request.timeout.ms"] == 12345
    assert reader.admin.config["bootstrap.servers"] == (("b", 9092),)
    assert "isolation.level" not in configs[Role.ADMIN]  # a consumer key
    consumer = AsyncConsumer(configs[Role.CONSUMER])
    assert consumer.config["isolation.level"] == "read_committed"
    assert consumer.config["client.id"] == "console-7"


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        ("client.id=x\nno.such.key=1\n", "'no.such.key'"),
        ("request.timeout.ms=soon\n", "request.timeout.ms"),
        ("just words\n", "client.properties:1"),
    ],
)
def test_a_bad_command_config_stops_the_console_before_it_serves(
    tmp_path: Path, properties: str, named: str
) -> None:
    from epochlog.cli.common import CommandError
    from epochlog.cli.console_cmd import client_configs
    from epochlog.cli.main import main

    args = console_args(tmp_path, properties)
    with pytest.raises(CommandError, match=named):
        client_configs(args)
    path = str(tmp_path / "client.properties")
    assert main(["console", "--bootstrap-server", "b:9092", "--command-config", path]) == 2


# -- routes -----------------------------------------------------------------------------------


class FailingReader:
    """A reader whose cluster never answers."""

    admin: Any = None

    async def overview(self) -> Any:
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "DescribeCluster", "no broker answered")

    async def messages(self, topic: str, partition: int, **kwargs: Any) -> Any:
        raise ConsoleInputError(f"no topic {topic!r}")

    async def close(self) -> None:
        pass


def fetch(path: str) -> tuple[int, str]:
    async def go() -> tuple[int, str]:
        async with TestClient(TestServer(make_app(FailingReader()))) as client:  # type: ignore[arg-type]
            response = await client.get(path)
            return response.status, await response.text()

    return asyncio.run(go())


def test_a_cluster_that_does_not_answer_gets_a_502_page_naming_the_error() -> None:
    status, text = fetch("/")
    assert status == 502 and "REQUEST_TIMED_OUT" in text and "no broker answered" in text


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("decode=base64", "decode"),
        ("offset=ten", "offset"),
        ("partition=x", "partition"),
        ("timestamp=yesterday", "timestamp"),
        ("", "no topic"),  # the reader's own refusal
    ],
)
def test_bad_message_parameters_get_a_400_page_naming_them(query: str, named: str) -> None:
    status, text = fetch(f"/topics/t/messages?{query}")
    assert status == 400 and named in text


def test_timestamps_are_milliseconds_or_iso_times() -> None:
    assert parse_timestamp("1790000000000") == 1_790_000_000_000
    assert parse_timestamp("2026-11-26T10:00:00Z") == 1_795_687_200_000
    assert parse_timestamp("2026-11-26T10:00:00+01:00") == 1_795_683_600_000


# -- the controller's recent events -----------------------------------------------------------


def test_recent_events_keep_the_last_ones_with_notes_durations_and_errors() -> None:
    ring = RecentEvents(capacity=2)
    ring.begin(ev.Failover(), 1_000)
    ring.note("3 partitions")
    ring.end(1500)
    ring.begin(ev.TopicConfigChanged("orders", {"retention.ms": "1"}), 2_000)
    ring.end(20, "ZookeeperError: gone")
    ring.begin(ev.BrokerChange(), 3_000)
    ring.note("new [], dead [2], bounced []")
    ring.end(30)
    ring.note("between events: dropped")
    records = ring.records()
    assert [r.name for r in records] == ["TopicConfigChanged", "BrokerChange"]
    assert records[0] == ControllerEventRecord(
        "TopicConfigChanged", "topic='orders'", 2_000, 20, "ZookeeperError: gone"
    )
    assert records[1].detail == "new [], dead [2], bounced []"
    with pytest.raises(ValueError, match="capacity"):
        RecentEvents(capacity=0)


def test_an_event_is_described_by_its_plain_fields_only() -> None:
    assert describe_event(ev.BrokerChange()) == ""
    assert describe_event(ev.TopicConfigChanged("t", {"a": "b"})) == "topic='t'"


def test_recent_events_travel_in_pin_controller_tagged_fields() -> None:
    response = m.PinControllerResponse(controller_id=1, recent_events_broker_id=1)
    response.recent_events = [
        m.PinControllerResponse.ControllerEvent(
            name="Failover", detail="x", started_ms=5, duration_us=7, error=None
        )
    ]
    frame = encode_response(ApiKey.PIN_CONTROLLER, 0, 9, response)
    _, decoded = decode_response(ApiKey.PIN_CONTROLLER, 0, frame[4:])
    assert decoded.recent_events_broker_id == 1
    assert [(e.name, e.duration_us, e.error) for e in decoded.recent_events] == [
        ("Failover", 7, None)
    ]
    plain = m.PinControllerResponse(controller_id=1)
    _, decoded = decode_response(
        ApiKey.PIN_CONTROLLER, 0, encode_response(ApiKey.PIN_CONTROLLER, 0, 9, plain)[4:]
    )
    assert decoded.recent_events_broker_id == -1 and not decoded.recent_events


def test_only_the_active_controller_answers_with_its_events() -> None:
    from epochlog.broker.handlers.context import ConnectionInfo
    from epochlog.broker.handlers.pin_controller import handle_pin_controller
    from epochlog.protocol.api import Request

    record = ControllerEventRecord("Failover", "", 1, 2)

    class Pins:
        async def describe(self) -> PinStatus:
            return PinStatus(2, None, None)

    class Gateway:
        def __init__(self, records: list[ControllerEventRecord] | None) -> None:
            self.records = records

        def recent_events(self) -> list[ControllerEventRecord] | None:
            return self.records

    class Services:
        broker_id = 2
        controller_pins = Pins()
        controller: Gateway

    def ask(records: list[ControllerEventRecord] | None, include: bool) -> Any:
        services = Services()
        services.controller = Gateway(records)
        body = m.PinControllerRequest(operation=0, include_recent_events=include)
        connection = ConnectionInfo("PLAINTEXT", "127.0.0.1:1")
        return asyncio.run(
            handle_pin_controller(services, Request(header=None, body=body), connection)  # type: ignore[arg-type]
        )

    answered = ask([record], True)
    assert answered.recent_events_broker_id == 2 and answered.recent_events[0].name == "Failover"
    assert ask(None, True).recent_events_broker_id == -1  # not the controller
    assert ask([record], False).recent_events == []  # not asked for


def test_a_broker_row_shows_its_metrics_or_says_they_are_unavailable() -> None:
    from aiohttp import web

    async def exposition(_request: web.Request) -> web.Response:
        return web.Response(text=EXPOSITION)

    async def go() -> tuple[BrokerRow, BrokerRow, BrokerRow]:
        app = web.Application()
        app.router.add_get("/metrics", exposition)
        async with TestServer(app) as server:
            good = str(server.make_url("/metrics"))
            missing = str(server.make_url("/nothing-here"))
            configs = {role: {"bootstrap.servers": "127.0.0.1:1"} for role in Role}
            reader = ClusterReader(configs, {1: good, 2: missing})
            try:
                node = BrokerNode(1, "127.0.0.1", 1, None, 5)
                rows = (
                    await reader._broker_row(node, 1, None),
                    await reader._broker_row(BrokerNode(2, "127.0.0.1", 1, None, 6), 1, None),
                    await reader._broker_row(BrokerNode(3, "127.0.0.1", 1, None, 7), 1, None),
                )
            finally:
                await reader.close()
            return rows

    served, failing, unconfigured = asyncio.run(go())
    assert served.metrics is not None and served.metrics.values["messages in"] == 12.0
    assert served.is_controller and not failing.is_controller
    assert failing.metrics is None and "404" in (failing.metrics_error or "")
    assert unconfigured.metrics is None and unconfigured.metrics_error == "no endpoint configured"
    assert "metrics unavailable" in pages._metrics_cell(failing)
