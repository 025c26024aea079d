"""The ACL APIs' handlers (broker/handlers/acls.py) over a fake store, and `epochlog acls`'
expansion of kafka-acls options into bindings and filters (cli/acls_cmd.py)."""

from __future__ import annotations

import argparse
import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from epochlog.broker.handlers.acls import (
    handle_create_acls,
    handle_delete_acls,
    handle_describe_acls,
)
from epochlog.cli.acls_cmd import add_parser, bindings_to_add, filters_for
from epochlog.cli.common import CommandError
from epochlog.client.admin_acls import AclSpec
from epochlog.protocol import messages as m
from epochlog.security.acls import AclBinding, AclBindingFilter, AclStore

SECURITY_DISABLED, INVALID_REQUEST = 54, 42


class FakeAclAdmin:
    def __init__(self) -> None:
        self.store = AclStore()

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return self.store.bindings(binding_filter)

    async def create(self, bindings: list[AclBinding]) -> None:
        for b in bindings:
            current = self.store.by_pattern.get(b.pattern, frozenset())
            self.store.replace(b.pattern, current | {b.entry})

    async def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        removed = []
        for f in filters:
            gone = self.store.bindings(f)
            for b in gone:
                self.store.replace(b.pattern, self.store.by_pattern[b.pattern] - {b.entry})
            removed.append(gone)
        return removed


CONNECTION = SimpleNamespace(peer="127.0.0.1:1", principal="User:admin")


def call(handler: Any, admin: Any, body: Any) -> Any:
    services = SimpleNamespace(acl_admin=admin)
    return asyncio.run(handler(services, SimpleNamespace(body=body), CONNECTION))


def creation(**kw: Any) -> Any:
    fields = dict(
        resource_type=2,
        resource_name="t",
        resource_pattern_type=3,
        principal="User:alice",
        host="*",
        operation=3,
        permission_type=3,
    )
    fields.update(kw)
    return m.CreateAclsRequest.AclCreation(**fields)


def test_without_an_authorizer_every_acl_api_is_security_disabled():
    body = m.CreateAclsRequest(creations=[creation()])
    assert call(handle_create_acls, None, body).results[0].error_code == SECURITY_DISABLED
    describe = m.DescribeAclsRequest(resource_type_filter=1, operation=1, permission_type=1)
    assert call(handle_describe_acls, None, describe).error_code == SECURITY_DISABLED
    delete = m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter()])
    assert call(handle_delete_acls, None, delete).filter_results[0].error_code == SECURITY_DISABLED


def test_create_refuses_what_kafka_refuses_and_stores_the_rest():
    admin = FakeAclAdmin()
    body = m.CreateAclsRequest(
        creations=[
            creation(),
            creation(resource_type=3, operation=4),  # Write on a Group
            creation(resource_pattern_type=2),  # MATCH
            creation(operation=99),
        ]
    )
    results = call(handle_create_acls, admin, body).results
    assert [r.error_code for r in results] == [0, INVALID_REQUEST, INVALID_REQUEST, INVALID_REQUEST]
    assert "Write is not supported on resource type Group" in results[1].error_message
    assert "MATCH is only valid in a filter" in results[2].error_message
    assert "unknown operation code 99" in results[3].error_message
    assert len(admin.store.bindings()) == 1
    describe = m.DescribeAclsRequest(
        resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1
    )
    (resource,) = call(handle_describe_acls, admin, describe).resources
    assert (resource.resource_type, resource.resource_name, resource.pattern_type) == (2, "t", 3)
    assert [(a.principal, a.operation) for a in resource.acls] == [("User:alice", 3)]
    delete = m.DeleteAclsRequest(
        filters=[
            m.DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1
            )
        ]
    )
    (result,) = call(handle_delete_acls, admin, delete).filter_results
    assert [a.resource_name for a in result.matching_acls] == ["t"]
    assert admin.store.bindings() == []


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    add_parser(sub, lambda p: p.add_argument("--bootstrap-server"))
    return parser.parse_args(["acls", *argv])


def test_producer_and_consumer_conveniences_are_kafka_acls():
    args = parse("add", "--allow-principal", "User:app", "--producer", "--idempotent",
                 "--topic", "orders", "--transactional-id", "tx")  # fmt: skip
    made = {(b.resource_type, b.resource_name, b.operation) for b in bindings_to_add(args)}
    assert made == {
        ("Topic", "orders", "Write"),
        ("Topic", "orders", "Describe"),
        ("Topic", "orders", "Create"),
        ("Cluster", "kafka-cluster", "IdempotentWrite"),
        ("TransactionalId", "tx", "Write"),
        ("TransactionalId", "tx", "Describe"),
    }
    consumer = parse("add", "--allow-principal", "User:app", "--consumer", "--topic", "t")
    with pytest.raises(CommandError, match="--consumer needs --group"):
        bindings_to_add(consumer)


def test_add_expands_principals_hosts_operations_and_resources():
    args = parse("add", "--allow-principal", "User:a", "--deny-principal", "User:b",
                 "--deny-host", "10.0.0.9", "--operation", "Read", "--operation", "Write",
                 "--topic", "t-", "--resource-pattern-type", "prefixed")  # fmt: skip
    made = bindings_to_add(args)
    assert len(made) == 4
    assert AclSpec("Topic", "t-", "Prefixed", "User:b", "10.0.0.9", "Write", "Deny") in made
    assert AclSpec("Topic", "t-", "Prefixed", "User:a", "*", "Read", "Allow") in made
    with pytest.raises(CommandError, match="needs --operation"):
        bindings_to_add(parse("add", "--allow-principal", "User:a", "--topic", "t"))


def test_remove_and_list_filters():
    (everything_on_t,) = filters_for(parse("remove", "--topic", "t"), removing=True)
    assert everything_on_t == AclSpec("Topic", "t", "Literal", None, None, "Any", "Any")
    with pytest.raises(CommandError, match="needs a resource"):
        filters_for(parse("remove"), removing=True)
    (listing,) = filters_for(parse("list"), removing=False)
    assert (listing.resource_type, listing.pattern_type, listing.principal) == ("Any", "Any", None)
