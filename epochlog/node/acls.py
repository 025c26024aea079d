"""ACLs for one broker process: the authorizer that follows ZooKeeper, and the store the ACL
APIs write through (`broker.collaborators.AclAdmin`).

With `authorizer.class.name` set (Kafka's AclAuthorizer or SimpleAclAuthorizer) the broker
loads every ACL from ZooKeeper before it serves, then follows `/kafka-acl-changes` and
`/kafka-acl-extended-changes` (`zk.acls.AclChangeListener`), so a change made through any
broker is in force on every broker within a ZooKeeper round trip. CreateAcls and DeleteAcls
write the pattern znodes with conditional updates and apply the result to this broker's own
authorizer at once (the notification then re-reads the same state). Empty: no authorizer,
no check on any request, and the ACL APIs answer SECURITY_DISABLED.
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.client import KazooClient

from epochlog.broker.authorization import RequestAuthorization
from epochlog.broker.broker import Broker
from epochlog.config.broker import BrokerConfig
from epochlog.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclStore,
    Authorizer,
    ResourcePattern,
    parse_super_users,
)
from epochlog.zk.acls import AclChangeListener, read_all_acls, update_pattern

log = logging.getLogger(__name__)


def authorizer_enabled(config: BrokerConfig) -> bool:
    return bool(config["authorizer.class.name"])


class ZkAcls:
    """This broker's authorizer, fed from ZooKeeper, and the ACL APIs' store."""

    def __init__(self, zk: KazooClient, config: BrokerConfig) -> None:
        self.zk = zk
        self.authorizer = Authorizer(
            AclStore(),
            super_users=parse_super_users(config["super.users"]),
            allow_everyone_if_no_acl_found=config["allow.everyone.if.no.acl.found"],
        )
        self.auto_create_topics = bool(config["auto.create.topics.enable"])
        self._listener: AclChangeListener | None = None

    async def start(self, broker: Broker) -> None:
        """Load every ACL, follow the changes, and turn the check on in the data plane. Call
        before the broker registers (clients cannot reach it before)."""
        listener = AclChangeListener(self.zk, asyncio.get_running_loop(), self._apply)
        await asyncio.to_thread(listener.mark_existing_handled)
        loaded = await asyncio.to_thread(read_all_acls, self.zk)
        for pattern, entries in loaded.items():
            self.authorizer.store.replace(pattern, entries)
        log.info(
            "authorizer on: %d ACLs on %d resource patterns; super.users %s",
            sum(len(e) for e in loaded.values()),
            len(loaded),
            sorted(self.authorizer.super_users) or "none",
        )
        await asyncio.to_thread(listener.start)
        self._listener = listener
        broker.services.acl_admin = self
        broker.services.authorization = RequestAuthorization(
            self.authorizer,
            broker.metadata_cache,
            auto_create_topics=self.auto_create_topics,
            fetch_sessions=broker.services.fetch_sessions,
        )

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.cancel()

    def _apply(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        self.authorizer.store.replace(pattern, entries)

    # ------------------------------------------------------------------ AclAdmin

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return self.authorizer.store.bindings(binding_filter)

    async def create(self, bindings: list[AclBinding]) -> None:
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        for pattern, added in by_pattern.items():
            _, after = await asyncio.to_thread(
                update_pattern, self.zk, pattern, lambda current, added=added: current | added
            )
            self._apply(pattern, after)

    async def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        removed: list[list[AclBinding]] = [[] for _ in filters]
        # The patterns any filter may touch, from ZooKeeper's state as this broker knows it;
        # each is then changed conditionally on its znode as it is now.
        patterns = {
            binding.pattern for f in filters for binding in self.authorizer.store.bindings(f)
        }
        for pattern in patterns:

            def without_matches(
                current: frozenset[AccessControlEntry], pattern: ResourcePattern = pattern
            ) -> frozenset[AccessControlEntry]:
                return frozenset(
                    e
                    for e in current
                    if not any(f.matches(AclBinding(pattern, e)) for f in filters)
                )

            before, after = await asyncio.to_thread(
                update_pattern, self.zk, pattern, without_matches
            )
            self._apply(pattern, after)
            for entry in before - after:
                binding = AclBinding(pattern, entry)
                for index, f in enumerate(filters):
                    if f.matches(binding):
                        removed[index].append(binding)
        return removed
