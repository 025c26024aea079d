"""Golden bytes for the classic consumer-group APIs, built by hand from Kafka 3.9's message JSON.

For each API at least one request and one response, at the versions the clients in
`reference/kafka-clients.md` send (librdkafka and kcat: JoinGroup v5, SyncGroup v3, Heartbeat v3,
LeaveGroup v1, FindCoordinator v2; aiokafka: OffsetCommit v3, OffsetFetch v3) and at the first
flexible version, where compact lengths and tagged sections appear.
"""

from __future__ import annotations

import pytest

from epochlog.protocol.errors import EncodeError
from epochlog.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from tests.kafka_wire import (
    NO_TAGS,
    array,
    boolean,
    bytes_,
    carray,
    cbytes,
    cstring,
    i8,
    i16,
    i32,
    i64,
    string,
    uv,
)

NOT_COORDINATOR = 16
REBALANCE_IN_PROGRESS = 27
UNKNOWN_MEMBER_ID = 25
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def check(obj: object, version: int, expected: bytes) -> None:
    assert obj.encode(version) == expected
    assert type(obj).decode(expected, version) == obj


# -- FindCoordinator (10) ------------------------------------------------------------------------


def test_find_coordinator_v0_request_is_just_the_key() -> None:
    check(FindCoordinatorRequest(key="grp"), 0, string("grp"))


def test_find_coordinator_v2_request_and_response() -> None:
    check(FindCoordinatorRequest(key="grp", key_type=0), 2, string("grp") + i8(0))
    response = FindCoordinatorResponse(
        throttle_time_ms=5, error_code=0, error_message=None, node_id=2, host="b2", port=9093
    )
    expected = i32(5) + i16(0) + string(None) + i32(2) + string("b2") + i32(9093)
    check(response, 2, expected)


def test_find_coordinator_v3_is_flexible() -> None:
    check(FindCoordinatorRequest(key="grp", key_type=1), 3, cstring("grp") + i8(1) + NO_TAGS)
    response = FindCoordinatorResponse(
        error_code=NOT_COORDINATOR, error_message="moved", node_id=-1, host="", port=-1
    )
    expected = (
        i32(0) + i16(NOT_COORDINATOR) + cstring("moved") + i32(-1) + cstring("") + i32(-1)
    ) + NO_TAGS
    check(response, 3, expected)


def test_find_coordinator_v4_batches_keys() -> None:
    request = FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"])
    check(request, 4, i8(0) + carray([cstring("a"), cstring("b")]) + NO_TAGS)
    coordinator = FindCoordinatorResponse.Coordinator(
        key="a", node_id=1, host="h", port=9092, error_code=0, error_message=None
    )
    response = FindCoordinatorResponse(throttle_time_ms=0, coordinators=[coordinator])
    element = cstring("a") + i32(1) + cstring("h") + i32(9092) + i16(0) + cstring(None) + NO_TAGS
    check(response, 4, i32(0) + carray([element]) + NO_TAGS)


def test_find_coordinator_v4_has_no_single_key_fields() -> None:
    with pytest.raises(EncodeError, match="key"):
        FindCoordinatorRequest(key="grp").encode(4)
    with pytest.raises(EncodeError, match="error_code"):
        FindCoordinatorResponse(error_code=NOT_COORDINATOR).encode(4)


# -- JoinGroup (11) ------------------------------------------------------------------------------


def join_request() -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",
        session_timeout_ms=45000,
        rebalance_timeout_ms=300000,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01"),
            JoinGroupRequest.JoinGroupRequestProtocol(name="cooperative-sticky", metadata=b""),
        ],
    )


def test_join_group_v0_request_has_no_rebalance_timeout() -> None:
    request = join_request()
    request.rebalance_timeout_ms = -1
    protocols = array(
        [string("range") + bytes_(b"\x00\x01"), string("cooperative-sticky") + bytes_(b"")]
    )
    expected = string("g") + i32(45000) + string("") + string("consumer") + protocols
    check(request, 0, expected)


