"""Headers and framing: Kafka's header-version rules and the ApiVersions exceptions."""

from __future__ import annotations

import struct

import pytest

from epochlog.protocol import messages as m
from epochlog.protocol.api import (
    APIS,
    ApiKey,
    Refusal,
    decode_request,
    decode_response,
    describe_unserved,
    encode_request,
    encode_response,
    peek_client_id,
    refusal,
    request_header_version,
    response_header_version,
    unsupported_api_versions_response,
)
from epochlog.protocol.errors import DecodeError, ErrorCode, UnsupportedVersionError
from epochlog.protocol.headers import RequestHeader


def test_header_versions_follow_kafka_rules() -> None:
    assert request_header_version(ApiKey.PRODUCE, 8) == 1
    assert request_header_version(ApiKey.PRODUCE, 9) == 2
    assert request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 0) == 0
    assert request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 3) == 2
    assert response_header_version(ApiKey.FETCH, 11) == 0
    assert response_header_version(ApiKey.FETCH, 12) == 1
    for version in range(5):  # ApiVersions responses always use header v0 (KIP-511)
        assert response_header_version(ApiKey.API_VERSIONS, version) == 0
    assert response_header_version(ApiKey.DESCRIBE_CLUSTER, 0) == 1


def test_request_header_v2_keeps_a_classic_client_id() -> None:
    header = RequestHeader(
        request_api_key=3, request_api_version=12, correlation_id=7, client_id="abc"
    )
    assert header.encode(2) == struct.pack(">hhih", 3, 12, 7, 3) + b"abc" + b"\x00"
    assert header.encode(1) == struct.pack(">hhih", 3, 12, 7, 3) + b"abc"
    assert header.encode(0) == struct.pack(">hhi", 3, 12, 7)
    null_client = struct.pack(">hhih", 3, 12, 7, -1) + b"\x00"
    assert RequestHeader.decode(null_client, 2).client_id is None


def test_request_frames_round_trip() -> None:
    body = m.MetadataRequest(topics=None, allow_auto_topic_creation=False)
    frame = encode_request(ApiKey.METADATA, 12, 42, "client-1", body)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    request = decode_request(frame[4:])
    assert (request.api_key, request.api_version, request.correlation_id) == (3, 12, 42)
    assert request.header.client_id == "client-1"
    assert request.body == body


def test_response_frames_round_trip() -> None:
    body = m.DescribeClusterResponse(cluster_id="c1", controller_id=2)
    frame = encode_response(ApiKey.DESCRIBE_CLUSTER, 1, 9, body)
    correlation_id, decoded = decode_response(ApiKey.DESCRIBE_CLUSTER, 1, frame[4:])
    assert correlation_id == 9
    assert decoded == body


def test_unknown_api_and_version_are_unsupported() -> None:
    frame = struct.pack(">hhih", 9999, 0, 1, -1)
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame)
    frame = struct.pack(">hhih", ApiKey.PRODUCE, 99, 1, -1)
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame)


@pytest.mark.parametrize(
    ("api_key", "version", "expected"),
    [
        (ApiKey.FETCH, 16, None),
        (ApiKey.API_VERSIONS, 0, None),
        (ApiKey.FETCH, 3, Refusal.CLOSE_CONNECTION),  # below our range
        (ApiKey.METADATA, 14, Refusal.CLOSE_CONNECTION),  # above it
        (57, 0, Refusal.CLOSE_CONNECTION),  # UpdateFeatures: a Kafka API we do not serve
        (9999, 0, Refusal.CLOSE_CONNECTION),  # no API at all
        (ApiKey.API_VERSIONS, 5, Refusal.ANSWER_UNSUPPORTED_VERSION),
        (ApiKey.API_VERSIONS, -1, Refusal.ANSWER_UNSUPPORTED_VERSION),
    ],
)
def test_only_api_versions_is_answered_when_not_served(
    api_key: int, version: int, expected: Refusal | None
) -> None:
    assert refusal(api_key, version) is expected


def test_an_unserved_request_is_described_with_api_version_client_and_served_range() -> None:
    assert describe_unserved(ApiKey.FETCH, 3, "kafka-python-2.0") == (
        "Fetch (key 1) v3 (client id 'kafka-python-2.0') is outside the versions this broker "
        f"serves (v{APIS[ApiKey.FETCH].min_version}-{APIS[ApiKey.FETCH].max_version})"
    )
    assert describe_unserved(68, 0, None) == (
        "API key 68 v0 (unknown client id) is not an API this broker serves"
    )


