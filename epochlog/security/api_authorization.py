"""What each API requires, as Kafka's KafkaApis asks its authorizer, sans-I/O.

`authorize_request(context, api_key, version, body)` answers one request: None when it may run
as it is (the common case, no copy made), else an `Outcome` saying what the dispatch does:

- `error`: the whole request is answered with this code by the API's error response (the
  handler is not called), e.g. JoinGroup without Read on its group: GROUP_AUTHORIZATION_FAILED;
- `body` with `denied`: the handler gets a copy of the body holding only the items the principal
  may act on (topics, groups, config resources), and the items it may not are answered with
  their error (TOPIC_AUTHORIZATION_FAILED, ...) and merged into the handler's answer under
  `response_attr`, per topic where Kafka answers per topic (Produce, Fetch, OffsetCommit,
  CreateTopics, ...); `body` None: every item was denied, the handler is not called;
- `response_filter`: run on the handler's answer, to leave out what the principal may not
  describe (Metadata for all topics, ListGroups, ListTransactions, OffsetFetch's topics).

`RULES` holds one rule per API key with a line saying what Kafka requires; a unit test fails
when an API is served without a rule. The caller supplies what the rules need to know of the
broker through `AuthContext` (topic names by id, whether a topic exists, auto-creation).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from epochlog.protocol import messages as m
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.messages import pin_controller
from epochlog.security.acls import CLUSTER_NAME, AclOperation, Authorizer, ResourceType

READ = AclOperation.READ
WRITE = AclOperation.WRITE
CREATE = AclOperation.CREATE
DELETE = AclOperation.DELETE
ALTER = AclOperation.ALTER
DESCRIBE = AclOperation.DESCRIBE
CLUSTER_ACTION = AclOperation.CLUSTER_ACTION
DESCRIBE_CONFIGS = AclOperation.DESCRIBE_CONFIGS
ALTER_CONFIGS = AclOperation.ALTER_CONFIGS
IDEMPOTENT_WRITE = AclOperation.IDEMPOTENT_WRITE
TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TXN_ID = ResourceType.TRANSACTIONAL_ID

TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TXN_ID_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

# Config resource types (DescribeConfigs and friends).
_CONFIG_TOPIC = 2
_CONFIG_BROKER = 4
_CONFIG_BROKER_LOGGER = 8


@dataclass
class AuthContext:
    """Who asks, and what the rules need to know of the broker."""

    authorizer: Authorizer
    principal: str  # "User:alice"
    host: str  # the client's address
    topic_name: Callable[[uuid.UUID], str | None] = lambda _id: None
    topic_exists: Callable[[str], bool] = lambda _name: True
    auto_create_topics: bool = False  # auto.create.topics.enable
    # The topics a fetch session holds (KIP-227), by session id (none: no such session).
    session_topics: Callable[[int], Iterable[str]] = lambda _session_id: ()

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def cluster(self, operation: AclOperation) -> bool:
        return self.allowed(operation, CLUSTER, CLUSTER_NAME)


@dataclass(slots=True)
class Outcome:
    """What the dispatch does with a request that is not allowed as it is (module docstring)."""

    body: Any = None
    error: int | None = None
    denied: list[tuple[Any, int]] = field(default_factory=list)  # (request body, error code)
    denied_entries: list[Any] = field(default_factory=list)  # ready response entries (Fetch)
    response_attr: str | None = None
    response_filter: Callable[[Any], Any] | None = None


Rule = Callable[[AuthContext, int, Any], Outcome | None]


def reject(code: int, response_filter: Callable[[Any], Any] | None = None) -> Outcome:
    return Outcome(error=code, response_filter=response_filter)


def _with(body: Any, attr: str, items: list[Any]) -> Any:
    copied = copy.copy(body)
    setattr(copied, attr, items)
    return copied


def split(
    body: Any,
    attr: str,
    response_attr: str,
    code_of: Callable[[Any], int | None],
) -> Outcome | None:
    """Keep the items of `body.<attr>` for which `code_of` is None; the others are answered
    with their code, merged under `response_attr`. None when nothing is denied."""
    items = getattr(body, attr) or []
    kept: list[Any] = []
    denied_by_code: dict[int, list[Any]] = {}
    for item in items:
        code = code_of(item)
        if code is None:
            kept.append(item)
        else:
            denied_by_code.setdefault(code, []).append(item)
    if not denied_by_code:
        return None
    return Outcome(
        body=_with(body, attr, kept) if kept else None,
        denied=[(_with(body, attr, group), code) for code, group in denied_by_code.items()],
        response_attr=response_attr,
    )


def _topic_check(
    ctx: AuthContext, operation: AclOperation, name_of: Callable[[Any], str | None]
) -> Callable[[Any], int | None]:
    def code_of(item: Any) -> int | None:
        name = name_of(item)
        if name is None:  # unknown topic id: the handler answers UNKNOWN_TOPIC_ID
            return None
        return None if ctx.allowed(operation, TOPIC, name) else TOPIC_DENIED

    return code_of


def _by_name(item: Any) -> str:
    return item.name


# --------------------------------------------------------------------------- the rules


def _cluster_action(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    return None if ctx.cluster(CLUSTER_ACTION) else reject(CLUSTER_DENIED)


def _cluster(operation: AclOperation) -> Rule:
    def rule(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
        return None if ctx.cluster(operation) else reject(CLUSTER_DENIED)

    return rule


def _nothing(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    return None


def _produce(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    txn_id = body.transactional_id
    if txn_id is not None and not ctx.allowed(WRITE, TXN_ID, txn_id):
        return reject(TXN_ID_DENIED)
    return split(body, "topic_data", "responses", _topic_check(ctx, WRITE, _by_name))


def _fetch(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    replica_id = body.replica_state.replica_id if version >= 15 else body.replica_id
    follower = replica_id >= 0
    if follower and ctx.cluster(CLUSTER_ACTION):
        return None

    def name_of(topic: Any) -> str | None:
        return topic.topic if version < 13 else ctx.topic_name(topic.topic_id)

    # An incremental fetch is answered for every partition its session holds: one of a topic
    # denied since it was added ends the session, and the client's full fetch that follows is
    # split below.
    incremental = not follower and body.session_id > 0 and body.session_epoch > 0
    if incremental and any(
        not ctx.allowed(READ, TOPIC, t) for t in ctx.session_topics(body.session_id)
    ):
        return reject(int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
    check = (lambda _t: TOPIC_DENIED) if follower else _topic_check(ctx, READ, name_of)
    outcome = split(body, "topics", "responses", check)
    if outcome is None:
        return None
    R = m.FetchResponse
    for denied_body, code in outcome.denied:
        for topic in denied_body.topics:
            outcome.denied_entries.append(
                R.FetchableTopicResponse(
                    topic=topic.topic,
                    topic_id=topic.topic_id,
                    partitions=[
                        R.PartitionData(
                            partition_index=p.partition,
                            error_code=code,
                            high_watermark=-1,
                            last_stable_offset=-1,
                            log_start_offset=-1,
                            records=b"",  # librdkafka refuses a null record set
                        )
                        for p in topic.partitions
                    ],
                )
            )
    outcome.denied = []
    if outcome.body is not None:
        # A fetch session would hold the denied partitions out of the answer for good (the
        # client thinks them added): a split fetch is answered sessionless, so the client
        # sends full fetches again.
        outcome.body.session_id = 0
        outcome.body.session_epoch = -1
    return outcome


def _describe_topics(attr: str = "topics", name_attr: str = "name") -> Rule:
    def rule(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
        return split(body, attr, attr, _topic_check(ctx, DESCRIBE, lambda t: getattr(t, name_attr)))

    return rule


def _offset_for_leader_epoch(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    if ctx.cluster(CLUSTER_ACTION):
        return None
    return split(body, "topics", "topics", _topic_check(ctx, DESCRIBE, lambda t: t.topic))


def _describable_topics_filter(ctx: AuthContext) -> Callable[[Any], Any]:
    def keep(response: Any) -> Any:
        response.topics = [
            t for t in response.topics if t.name is None or ctx.allowed(DESCRIBE, TOPIC, t.name)
        ]
        return response

    return keep


def _metadata(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    topics = body.topics
    if topics is None or (version == 0 and not topics):
        return Outcome(body=body, response_filter=_describable_topics_filter(ctx))
    auto_create = ctx.auto_create_topics and (version < 4 or body.allow_auto_topic_creation)
    may_create_any = auto_create and ctx.cluster(CREATE)

    def code_of(topic: Any) -> int | None:
        name = topic.name
        if name is None:
            name = ctx.topic_name(topic.topic_id)
            if name is None:
                return None
        if not ctx.allowed(DESCRIBE, TOPIC, name):
            return TOPIC_DENIED
        if (
            auto_create
            and not may_create_any
            and not ctx.topic_exists(name)
            and not ctx.allowed(CREATE, TOPIC, name)
        ):
            return TOPIC_DENIED
        return None

    outcome = split(body, "topics", "topics", code_of)
    if outcome is not None and outcome.body is None and version >= 1:
        # Every named topic refused: still a Metadata answer (brokers, controller), for none.
        outcome.body = _with(body, "topics", [])
    return outcome


def _create_topics(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    if ctx.cluster(CREATE):
        return None
    return split(body, "topics", "topics", _topic_check(ctx, CREATE, _by_name))


def _delete_topics(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    if version < 6:
        return split(body, "topic_names", "responses", _topic_check(ctx, DELETE, lambda name: name))

    def name_of(topic: Any) -> str | None:
        return topic.name if topic.name is not None else ctx.topic_name(topic.topic_id)

    return split(body, "topics", "responses", _topic_check(ctx, DELETE, name_of))


def _per_topic(operation: AclOperation, attr: str, response_attr: str) -> Rule:
    def rule(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
        return split(body, attr, response_attr, _topic_check(ctx, operation, _by_name))

    return rule


def _init_producer_id(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    txn_id = body.transactional_id
    if txn_id is not None:
        return None if ctx.allowed(WRITE, TXN_ID, txn_id) else reject(TXN_ID_DENIED)
    # KIP-679: an idempotent producer needs IdempotentWrite on the cluster or Write on a topic.
    if ctx.cluster(IDEMPOTENT_WRITE) or ctx.authorizer.authorize_any_of_type(
        ctx.principal, ctx.host, WRITE, TOPIC
    ):
        return None
    return reject(CLUSTER_DENIED)


def _group(operation: AclOperation, topics: AclOperation | None = None) -> Rule:
    """`operation` on the request's group_id; then, if given, `topics` on each topic."""

    def rule(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
        if not ctx.allowed(operation, GROUP, body.group_id):
            return reject(GROUP_DENIED)
        if topics is None:
            return None
        return split(body, "topics", "topics", _topic_check(ctx, topics, _by_name))

    return rule


def _offset_delete(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    if not ctx.allowed(DELETE, GROUP, body.group_id):
        return reject(GROUP_DENIED)
    outcome = split(body, "topics", "topics", _topic_check(ctx, READ, _by_name))
    if outcome is None:
        return None
    R = m.OffsetDeleteResponse
    for denied_body, code in outcome.denied:
        for topic in denied_body.topics:
            outcome.denied_entries.append(
                R.OffsetDeleteResponseTopic(
                    name=topic.name,
                    partitions=[
                        R.OffsetDeleteResponsePartition(
                            partition_index=p.partition_index, error_code=code
                        )
                        for p in topic.partitions
                    ],
                )
            )
    outcome.denied = []
    return outcome


def _hide_offsets(ctx: AuthContext, topics: list[Any], all_topics: bool) -> list[Any]:
    """OffsetFetch: topics the principal may not describe are left out of an all-topics answer
    and answered TOPIC_AUTHORIZATION_FAILED when named."""
    out = []
    for topic in topics:
        if ctx.allowed(DESCRIBE, TOPIC, topic.name):
            out.append(topic)
        elif not all_topics:
            for p in topic.partitions:
                p.error_code = TOPIC_DENIED
                p.committed_offset = -1
            out.append(topic)
    return out


def _offset_fetch(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    if version < 8:
        if not ctx.allowed(DESCRIBE, GROUP, body.group_id):
            return reject(GROUP_DENIED)
        all_topics = body.topics is None

        def hide(response: Any) -> Any:
            response.topics = _hide_offsets(ctx, response.topics, all_topics)
            return response

        return Outcome(body=body, response_filter=hide)
    all_topics_of = {g.group_id: g.topics is None for g in body.groups}
    outcome = split(
        body,
        "groups",
        "groups",
        lambda g: None if ctx.allowed(DESCRIBE, GROUP, g.group_id) else GROUP_DENIED,
    ) or Outcome(body=body)

    def hide_groups(response: Any) -> Any:
        for group in response.groups:
            group.topics = _hide_offsets(
                ctx, group.topics or [], all_topics_of.get(group.group_id, True)
            )
        return response

    outcome.response_filter = hide_groups
    return outcome


def _find_coordinator(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    resource, code = (GROUP, GROUP_DENIED) if body.key_type == 0 else (TXN_ID, TXN_ID_DENIED)
    if version < 4:
        return None if ctx.allowed(DESCRIBE, resource, body.key) else reject(code)
    return split(
        body,
        "coordinator_keys",
        "coordinators",
        lambda key: None if ctx.allowed(DESCRIBE, resource, key) else code,
    )


def _describe_groups(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    return split(
        body,
        "groups",
        "groups",
        lambda g: None if ctx.allowed(DESCRIBE, GROUP, g) else GROUP_DENIED,
    )


def _list_groups(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    if ctx.cluster(DESCRIBE):
        return None

    def keep(response: Any) -> Any:
        response.groups = [g for g in response.groups if ctx.allowed(DESCRIBE, GROUP, g.group_id)]
        return response

    return Outcome(body=body, response_filter=keep)


def _delete_groups(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    return split(
        body,
        "groups_names",
        "results",
        lambda g: None if ctx.allowed(DELETE, GROUP, g) else GROUP_DENIED,
    )


def _config_check(ctx: AuthContext, operation: AclOperation) -> Callable[[Any], int | None]:
    def code_of(resource: Any) -> int | None:
        if resource.resource_type == _CONFIG_TOPIC:
            allowed = ctx.allowed(operation, TOPIC, resource.resource_name)
            return None if allowed else TOPIC_DENIED
        if resource.resource_type in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER):
            return None if ctx.cluster(operation) else CLUSTER_DENIED
        return None  # other types: the handler answers them

    return code_of


def _describe_configs(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    return split(body, "resources", "results", _config_check(ctx, DESCRIBE_CONFIGS))


def _alter_configs(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    return split(body, "resources", "responses", _config_check(ctx, ALTER_CONFIGS))


def _txn_id_write(ctx: AuthContext, txn_id: str) -> bool:
    return ctx.allowed(WRITE, TXN_ID, txn_id)


def _end_txn(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    return None if _txn_id_write(ctx, body.transactional_id) else reject(TXN_ID_DENIED)


def _add_offsets_to_txn(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    if not _txn_id_write(ctx, body.transactional_id):
        return reject(TXN_ID_DENIED)
    return None if ctx.allowed(READ, GROUP, body.group_id) else reject(GROUP_DENIED)


def _txn_offset_commit(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    if not _txn_id_write(ctx, body.transactional_id):
        return reject(TXN_ID_DENIED)
    return _group(READ, READ)(ctx, version, body)


def _add_partitions_to_txn(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    if version >= 4:  # broker to broker (KIP-890 verification)
        return _cluster_action(ctx, version, body)
    if not _txn_id_write(ctx, body.v3_and_below_transactional_id):
        return reject(TXN_ID_DENIED)
    denied = {t.name for t in body.v3_and_below_topics if not ctx.allowed(WRITE, TOPIC, t.name)}
    if not denied:
        return None

    # Kafka: nothing is added; denied topics TOPIC_AUTHORIZATION_FAILED, the rest
    # OPERATION_NOT_ATTEMPTED.
    def mark(response: Any) -> Any:
        for topic in response.results_by_topic_v3_and_below:
            if topic.name in denied:
                for p in topic.results_by_partition:
                    p.partition_error_code = TOPIC_DENIED
        return response

    return reject(int(ErrorCode.OPERATION_NOT_ATTEMPTED), response_filter=mark)


def _write_txn_markers(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    if ctx.cluster(ALTER) or ctx.cluster(CLUSTER_ACTION):
        return None
    return reject(CLUSTER_DENIED)


def _describe_transactions(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    def hide_topics(response: Any) -> Any:
        for state in response.transaction_states:
            state.topics = [t for t in state.topics if ctx.allowed(DESCRIBE, TOPIC, t.topic)]
        return response

    outcome = split(
        body,
        "transactional_ids",
        "transaction_states",
        lambda txn_id: None if ctx.allowed(DESCRIBE, TXN_ID, txn_id) else TXN_ID_DENIED,
    ) or Outcome(body=body)
    outcome.response_filter = hide_topics
    return outcome


def _list_transactions(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    def keep(response: Any) -> Any:
        response.transaction_states = [
            s
            for s in response.transaction_states
            if ctx.allowed(DESCRIBE, TXN_ID, s.transactional_id)
        ]
        return response

    return Outcome(body=body, response_filter=keep)


def _describe_topic_partitions(ctx: AuthContext, version: int, body: Any) -> Outcome | None:
    if not body.topics:
        return Outcome(body=body, response_filter=_describable_topics_filter(ctx))
    return split(body, "topics", "topics", _topic_check(ctx, DESCRIBE, _by_name))


# API key -> (what Kafka requires, the rule). Keyed by number so that APIs other modules add
# (SASL, SCRAM) have their rule here already.
RULES: dict[int, tuple[str, Rule]] = {
    0: ("Write on each Topic; Write on the TransactionalId if one is given", _produce),
    1: (
        "consumer: Read on each Topic; follower: ClusterAction on the Cluster (else every "
        "partition TOPIC_AUTHORIZATION_FAILED)",
        _fetch,
    ),
    2: ("Describe on each Topic", _describe_topics()),
    3: (
        "Describe on each Topic (all topics: the others left out); Create on the Cluster or "
        "the Topic to auto-create",
        _metadata,
    ),
    4: ("ClusterAction on the Cluster", _cluster_action),
    5: ("ClusterAction on the Cluster", _cluster_action),
    6: ("ClusterAction on the Cluster", _cluster_action),
    7: ("ClusterAction on the Cluster", _cluster_action),
    8: ("Read on the Group, Read on each Topic", _group(READ, READ)),
    9: ("Describe on the Group; topics not describable hidden", _offset_fetch),
    10: ("Describe on the Group or TransactionalId", _find_coordinator),
    11: ("Read on the Group", _group(READ)),
    12: ("Read on the Group", _group(READ)),
    13: ("Read on the Group", _group(READ)),
    14: ("Read on the Group", _group(READ)),
    15: ("Describe on each Group", _describe_groups),
    16: ("Describe on the Cluster, else only groups with Describe", _list_groups),
    17: ("none (SaslHandshake)", _nothing),
    18: ("none", _nothing),
    19: ("Create on the Cluster, else Create on each Topic", _create_topics),
    20: ("Delete on each Topic", _delete_topics),
    21: ("Delete on each Topic", _per_topic(DELETE, "topics", "topics")),
    22: (
        "Write on the TransactionalId; idempotent: IdempotentWrite on the Cluster or Write "
        "on some Topic",
        _init_producer_id,
    ),
    23: ("ClusterAction on the Cluster, else Describe on each Topic", _offset_for_leader_epoch),
    24: (
        "v0-3: Write on the TransactionalId and each Topic; v4+: ClusterAction",
        _add_partitions_to_txn,
    ),
    25: ("Write on the TransactionalId, Read on the Group", _add_offsets_to_txn),
    26: ("Write on the TransactionalId", _end_txn),
    27: ("ClusterAction (or Alter) on the Cluster", _write_txn_markers),
    28: (
        "Write on the TransactionalId, Read on the Group, Read on each Topic",
        _txn_offset_commit,
    ),
    29: ("Describe on the Cluster", _cluster(DESCRIBE)),
    30: ("Alter on the Cluster", _cluster(ALTER)),
    31: ("Alter on the Cluster", _cluster(ALTER)),
    32: ("DescribeConfigs on each Topic / the Cluster (broker resources)", _describe_configs),
    33: ("AlterConfigs on each Topic / the Cluster (broker resources)", _alter_configs),
    34: ("Alter on the Cluster", _cluster(ALTER)),
    35: ("Describe on the Cluster", _cluster(DESCRIBE)),
    36: ("none (SaslAuthenticate)", _nothing),
    37: ("Alter on each Topic", _per_topic(ALTER, "topics", "results")),
    42: ("Delete on each Group", _delete_groups),
    43: ("Alter on the Cluster", _cluster(ALTER)),
    44: ("AlterConfigs on each Topic / the Cluster (broker resources)", _alter_configs),
    45: ("Alter on the Cluster", _cluster(ALTER)),
    46: ("Describe on the Cluster", _cluster(DESCRIBE)),
    47: ("Delete on the Group, Read on each Topic", _offset_delete),
    48: ("DescribeConfigs on the Cluster", _cluster(DESCRIBE_CONFIGS)),
    49: ("AlterConfigs on the Cluster", _cluster(ALTER_CONFIGS)),
    50: ("Describe on the Cluster", _cluster(DESCRIBE)),
    51: ("Alter on the Cluster", _cluster(ALTER)),
    56: ("ClusterAction on the Cluster", _cluster_action),
    60: ("none (authorized operations need Describe on the Cluster)", _nothing),
    61: ("Read on each Topic", _per_topic(READ, "topics", "topics")),
    65: ("Describe on each TransactionalId; topics not describable hidden", _describe_transactions),
    66: ("only TransactionalIds with Describe", _list_transactions),
    75: ("Describe on each Topic (all topics: the others left out)", _describe_topic_partitions),
    pin_controller.API_KEY: ("ClusterAction on the Cluster (KIP-39, ours)", _cluster_action),
}


def authorize_request(ctx: AuthContext, api_key: int, version: int, body: Any) -> Outcome | None:
    """None: the request runs as it is. Else what to do (see `Outcome`). A served API without
    a rule is refused whole (CLUSTER_AUTHORIZATION_FAILED), never let through unchecked."""
    entry = RULES.get(api_key)
    if entry is None:
        return reject(CLUSTER_DENIED)
    return entry[1](ctx, version, body)
