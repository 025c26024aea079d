"""Kafka's ACL model and AclAuthorizer's decision (security/acls.py), and their ZooKeeper form
(zk/acls.py): deny wins, wildcards, prefixes, implied operations, super.users,
allow.everyone.if.no.acl.found; a property test against a naive reading of Kafka's rules."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.security.acls import (
    ANY_BINDING,
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    AclStore,
    Authorizer,
    PatternType,
    ResourcePattern,
    ResourceType,
    operation_named,
    parse_super_users,
    validate_binding,
)
from epochlog.zk.acls import (
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    acl_path,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
)
from epochlog.zk.znodes import ZNodeDecodeError

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation


def acl(
    name: str,
    principal: str = "User:alice",
    op: AclOperation = Op.READ,
    permission: AclPermissionType = ALLOW,
    host: str = "*",
    resource_type: ResourceType = TOPIC,
    pattern_type: PatternType = LITERAL,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, op, permission),
    )


def authorizer(*bindings: AclBinding, **kwargs: object) -> Authorizer:
    store = AclStore()
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        grouped.setdefault(b.pattern, set()).add(b.entry)
    for pattern, entries in grouped.items():
        store.replace(pattern, entries)
    return Authorizer(store, **kwargs)  # type: ignore[arg-type]


def test_no_acl_denies_unless_allow_everyone_if_no_acl_found():
    assert not authorizer().authorize("User:alice", "1.2.3.4", Op.READ, TOPIC, "t")
    open_ = authorizer(allow_everyone_if_no_acl_found=True)
    assert open_.authorize("User:alice", "1.2.3.4", Op.READ, TOPIC, "t")
    # an ACL for someone else closes the resource to everyone not allowed
    closed = authorizer(acl("t", "User:bob"), allow_everyone_if_no_acl_found=True)
    assert not closed.authorize("User:alice", "1.2.3.4", Op.READ, TOPIC, "t")
    assert closed.authorize("User:bob", "1.2.3.4", Op.READ, TOPIC, "t")
    assert closed.authorize("User:alice", "1.2.3.4", Op.READ, TOPIC, "other")


def test_deny_wins_over_allow():
    a = authorizer(acl("t"), acl("t", permission=DENY))
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    # a Deny for everyone beats an Allow for alice; a Deny on another host does not apply
    b = authorizer(acl("t"), acl("t", "User:*", permission=DENY, host="10.0.0.9"))
    assert b.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "t")
    assert not b.authorize("User:alice", "10.0.0.9", Op.READ, TOPIC, "t")


def test_wildcards_principal_host_and_resource():
    a = authorizer(acl("*", "User:*", Op.WRITE))
    assert a.authorize("User:anyone", "h", Op.WRITE, TOPIC, "whatever")
    assert not a.authorize("User:anyone", "h", Op.READ, TOPIC, "whatever")
    b = authorizer(acl("t", host="10.0.0.1"))
    assert b.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "t")
    assert not b.authorize("User:alice", "10.0.0.2", Op.READ, TOPIC, "t")


def test_prefixed_patterns():
    a = authorizer(acl("orders-", pattern_type=PREFIXED))
    assert a.authorize("User:alice", "h", Op.READ, TOPIC, "orders-eu")
    assert a.authorize("User:alice", "h", Op.READ, TOPIC, "orders-")
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "order")
    d = authorizer(acl("orders-", pattern_type=PREFIXED), acl("orders-eu", permission=DENY))
    assert not d.authorize("User:alice", "h", Op.READ, TOPIC, "orders-eu")
    assert d.authorize("User:alice", "h", Op.READ, TOPIC, "orders-us")


def test_implied_operations_allow_but_never_widen_a_deny():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert authorizer(acl("t", op=op)).authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")
    a = authorizer(acl("t", op=Op.ALTER_CONFIGS))
    assert a.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not a.authorize("User:alice", "h", Op.ALTER, TOPIC, "t")
    assert not authorizer(acl("t", op=Op.DESCRIBE)).authorize(
        "User:alice", "h", Op.READ, TOPIC, "t"
    )
    # Deny Read leaves Describe (implied by an Allow Write) allowed
    b = authorizer(acl("t", op=Op.WRITE), acl("t", op=Op.READ, permission=DENY))
    assert b.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")
    # All allows and denies everything
    assert authorizer(acl("t", op=Op.ALL)).authorize("User:alice", "h", Op.DELETE, TOPIC, "t")
    c = authorizer(acl("t", op=Op.READ), acl("t", op=Op.ALL, permission=DENY))
    assert not c.authorize("User:alice", "h", Op.READ, TOPIC, "t")


def test_super_users_may_do_anything():
    users = parse_super_users("User:admin; User:broker;")
    assert users == {"User:admin", "User:broker"}
    a = authorizer(acl("t", "User:admin", permission=DENY), super_users=users)
    assert a.authorize("User:admin", "h", Op.READ, TOPIC, "t")
    assert a.authorize("User:broker", "h", Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    with pytest.raises(AclError, match="super.users"):
        parse_super_users("User:admin;bob")


def test_authorize_any_of_type():
    assert authorizer(acl("t", op=Op.WRITE)).authorize_any_of_type(
        "User:alice", "h", Op.WRITE, TOPIC
    )
    assert not authorizer(acl("t", op=Op.READ)).authorize_any_of_type(
        "User:alice", "h", Op.WRITE, TOPIC
    )
    denied_all = authorizer(acl("t", op=Op.WRITE), acl("*", op=Op.WRITE, permission=DENY))
    assert not denied_all.authorize_any_of_type("User:alice", "h", Op.WRITE, TOPIC)
    prefix_denied = authorizer(
        acl("ab", op=Op.WRITE), acl("a", op=Op.WRITE, permission=DENY, pattern_type=PREFIXED)
    )
    assert not prefix_denied.authorize_any_of_type("User:alice", "h", Op.WRITE, TOPIC)


def test_filters_match_as_kafka_describes():
    store = AclStore()
    for b in (
        acl("t"),
        acl("*", "User:bob"),
        acl("t-", pattern_type=PREFIXED, op=Op.WRITE),
        acl("g", resource_type=GROUP),
    ):
        store.replace(b.pattern, {b.entry})
    assert len(store.bindings(ANY_BINDING)) == 4
    match = AclBindingFilter(TOPIC, "t-1", PatternType.MATCH)
    assert {b.pattern.name for b in store.bindings(match)} == {"*", "t-"}
    literal = AclBindingFilter(TOPIC, "t", PatternType.LITERAL)
    assert [b.pattern.name for b in store.bindings(literal)] == ["t"]
    by_op = AclBindingFilter(operation=Op.WRITE)
    assert [b.pattern.name for b in store.bindings(by_op)] == ["t-"]
    by_principal = AclBindingFilter(principal="User:bob")
    assert [b.pattern.name for b in store.bindings(by_principal)] == ["*"]


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl("t", resource_type=ResourceType.ANY), "only valid in a filter"),
        (acl("t", pattern_type=PatternType.MATCH), "only valid in a filter"),
        (acl("t", op=Op.ANY), "only valid in a filter"),
        (acl("t", permission=AclPermissionType.ANY), "only valid in a filter"),
        (acl("g", op=Op.WRITE, resource_type=GROUP), "not supported on resource type Group"),
        (acl("my-cluster", op=Op.ALTER, resource_type=CLUSTER), "kafka-cluster"),
        (acl("t", "alice"), "not a principal"),
        (acl(""), "must not be empty"),
    ],
)
def test_bindings_kafka_refuses(binding: AclBinding, message: str):
    with pytest.raises(AclError, match=message):
        validate_binding(binding)


def test_operation_names_as_kafka_tools_write_them():
    assert operation_named("IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert operation_named("describe-configs") is Op.DESCRIBE_CONFIGS
    assert operation_named("ALL") is Op.ALL
    with pytest.raises(AclError, match="unknown operation 'Fly'"):
        operation_named("Fly")


# ------------------------------------------------------------------ property test


def naive(
    bindings: list[AclBinding],
    super_users: set[str],
    allow_everyone: bool,
    principal: str,
    host: str,
    op: AclOperation,
    rtype: ResourceType,
    name: str,
) -> bool:
    """Kafka's rules read literally, with no index."""
    if principal in super_users:
        return True
    applying = [
        b
        for b in bindings
        if b.pattern.resource_type == rtype
        and (
            (b.pattern.pattern_type == LITERAL and b.pattern.name in (name, "*"))
            or (b.pattern.pattern_type == PREFIXED and name.startswith(b.pattern.name))
        )
    ]
    if not applying:
        return allow_everyone

    def hits(b: AclBinding, ops: set[AclOperation]) -> bool:
        e = b.entry
        return (
            e.principal in (principal, "User:*")
            and e.host in (host, "*")
            and (e.operation in ops or e.operation == Op.ALL)
        )

    if any(b.entry.permission == DENY and hits(b, {op}) for b in applying):
        return False
    implied = {op}
    if op == Op.DESCRIBE:
        implied |= {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}
    if op == Op.DESCRIBE_CONFIGS:
        implied |= {Op.ALTER_CONFIGS}
    return any(b.entry.permission == ALLOW and hits(b, implied) for b in applying)