def test_join_group_v5_request_as_librdkafka_sends_it() -> None:
    protocols = array(
        [string("range") + bytes_(b"\x00\x01"), string("cooperative-sticky") + bytes_(b"")]
    )
    expected = (
        string("g")
        + i32(45000)
        + i32(300000)
        + string("")
        + string(None)  # GroupInstanceId
        + string("consumer")
        + protocols
    )
    check(join_request(), 5, expected)


def test_join_group_v8_request_is_flexible_with_reason() -> None:
    request = join_request()
    request.reason = "rejoin"
    protocols = carray(
        [
            cstring("range") + cbytes(b"\x00\x01") + NO_TAGS,
            cstring("cooperative-sticky") + cbytes(b"") + NO_TAGS,
        ]
    )
    expected = (
        cstring("g")
        + i32(45000)
        + i32(300000)
        + cstring("")
        + cstring(None)
        + cstring("consumer")
        + protocols
        + cstring("rejoin")
        + NO_TAGS
    )
    check(request, 8, expected)


def test_join_group_v5_response() -> None:
    response = JoinGroupResponse(
        throttle_time_ms=0,
        error_code=0,
        generation_id=3,
        protocol_name="range",
        leader="m1",
        member_id="m1",
        members=[
            JoinGroupResponse.JoinGroupResponseMember(
                member_id="m1", group_instance_id="static-1", metadata=b"\x07"
            )
        ],
    )
    expected = (
        i32(0)
        + i16(0)
        + i32(3)
        + string("range")
        + string("m1")
        + string("m1")
        + array([string("m1") + string("static-1") + bytes_(b"\x07")])
    )
    check(response, 5, expected)


def test_join_group_v9_response_with_protocol_type_and_skip_assignment() -> None:
    response = JoinGroupResponse(
        error_code=REBALANCE_IN_PROGRESS,
        generation_id=-1,
        protocol_type="consumer",
        protocol_name=None,
        leader="",
        skip_assignment=True,
        member_id="m2",
        members=[],
    )
    expected = (
        i32(0)
        + i16(REBALANCE_IN_PROGRESS)
        + i32(-1)
        + cstring("consumer")
        + cstring(None)
        + cstring("")
        + boolean(True)
        + cstring("m2")
        + carray([])
        + NO_TAGS
    )
    check(response, 9, expected)


def test_join_group_protocol_name_is_nullable_only_from_v7() -> None:
    with pytest.raises(EncodeError, match="protocol_name"):
        JoinGroupResponse(protocol_name=None).encode(6)


# -- SyncGroup (14) ------------------------------------------------------------------------------


def test_sync_group_v3_request_and_response() -> None:
    request = SyncGroupRequest(
        group_id="g",
        generation_id=3,
        member_id="m1",
        group_instance_id=None,
        assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id="m1", assignment=b"\x01\x02"),
            SyncGroupRequest.SyncGroupRequestAssignment(member_id="m2", assignment=b""),
        ],
    )
    expected = (
        string("g")
        + i32(3)
        + string("m1")
        + string(None)
        + array([string("m1") + bytes_(b"\x01\x02"), string("m2") + bytes_(b"")])
    )
    check(request, 3, expected)
    response = SyncGroupResponse(throttle_time_ms=1, error_code=0, assignment=b"\x01\x02")
    check(response, 3, i32(1) + i16(0) + bytes_(b"\x01\x02"))


def test_sync_group_v5_request_and_response_carry_the_protocol() -> None:
    request = SyncGroupRequest(
        group_id="g",
        generation_id=3,
        member_id="m1",
        group_instance_id="i1",
        protocol_type="consumer",
        protocol_name="range",
        assignments=[],
    )
    expected = (
        cstring("g")
        + i32(3)
        + cstring("m1")
        + cstring("i1")
        + cstring("consumer")
        + cstring("range")
        + carray([])
        + NO_TAGS
    )
    check(request, 5, expected)
    response = SyncGroupResponse(
        error_code=0, protocol_type="consumer", protocol_name="range", assignment=b"\x09"
    )
    expected = i32(0) + i16(0) + cstring("consumer") + cstring("range") + cbytes(b"\x09") + NO_TAGS
    check(response, 5, expected)


