"""What each API requires (security/api_authorization.py) and the one dispatch check that
applies it (broker/authorization.py): every served API has a rule; per-topic denials are merged
into the handler's answer; whole-request denials never reach the handler."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from epochlog.broker.authorization import RequestAuthorization, client_host
from epochlog.broker.handlers import HANDLERS
from epochlog.broker.handlers.context import CloseConnection, ConnectionInfo
from epochlog.broker.metadata_cache import MetadataCache
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, Request
from epochlog.protocol.headers import RequestHeader
from epochlog.security.acls import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    AclStore,
    Authorizer,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from epochlog.security.api_authorization import RULES, AuthContext, authorize_request
from epochlog.security.principal import KafkaPrincipal

Op = AclOperation
ME = "User:alice"
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53


def test_every_served_api_has_a_rule():
    missing = sorted(ApiKey(k).name for k in APIS if k not in RULES)
    assert not missing, f"APIs served without an authorization rule: {missing}"
    assert set(HANDLERS) <= set(RULES)
    for summary, rule in RULES.values():
        assert summary and callable(rule)


def ctx(*grants: tuple[Op, ResourceType, str], deny: tuple = (), **kw: Any) -> AuthContext:
    store = AclStore()
    entries: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for perm, items in ((AclPermissionType.ALLOW, grants), (AclPermissionType.DENY, deny)):
        for op, rtype, name in items:
            pattern = ResourcePattern(rtype, name, PatternType.LITERAL)
            entries.setdefault(pattern, set()).add(AccessControlEntry(ME, "*", op, perm))
    for pattern, es in entries.items():
        store.replace(pattern, es)
    return AuthContext(Authorizer(store), ME, "127.0.0.1", **kw)


def produce(*topics: str, txn: str | None = None, acks: int = -1) -> Any:
    R = m.ProduceRequest
    return R(
        transactional_id=txn,
        acks=acks,
        timeout_ms=1000,
        topic_data=[
            R.TopicProduceData(name=t, partition_data=[R.PartitionProduceData(index=0)])
            for t in topics
        ],
    )


def test_produce_splits_topics_and_checks_the_transactional_id():
    c = ctx((Op.WRITE, ResourceType.TOPIC, "ok"))
    assert authorize_request(c, 0, 9, produce("ok")) is None
    outcome = authorize_request(c, 0, 9, produce("ok", "no"))
    assert outcome is not None and outcome.response_attr == "responses"
    assert [t.name for t in outcome.body.topic_data] == ["ok"]
    ((denied, code),) = outcome.denied
    assert code == TOPIC_DENIED and [t.name for t in denied.topic_data] == ["no"]
    whole = authorize_request(c, 0, 9, produce("ok", txn="tx"))
    assert whole is not None and whole.error == TXN_DENIED
    c2 = ctx((Op.WRITE, ResourceType.TOPIC, "ok"), (Op.WRITE, ResourceType.TRANSACTIONAL_ID, "tx"))
    assert authorize_request(c2, 0, 9, produce("ok", txn="tx")) is None


def fetch(replica_id: int, *topics: str) -> Any:
    R = m.FetchRequest
    return R(
        replica_id=replica_id,
        session_id=5,
        session_epoch=3,
        topics=[R.FetchTopic(topic=t, partitions=[R.FetchPartition(partition=0)]) for t in topics],
    )


def test_fetch_consumers_need_read_followers_cluster_action():
    c = ctx((Op.READ, ResourceType.TOPIC, "ok"))
    outcome = authorize_request(c, 1, 12, fetch(-1, "ok", "no"))
    assert outcome is not None
    assert [t.topic for t in outcome.body.topics] == ["ok"]
    # answered sessionless, so the client sends full fetches again
    assert (outcome.body.session_id, outcome.body.session_epoch) == (0, -1)
    (entry,) = outcome.denied_entries
    assert entry.topic == "no" and entry.partitions[0].error_code == TOPIC_DENIED
    follower = authorize_request(c, 1, 12, fetch(2, "ok"))
    assert follower is not None and follower.body is None  # every partition denied
    c2 = ctx((Op.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME))
    assert authorize_request(c2, 1, 12, fetch(2, "ok", "no")) is None


def test_fetch_by_topic_id_resolves_names():
    known = uuid.uuid4()
    c = ctx(topic_name=lambda i: "no" if i == known else None)
    R = m.FetchRequest
    body = R(
        replica_id=-1,
        topics=[
            R.FetchTopic(topic_id=known, partitions=[R.FetchPartition(partition=0)]),
            R.FetchTopic(topic_id=uuid.uuid4(), partitions=[R.FetchPartition(partition=0)]),
        ],
    )
    outcome = authorize_request(c, 1, 13, body)
    assert outcome is not None and len(outcome.body.topics) == 1  # unknown id: handler says so
    assert outcome.denied_entries[0].topic_id == known


def metadata(topics: list[str] | None, auto: bool = True) -> Any:
    R = m.MetadataRequest
    return R(
        topics=None if topics is None else [R.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=auto,
    )


def test_metadata_hides_and_refuses_undescribable_topics():
    c = ctx((Op.WRITE, ResourceType.TOPIC, "mine"))  # Write implies Describe
    all_topics = authorize_request(c, 3, 12, metadata(None))
    assert all_topics is not None and all_topics.response_filter is not None
    R = m.MetadataResponse
    answer = R(
        topics=[R.MetadataResponseTopic(name="mine"), R.MetadataResponseTopic(name="theirs")]
    )
    assert [t.name for t in all_topics.response_filter(answer).topics] == ["mine"]
    named = authorize_request(c, 3, 12, metadata(["mine", "theirs"]))
    assert named is not None and [t.name for t in named.body.topics] == ["mine"]
    assert named.denied[0][1] == TOPIC_DENIED
    none_left = authorize_request(c, 3, 12, metadata(["theirs"]))
    assert none_left is not None and none_left.body.topics == []  # brokers still answered


def test_metadata_auto_creation_needs_create():
    describe = (Op.DESCRIBE, ResourceType.TOPIC, "new")
    c = ctx(describe, topic_exists=lambda _n: False, auto_create_topics=True)
    outcome = authorize_request(c, 3, 12, metadata(["new"]))
    assert outcome is not None and outcome.denied[0][1] == TOPIC_DENIED
    c2 = ctx(describe, (Op.CREATE, ResourceType.TOPIC, "new"), topic_exists=lambda _n: False,
             auto_create_topics=True)  # fmt: skip
    assert authorize_request(c2, 3, 12, metadata(["new"])) is None
    c3 = ctx(describe, (Op.CREATE, ResourceType.CLUSTER, CLUSTER_NAME),
             topic_exists=lambda _n: False, auto_create_topics=True)  # fmt: skip
    assert authorize_request(c3, 3, 12, metadata(["new"])) is None
    # without auto-creation the answer is UNKNOWN_TOPIC_OR_PARTITION, the handler's
    assert authorize_request(c, 3, 12, metadata(["new"], auto=False)) is None


def test_group_apis_need_read_on_the_group():
    c = ctx((Op.READ, ResourceType.GROUP, "g"), (Op.READ, ResourceType.TOPIC, "t"))
    join = m.JoinGroupRequest(group_id="g")
    assert authorize_request(c, 11, 5, join) is None
    other = authorize_request(c, 11, 5, m.JoinGroupRequest(group_id="h"))
    assert other is not None and other.error == GROUP_DENIED
    R = m.OffsetCommitRequest
    commit = R(
        group_id="g",
        topics=[R.OffsetCommitRequestTopic(name=t) for t in ("t", "u")],
    )
    outcome = authorize_request(c, 8, 8, commit)
    assert outcome is not None and [t.name for t in outcome.body.topics] == ["t"]
    commit.group_id = "h"
    denied = authorize_request(c, 8, 8, commit)
    assert denied is not None and denied.error == GROUP_DENIED
    find = m.FindCoordinatorRequest(key="g", key_type=0)
    assert authorize_request(c, 10, 3, find) is None  # Read implies Describe
    find_txn = m.FindCoordinatorRequest(key="tx", key_type=1)
    refused = authorize_request(c, 10, 3, find_txn)
    assert refused is not None and refused.error == TXN_DENIED


def test_create_topics_needs_create_on_cluster_or_topic():
    R = m.CreateTopicsRequest
    body = R(topics=[R.CreatableTopic(name=n) for n in ("a", "b")])
    c = ctx((Op.CREATE, ResourceType.TOPIC, "a"))
    outcome = authorize_request(c, 19, 5, body)
    assert outcome is not None and [t.name for t in outcome.body.topics] == ["a"]
    assert (
        authorize_request(ctx((Op.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)), 19, 5, body) is None
    )


def test_control_requests_need_cluster_action():
    body = m.UpdateMetadataRequest()
    refused = authorize_request(ctx(), 6, 7, body)
    assert refused is not None and refused.error == CLUSTER_DENIED
    c = ctx((Op.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME))
    for key in (4, 5, 6, 7, 56, int(ApiKey.PIN_CONTROLLER)):
        assert authorize_request(c, key, 0, body) is None


def test_init_producer_id_idempotent_needs_idempotent_write_or_write_on_a_topic():
    body = m.InitProducerIdRequest(transactional_id=None)
    refused = authorize_request(ctx(), 22, 4, body)
    assert refused is not None and refused.error == CLUSTER_DENIED
    assert authorize_request(ctx((Op.WRITE, ResourceType.TOPIC, "t")), 22, 4, body) is None
    assert (
        authorize_request(ctx((Op.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)), 22, 4,
                          body) is None
    )  # fmt: skip


def test_describe_configs_per_resource_type():
    R = m.DescribeConfigsRequest
    body = R(
        resources=[
            R.DescribeConfigsResource(resource_type=2, resource_name="t"),
            R.DescribeConfigsResource(resource_type=4, resource_name="1"),
        ]
    )
    outcome = authorize_request(ctx((Op.ALTER_CONFIGS, ResourceType.TOPIC, "t")), 32, 4, body)
    assert outcome is not None and [r.resource_name for r in outcome.body.resources] == ["t"]
    assert [code for _, code in outcome.denied] == [CLUSTER_DENIED]


# ------------------------------------------------------------------ the dispatch check


def request_of(api_key: int, version: int, body: Any) -> Request:
    header = RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="c"
    )
    return Request(header, body)


def dispatch(authorizer: Authorizer) -> RequestAuthorization:
    return RequestAuthorization(authorizer, MetadataCache(), auto_create_topics=False)


def granted(op: Op, rtype: ResourceType, name: str) -> Authorizer:
    store = AclStore()
    store.replace(
        ResourcePattern(rtype, name), {AccessControlEntry(ME, "*", op, AclPermissionType.ALLOW)}
    )
    return Authorizer(store)


CONNECTION = ConnectionInfo("PLAINTEXT", "127.0.0.1:5555", principal=KafkaPrincipal.parse(ME))


def produce_answer(body: Any) -> Any:
    R = m.ProduceResponse
    return R(
        responses=[
            R.TopicProduceResponse(
                name=t.name, partition_responses=[R.PartitionProduceResponse(index=0)]
            )
            for t in body.topic_data
        ]
    )


def test_dispatch_merges_denied_topics_into_a_deferred_produce_answer():
    seen: list[Any] = []

    def begin_produce(services: Any, request: Request, connection: Any) -> Any:
        seen.append(request.body)
        future = asyncio.get_running_loop().create_future()
        future.set_result(produce_answer(request.body))
        return future

    async def run() -> Any:
        handling = dispatch(granted(Op.WRITE, ResourceType.TOPIC, "ok")).begin(
            begin_produce, None, request_of(0, 9, produce("ok", "no")), CONNECTION
        )
        assert isinstance(handling, asyncio.Future)  # still deferred by the server
        return await handling

    answer = asyncio.run(run())
    assert [t.name for t in seen[0].topic_data] == ["ok"]
    codes = {t.name: t.partition_responses[0].error_code for t in answer.responses}
    assert codes == {"ok": 0, "no": TOPIC_DENIED}


def test_dispatch_never_calls_the_handler_for_a_whole_denial():
    def handler(*args: Any) -> Any:
        raise AssertionError("the handler must not run")

    async def run() -> Any:
        request = request_of(11, 5, m.JoinGroupRequest(group_id="g", member_id="m"))
        return await dispatch(Authorizer()).begin(handler, None, request, CONNECTION)

    answer = asyncio.run(run())
    assert answer.error_code == GROUP_DENIED


def test_dispatch_closes_an_acks0_produce_it_refuses():
    async def run() -> Any:
        request = request_of(0, 9, produce("no", acks=0))
        return await dispatch(Authorizer()).begin(lambda *a: None, None, request, CONNECTION)

    with pytest.raises(CloseConnection):
        asyncio.run(run())


def test_dispatch_runs_allowed_requests_unchanged():
    request = request_of(0, 9, produce("ok"))
    seen: list[Request] = []

    async def handler(services: Any, req: Request, connection: Any) -> Any:
        seen.append(req)
        return produce_answer(req.body)

    async def run() -> Any:
        auth = dispatch(granted(Op.WRITE, ResourceType.TOPIC, "ok"))
        return await auth.begin(handler, None, request, CONNECTION)

    answer = asyncio.run(run())
    assert seen == [request] and seen[0] is request
    assert answer.responses[0].partition_responses[0].error_code == 0


def test_client_host():
    assert client_host("10.1.2.3:5555") == "10.1.2.3"
    assert client_host("::1:5555") == "::1"


def test_an_incremental_fetch_whose_session_holds_a_denied_topic_ends_the_session():
    c = ctx((Op.READ, ResourceType.TOPIC, "ok"), session_topics=lambda sid: {"ok", "no"})
    R = m.FetchRequest
    incremental = R(replica_id=-1, session_id=5, session_epoch=3, topics=[])
    outcome = authorize_request(c, 1, 12, incremental)
    assert outcome is not None and outcome.error == 70  # FETCH_SESSION_ID_NOT_FOUND
    c2 = ctx((Op.READ, ResourceType.TOPIC, "ok"), session_topics=lambda sid: {"ok"})
    assert authorize_request(c2, 1, 12, incremental) is None
