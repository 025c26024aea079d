"""Kafka's log-dir event notifications (KIP-112): a broker tells the controller that one of its
log dirs changed state, and the controller resends it a LeaderAndIsr for every partition it hosts.

The znodes are Kafka's (`LogDirEventNotificationZNode` / `LogDirEventNotificationSequenceZNode` in
ZkData.scala): persistent sequential `/log_dir_event_notification/log_dir_event_<10 digits>`
holding `{"version":1,"broker":<id>,"event":1}` (event 1 is Kafka's LogDirFailureEvent, the only
one it defines). epochlog writes the same event when a dir goes offline, when it comes back, and
when a led partition's log was found damaged: each time the broker's answers to the resent
LeaderAndIsr say which replicas it can serve. The controller watches the children, handles each
notification once and deletes it.
"""

from __future__ import annotations

import contextlib
import json
import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from epochlog.zk.znodes import ZNodeDecodeError

log = logging.getLogger(__name__)

LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1
LOG_DIR_EVENT_VERSION = 1


def log_dir_event_path(name: str) -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{name}"


def encode_log_dir_event(broker_id: int) -> bytes:
    """Kafka's LogDirEventNotificationSequenceZNode.encode, byte for byte."""
    return json.dumps(
        {"version": LOG_DIR_EVENT_VERSION, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT},
        separators=(",", ":"),
    ).encode()


def decode_log_dir_event(data: bytes | None, path: str = LOG_DIR_EVENT_NOTIFICATION_PATH) -> int:
    """The broker id a notification names; ZNodeDecodeError when it names none."""
    try:
        obj = json.loads((data or b"").decode("utf-8"))
        broker = obj["broker"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ZNodeDecodeError(path, f"not a log dir event ({exc})") from None
    if not isinstance(broker, int) or isinstance(broker, bool) or broker < 0:
        raise ZNodeDecodeError(path, f"broker {broker!r} is not a broker id")
    return broker


def write_log_dir_event(client: KazooClient, broker_id: int) -> str:
    """Create a notification for `broker_id`; returns its path. Blocking."""
    return client.create(
        log_dir_event_path(LOG_DIR_EVENT_PREFIX),
        encode_log_dir_event(broker_id),
        sequence=True,
        makepath=True,
    )


def read_log_dir_events(client: KazooClient) -> list[tuple[str, int | None]]:
    """(child name, broker id or None if unreadable) of every pending notification, oldest
    first. Blocking."""
    try:
        children = sorted(client.get_children(LOG_DIR_EVENT_NOTIFICATION_PATH))
    except NoNodeError:
        return []
    events: list[tuple[str, int | None]] = []
    for name in children:
        if not name.startswith(LOG_DIR_EVENT_PREFIX):
            continue
        path = log_dir_event_path(name)
        try:
            data, _ = client.get(path)
        except NoNodeError:
            continue
        try:
            events.append((name, decode_log_dir_event(data, path)))
        except ZNodeDecodeError as exc:
            log.warning("%s; deleting it", exc)
            events.append((name, None))
    return events


def delete_log_dir_events(client: KazooClient, names: list[str]) -> None:
    """Delete handled notifications (already gone is fine). Blocking."""
    for name in names:
        with contextlib.suppress(NoNodeError):
            client.delete(log_dir_event_path(name))