# -- Heartbeat (12) ------------------------------------------------------------------------------


def test_heartbeat_v0_and_v3() -> None:
    request = HeartbeatRequest(group_id="g", generation_id=7, member_id="m1")
    check(request, 0, string("g") + i32(7) + string("m1"))
    check(request, 3, string("g") + i32(7) + string("m1") + string(None))
    check(HeartbeatResponse(error_code=REBALANCE_IN_PROGRESS), 0, i16(REBALANCE_IN_PROGRESS))
    response = HeartbeatResponse(throttle_time_ms=2, error_code=REBALANCE_IN_PROGRESS)
    check(response, 3, i32(2) + i16(REBALANCE_IN_PROGRESS))


def test_heartbeat_v4_is_flexible() -> None:
    request = HeartbeatRequest(group_id="g", generation_id=7, member_id="m1", group_instance_id="s")
    check(request, 4, cstring("g") + i32(7) + cstring("m1") + cstring("s") + NO_TAGS)
    check(HeartbeatResponse(error_code=0), 4, i32(0) + i16(0) + NO_TAGS)


def test_heartbeat_group_instance_id_needs_v3() -> None:
    with pytest.raises(EncodeError, match="group_instance_id"):
        HeartbeatRequest(group_instance_id="s").encode(2)


# -- LeaveGroup (13) -----------------------------------------------------------------------------


def test_leave_group_v1_request_and_response() -> None:
    check(LeaveGroupRequest(group_id="g", member_id="m1"), 1, string("g") + string("m1"))
    check(LeaveGroupResponse(throttle_time_ms=0, error_code=0), 1, i32(0) + i16(0))


def test_leave_group_v3_batches_members() -> None:
    request = LeaveGroupRequest(
        group_id="g",
        members=[
            LeaveGroupRequest.MemberIdentity(member_id="m1", group_instance_id=None),
            LeaveGroupRequest.MemberIdentity(member_id="", group_instance_id="s2"),
        ],
    )
    expected = string("g") + array([string("m1") + string(None), string("") + string("s2")])
    check(request, 3, expected)
    response = LeaveGroupResponse(
        error_code=0,
        members=[
            LeaveGroupResponse.MemberResponse(
                member_id="m1", group_instance_id=None, error_code=UNKNOWN_MEMBER_ID
            )
        ],
    )
    expected = i32(0) + i16(0) + array([string("m1") + string(None) + i16(UNKNOWN_MEMBER_ID)])
    check(response, 3, expected)


def test_leave_group_v5_is_flexible_with_reason() -> None:
    request = LeaveGroupRequest(
        group_id="g",
        members=[LeaveGroupRequest.MemberIdentity(member_id="m1", reason="closing")],
    )
    member = cstring("m1") + cstring(None) + cstring("closing") + NO_TAGS
    check(request, 5, cstring("g") + carray([member]) + NO_TAGS)


def test_leave_group_v3_has_no_single_member_id() -> None:
    with pytest.raises(EncodeError, match="member_id"):
        LeaveGroupRequest(group_id="g", member_id="m1").encode(3)


# -- OffsetCommit (8) ----------------------------------------------------------------------------


def commit_request() -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=3,
        member_id="m1",
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name="t",
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=42, committed_metadata=None
                    ),
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=1, committed_offset=7, committed_metadata="meta"
                    ),
                ],
            )
        ],
    )


def test_offset_commit_v0_request_has_no_member() -> None:
    request = commit_request()
    request.generation_id_or_member_epoch = -1
    request.member_id = ""
    partitions = array([i32(0) + i64(42) + string(None), i32(1) + i64(7) + string("meta")])
    check(request, 0, string("g") + array([string("t") + partitions]))


def test_offset_commit_v1_request_has_a_commit_timestamp_per_partition() -> None:
    request = commit_request()
    for partition in request.topics[0].partitions:
        partition.commit_timestamp = 1000
    partitions = array(
        [
            i32(0) + i64(42) + i64(1000) + string(None),
            i32(1) + i64(7) + i64(1000) + string("meta"),
        ]
    )
    expected = string("g") + i32(3) + string("m1") + array([string("t") + partitions])
    check(request, 1, expected)


