"""ACLs in ZooKeeper, as Kafka's AclAuthorizer keeps them (ZkAclStore, ZkAclChangeStore).

- One znode per resource pattern: LITERAL under `/kafka-acl/<ResourceType>/<name>`, PREFIXED
  under `/kafka-acl-extended/prefixed/<ResourceType>/<name>`, holding
  `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}]}` (Kafka's AclEntry JSON; ResourceType as Topic, Group,
  Cluster, TransactionalId, DelegationToken, User).
- Changes are conditional on the znode's version (set/delete with version, create failing on
  an existing node) and retried on a conflict, so two brokers adding ACLs to one resource at
  once both land (Kafka's updateResourceAcls). A pattern left without ACLs loses its znode.
- Each change is announced with a persistent sequential node: a literal pattern under
  `/kafka-acl-changes/acl_changes_<seq>` holding `TOPIC:<name>` (Kafka's LiteralAclChangeStore),
  a prefixed one under `/kafka-acl-extended-changes/acl_changes_<seq>` holding
  `{"version":1,"resourceType":"TOPIC","name":"x","patternType":"PREFIXED"}`.
- `AclChangeListener`: every broker watches both change paths and, for each notification with
  a sequence above the last it handled, re-reads that pattern's znode and calls back; it
  deletes notifications older than 15 minutes (ZkNodeChangeNotificationListener). A broker
  loads every ACL at start (`read_all_acls`) before it serves.

All functions block; run them in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from epochlog.security.acls import (
    AccessControlEntry,
    AclError,
    PatternType,
    ResourcePattern,
    ResourceType,
    operation_named,
    pattern_type_named,
    permission_named,
    resource_type_named,
)
from epochlog.zk.session import WatchHandle, on_loop, watch_children
from epochlog.zk.znodes import ZNodeDecodeError

log = logging.getLogger(__name__)

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
ACL_JSON_VERSION = 1

# The resource types ZooKeeper holds ACLs for (Kafka's SecurityUtils.resourceTypeName).
STORED_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)


def pattern_root(pattern_type: PatternType) -> str:
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ROOT
    if pattern_type == PatternType.PREFIXED:
        return f"{EXTENDED_ROOT}/prefixed"
    raise AclError(f"pattern type {pattern_type.name} is not stored (LITERAL or PREFIXED)")


def acl_path(pattern: ResourcePattern) -> str:
    if "/" in pattern.name:
        raise AclError(f"resource name {pattern.name!r} holds '/', which ZooKeeper cannot store")
    return f"{pattern_root(pattern.pattern_type)}/{pattern.resource_type.title}/{pattern.name}"


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """Kafka's AclEntry.toJsonCompatibleMap, sorted so equal sets encode equally."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": e.permission.title,
            "operation": e.operation.title,
            "host": e.host,
        }
        for e in sorted(
            entries, key=lambda e: (e.principal, e.host, int(e.operation), int(e.permission))
        )
    ]
    return json.dumps({"version": ACL_JSON_VERSION, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes | None, path: str) -> frozenset[AccessControlEntry]:
    if not data:
        return frozenset()
    try:
        obj = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ZNodeDecodeError(path, f"not JSON ({exc})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("acls"), list):
        raise ZNodeDecodeError(path, 'expected {"version":1,"acls":[...]}')
    entries = set()
    for item in obj["acls"]:
        try:
            entries.add(
                AccessControlEntry(
                    str(item["principal"]),
                    str(item["host"]),
                    operation_named(str(item["operation"])),
                    permission_named(str(item["permissionType"])),
                )
            )
        except (KeyError, TypeError, AclError) as exc:
            raise ZNodeDecodeError(path, f"bad ACL entry {item!r}: {exc}") from None
    return frozenset(entries)


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(the change path to create under, the notification's data)."""
    if pattern.pattern_type == PatternType.LITERAL:
        return LITERAL_CHANGES, f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return EXTENDED_CHANGES, json.dumps(event, separators=(",", ":")).encode()


def decode_change(root: str, data: bytes | None, path: str) -> ResourcePattern:
    text = (data or b"").decode("utf-8", "replace")
    try:
        if root == LITERAL_CHANGES:
            type_name, sep, name = text.partition(":")
            if not sep or not name:
                raise AclError(f"expected ResourceType:name, got {text!r}")
            return ResourcePattern(resource_type_named(type_name), name, PatternType.LITERAL)
        event = json.loads(text)
        if not isinstance(event, dict) or event.get("version") != 1:
            raise AclError(f"expected a version 1 change event, got {text!r}")
        return ResourcePattern(
            resource_type_named(str(event["resourceType"])),
            str(event["name"]),
            pattern_type_named(str(event["patternType"])),
        )
    except (AclError, ValueError, KeyError) as exc:
        raise ZNodeDecodeError(path, str(exc)) from None


def read_pattern(
    client: KazooClient, pattern: ResourcePattern
) -> tuple[frozenset[AccessControlEntry], int]:
    """The pattern's entries and its znode version (-1: no znode)."""
    path = acl_path(pattern)
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return frozenset(), -1
    return decode_acls(data, path), stat.version


def read_all_acls(client: KazooClient) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    found: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        root = pattern_root(pattern_type)
        for resource_type in STORED_TYPES:
            try:
                names = client.get_children(f"{root}/{resource_type.title}")
            except NoNodeError:
                continue
            for name in names:
                pattern = ResourcePattern(resource_type, name, pattern_type)
                try:
                    entries, _ = read_pattern(client, pattern)
                except ZNodeDecodeError as exc:
                    log.warning("ignoring ACLs of %s: %s", pattern, exc)
                    continue
                if entries:
                    found[pattern] = entries
    return found


def update_pattern(
    client: KazooClient,
    pattern: ResourcePattern,
    change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
    """Apply `change` to the pattern's entries with a conditional write, retrying on a
    concurrent change, and announce it. Returns (entries before, entries after)."""
    path = acl_path(pattern)
    while True:
        before, version = read_pattern(client, pattern)
        after = change(before)
        if after == before:
            return before, after
        try:
            if version < 0:
                client.create(path, encode_acls(after), makepath=True)
            elif after:
                client.set(path, encode_acls(after), version=version)
            else:
                client.delete(path, version=version)
        except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
            continue  # someone else changed it: read again
        break
    change_root, data = encode_change(pattern)
    client.create(f"{change_root}/{CHANGE_PREFIX}", data, sequence=True, makepath=True)
    return before, after


class AclChangeListener:
    """Calls `on_change(pattern, entries)` on the loop for every change notification not yet
    handled, on both change paths (see the module docstring)."""

    def __init__(
        self,
        client: KazooClient,
        loop: asyncio.AbstractEventLoop,
        on_change: Callable[[ResourcePattern, frozenset[AccessControlEntry]], Any],
        *,
        expiration_ms: int = CHANGE_EXPIRATION_MS,
    ) -> None:
        self.client = client
        self.loop = loop
        self.expiration_ms = expiration_ms
        self._deliver = on_loop(loop, on_change)
        self._last_handled = {LITERAL_CHANGES: -1, EXTENDED_CHANGES: -1}
        self._lock = threading.Lock()
        self._handles: list[WatchHandle] = []

    def mark_existing_handled(self) -> None:
        """Take the notifications present now as handled: call it just before loading every
        ACL (a change landing in between is applied again, which is harmless). Blocking."""
        with self._lock:
            for root in self._last_handled:
                with contextlib.suppress(NoNodeError):
                    numbers = [
                        _number(c)
                        for c in self.client.get_children(root)
                        if c.startswith(CHANGE_PREFIX)
                    ]
                    self._last_handled[root] = max(numbers, default=-1)

    def start(self) -> None:
        """Set the watches (notifications not yet handled are handled at once). Blocking."""
        for root in self._last_handled:
            self._handles.append(
                watch_children(
                    self.client,
                    root,
                    self.loop,
                    lambda children, root=root: self._on_children(root, children),
                )
            )

    def cancel(self) -> None:
        for handle in self._handles:
            handle.cancel()

    def _on_children(self, root: str, children: list[str]) -> None:
        self.loop.run_in_executor(None, self.process, root, children)

    def process(self, root: str, children: list[str]) -> None:
        with self._lock:
            names = sorted(c for c in children if c.startswith(CHANGE_PREFIX))
            for name in names:
                try:
                    number = _number(name)
                except ValueError:
                    continue
                if number <= self._last_handled[root]:
                    continue
                self._handle_one(root, name)
                self._last_handled[root] = number
            self._purge(root, names, int(time.time() * 1000))

    def _handle_one(self, root: str, name: str) -> None:
        path = f"{root}/{name}"
        try:
            data, _ = self.client.get(path)
            pattern = decode_change(root, data, path)
            entries, _ = read_pattern(self.client, pattern)
        except NoNodeError:
            return
        except (ZNodeDecodeError, AclError) as exc:
            log.warning("ignoring ACL change %s: %s", path, exc)
            return
        log.info("ACL change %s: %s now has %d ACLs", name, pattern, len(entries))
        self._deliver(pattern, entries)

    def _purge(self, root: str, names: list[str], now_ms: int) -> None:
        for name in names:
            path = f"{root}/{name}"
            try:
                _, stat = self.client.get(path)
            except NoNodeError:
                continue
            if now_ms - stat.ctime > self.expiration_ms:
                with contextlib.suppress(NoNodeError):
                    self.client.delete(path)


def _number(name: str) -> int:
    return int(name[len(CHANGE_PREFIX) :])
