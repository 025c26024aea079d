"""The console's pages as HTML strings, built from the values in `views` (pure functions).

Server-rendered, no script: every page is a plain document with a navigation bar, tables and a
little CSS, so it works in any browser and a test can read it as text. Everything that came
from the cluster is escaped (`_e`); links are built with `urllib.parse.quote`. Elements that
tests and people look for carry ids (`broker-1`, `partition-0`, `record-5`, `group-lag`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape
from urllib.parse import quote, urlencode

from epochlog.console.views import (
    DECODINGS,
    BrokerRow,
    ClusterView,
    GroupRow,
    MessagesPage,
    PartitionRow,
    ShownBytes,
    TopicRow,
)
from epochlog.protocol.messages.pin_controller import ControllerEventRecord

CSS = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
nav { background: #1d2330; padding: 0.6em 1.2em; }
nav a { color: #e8ecf3; margin-right: 1.4em; text-decoration: none; font-weight: 600; }
nav span { color: #8fa3c0; float: right; }
main { padding: 1em 1.6em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; background: white; margin: 0.4em 0 1em; }
th, td { border: 1px solid #d9dde5; padding: 0.3em 0.7em; text-align: left;
         vertical-align: top; }
th { background: #eef1f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { margin: 0; white-space: pre-wrap; max-width: 60em; }
.bad { color: #b00020; font-weight: 600; } .ok { color: #1b7f3b; }
.muted { color: #7a8496; } .error { background: #fde8ea; padding: 0.6em; }
form { margin: 0.6em 0; } input, select { margin-right: 0.6em; }
"""


OK = '<span class="ok">ok</span>'


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _bad(text: str) -> str:
    return f'<span class="bad">{_e(text)}</span>'


def _link(path: str, text: object, **query: object) -> str:
    given = {k: v for k, v in query.items() if v is not None}
    href = path + ("?" + urlencode(given) if given else "")
    return f'<a href="{_e(href)}">{_e(text)}</a>'


def _topic_path(topic: str) -> str:
    return "/topics/" + quote(topic, safe="")


def _size(n: int | None) -> str:
    if n is None:
        return '<span class="muted">unknown</span>'
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _table(headers: Sequence[str], rows: Iterable[str], table_id: str | None = None) -> str:
    ident = f' id="{_e(table_id)}"' if table_id else ""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(rows)
    if not body:
        body = f'<tr><td colspan="{len(headers)}" class="muted">none</td></tr>'
    return f"<table{ident}><tr>{head}</tr>{body}</table>"


def layout(title: str, body: str, cluster_id: str | None = None) -> str:
    nav = " ".join(
        _link(path, text)
        for path, text in (
            ("/", "Overview"),
            ("/topics", "Topics"),
            ("/groups", "Consumer groups"),
            ("/controller/events", "Controller events"),
        )
    )
    cluster = f"<span>cluster {_e(cluster_id)}</span>" if cluster_id else ""
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{_e(title)} · epochlog console</title><style>{CSS}</style></head>"
        f"<body><nav>{nav}{cluster}</nav><main><h1>{_e(title)}</h1>{body}</main></body></html>"
    )


def error_page(title: str, message: str) -> str:
    return layout(title, f'<p class="error" id="error">{_e(message)}</p>')


# -- overview ---------------------------------------------------------------------------------


def _metrics_cell(row: BrokerRow) -> str:
    if row.metrics is None:
        why = f" ({_e(row.metrics_error)})" if row.metrics_error else ""
        return f'<td class="muted metrics">metrics unavailable{why}</td>'
    values = ", ".join(
        f"{_e(label)} {'—' if value is None else f'{value:g}'}"
        for label, value in row.metrics.values.items()
    )
    return f'<td class="metrics">{values}</td>'


def _broker_row(row: BrokerRow) -> str:
    node = row.node
    roles = []
    if row.is_controller:
        roles.append("controller")
    if row.is_pinned:
        roles.append("pinned")
    return (
        f'<tr id="broker-{node.node_id}"><td class="num">{node.node_id}</td>'
        f"<td>{_e(node.host)}:{node.port}</td><td>{_e(node.rack or '')}</td>"
        f'<td class="num">{"unknown" if node.epoch < 0 else node.epoch}</td>'
        f"<td>{_e(', '.join(roles))}</td>{_metrics_cell(row)}</tr>"
    )


def _partition_cells(p: PartitionRow) -> str:
    info = p.info
    leader = '<span class="bad">none</span>' if info.leader < 0 else str(info.leader)
    state = []
    if p.offline:
        state.append('<span class="bad">offline</span>')
    if p.under_replicated:
        state.append('<span class="bad">under-replicated</span>')
    return (
        f'<td class="num">{info.partition}</td><td>{leader}</td>'
        f'<td class="num">{info.leader_epoch}</td>'
        f"<td>{_e(list(info.replicas))}</td><td>{_e(list(info.isr))}</td>"
        f'<td class="num">{_size(p.size_bytes)}</td>'
        f"<td>{' '.join(state) or OK}</td>"
    )