def test_the_client_id_is_read_from_any_request_header_that_has_one() -> None:
    fetch_v3 = struct.pack(">hhih", ApiKey.FETCH, 3, 1, 3) + b"cli" + b"\x00" * 20
    assert peek_client_id(fetch_v3) == "cli"
    metadata_v14 = struct.pack(">hhih", ApiKey.METADATA, 14, 1, 2) + b"me" + b"\x00"
    assert peek_client_id(metadata_v14) == "me"
    assert peek_client_id(struct.pack(">hhih", 57, 0, 1, -1)) is None  # a null client id
    assert peek_client_id(struct.pack(">hhih", 57, 0, 1, 40) + b"short") is None
    assert peek_client_id(struct.pack(">hhih", 57, 0, 1, 2) + b"\xff\xfe") is None
    # ControlledShutdown v0's header (v0) has no client id: the int16 after it is the body's
    controlled_shutdown_v0 = struct.pack(">hhihi", ApiKey.CONTROLLED_SHUTDOWN, 0, 1, 1, 0)
    assert peek_client_id(controlled_shutdown_v0) is None


def test_unsupported_api_versions_gets_a_v0_body_listing_key_18() -> None:
    frame = unsupported_api_versions_response(correlation_id=5)
    payload = frame[4:]
    # header v0 (correlation id only), then a v0 body: error, int32 array count, one entry
    assert payload == struct.pack(
        ">ihihhh",
        5,
        ErrorCode.UNSUPPORTED_VERSION,
        1,
        18,
        APIS[ApiKey.API_VERSIONS].min_version,
        APIS[ApiKey.API_VERSIONS].max_version,
    )


def test_trailing_bytes_after_a_request_are_ignored_as_kafka_does() -> None:
    # librdkafka 2.16 sends three of them after an all-topics Metadata v13 request.
    body = m.MetadataRequest(topics=None, allow_auto_topic_creation=True)
    frame = encode_request(ApiKey.METADATA, 13, 7, "c", body)
    request = decode_request(frame[4:] + b"\x00\x00\x00")
    assert request.body == body
    assert request.correlation_id == 7


def test_decode_errors_name_api_version_and_field() -> None:
    body = m.ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            m.ProduceRequest.TopicProduceData(
                name="topic",
                partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=b"x" * 100)],
            )
        ],
    )
    encoded = body.encode(7)
    with pytest.raises(DecodeError) as info:
        m.ProduceRequest.decode(encoded[:-10], 7)
    message = str(info.value)
    assert "ProduceRequest v7" in message
    assert "topic_data[].partition_data[].records" in message


class FakeSlice:
    """Stands in for storage's FileSlice: a length and bytes read on demand."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def read_bytes(self) -> bytes:
        return self.data


def test_fetch_response_with_file_slices_leaves_holes_at_the_right_places() -> None:
    from epochlog.protocol.api import encode_response_segments

    def partition(index: int, records) -> m.FetchResponse.PartitionData:
        return m.FetchResponse.PartitionData(
            partition_index=index, high_watermark=10, last_stable_offset=10, records=records
        )

    slices = [FakeSlice(b"A" * 300), FakeSlice(b"B" * 5)]
    body = m.FetchResponse(
        responses=[
            m.FetchResponse.FetchableTopicResponse(
                topic="t",
                partitions=[partition(0, slices[0]), partition(1, slices[1]), partition(2, None)],
            )
        ]
    )
    for version in (11, 12, 16):
        segmented = encode_response_segments(ApiKey.FETCH, version, 77, body)
        # stitch the slices into the holes: it must equal the frame built from plain bytes
        stitched = bytearray()
        last = 0
        for position, piece in segmented.slices:
            stitched += segmented[last:position] + piece.read_bytes()
            last = position
        stitched += segmented[last:]
        plain_body = m.FetchResponse.decode(
            m.FetchResponse(responses=body.responses).encode(version), version
        )
        assert bytes(stitched) == encode_response(ApiKey.FETCH, version, 77, plain_body)
        correlation_id, decoded = decode_response(ApiKey.FETCH, version, bytes(stitched[4:]))
        assert [p.records for p in decoded.responses[0].partitions] == [b"A" * 300, b"B" * 5, None]
