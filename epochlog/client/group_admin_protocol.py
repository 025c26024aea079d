"""The admin client's group requests and answers, built and read without I/O.

For each group API the admin uses, a function builds the request for a negotiated version and
another reads the answer into a `GroupReply` per group: the error that decides what happens next
(see `coordinator_error_action`), the broker's message, and the value (a `GroupDescription`, the
committed offsets, ...). Version differences live here: FindCoordinator v4+ batches keys
(KIP-699), OffsetFetch v2+ may ask for every offset (null topics), ListGroups v4+ filters and
reports states (KIP-518). OffsetCommit and OffsetFetch for given partitions are the consumer's
(`group_offsets`), which this module reuses.

Errors at partition level in the offset APIs: a coordinator error on any partition (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, ...) is taken as the group's, since it means the request reached
the wrong broker or too early (Kafka's offset handlers unmap the coordinator on one); otherwise the
first failed partition's error is the group's, naming that partition.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.client import group_offsets
from epochlog.client.errors import ClientError
from epochlog.client.group_offsets import OffsetAndMetadata
from epochlog.client.metadata import BrokerNode, TopicPartition
from epochlog.protocol import messages as m
from epochlog.protocol.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from epochlog.protocol.consumer_protocol import decode_assignment
from epochlog.protocol.errors import DecodeError, ErrorCode

GROUP_KEY_TYPE = 0  # FindCoordinator KeyType: a group
TRANSACTION_KEY_TYPE = 1  # FindCoordinator KeyType: a transactional id
FIRST_BATCHED_FIND_COORDINATOR = 4  # KIP-699
FIRST_STATES_FILTER_LIST_GROUPS = 4  # KIP-518
FIRST_MULTI_GROUP_OFFSET_FETCH = 8  # KIP-709
FIRST_ALL_TOPICS_OFFSET_FETCH = 2  # null Topics: every committed offset
NO_OFFSET = -1


class CoordinatorAction(enum.Enum):
    DONE = "done"
    RETRY = "retry at the same coordinator"
    FIND_AGAIN = "find the coordinator again"
    FAIL = "fail"


_FIND_AGAIN = frozenset(
    {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.REQUEST_TIMED_OUT}
)


def coordinator_error_action(code: ErrorCode) -> CoordinatorAction:
    """What a group operation does with an error from (or about) the group's coordinator, as
    Kafka's admin client does (CoordinatorStrategy and the group handlers)."""
    if code is ErrorCode.NONE:
        return CoordinatorAction.DONE
    if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        return CoordinatorAction.RETRY
    if code in _FIND_AGAIN:
        return CoordinatorAction.FIND_AGAIN
    return CoordinatorAction.FAIL


# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class GroupListing:
    """A group as ListGroups shows it; `state` is None from brokers older than ListGroups v4."""

    group_id: str
    protocol_type: str
    state: str | None

    @property
    def is_consumer_group(self) -> bool:
        """A group of consumers, or of `assign()` consumers that only commit (no protocol type):
        what Kafka's listConsumerGroups and kafka-consumer-groups --list show."""
        return self.protocol_type in (CONSUMER_PROTOCOL_TYPE, "")


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]  # decoded for "consumer" groups; empty otherwise
    assignment_bytes: bytes = b""


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str  # Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str
    assignor: str  # the protocol the group chose (range, roundrobin, ...); "" unless Stable
    members: list[MemberDescription]
    coordinator: BrokerNode | None


@dataclass
class GroupReply:
    """One group's part of a coordinator's answer."""

    code: ErrorCode
    message: str | None = None
    value: Any = None
    where: str = ""  # the partition an error is about, if it is a partition's


@dataclass(frozen=True)
class CoordinatorAnswer:
    group_id: str
    code: ErrorCode
    message: str | None
    node_id: int


# ------------------------------------------------------------------------------------ requests


def find_coordinator_requests(
    groups: list[str], version: int, key_type: int = GROUP_KEY_TYPE
) -> list[Any]:
    """One batched request from v4, else one per group (or transactional id, key_type 1)."""
    R = m.FindCoordinatorRequest
    if version >= FIRST_BATCHED_FIND_COORDINATOR:
        return [R(key_type=key_type, coordinator_keys=list(groups))]
    return [R(key=g, key_type=key_type) for g in groups]


def read_find_coordinator(
    groups: list[str], responses: list[Any], version: int
) -> list[CoordinatorAnswer]:
    if version >= FIRST_BATCHED_FIND_COORDINATOR:
        (response,) = responses
        return [
            CoordinatorAnswer(c.key, ErrorCode.of(c.error_code), c.error_message, c.node_id)
            for c in response.coordinators
            if c.key in groups
        ]
    return [
        CoordinatorAnswer(
            g,
            ErrorCode.of(r.error_code),
            r.error_message if version >= 1 else None,
            r.node_id,
        )
        for g, r in zip(groups, responses, strict=True)
    ]


def list_groups_request(states: list[str]) -> Any:
    return m.ListGroupsRequest(states_filter=list(states), types_filter=[])