PARTITION_HEADERS = ("partition", "leader", "leader epoch", "replicas", "ISR", "size", "state")


def overview_page(view: ClusterView) -> str:
    controller = "none" if view.controller_id < 0 else f"broker {view.controller_id}"
    urp, offline = view.under_replicated, view.offline
    summary = (
        f'<p id="controller">Controller: <b>{_e(controller)}</b>, {_e(view.pin_summary)}</p>'
        f'<p id="partition-health">Partitions: '
        f"{sum(len(t.partitions) for t in view.topics)} in {len(view.topics)} topics; "
        f'<span class="{"bad" if urp else "ok"}" id="under-replicated-count">'
        f"{len(urp)} under-replicated</span>, "
        f'<span class="{"bad" if offline else "ok"}" id="offline-count">'
        f"{len(offline)} offline</span></p>"
    )
    brokers = _table(
        ("id", "endpoint", "rack", "broker epoch", "role", "metrics"),
        (_broker_row(b) for b in view.brokers),
        "brokers",
    )
    unhealthy = sorted(
        {id(p): p for p in (*offline, *urp)}.values(),
        key=lambda p: (p.info.topic, p.info.partition),
    )
    problems = _table(
        ("topic", *PARTITION_HEADERS),
        (
            f"<tr><td>{_link(_topic_path(p.info.topic), p.info.topic)}</td>"
            f"{_partition_cells(p)}</tr>"
            for p in unhealthy
        ),
        "unhealthy-partitions",
    )
    body = (
        f"{summary}<h2>Brokers</h2>{brokers}"
        f"<h2>Under-replicated and offline partitions</h2>{problems}"
    )
    return layout("Cluster overview", body, view.cluster_id)


# -- topics -----------------------------------------------------------------------------------


def topics_page(topics: list[TopicRow], cluster_id: str | None = None) -> str:
    rows = (
        f'<tr id="topic-{_e(t.name)}"><td>{_link(_topic_path(t.name), t.name)}</td>'
        f'<td class="num">{len(t.partitions)}</td>'
        f'<td class="num">{t.under_replicated}</td><td class="num">{t.offline}</td>'
        f'<td class="num">{_size(t.size_bytes)}</td>'
        f"<td>{'internal' if t.is_internal else ''}</td></tr>"
        for t in topics
    )
    table = _table(
        ("topic", "partitions", "under-replicated", "offline", "size", ""), rows, "topics"
    )
    return layout("Topics", table, cluster_id)


def topic_page(topic: TopicRow, cluster_id: str | None = None) -> str:
    rows = (
        f'<tr id="partition-{p.info.partition}">{_partition_cells(p)}<td>'
        f"{_link(_topic_path(topic.name) + '/messages', 'messages', partition=p.info.partition)}"
        "</td></tr>"
        for p in topic.partitions
    )
    table = _table((*PARTITION_HEADERS, ""), rows, "partitions")
    body = (
        f"<p>{len(topic.partitions)} partitions, {_size(topic.size_bytes)} on the leaders"
        f"{', internal' if topic.is_internal else ''}</p>{table}"
    )
    return layout(f"Topic {topic.name}", body, cluster_id)


# -- messages ---------------------------------------------------------------------------------


def _shown(value: ShownBytes) -> str:
    return f'<pre class="{_e(value.kind)}">{_e(value.text)}</pre>'


