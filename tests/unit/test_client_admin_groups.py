"""The admin's group operations against a scripted two-broker cluster: how it finds a group's
coordinator (batched FindCoordinator v4+, one per group before), and what it does with each
coordinator error (Kafka's admin rules), down to the message of the error it raises.

`ScriptedCluster` answers ApiVersions, Metadata, FindCoordinator and the group APIs the admin
sends, from a few knobs a test sets: which broker coordinates, which errors come first."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from epochlog.client import AsyncAdmin, KafkaError, OffsetAndMetadata, TopicPartition
from epochlog.client.group_admin_protocol import (
    CoordinatorAction,
    GroupReply,
    coordinator_error_action,
    read_offset_commit,
)
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, decode_request, encode_response
from epochlog.protocol.consumer_protocol import Assignment, encode_assignment
from epochlog.protocol.errors import ErrorCode

E = ErrorCode


class ScriptedCluster:
    def __init__(self) -> None:
        self.ids = [1, 2]
        self.ports: dict[int, int] = {}
        self.servers: list[asyncio.base_events.Server] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.coordinator = 2
        self.find_coordinator_max_version = APIS[ApiKey.FIND_COORDINATOR].max_version
        self.find_errors: list[ErrorCode] = []  # the next FindCoordinator answers, per key
        self.stale_finds: list[int] = []  # brokers named as coordinator before the real one
        self.load_in_progress = 0  # group requests answered COORDINATOR_LOAD_IN_PROGRESS
        self.members_in: set[str] = set()  # groups with a member (admin commits refused)
        self.finds: list[tuple[int, list[str]]] = []  # (version, keys) of FindCoordinator
        self.group_requests: list[tuple[int, int]] = []  # (node, api key)

    async def start(self) -> ScriptedCluster:
        for node in self.ids:
            server = await asyncio.start_server(
                lambda r, w, node=node: self.serve(node, r, w), "127.0.0.1", 0
            )
            self.ports[node] = server.sockets[0].getsockname()[1]
            self.servers.append(server)
        return self

    async def stop(self) -> None:
        for w in self.writers:
            w.close()
        for server in self.servers:
            server.close()
            await server.wait_closed()

    async def serve(self, node: int, reader: Any, writer: Any) -> None:
        self.writers.append(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                request = decode_request(await reader.readexactly(size))
                body = self.answer(node, request.api_key, request.body, request.api_version)
                writer.write(
                    encode_response(
                        request.api_key, request.api_version, request.correlation_id, body
                    )
                )
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    def answer(self, node: int, api_key: int, req: Any, v: int) -> Any:
        if api_key == ApiKey.API_VERSIONS:
            return m.ApiVersionsResponse(
                api_keys=[
                    m.ApiVersionsResponse.ApiVersion(
                        api_key=a.key,
                        min_version=a.min_version,
                        max_version=self.find_coordinator_max_version
                        if a.key == ApiKey.FIND_COORDINATOR
                        else a.max_version,
                    )
                    for a in APIS.values()
                ]
            )
        if api_key == ApiKey.METADATA:
            R = m.MetadataResponse
            return R(
                brokers=[
                    R.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=self.ports[n])
                    for n in self.ids
                ],
                controller_id=1,
                cluster_id="scripted",
                topics=[],
            )
        if api_key == ApiKey.FIND_COORDINATOR:
            return self.find_coordinator(req, v)
        self.group_requests.append((node, api_key))
        error = E.NONE
        if node != self.coordinator:
            error = E.NOT_COORDINATOR
        elif self.load_in_progress:
            self.load_in_progress -= 1
            error = E.COORDINATOR_LOAD_IN_PROGRESS
        if api_key == ApiKey.DESCRIBE_GROUPS:
            return self.describe(req, error)
        if api_key == ApiKey.OFFSET_COMMIT:
            R = m.OffsetCommitResponse
            if error is E.NONE and req.group_id in self.members_in:
                error = E.UNKNOWN_MEMBER_ID
            return R(
                topics=[
                    R.OffsetCommitResponseTopic(
                        name=t.name,
                        partitions=[
                            R.OffsetCommitResponsePartition(
                                partition_index=p.partition_index, error_code=error
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in req.topics
                ]
            )
        raise AssertionError(f"unexpected API {api_key}")

    def find_coordinator(self, req: Any, v: int) -> Any:
        keys = list(req.coordinator_keys) if v >= 4 else [req.key]
        self.finds.append((v, keys))
        R = m.FindCoordinatorResponse
        answers = []
        for _ in keys:
            error = self.find_errors.pop(0) if self.find_errors else E.NONE
            node = self.coordinator if error is E.NONE else -1
            if error is E.NONE and self.stale_finds:
                node = self.stale_finds.pop(0)
            answers.append((error, node, "127.0.0.1", self.ports.get(node, -1)))
        if v >= 4:
            return R(
                coordinators=[
                    R.Coordinator(key=k, node_id=n, host=h, port=p, error_code=e)
                    for k, (e, n, h, p) in zip(keys, answers, strict=True)
                ]
            )
        ((e, n, h, p),) = answers
        return R(error_code=e, node_id=n, host=h, port=p)

    def describe(self, req: Any, error: ErrorCode) -> Any:
        R = m.DescribeGroupsResponse
        groups = []
        for g in req.groups:
            members = [
                R.DescribedGroupMember(
                    member_id=f"{g}-member",
                    client_id="app",
                    client_host="/10.0.0.7",
                    member_metadata=b"",
                    member_assignment=encode_assignment(Assignment((("t", 1), ("t", 0)))),
                )
            ]
            groups.append(
                R.DescribedGroup(
                    error_code=error,
                    group_id=g,
                    group_state="Stable" if error is E.NONE else "",
                    protocol_type="consumer",
                    protocol_data="range" if error is E.NONE else "",
                    members=members if error is E.NONE else [],
                )
            )
        return R(groups=groups)


@pytest.fixture
async def cluster():
    c = await ScriptedCluster().start()
    yield c
    await c.stop()


def admin_for(cluster: ScriptedCluster, **extra: Any) -> AsyncAdmin:
    return AsyncAdmin(
        {
            "bootstrap.servers": f"127.0.0.1:{cluster.ports[1]}",
            "retry.backoff.ms": 10,
            "retry.backoff.max.ms": 50,
            **{k.replace("_", "."): v for k, v in extra.items()},
        }
    )


@pytest.mark.parametrize(
    ("code", "action"),
    [
        (E.NONE, CoordinatorAction.DONE),
        (E.COORDINATOR_LOAD_IN_PROGRESS, CoordinatorAction.RETRY),
        (E.COORDINATOR_NOT_AVAILABLE, CoordinatorAction.FIND_AGAIN),
        (E.NOT_COORDINATOR, CoordinatorAction.FIND_AGAIN),
        (E.REQUEST_TIMED_OUT, CoordinatorAction.FIND_AGAIN),
        (E.GROUP_ID_NOT_FOUND, CoordinatorAction.FAIL),
        (E.NON_EMPTY_GROUP, CoordinatorAction.FAIL),
        (E.UNKNOWN_MEMBER_ID, CoordinatorAction.FAIL),
        (E.GROUP_AUTHORIZATION_FAILED, CoordinatorAction.FAIL),
    ],
)
def test_coordinator_errors_are_handled_as_kafkas_admin_handles_them(
    code: ErrorCode, action: CoordinatorAction
) -> None:
    assert coordinator_error_action(code) is action


def test_a_coordinator_error_on_one_partition_is_the_groups() -> None:
    R = m.OffsetCommitResponse
    response = R(
        topics=[
            R.OffsetCommitResponseTopic(
                name="t",
                partitions=[
                    R.OffsetCommitResponsePartition(partition_index=0, error_code=E.NONE),
                    R.OffsetCommitResponsePartition(
                        partition_index=1, error_code=E.NOT_COORDINATOR
                    ),
                ],
            )
        ]
    )
    assert read_offset_commit(response) == GroupReply(E.NOT_COORDINATOR)


async def test_describe_finds_coordinators_in_one_batched_request_and_waits_out_errors(
    cluster: ScriptedCluster,
) -> None:
    cluster.find_errors = [E.COORDINATOR_NOT_AVAILABLE]  # the first key, the first time
    cluster.load_in_progress = 1
    async with admin_for(cluster) as admin:
        described = await admin.describe_groups(["a", "b"])
    v, keys = cluster.finds[0]
    assert v >= 4 and keys == ["a", "b"]
    assert cluster.finds[1:] == [(v, ["a"])]  # only the group that got no coordinator
    assert {g: d.state for g, d in described.items()} == {"a": "Stable", "b": "Stable"}
    member = described["a"].members[0]
    assert (member.member_id, member.client_id, member.host) == ("a-member", "app", "/10.0.0.7")
    assert member.assignment == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert described["a"].assignor == "range"
    assert described["a"].coordinator is not None and described["a"].coordinator.node_id == 2


async def test_a_broker_without_batched_find_coordinator_gets_one_request_per_group(
    cluster: ScriptedCluster,
) -> None:
    cluster.find_coordinator_max_version = 2  # what librdkafka sends
    async with admin_for(cluster) as admin:
        described = await admin.describe_groups(["a", "b"])
    assert sorted(cluster.finds) == [(2, ["a"]), (2, ["b"])]
    assert set(described) == {"a", "b"}


async def test_a_group_answered_not_coordinator_looks_its_coordinator_up_again(
    cluster: ScriptedCluster,
) -> None:
    cluster.stale_finds = [1]  # the first answer names broker 1; broker 2 coordinates
    async with admin_for(cluster) as admin:
        described = await admin.describe_groups(["a"])
    assert cluster.group_requests == [(1, ApiKey.DESCRIBE_GROUPS), (2, ApiKey.DESCRIBE_GROUPS)]
    assert [keys for _, keys in cluster.finds] == [["a"], ["a"]]
    assert described["a"].state == "Stable"


async def test_a_coordinator_that_never_loads_times_out_naming_the_group_and_the_error(
    cluster: ScriptedCluster,
) -> None:
    cluster.load_in_progress = 10**6
    async with admin_for(cluster) as admin:
        with pytest.raises(KafkaError) as raised:
            await admin.describe_groups(["slow"], timeout=0.3)
    error = raised.value
    assert error.code is E.REQUEST_TIMED_OUT
    assert "DescribeGroups for group 'slow'" in str(error)
    assert "COORDINATOR_LOAD_IN_PROGRESS" in str(error)


async def test_altering_the_offsets_of_a_group_with_members_names_group_partition_and_error(
    cluster: ScriptedCluster,
) -> None:
    cluster.members_in = {"busy"}
    async with admin_for(cluster) as admin:
        await admin.alter_group_offsets("idle", {("t", 0): 5, ("t", 1): OffsetAndMetadata(7, "x")})
        with pytest.raises(KafkaError) as raised:
            await admin.alter_group_offsets("busy", {("t", 0): 5})
    assert raised.value.code is E.UNKNOWN_MEMBER_ID
    assert str(raised.value).startswith("OffsetCommit for group 'busy' at t-0: UNKNOWN_MEMBER_ID")