def read_list_groups(response: Any, version: int) -> tuple[ErrorCode, list[GroupListing]]:
    return ErrorCode.of(response.error_code), [
        GroupListing(
            g.group_id,
            g.protocol_type,
            g.group_state if version >= FIRST_STATES_FILTER_LIST_GROUPS else None,
        )
        for g in response.groups
    ]


def describe_groups_request(groups: list[str]) -> Any:
    return m.DescribeGroupsRequest(groups=list(groups), include_authorized_operations=False)


def read_describe_groups(response: Any, coordinator: BrokerNode | None) -> dict[str, GroupReply]:
    return {
        g.group_id: GroupReply(ErrorCode.of(g.error_code), value=_description(g, coordinator))
        for g in response.groups
    }


def delete_groups_request(groups: list[str]) -> Any:
    return m.DeleteGroupsRequest(groups_names=list(groups))


def read_delete_groups(response: Any) -> dict[str, GroupReply]:
    return {r.group_id: GroupReply(ErrorCode.of(r.error_code)) for r in response.results}


def offset_fetch_request(group: str, wanted: list[TopicPartition] | None, version: int) -> Any:
    """OffsetFetch for `wanted` partitions (as the consumer asks, `group_offsets`), or with
    `wanted` None for every committed offset of the group (null topics, v2+)."""
    if wanted is not None:
        return group_offsets.offset_fetch_request(version, group, wanted, require_stable=False)
    if version < FIRST_ALL_TOPICS_OFFSET_FETCH:
        raise ClientError(
            f"OffsetFetch for group {group!r}: listing every offset needs v2; "
            f"the broker serves v{version}"
        )
    R = m.OffsetFetchRequest
    if version >= FIRST_MULTI_GROUP_OFFSET_FETCH:
        return R(groups=[R.OffsetFetchRequestGroup(group_id=group, topics=None)])
    return R(group_id=group, topics=None)


def read_offset_fetch(
    response: Any, wanted: list[TopicPartition] | None, version: int
) -> GroupReply:
    """The committed offsets as {partition: OffsetAndMetadata, or None without one}."""
    result = group_offsets.offset_fetch_result(version, response)
    if result.error is not ErrorCode.NONE:
        return GroupReply(result.error)
    offsets = dict(result.offsets)
    for tp in wanted or []:
        offsets.setdefault(tp, None)
    return _partition_reply(result.partition_errors, offsets)


def offset_commit_request(
    group: str, commits: Mapping[TopicPartition, OffsetAndMetadata], version: int
) -> Any:
    """An admin's commit (Kafka's AlterConsumerGroupOffsets): generation -1, no member id."""
    return group_offsets.offset_commit_request(version, group, -1, "", None, commits)


def read_offset_commit(response: Any) -> GroupReply:
    return _partition_reply(group_offsets.offset_commit_errors(response), None)


def offset_delete_request(group: str, partitions: list[TopicPartition]) -> Any:
    R = m.OffsetDeleteRequest
    return R(
        group_id=group,
        topics=[
            R.OffsetDeleteRequestTopic(
                name=t, partitions=[R.OffsetDeleteRequestPartition(partition_index=p) for p in ps]
            )
            for t, ps in _by_topic(partitions).items()
        ],
    )


def read_offset_delete(response: Any) -> GroupReply:
    code = ErrorCode.of(response.error_code)
    if code is not ErrorCode.NONE:
        return GroupReply(code)
    errors = {
        TopicPartition(t.name, p.partition_index): ErrorCode.of(p.error_code)
        for t in response.topics
        for p in t.partitions
    }
    return _partition_reply(errors, None)


# ------------------------------------------------------------------------------------ helpers


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _partition_reply(errors: Mapping[TopicPartition, ErrorCode], value: Any) -> GroupReply:
    """The group's reply from its partitions' errors (see the module docstring)."""
    for code in errors.values():
        if coordinator_error_action(code) in (
            CoordinatorAction.RETRY,
            CoordinatorAction.FIND_AGAIN,
        ):
            return GroupReply(code)
    for tp, code in errors.items():
        if code is not ErrorCode.NONE:
            return GroupReply(code, where=str(tp))
    return GroupReply(ErrorCode.NONE, value=value)


def _description(g: Any, coordinator: BrokerNode | None) -> GroupDescription:
    members = []
    for x in g.members:
        assignment: list[TopicPartition] = []
        # Empty bytes: a member between JoinGroup and SyncGroup, with nothing assigned yet.
        if g.protocol_type == CONSUMER_PROTOCOL_TYPE and x.member_assignment:
            try:
                decoded = decode_assignment(x.member_assignment)
            except DecodeError as exc:
                raise ClientError(
                    f"DescribeGroups for group {g.group_id!r}: member {x.member_id!r}'s "
                    f"assignment is not a consumer assignment: {exc}"
                ) from None
            assignment = sorted(TopicPartition(t, p) for t, p in decoded.partitions)
        members.append(
            MemberDescription(
                x.member_id,
                x.group_instance_id,
                x.client_id,
                x.client_host,
                assignment,
                bytes(x.member_assignment),
            )
        )
    return GroupDescription(
        g.group_id, g.group_state, g.protocol_type, g.protocol_data, members, coordinator
    )