def _time(ms: int) -> str:
    if ms < 0:
        return "none"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def messages_page(page: MessagesPage, cluster_id: str | None = None) -> str:
    path = _topic_path(page.topic) + "/messages"
    partitions = "".join(
        f'<option value="{p}"{" selected" if p == page.partition else ""}>{p}</option>'
        for p in range(page.partitions)
    )
    decodings = "".join(
        f'<option value="{d}"{" selected" if d == page.decoding else ""}>{d}</option>'
        for d in DECODINGS
    )
    form = (
        f'<form method="get" action="{_e(path)}">'
        f'partition <select name="partition">{partitions}</select>'
        f'offset <input name="offset" id="offset-input" size="10" value="{page.start}">'
        f'or time <input name="timestamp" id="timestamp-input" size="24" '
        'placeholder="2026-11-26T10:00:00Z or ms">'
        f'records <input name="limit" size="4" value="{page.limit}">'
        f'as <select name="decode">{decodings}</select>'
        '<input type="submit" value="Show"></form>'
    )
    by_time = (
        f" (first record at or after {_e(_time(page.from_timestamp_ms))})"
        if page.from_timestamp_ms is not None
        else ""
    )
    summary = (
        f'<p id="range">Partition {page.partition}: offsets {page.log_start} to '
        f"{page.log_end - 1 if page.log_end > page.log_start else 'none'} "
        f"(log end {page.log_end}); showing {len(page.records)} from offset {page.start}"
        f"{by_time}</p>"
    )
    pager = []
    common = {"partition": page.partition, "limit": page.limit, "decode": page.decoding}
    if page.previous_start is not None:
        pager.append(_link(path, "« previous", offset=page.previous_start, **common))
    if page.next_start is not None:
        pager.append(_link(path, "next »", offset=page.next_start, **common))
    pager_html = f'<p id="pager">{" ".join(pager)}</p>'
    rows = (
        f'<tr id="record-{r.offset}"><td class="num">{r.offset}</td><td>{_e(_time(r.timestamp_ms))}'
        f"</td><td>{_shown(r.key)}</td><td>{_shown(r.value)}</td>"
        f"<td>{'<br>'.join(f'{_e(k)}: {_shown(v)}' for k, v in r.headers)}</td></tr>"
        for r in page.records
    )
    table = _table(("offset", "timestamp", "key", "value", "headers"), rows, "records")
    body = form + summary + pager_html + table + pager_html
    return layout(f"Topic {page.topic}: messages", body, cluster_id)


# -- groups -----------------------------------------------------------------------------------


def groups_page(groups: list[GroupRow], cluster_id: str | None = None) -> str:
    rows = (
        f'<tr id="group-{_e(g.group_id)}">'
        f"<td>{_link('/groups/' + quote(g.group_id, safe=''), g.group_id)}"
        f'</td><td>{_e(g.state)}</td><td class="num">{len(g.members)}</td>'
        f'<td class="num">{"" if g.total_lag is None else g.total_lag}</td>'
        f"<td>{'' if g.coordinator is None else g.coordinator}</td>"
        f"<td>{_e(g.error or '')}</td></tr>"
        for g in groups
    )
    table = _table(("group", "state", "members", "lag", "coordinator", ""), rows, "groups")
    return layout("Consumer groups", table, cluster_id)


def group_page(group: GroupRow, cluster_id: str | None = None) -> str:
    if group.error:
        return layout(
            f"Consumer group {group.group_id}",
            f'<p class="error" id="error">{_e(group.error)}</p>',
            cluster_id,
        )
    summary = (
        f'<p id="group-state">State <b>{_e(group.state)}</b>, protocol '
        f"{_e(group.protocol_type or 'none')} {_e(group.assignor)}, coordinator "
        f"{'unknown' if group.coordinator is None else group.coordinator}; total lag "
        f'<b id="total-lag">{"unknown" if group.total_lag is None else group.total_lag}</b></p>'
    )
    members = _table(
        ("member", "client id", "host", "assigned partitions"),
        (
            f"<tr><td>{_e(m.member_id)}</td><td>{_e(m.client_id)}</td><td>{_e(m.host)}</td>"
            f"<td>{_e(', '.join(f'{t}-{p}' for t, p in m.assignment))}</td></tr>"
            for m in group.members
        ),
        "members",
    )
    lags = _table(
        ("topic", "partition", "committed offset", "log end offset", "lag"),
        (
            f'<tr id="lag-{_e(p.topic)}-{p.partition}"><td>{_e(p.topic)}</td>'
            f'<td class="num">{p.partition}</td>'
            f'<td class="num">{"none" if p.committed is None else p.committed}</td>'
            f'<td class="num">{"unknown" if p.log_end is None else p.log_end}</td>'
            f'<td class="num lag">{"unknown" if p.lag is None else p.lag}</td></tr>'
            for p in group.lags
        ),
        "group-lag",
    )
    body = f"{summary}<h2>Members</h2>{members}<h2>Lag per partition</h2>{lags}"
    return layout(f"Consumer group {group.group_id}", body, cluster_id)


# -- controller events ------------------------------------------------------------------------


def events_page(
    broker_id: int, events: list[ControllerEventRecord], cluster_id: str | None = None
) -> str:
    rows = (
        f"<tr><td>{_e(_time(e.started_ms))}</td><td>{_e(e.name)}</td><td>{_e(e.detail)}</td>"
        f'<td class="num">{e.duration_us / 1000:.1f}</td>'
        f"<td>{OK if e.error is None else _bad(e.error)}</td></tr>"
        for e in reversed(events)  # newest first
    )
    table = _table(("started", "event", "detail", "took (ms)", "outcome"), rows, "events")
    body = (
        f'<p id="events-source">The last {len(events)} events handled by the controller, '
        f"broker {broker_id}, newest first.</p>{table}"
    )
    return layout("Controller events", body, cluster_id)