def test_offset_commit_v3_request_as_aiokafka_sends_it() -> None:
    request = commit_request()
    request.retention_time_ms = -1
    partitions = array([i32(0) + i64(42) + string(None), i32(1) + i64(7) + string("meta")])
    expected = string("g") + i32(3) + string("m1") + i64(-1) + array([string("t") + partitions])
    check(request, 3, expected)


def test_offset_commit_v7_request_has_leader_epoch_and_group_instance() -> None:
    request = commit_request()
    request.topics[0].partitions[0].committed_leader_epoch = 5
    partitions = array(
        [i32(0) + i64(42) + i32(5) + string(None), i32(1) + i64(7) + i32(-1) + string("meta")]
    )
    expected = (
        string("g") + i32(3) + string("m1") + string(None) + array([string("t") + partitions])
    )
    check(request, 7, expected)


def test_offset_commit_v9_request_is_flexible() -> None:
    request = commit_request()
    partitions = carray(
        [
            i32(0) + i64(42) + i32(-1) + cstring(None) + NO_TAGS,
            i32(1) + i64(7) + i32(-1) + cstring("meta") + NO_TAGS,
        ]
    )
    expected = (
        cstring("g")
        + i32(3)
        + cstring("m1")
        + cstring(None)
        + carray([cstring("t") + partitions + NO_TAGS])
        + NO_TAGS
    )
    check(request, 9, expected)


def test_offset_commit_retention_time_is_dropped_after_v4() -> None:
    request = commit_request()
    request.retention_time_ms = 60000  # ignorable: silently not written at v5+
    assert request.encode(5) == commit_request().encode(5)


def test_offset_commit_v3_and_v8_responses() -> None:
    response = OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(
                name="t",
                partitions=[
                    OffsetCommitResponse.OffsetCommitResponsePartition(
                        partition_index=0, error_code=0
                    ),
                    OffsetCommitResponse.OffsetCommitResponsePartition(
                        partition_index=1, error_code=UNKNOWN_MEMBER_ID
                    ),
                ],
            )
        ],
    )
    partitions = [i32(0) + i16(0), i32(1) + i16(UNKNOWN_MEMBER_ID)]
    check(response, 2, array([string("t") + array(partitions)]))
    check(response, 3, i32(0) + array([string("t") + array(partitions)]))
    flexible = carray([cstring("t") + carray([p + NO_TAGS for p in partitions]) + NO_TAGS])
    check(response, 8, i32(0) + flexible + NO_TAGS)


# -- OffsetFetch (9) -----------------------------------------------------------------------------


def test_offset_fetch_v1_request_and_response() -> None:
    request = OffsetFetchRequest(
        group_id="g",
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 2])],
    )
    check(request, 1, string("g") + array([string("t") + array([i32(0), i32(2)])]))
    response = OffsetFetchResponse(
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(
                name="t",
                partitions=[
                    OffsetFetchResponse.OffsetFetchResponsePartition(
                        partition_index=0, committed_offset=42, metadata="", error_code=0
                    ),
                    OffsetFetchResponse.OffsetFetchResponsePartition(
                        partition_index=2, committed_offset=-1, metadata=None, error_code=0
                    ),
                ],
            )
        ]
    )
    partitions = [i32(0) + i64(42) + string("") + i16(0), i32(2) + i64(-1) + string(None) + i16(0)]
    check(response, 1, array([string("t") + array(partitions)]))


def test_offset_fetch_v3_null_topics_means_all_topics() -> None:
    request = OffsetFetchRequest(group_id="g", topics=None)
    check(request, 3, string("g") + array(None))
    with pytest.raises(EncodeError, match="topics"):
        request.encode(1)  # null is only allowed from v2