NAMES = st.sampled_from(["a", "ab", "abc", "b", "*"])
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:*"])
HOSTS = st.sampled_from(["10.0.0.1", "10.0.0.2", "*"])
OPS = st.sampled_from(
    [Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.ALTER_CONFIGS,
     Op.DESCRIBE_CONFIGS]
)  # fmt: skip
BINDINGS = st.builds(
    lambda name, rtype, ptype, principal, host, op, perm: acl(
        name, principal, op, perm, host, rtype, ptype
    ),
    NAMES,
    st.sampled_from([TOPIC, GROUP]),
    st.sampled_from([LITERAL, PREFIXED]),
    PRINCIPALS,
    HOSTS,
    OPS,
    st.sampled_from([ALLOW, DENY]),
)


@settings(max_examples=400, deadline=None)
@given(
    bindings=st.lists(BINDINGS, max_size=8),
    super_user=st.booleans(),
    allow_everyone=st.booleans(),
    principal=st.sampled_from(["User:alice", "User:bob"]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    op=OPS.filter(lambda o: o != Op.ALL),
    rtype=st.sampled_from([TOPIC, GROUP]),
    name=st.sampled_from(["a", "ab", "abc", "b", "c"]),
)
def test_authorizer_agrees_with_the_naive_reading(
    bindings, super_user, allow_everyone, principal, host, op, rtype, name
):
    supers = {"User:alice"} if super_user else set()
    a = authorizer(*bindings, super_users=supers, allow_everyone_if_no_acl_found=allow_everyone)
    expected = naive(bindings, supers, allow_everyone, principal, host, op, rtype, name)
    assert a.authorize(principal, host, op, rtype, name) is expected


# ------------------------------------------------------------------ ZooKeeper form


def test_znode_paths_and_json_are_kafkas():
    assert acl_path(ResourcePattern(TOPIC, "t")) == "/kafka-acl/Topic/t"
    assert (
        acl_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PREFIXED))
        == "/kafka-acl-extended/prefixed/TransactionalId/tx"
    )
    with pytest.raises(AclError, match="'/'"):
        acl_path(ResourcePattern(GROUP, "a/b"))
    entries = {
        AccessControlEntry("User:alice", "*", Op.READ, ALLOW),
        AccessControlEntry("User:bob", "10.0.0.1", Op.IDEMPOTENT_WRITE, DENY),
    }
    data = encode_acls(entries)
    obj = json.loads(data)
    assert obj["version"] == 1
    assert {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
            "host": "*"} in obj["acls"]  # fmt: skip
    assert {"principal": "User:bob", "permissionType": "Deny", "operation": "IdempotentWrite",
            "host": "10.0.0.1"} in obj["acls"]  # fmt: skip
    assert decode_acls(data, "/p") == entries
    # Kafka's own example (AclEntry's javadoc)
    kafka = b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Deny",' \
        b'"operation": "Read","principal": "User:alice"}]}'  # fmt: skip
    assert decode_acls(kafka, "/p") == {AccessControlEntry("User:alice", "host1", Op.READ, DENY)}
    with pytest.raises(ZNodeDecodeError, match="bad ACL entry"):
        decode_acls(b'{"version":1,"acls":[{"principal":"User:a"}]}', "/p")


def test_change_notifications_are_kafkas():
    root, data = encode_change(ResourcePattern(TOPIC, "t"))
    assert (root, data) == (LITERAL_CHANGES, b"TOPIC:t")
    assert decode_change(root, data, "/x") == ResourcePattern(TOPIC, "t")
    assert decode_change(root, b"Topic:a:b", "/x") == ResourcePattern(TOPIC, "a:b")
    root, data = encode_change(ResourcePattern(GROUP, "g-", PREFIXED))
    assert root == EXTENDED_CHANGES
    assert json.loads(data) == {
        "version": 1, "resourceType": "GROUP", "name": "g-", "patternType": "PREFIXED"
    }  # fmt: skip
    assert decode_change(root, data, "/x") == ResourcePattern(GROUP, "g-", PREFIXED)
    with pytest.raises(ZNodeDecodeError):
        decode_change(LITERAL_CHANGES, b"nonsense", "/x")
