"""The consumer-group APIs (declared, not served yet) at every version Kafka 3.9 lists: they
round-trip through our codec, and two independent Kafka codecs read our bytes as we meant them.

Independent codecs, both installed with the clients in `reference/kafka-clients.md`:
* kafka-python 3.0.12's JSON-driven classes (`kafka.protocol.consumer.group`, `.admin.groups`,
  `.metadata.find_coordinator`), generated at import from its own copy of Kafka's message JSON
  (Kafka 4.x; identical to 3.9 for these versions apart from min versions and v10 topic ids).
  We decode our bytes with them, compare every field by name, and require their re-encoding to be
  our bytes exactly.
* the hand-written per-version Struct classes of aiokafka 0.14 (`aiokafka.protocol.*`) and of
  kafka-python's legacy `kafka.protocol.old`, for the versions they have: their decode, then
  encode, must give back our bytes.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey
from epochlog.protocol.codec import Message
from epochlog.protocol.errors import DecodeError
from tests.schema_strategies import message_strategy

GROUP_APIS: dict[ApiKey, tuple[type[Message], type[Message]]] = {
    ApiKey.OFFSET_COMMIT: (m.OffsetCommitRequest, m.OffsetCommitResponse),
    ApiKey.OFFSET_FETCH: (m.OffsetFetchRequest, m.OffsetFetchResponse),
    ApiKey.FIND_COORDINATOR: (m.FindCoordinatorRequest, m.FindCoordinatorResponse),
    ApiKey.JOIN_GROUP: (m.JoinGroupRequest, m.JoinGroupResponse),
    ApiKey.HEARTBEAT: (m.HeartbeatRequest, m.HeartbeatResponse),
    ApiKey.LEAVE_GROUP: (m.LeaveGroupRequest, m.LeaveGroupResponse),
    ApiKey.SYNC_GROUP: (m.SyncGroupRequest, m.SyncGroupResponse),
    ApiKey.DESCRIBE_GROUPS: (m.DescribeGroupsRequest, m.DescribeGroupsResponse),
    ApiKey.LIST_GROUPS: (m.ListGroupsRequest, m.ListGroupsResponse),
    ApiKey.DELETE_GROUPS: (m.DeleteGroupsRequest, m.DeleteGroupsResponse),
    ApiKey.OFFSET_DELETE: (m.OffsetDeleteRequest, m.OffsetDeleteResponse),
}

# validVersions in Kafka 3.9's JSON (apache/kafka branch 3.9, commit c821449f)
KAFKA_39_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
}

# What each client can send (reference/kafka-clients.md, section 1.1): every version must decode.
CLIENT_VERSIONS: dict[str, dict[ApiKey, range]] = {
    "librdkafka 2.16 (confluent-kafka)": {
        ApiKey.FIND_COORDINATOR: range(0, 3),
        ApiKey.JOIN_GROUP: range(0, 6),
        ApiKey.SYNC_GROUP: range(0, 4),
        ApiKey.HEARTBEAT: range(0, 4),
        ApiKey.LEAVE_GROUP: range(0, 2),
        ApiKey.OFFSET_COMMIT: range(0, 10),
        ApiKey.OFFSET_FETCH: range(0, 10),
    },
    "librdkafka 2.0.2 (kcat)": {
        ApiKey.FIND_COORDINATOR: range(0, 3),
        ApiKey.JOIN_GROUP: range(0, 6),
        ApiKey.SYNC_GROUP: range(0, 4),
        ApiKey.HEARTBEAT: range(0, 4),
        ApiKey.LEAVE_GROUP: range(0, 2),
        ApiKey.OFFSET_COMMIT: range(0, 8),
        ApiKey.OFFSET_FETCH: range(0, 8),
    },
    "kafka-python 3.0.12": {
        ApiKey.FIND_COORDINATOR: range(0, 7),
        ApiKey.JOIN_GROUP: range(0, 8),
        ApiKey.SYNC_GROUP: range(0, 6),
        ApiKey.HEARTBEAT: range(0, 5),
        ApiKey.LEAVE_GROUP: range(0, 6),
        ApiKey.OFFSET_COMMIT: range(0, 9),
        ApiKey.OFFSET_FETCH: range(0, 9),
    },
    "aiokafka 0.14.0": {
        ApiKey.FIND_COORDINATOR: range(0, 2),
        ApiKey.JOIN_GROUP: range(0, 6),
        ApiKey.SYNC_GROUP: range(0, 4),
        ApiKey.HEARTBEAT: range(0, 2),
        ApiKey.LEAVE_GROUP: range(0, 2),
        ApiKey.OFFSET_COMMIT: range(2, 4),
        ApiKey.OFFSET_FETCH: range(1, 4),
    },
}

CASES = [
    pytest.param(cls, version, id=f"{cls.SCHEMA.name}-v{version}")
    for request, response in GROUP_APIS.values()
    for cls in (request, response)
    for version in cls.SCHEMA.valid
]

FAST = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_schemas_declare_kafka_39_ranges_with_their_api_keys() -> None:
    for key, (request, response) in GROUP_APIS.items():
        for cls in (request, response):
            valid = cls.SCHEMA.valid
            assert (valid.low, valid.high) == KAFKA_39_VERSIONS[key], cls.SCHEMA.name
            assert cls.SCHEMA.api_key == key


@pytest.mark.parametrize("client", sorted(CLIENT_VERSIONS))
def test_every_version_a_client_sends_is_declared(client: str) -> None:
    for key, versions in CLIENT_VERSIONS[client].items():
        request, response = GROUP_APIS[key]
        for version in versions:
            assert version in request.SCHEMA.valid and version in response.SCHEMA.valid


def test_group_apis_are_advertised_with_every_version_kafka_39_serves() -> None:
    for key, (request, _) in GROUP_APIS.items():
        api = APIS[key]  # APIS is what ApiVersions advertises
        assert (api.min_version, api.max_version) == (
            request.SCHEMA.valid.low,
            request.SCHEMA.valid.high,
        )


@pytest.mark.parametrize(("cls", "version"), CASES)
@FAST
@given(data=st.data())
def test_message_round_trips(cls: type[Message], version: int, data: st.DataObject) -> None:
    obj = data.draw(message_strategy(cls, version))
    encoded = obj.encode(version)
    assert cls.decode(encoded, version) == obj
    assert cls.decode(encoded, version).encode(version) == encoded


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_every_truncation_raises_decode_error(
    cls: type[Message], version: int, data: st.DataObject
) -> None:
    encoded = data.draw(message_strategy(cls, version)).encode(version)
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError) as info:
            cls.decode(encoded[:cut], version)
        assert f"{cls.SCHEMA.name} v{version}" in str(info.value)


# -- kafka-python's JSON-driven codec ------------------------------------------------------------

_KAFKA_PYTHON_MODULES = {
    "OffsetCommit": "kafka.protocol.consumer.group",
    "OffsetFetch": "kafka.protocol.consumer.group",
    "JoinGroup": "kafka.protocol.consumer.group",
    "SyncGroup": "kafka.protocol.consumer.group",
    "Heartbeat": "kafka.protocol.consumer.group",
    "LeaveGroup": "kafka.protocol.consumer.group",
    "OffsetDelete": "kafka.protocol.consumer.group",
    "FindCoordinator": "kafka.protocol.metadata.find_coordinator",
    "DescribeGroups": "kafka.protocol.admin.groups",
    "ListGroups": "kafka.protocol.admin.groups",
    "DeleteGroups": "kafka.protocol.admin.groups",
}

# kafka-python decodes this int32 into a set of operations (its json_patch makes it a bitfield)
_NOT_COMPARED_BY_VALUE = {"authorized_operations"}


def kafka_python_class(cls: type[Message]) -> Any:
    name = cls.SCHEMA.name
    api = name.removesuffix("Request").removesuffix("Response")
    return getattr(importlib.import_module(_KAFKA_PYTHON_MODULES[api]), name)


def assert_same_fields(ours: Message, theirs: Any, version: int, path: str) -> None:
    for f in ours.FIELDS:
        if version not in f.versions or f.attr in _NOT_COMPARED_BY_VALUE:
            continue
        mine, other = getattr(ours, f.attr), getattr(theirs, f.attr)
        where = f"{path}.{f.attr}"
        if f.is_struct and f.is_array and mine is not None:
            assert other is not None and len(mine) == len(other), where
            for i, (a, b) in enumerate(zip(mine, other, strict=True)):
                assert_same_fields(a, b, version, f"{where}[{i}]")
        elif f.is_struct and not f.is_array:
            assert_same_fields(mine, other, version, where)
        else:
            assert mine == (bytes(other) if isinstance(other, bytes | bytearray) else other), where


@pytest.mark.parametrize(("cls", "version"), CASES)
@FAST
@given(data=st.data())
def test_kafka_python_reads_our_bytes_field_by_field(
    cls: type[Message], version: int, data: st.DataObject
) -> None:
    theirs_cls = kafka_python_class(cls)
    assert version <= theirs_cls.max_version
    ours = data.draw(message_strategy(cls, version))
    encoded = ours.encode(version)
    theirs = theirs_cls.decode(encoded, version=version)
    assert_same_fields(ours, theirs, version, cls.SCHEMA.name)
    assert bytes(theirs.encode()) == encoded


# -- hand-written Struct codecs: aiokafka and kafka-python's legacy classes -----------------------

_STRUCT_MODULES = {
    "aiokafka": {
        "OffsetCommit": "aiokafka.protocol.commit",
        "OffsetFetch": "aiokafka.protocol.commit",
        "FindCoordinator": "aiokafka.protocol.coordination",
        "JoinGroup": "aiokafka.protocol.group",
        "SyncGroup": "aiokafka.protocol.group",
        "Heartbeat": "aiokafka.protocol.group",
        "LeaveGroup": "aiokafka.protocol.group",
        "DescribeGroups": "aiokafka.protocol.admin",
        "ListGroups": "aiokafka.protocol.admin",
        "DeleteGroups": "aiokafka.protocol.admin",
    },
    "kafka.protocol.old": {
        "OffsetCommit": "kafka.protocol.old.commit",
        "OffsetFetch": "kafka.protocol.old.commit",
        "FindCoordinator": "kafka.protocol.old.find_coordinator",
        "JoinGroup": "kafka.protocol.old.group",
        "SyncGroup": "kafka.protocol.old.group",
        "Heartbeat": "kafka.protocol.old.group",
        "LeaveGroup": "kafka.protocol.old.group",
        "DescribeGroups": "kafka.protocol.old.admin",
        "ListGroups": "kafka.protocol.old.admin",
        "DeleteGroups": "kafka.protocol.old.admin",
    },
}


def _struct_cases() -> list[Any]:
    cases = []
    for library, modules in _STRUCT_MODULES.items():
        for cls, version in ((c.values[0], c.values[1]) for c in CASES):
            name = cls.SCHEMA.name
            api = name.removesuffix("Request").removesuffix("Response")
            if api not in modules:
                continue
            theirs = getattr(importlib.import_module(modules[api]), f"{name}_v{version}", None)
            if theirs is not None:
                cases.append(pytest.param(cls, version, theirs, id=f"{library}-{name}-v{version}"))
    return cases


STRUCT_CASES = _struct_cases()


def test_the_hand_written_codecs_cover_what_their_clients_send() -> None:
    covered = {(c.values[0].SCHEMA.name, c.values[1]) for c in STRUCT_CASES}
    for key, versions in CLIENT_VERSIONS["aiokafka 0.14.0"].items():
        for cls in GROUP_APIS[key]:
            for version in versions:
                if key == ApiKey.JOIN_GROUP and version in (3, 4):
                    continue  # aiokafka has JoinGroup 0, 1, 2 and 5 only
                if key == ApiKey.SYNC_GROUP and version == 2:
                    continue  # and SyncGroup 0, 1 and 3
                assert (cls.SCHEMA.name, version) in covered


@pytest.mark.parametrize(("cls", "version", "theirs_cls"), STRUCT_CASES)
@FAST
@given(data=st.data())
def test_hand_written_codecs_read_our_bytes(
    cls: type[Message], version: int, theirs_cls: Any, data: st.DataObject
) -> None:
    encoded = data.draw(message_strategy(cls, version)).encode(version)
    assert theirs_cls.decode(encoded).encode() == encoded