def test_offset_fetch_v5_response_has_leader_epoch_and_top_level_error() -> None:
    response = OffsetFetchResponse(
        throttle_time_ms=3,
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(
                name="t",
                partitions=[
                    OffsetFetchResponse.OffsetFetchResponsePartition(
                        partition_index=0,
                        committed_offset=42,
                        committed_leader_epoch=9,
                        metadata="m",
                        error_code=0,
                    )
                ],
            )
        ],
        error_code=NOT_COORDINATOR,
    )
    partition = i32(0) + i64(42) + i32(9) + string("m") + i16(0)
    expected = i32(3) + array([string("t") + array([partition])]) + i16(NOT_COORDINATOR)
    check(response, 5, expected)


def test_offset_fetch_v7_request_is_flexible_with_require_stable() -> None:
    request = OffsetFetchRequest(
        group_id="g",
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[1])],
        require_stable=True,
    )
    topics = carray([cstring("t") + carray([i32(1)]) + NO_TAGS])
    check(request, 7, cstring("g") + topics + boolean(True) + NO_TAGS)


def test_offset_fetch_v8_asks_for_many_groups() -> None:
    request = OffsetFetchRequest(
        groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id="g1",
                topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0])
                ],
            ),
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g2", topics=None),
        ],
        require_stable=False,
    )
    groups = carray(
        [
            cstring("g1") + carray([cstring("t") + carray([i32(0)]) + NO_TAGS]) + NO_TAGS,
            cstring("g2") + carray(None) + NO_TAGS,
        ]
    )
    check(request, 8, groups + boolean(False) + NO_TAGS)
    with pytest.raises(EncodeError, match="group_id"):
        OffsetFetchRequest(group_id="g").encode(8)

    response = OffsetFetchResponse(
        groups=[
            OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id="g1",
                topics=[
                    OffsetFetchResponse.OffsetFetchResponseTopics(
                        name="t",
                        partitions=[
                            OffsetFetchResponse.OffsetFetchResponsePartitions(
                                partition_index=0, committed_offset=5, metadata=None
                            )
                        ],
                    )
                ],
                error_code=0,
            )
        ]
    )
    partition = i32(0) + i64(5) + i32(-1) + cstring(None) + i16(0) + NO_TAGS
    group = cstring("g1") + carray([cstring("t") + carray([partition]) + NO_TAGS]) + i16(0)
    check(response, 8, i32(0) + carray([group + NO_TAGS]) + NO_TAGS)


def test_offset_fetch_v9_group_has_member_id_and_epoch() -> None:
    request = OffsetFetchRequest(
        groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id="g", member_id="m", member_epoch=4, topics=None
            )
        ]
    )
    group = cstring("g") + cstring("m") + i32(4) + carray(None) + NO_TAGS
    check(request, 9, carray([group]) + boolean(False) + NO_TAGS)


# -- DescribeGroups (15) -------------------------------------------------------------------------


def described_group() -> DescribeGroupsResponse.DescribedGroup:
    return DescribeGroupsResponse.DescribedGroup(
        error_code=0,
        group_id="g",
        group_state="Stable",
        protocol_type="consumer",
        protocol_data="range",
        members=[
            DescribeGroupsResponse.DescribedGroupMember(
                member_id="m1",
                client_id="c",
                client_host="/127.0.0.1",
                member_metadata=b"\x01",
                member_assignment=b"\x02",
            )
        ],
    )


def test_describe_groups_v0_request_and_response() -> None:
    check(DescribeGroupsRequest(groups=["g", "h"]), 0, array([string("g"), string("h")]))
    member = string("m1") + string("c") + string("/127.0.0.1") + bytes_(b"\x01") + bytes_(b"\x02")
    group = (
        i16(0) + string("g") + string("Stable") + string("consumer") + string("range")
    ) + array([member])
    check(DescribeGroupsResponse(groups=[described_group()]), 0, array([group]))


