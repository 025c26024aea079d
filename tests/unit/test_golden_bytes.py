"""Golden bytes: messages encode to, and decode from, bodies built by hand from Kafka's layouts.

The expected bytes are assembled with `struct.pack` from the field orders in
`reference/kafka-protocol-facts.md` (sections 2.1 to 2.11) and Kafka's message JSON, never by our
encoder, so a schema transcription mistake or a codec bug shows up as a byte difference.
"""

from __future__ import annotations

import struct
import uuid

import pytest

from epochlog.protocol.errors import EncodeError, UnsupportedVersionError
from epochlog.protocol.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    FetchRequest,
    LeaderAndIsrRequest,
    MetadataResponse,
    ProduceRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

# -- hand-written primitives (big-endian, as in Kafka's Type.java) -------------------------------


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return struct.pack(">?", v)


def uv(n: int) -> bytes:
    """UNSIGNED_VARINT: base-128, low groups first."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def string(s: str | None) -> bytes:
    """STRING / NULLABLE_STRING: int16 length (-1 = null)."""
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def cstring(s: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING: uvarint length + 1 (0 = null)."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return uv(len(b) + 1) + b


def cbytes(b: bytes | None) -> bytes:
    """COMPACT_NULLABLE_BYTES (flexible records): uvarint length + 1 (0 = null)."""
    return b"\x00" if b is None else uv(len(b) + 1) + b


def array(items: list[bytes]) -> bytes:
    """ARRAY: int32 count."""
    return i32(len(items)) + b"".join(items)


def carray(items: list[bytes]) -> bytes:
    """COMPACT_ARRAY: uvarint count + 1."""
    return uv(len(items) + 1) + b"".join(items)


def int32s(xs: list[int]) -> bytes:
    return array([i32(x) for x in xs])


def cint32s(xs: list[int]) -> bytes:
    return carray([i32(x) for x in xs])


NO_TAGS = b"\x00"  # an empty tagged-field section: uvarint count 0

TOPIC_ID_BYTES = bytes(range(1, 17))
TOPIC_ID = uuid.UUID(bytes=TOPIC_ID_BYTES)
BROKER_EPOCH = 0x1_0000_0023  # a czxid: larger than 32 bits on purpose


def check(obj: object, version: int, expected: bytes) -> None:
    assert obj.encode(version) == expected
    assert type(obj).decode(expected, version) == obj


# -- LeaderAndIsr v2 (section 2.3): non-flexible, grouped by topic, BrokerEpoch ------------------


def test_leader_and_isr_v2_request() -> None:
    req = LeaderAndIsrRequest(
        controller_id=1,
        controller_epoch=2,
        broker_epoch=BROKER_EPOCH,
        topic_states=[
            LeaderAndIsrRequest.LeaderAndIsrTopicState(
                topic_name="t",
                partition_states=[
                    LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                        partition_index=0,
                        controller_epoch=2,
                        leader=1,
                        leader_epoch=5,
                        isr=[1, 2],
                        partition_epoch=7,
                        replicas=[1, 2, 3],
                        is_new=True,
                    )
                ],
            )
        ],
        live_leaders=[
            LeaderAndIsrRequest.LeaderAndIsrLiveLeader(broker_id=1, host_name="h1", port=9092)
        ],
    )
    partition = (
        i32(0)
        + i32(2)
        + i32(1)
        + i32(5)
        + int32s([1, 2])
        + i32(7)
        + int32s([1, 2, 3])
        + boolean(True)
    )
    expected = (
        i32(1)
        + i32(2)
        + i64(BROKER_EPOCH)
        + array([string("t") + array([partition])])
        + array([i32(1) + string("h1") + i32(9092)])
    )
    check(req, 2, expected)


# -- UpdateMetadata v5 (section 2.4): endpoint Port precedes Host; Rack nullable -----------------


def test_update_metadata_v5_request() -> None:
    req = UpdateMetadataRequest(
        controller_id=1,
        controller_epoch=3,
        broker_epoch=BROKER_EPOCH,
        topic_states=[
            UpdateMetadataRequest.UpdateMetadataTopicState(
                topic_name="t",
                partition_states=[
                    UpdateMetadataRequest.UpdateMetadataPartitionState(
                        partition_index=1,
                        controller_epoch=3,
                        leader=2,
                        leader_epoch=4,
                        isr=[2],
                        zk_version=9,
                        replicas=[2, 1],
                        offline_replicas=[1],
                    )
                ],
            )
        ],
        live_brokers=[
            UpdateMetadataRequest.UpdateMetadataBroker(
                id=1,
                endpoints=[
                    UpdateMetadataRequest.UpdateMetadataEndpoint(
                        port=9092, host="h1", listener="PLAINTEXT", security_protocol=0
                    )
                ],
                rack=None,
            ),
            UpdateMetadataRequest.UpdateMetadataBroker(
                id=2,
                endpoints=[
                    UpdateMetadataRequest.UpdateMetadataEndpoint(
                        port=9093, host="h2", listener="PLAINTEXT", security_protocol=0
                    )
                ],
                rack="r2",
            ),
        ],
    )
    partition = (
        i32(1) + i32(3) + i32(2) + i32(4) + int32s([2]) + i32(9) + int32s([2, 1]) + int32s([1])
    )
    expected = (
        i32(1)
        + i32(3)
        + i64(BROKER_EPOCH)
        + array([string("t") + array([partition])])
        + array(
            [
                i32(1)
                + array([i32(9092) + string("h1") + string("PLAINTEXT") + i16(0)])
                + string(None),
                i32(2)
                + array([i32(9093) + string("h2") + string("PLAINTEXT") + i16(0)])
                + string("r2"),
            ]
        )
    )
    check(req, 5, expected)


# -- StopReplica v1 (section 2.5): top-level DeletePartitions, Topics{Name, PartitionIndexes} ----


def test_stop_replica_v1_request() -> None:
    req = StopReplicaRequest(
        controller_id=1,
        controller_epoch=2,
        broker_epoch=BROKER_EPOCH,
        delete_partitions=True,
        topics=[
            StopReplicaRequest.StopReplicaTopicV1(name="a", partition_indexes=[0, 2]),
            StopReplicaRequest.StopReplicaTopicV1(name="bb", partition_indexes=[]),
        ],
    )
    expected = (
        i32(1)
        + i32(2)
        + i64(BROKER_EPOCH)
        + boolean(True)
        + array([string("a") + int32s([0, 2]), string("bb") + int32s([])])
    )
    check(req, 1, expected)


# -- ControlledShutdown v2 (section 2.6) ---------------------------------------------------------


def test_controlled_shutdown_v2_request() -> None:
    check(
        ControlledShutdownRequest(broker_id=3, broker_epoch=BROKER_EPOCH),
        2,
        i32(3) + i64(BROKER_EPOCH),
    )


def test_controlled_shutdown_v2_response() -> None:
    resp = ControlledShutdownResponse(
        error_code=77,
        remaining_partitions=[
            ControlledShutdownResponse.RemainingPartition(topic_name="t", partition_index=0),
            ControlledShutdownResponse.RemainingPartition(topic_name="u", partition_index=5),
        ],
    )
    expected = i16(77) + array([string("t") + i32(0), string("u") + i32(5)])
    check(resp, 2, expected)


# -- AlterPartition v3 (section 2.7): flexible, topic IDs, NewIsrWithEpochs ----------------------


def test_alter_partition_v3_request() -> None:
    req = AlterPartitionRequest(
        broker_id=1,
        broker_epoch=BROKER_EPOCH,
        topics=[
            AlterPartitionRequest.TopicData(
                topic_id=TOPIC_ID,
                partitions=[
                    AlterPartitionRequest.PartitionData(
                        partition_index=0,
                        leader_epoch=5,
                        new_isr_with_epochs=[
                            AlterPartitionRequest.BrokerState(
                                broker_id=1, broker_epoch=BROKER_EPOCH
                            ),
                            AlterPartitionRequest.BrokerState(broker_id=2, broker_epoch=-1),
                        ],
                        leader_recovery_state=0,
                        partition_epoch=11,
                    )
                ],
            )
        ],
    )
    isr = carray([i32(1) + i64(BROKER_EPOCH) + NO_TAGS, i32(2) + i64(-1) + NO_TAGS])
    partition = i32(0) + i32(5) + isr + i8(0) + i32(11) + NO_TAGS
    expected = (
        i32(1)
        + i64(BROKER_EPOCH)
        + carray([TOPIC_ID_BYTES + carray([partition]) + NO_TAGS])
        + NO_TAGS
    )
    check(req, 3, expected)


def test_alter_partition_v3_response() -> None:
    resp = AlterPartitionResponse(
        throttle_time_ms=0,
        error_code=0,
        topics=[
            AlterPartitionResponse.TopicData(
                topic_id=TOPIC_ID,
                partitions=[
                    AlterPartitionResponse.PartitionData(
                        partition_index=0,
                        error_code=107,
                        leader_id=1,
                        leader_epoch=5,
                        isr=[1],
                        leader_recovery_state=0,
                        partition_epoch=11,
                    )
                ],
            )
        ],
    )
    partition = i32(0) + i16(107) + i32(1) + i32(5) + cint32s([1]) + i8(0) + i32(11) + NO_TAGS
    expected = i32(0) + i16(0) + carray([TOPIC_ID_BYTES + carray([partition]) + NO_TAGS]) + NO_TAGS
    check(resp, 3, expected)


def test_alter_partition_is_served_at_v3_only() -> None:
    with pytest.raises(UnsupportedVersionError):
        AlterPartitionRequest(broker_id=1).encode(2)


# -- Fetch v15 (section 2.8): no ReplicaId, ReplicaState in tag 1 --------------------------------


def _fetch_v15(replica_state: FetchRequest.ReplicaState | None, cluster_id: str | None):
    kwargs = {} if replica_state is None else {"replica_state": replica_state}
    return FetchRequest(
        cluster_id=cluster_id,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52428800,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic_id=TOPIC_ID,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=0,
                        current_leader_epoch=5,
                        fetch_offset=100,
                        last_fetched_epoch=4,
                        log_start_offset=0,
                        partition_max_bytes=1048576,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
        **kwargs,
    )


def _fetch_v15_body() -> bytes:
    partition = i32(0) + i32(5) + i64(100) + i32(4) + i64(0) + i32(1048576) + NO_TAGS
    return (
        i32(500)  # MaxWaitMs (no ReplicaId: it exists only in v0-14)
        + i32(1)  # MinBytes
        + i32(52428800)  # MaxBytes
        + i8(0)  # IsolationLevel
        + i32(0)  # SessionId
        + i32(-1)  # SessionEpoch
        + carray([TOPIC_ID_BYTES + carray([partition]) + NO_TAGS])  # Topics
        + carray([])  # ForgottenTopicsData
        + cstring("")  # RackId
    )


def test_fetch_v15_follower_request_carries_replica_state_in_tag_1() -> None:
    req = _fetch_v15(FetchRequest.ReplicaState(replica_id=2, replica_epoch=BROKER_EPOCH), None)
    replica_state = i32(2) + i64(BROKER_EPOCH) + NO_TAGS  # a nested flexible struct
    assert len(replica_state) == 13
    tagged = uv(1) + uv(1) + uv(13) + replica_state  # count 1; tag 1, size 13
    assert tagged == bytes([1, 1, 13]) + replica_state
    check(req, 15, _fetch_v15_body() + tagged)


def test_fetch_v15_tags_are_written_in_ascending_order() -> None:
    req = _fetch_v15(FetchRequest.ReplicaState(replica_id=2, replica_epoch=7), "cid")
    cluster_id = cstring("cid")  # tag 0: compact nullable string
    replica_state = i32(2) + i64(7) + NO_TAGS
    tagged = (
        uv(2)
        + uv(0)
        + uv(len(cluster_id))
        + cluster_id
        + uv(1)
        + uv(len(replica_state))
        + replica_state
    )
    check(req, 15, _fetch_v15_body() + tagged)


def test_fetch_v15_consumer_request_has_empty_tagged_section() -> None:
    req = _fetch_v15(None, None)
    assert req.replica_state == FetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1)
    check(req, 15, _fetch_v15_body() + NO_TAGS)


def test_fetch_v15_refuses_the_v0_14_replica_id_field() -> None:
    req = _fetch_v15(None, None)
    req.replica_id = 2  # not ignorable in Kafka's schema: v15 carries it in ReplicaState
    with pytest.raises(EncodeError):
        req.encode(15)


# -- Metadata v13 (section 2.9): top-level ErrorCode after ClusterAuthorizedOperations's slot ----


def _metadata_response(error_code: int) -> MetadataResponse:
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.MetadataResponseBroker(node_id=1, host="h1", port=9092, rack=None)
        ],
        cluster_id="cid",
        controller_id=1,
        topics=[
            MetadataResponse.MetadataResponseTopic(
                error_code=0,
                name="t",
                topic_id=TOPIC_ID,
                is_internal=False,
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        error_code=0,
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=3,
                        replica_nodes=[1, 2],
                        isr_nodes=[1],
                        offline_replicas=[2],
                    )
                ],
                topic_authorized_operations=-2147483648,
            )
        ],
        error_code=error_code,
    )


def _metadata_v13_prefix() -> bytes:
    partition = (
        i16(0) + i32(0) + i32(1) + i32(3) + cint32s([1, 2]) + cint32s([1]) + cint32s([2]) + NO_TAGS
    )
    topic = (
        i16(0)
        + cstring("t")
        + TOPIC_ID_BYTES
        + boolean(False)
        + carray([partition])
        + i32(-2147483648)  # TopicAuthorizedOperations
        + NO_TAGS
    )
    return (
        i32(0)  # ThrottleTimeMs
        + carray([i32(1) + cstring("h1") + i32(9092) + cstring(None) + NO_TAGS])  # Brokers
        + cstring("cid")  # ClusterId
        + i32(1)  # ControllerId
        + carray([topic])  # Topics; ClusterAuthorizedOperations is v8-10 only
    )


def test_metadata_v13_response_with_rebootstrap_required() -> None:
    expected = _metadata_v13_prefix() + i16(129) + NO_TAGS
    check(_metadata_response(129), 13, expected)


def test_metadata_v12_drops_the_ignorable_top_level_error_code() -> None:
    # v12 has the same layout without the trailing ErrorCode; it is ignorable, so it is dropped
    v12 = _metadata_v13_prefix() + NO_TAGS
    assert _metadata_response(129).encode(12) == v12
    assert MetadataResponse.decode(v12, 12) == _metadata_response(0)


# -- ApiVersions (section 2.10) ------------------------------------------------------------------


def test_api_versions_v0_response_for_an_unsupported_version() -> None:
    resp = ApiVersionsResponse(
        error_code=35,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)],
    )
    expected = i16(35) + array([i16(18) + i16(0) + i16(4)])  # no ThrottleTimeMs in v0
    check(resp, 0, expected)


def test_api_versions_v3_request() -> None:
    req = ApiVersionsRequest(client_software_name="epochlog", client_software_version="0.1.0")
    check(req, 3, cstring("epochlog") + cstring("0.1.0") + NO_TAGS)


def test_api_versions_v3_response_without_features() -> None:
    resp = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=11),
            ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4),
        ],
        throttle_time_ms=0,
    )
    expected = (
        i16(0)
        + carray([i16(0) + i16(3) + i16(11) + NO_TAGS, i16(18) + i16(0) + i16(4) + NO_TAGS])
        + i32(0)
        + NO_TAGS  # SupportedFeatures empty, FinalizedFeaturesEpoch -1, ...: all at default
    )
    check(resp, 3, expected)


def test_api_versions_v3_response_with_tagged_features() -> None:
    resp = ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)],
        throttle_time_ms=0,
        supported_features=[
            ApiVersionsResponse.SupportedFeatureKey(
                name="metadata.version", min_version=1, max_version=20
            )
        ],
        finalized_features_epoch=5,
    )
    features = carray([cstring("metadata.version") + i16(1) + i16(20) + NO_TAGS])
    assert len(features) == 23
    expected = (
        i16(0)
        + carray([i16(18) + i16(0) + i16(4) + NO_TAGS])
        + i32(0)
        + uv(2)
        + uv(0)
        + uv(23)
        + features  # tag 0 SupportedFeatures
        + uv(1)
        + uv(8)
        + i64(5)  # tag 1 FinalizedFeaturesEpoch
    )
    check(resp, 3, expected)


# -- Produce v9 (section 2.11): first flexible version, compact everything -----------------------


def test_produce_v9_request() -> None:
    batch = bytes(range(70))  # opaque to the codec: the records field is bytes
    req = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=batch),
                    ProduceRequest.PartitionProduceData(index=1, records=None),
                ],
            )
        ],
    )
    expected = (
        cstring(None)  # TransactionalId: compact nullable, 0 = null
        + i16(-1)
        + i32(30000)
        + carray(
            [
                cstring("t")
                + carray(
                    [
                        i32(0) + cbytes(batch) + NO_TAGS,
                        i32(1) + cbytes(None) + NO_TAGS,
                    ]
                )
                + NO_TAGS
            ]
        )
        + NO_TAGS
    )
    assert cbytes(batch)[:1] == bytes([71])
    check(req, 9, expected)