def test_describe_groups_v5_is_flexible_with_operations_and_instance_ids() -> None:
    request = DescribeGroupsRequest(groups=["g"], include_authorized_operations=True)
    check(request, 5, carray([cstring("g")]) + boolean(True) + NO_TAGS)
    member = (
        cstring("m1")
        + cstring(None)
        + cstring("c")
        + cstring("/127.0.0.1")
        + cbytes(b"\x01")
        + cbytes(b"\x02")
        + NO_TAGS
    )
    group = (
        i16(0)
        + cstring("g")
        + cstring("Stable")
        + cstring("consumer")
        + cstring("range")
        + carray([member])
        + i32(AUTHORIZED_OPERATIONS_OMITTED)
        + NO_TAGS
    )
    check(DescribeGroupsResponse(groups=[described_group()]), 5, i32(0) + carray([group]) + NO_TAGS)


# -- ListGroups (16) -----------------------------------------------------------------------------


def test_list_groups_v0_request_is_empty_and_response_lists_groups() -> None:
    check(ListGroupsRequest(), 0, b"")
    response = ListGroupsResponse(
        error_code=0,
        groups=[ListGroupsResponse.ListedGroup(group_id="g", protocol_type="consumer")],
    )
    check(response, 0, i16(0) + array([string("g") + string("consumer")]))
    check(response, 1, i32(0) + i16(0) + array([string("g") + string("consumer")]))


def test_list_groups_v4_filters_by_state() -> None:
    request = ListGroupsRequest(states_filter=["Stable", "Empty"])
    check(request, 4, carray([cstring("Stable"), cstring("Empty")]) + NO_TAGS)
    with pytest.raises(EncodeError, match="states_filter"):
        request.encode(3)
    response = ListGroupsResponse(
        groups=[
            ListGroupsResponse.ListedGroup(
                group_id="g", protocol_type="consumer", group_state="Stable", group_type="classic"
            )
        ]
    )
    group = cstring("g") + cstring("consumer") + cstring("Stable") + NO_TAGS
    expected_v4 = i32(0) + i16(0) + carray([group]) + NO_TAGS
    assert response.encode(4) == expected_v4  # GroupType (v5, ignorable) is dropped
    group_v5 = cstring("g") + cstring("consumer") + cstring("Stable") + cstring("classic") + NO_TAGS
    check(response, 5, i32(0) + i16(0) + carray([group_v5]) + NO_TAGS)


# -- DeleteGroups (42) ---------------------------------------------------------------------------


def test_delete_groups_v0_and_v2() -> None:
    request = DeleteGroupsRequest(groups_names=["g1", "g2"])
    check(request, 0, array([string("g1"), string("g2")]))
    check(request, 2, carray([cstring("g1"), cstring("g2")]) + NO_TAGS)
    response = DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id="g1", error_code=0),
            DeleteGroupsResponse.DeletableGroupResult(group_id="g2", error_code=69),
        ],
    )
    check(response, 0, i32(0) + array([string("g1") + i16(0), string("g2") + i16(69)]))
    results = carray([cstring("g1") + i16(0) + NO_TAGS, cstring("g2") + i16(69) + NO_TAGS])
    check(response, 2, i32(0) + results + NO_TAGS)


# -- OffsetDelete (47) ---------------------------------------------------------------------------


def test_offset_delete_v0_request_and_response() -> None:
    request = OffsetDeleteRequest(
        group_id="g",
        topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name="t",
                partitions=[
                    OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0),
                    OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=3),
                ],
            )
        ],
    )
    check(request, 0, string("g") + array([string("t") + array([i32(0), i32(3)])]))
    response = OffsetDeleteResponse(
        error_code=0,
        throttle_time_ms=4,
        topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(
                name="t",
                partitions=[
                    OffsetDeleteResponse.OffsetDeleteResponsePartition(
                        partition_index=0, error_code=86
                    )
                ],
            )
        ],
    )
    # ErrorCode comes before ThrottleTimeMs in this one response
    expected = i16(0) + i32(4) + array([string("t") + array([i32(0) + i16(86)])])
    check(response, 0, expected)


def test_compact_lengths_past_127_take_two_varint_bytes() -> None:
    group = "g" * 200
    request = HeartbeatRequest(group_id=group, generation_id=1, member_id="m")
    assert uv(201) == b"\xc9\x01"
    check(request, 4, uv(201) + group.encode() + i32(1) + cstring("m") + cstring(None) + NO_TAGS)
