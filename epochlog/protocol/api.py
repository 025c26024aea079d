"""The APIs we serve, and framing: size prefix, headers and bodies on the wire.

`APIS` is the protocol table of DESIGN.md: each API key with the version range we advertise in
ApiVersions and its request and response classes. Framing follows Kafka's header-version rules:
the request header is v2 for a flexible API version and v1 otherwise (v0 for ControlledShutdown
v0); the response header is v1 for a flexible version and v0 otherwise, except that ApiVersions
responses always use v0 so that any client can read them.

A request of an API key or version we do not serve is refused as Kafka's broker refuses it
(`refusal`): SocketServer closes the connection (`isApiEnabled` fails while parsing the header),
except for ApiVersions, which accepts any version and answers one it does not know with
UNSUPPORTED_VERSION in a v0 body listing ApiVersions' own range (KIP-511), so that the client can
ask again at a version we serve.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from epochlog.protocol import messages as m
from epochlog.protocol.codec import (
    Message,
    SegmentedBuffer,
    compile_version,
    decode_from,
    encode_into,
)
from epochlog.protocol.errors import DecodeError, UnsupportedVersionError
from epochlog.protocol.headers import RequestHeader, ResponseHeader


class ApiKey(enum.IntEnum):
    """Kafka's API keys that epochlog knows; only those in `APIS` are served and advertised."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8  # classic consumer-group APIs
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24  # transactions
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27  # (broker to broker)
    TXN_OFFSET_COMMIT = 28  # answered by the group coordinator
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    ALTER_PARTITION = 56
    DESCRIBE_CLUSTER = 60
    DESCRIBE_CONFIGS = 32  # dynamic configs
    ALTER_CONFIGS = 33
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TOPIC_PARTITIONS = 75
    DESCRIBE_CLIENT_QUOTAS = 48  # client quotas
    ALTER_CLIENT_QUOTAS = 49
    SASL_HANDSHAKE = 17  # SASL (issue 21)
    SASL_AUTHENTICATE = 36
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    PIN_CONTROLLER = m.pin_controller.API_KEY  # KIP-39, a vendor key Kafka does not use


@dataclass(frozen=True)
class Api:
    key: ApiKey
    min_version: int
    max_version: int
    request: type[Message]
    response: type[Message]

    @property
    def name(self) -> str:
        return self.request.SCHEMA.name.removesuffix("Request")

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def _api(
    key: ApiKey, request: type[Message], response: type[Message], max_version: int | None = None
) -> Api:
    """The API at every version its schema defines, or up to `max_version`."""
    valid = request.SCHEMA.valid
    assert valid.high is not None and response.SCHEMA.valid == valid, key
    high = valid.high if max_version is None else max_version
    assert valid.low <= high <= valid.high, key
    return Api(key, valid.low, high, request, response)


APIS: dict[int, Api] = {
    api.key: api
    for api in (
        _api(ApiKey.PRODUCE, m.ProduceRequest, m.ProduceResponse),
        _api(ApiKey.FETCH, m.FetchRequest, m.FetchResponse),
        _api(ApiKey.LIST_OFFSETS, m.ListOffsetsRequest, m.ListOffsetsResponse),
        _api(ApiKey.METADATA, m.MetadataRequest, m.MetadataResponse),
        _api(ApiKey.LEADER_AND_ISR, m.LeaderAndIsrRequest, m.LeaderAndIsrResponse),
        _api(ApiKey.STOP_REPLICA, m.StopReplicaRequest, m.StopReplicaResponse),
        _api(ApiKey.UPDATE_METADATA, m.UpdateMetadataRequest, m.UpdateMetadataResponse),
        _api(ApiKey.CONTROLLED_SHUTDOWN, m.ControlledShutdownRequest, m.ControlledShutdownResponse),
        _api(ApiKey.API_VERSIONS, m.ApiVersionsRequest, m.ApiVersionsResponse),
        _api(ApiKey.CREATE_TOPICS, m.CreateTopicsRequest, m.CreateTopicsResponse),
        _api(ApiKey.DELETE_TOPICS, m.DeleteTopicsRequest, m.DeleteTopicsResponse),
        _api(ApiKey.INIT_PRODUCER_ID, m.InitProducerIdRequest, m.InitProducerIdResponse),
        _api(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            m.OffsetForLeaderEpochRequest,
            m.OffsetForLeaderEpochResponse,
        ),
        _api(ApiKey.ALTER_PARTITION, m.AlterPartitionRequest, m.AlterPartitionResponse),
        _api(ApiKey.DESCRIBE_CLUSTER, m.DescribeClusterRequest, m.DescribeClusterResponse),
        _api(ApiKey.PIN_CONTROLLER, m.PinControllerRequest, m.PinControllerResponse),
        _api(ApiKey.OFFSET_COMMIT, m.OffsetCommitRequest, m.OffsetCommitResponse),
        _api(ApiKey.OFFSET_FETCH, m.OffsetFetchRequest, m.OffsetFetchResponse),
        _api(ApiKey.FIND_COORDINATOR, m.FindCoordinatorRequest, m.FindCoordinatorResponse),
        _api(ApiKey.JOIN_GROUP, m.JoinGroupRequest, m.JoinGroupResponse),
        _api(ApiKey.HEARTBEAT, m.HeartbeatRequest, m.HeartbeatResponse),
        _api(ApiKey.LEAVE_GROUP, m.LeaveGroupRequest, m.LeaveGroupResponse),
        _api(ApiKey.SYNC_GROUP, m.SyncGroupRequest, m.SyncGroupResponse),
        _api(ApiKey.DESCRIBE_GROUPS, m.DescribeGroupsRequest, m.DescribeGroupsResponse),
        _api(ApiKey.LIST_GROUPS, m.ListGroupsRequest, m.ListGroupsResponse),
        _api(ApiKey.DELETE_GROUPS, m.DeleteGroupsRequest, m.DeleteGroupsResponse),
        _api(ApiKey.OFFSET_DELETE, m.OffsetDeleteRequest, m.OffsetDeleteResponse),
        _api(ApiKey.DELETE_RECORDS, m.DeleteRecordsRequest, m.DeleteRecordsResponse),
        _api(ApiKey.CREATE_PARTITIONS, m.CreatePartitionsRequest, m.CreatePartitionsResponse),
        _api(ApiKey.ELECT_LEADERS, m.ElectLeadersRequest, m.ElectLeadersResponse),
        _api(ApiKey.DESCRIBE_CONFIGS, m.DescribeConfigsRequest, m.DescribeConfigsResponse),
        _api(ApiKey.ALTER_CONFIGS, m.AlterConfigsRequest, m.AlterConfigsResponse),
        _api(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            m.IncrementalAlterConfigsRequest,
            m.IncrementalAlterConfigsResponse,
        ),
        _api(
            ApiKey.ALTER_REPLICA_LOG_DIRS,
            m.AlterReplicaLogDirsRequest,
            m.AlterReplicaLogDirsResponse,
        ),
        _api(ApiKey.DESCRIBE_LOG_DIRS, m.DescribeLogDirsRequest, m.DescribeLogDirsResponse),
        _api(ApiKey.DESCRIBE_PRODUCERS, m.DescribeProducersRequest, m.DescribeProducersResponse),
        _api(ApiKey.WRITE_TXN_MARKERS, m.WriteTxnMarkersRequest, m.WriteTxnMarkersResponse),
        _api(ApiKey.TXN_OFFSET_COMMIT, m.TxnOffsetCommitRequest, m.TxnOffsetCommitResponse),
        _api(
            ApiKey.DESCRIBE_TOPIC_PARTITIONS,
            m.DescribeTopicPartitionsRequest,
            m.DescribeTopicPartitionsResponse,
        ),
        _api(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            m.AlterPartitionReassignmentsRequest,
            m.AlterPartitionReassignmentsResponse,
        ),
        _api(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            m.ListPartitionReassignmentsRequest,
            m.ListPartitionReassignmentsResponse,
        ),
        _api(
            ApiKey.DESCRIBE_CLIENT_QUOTAS,
            m.DescribeClientQuotasRequest,
            m.DescribeClientQuotasResponse,
        ),
        _api(ApiKey.ALTER_CLIENT_QUOTAS, m.AlterClientQuotasRequest, m.AlterClientQuotasResponse),
        _api(ApiKey.SASL_HANDSHAKE, m.SaslHandshakeRequest, m.SaslHandshakeResponse),
        _api(ApiKey.SASL_AUTHENTICATE, m.SaslAuthenticateRequest, m.SaslAuthenticateResponse),
        _api(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            m.DescribeUserScramCredentialsRequest,
            m.DescribeUserScramCredentialsResponse,
        ),
        _api(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            m.AlterUserScramCredentialsRequest,
            m.AlterUserScramCredentialsResponse,
        ),
        # AddPartitionsToTxn v5 is KIP-890 part 2 (transaction.version 2, partitions added by
        # the produce itself): not served, so clients keep adding them explicitly.
        _api(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            m.AddPartitionsToTxnRequest,
            m.AddPartitionsToTxnResponse,
            max_version=4,
        ),
        _api(ApiKey.ADD_OFFSETS_TO_TXN, m.AddOffsetsToTxnRequest, m.AddOffsetsToTxnResponse),
        _api(ApiKey.END_TXN, m.EndTxnRequest, m.EndTxnResponse),
        _api(
            ApiKey.DESCRIBE_TRANSACTIONS,
            m.DescribeTransactionsRequest,
            m.DescribeTransactionsResponse,
        ),
        _api(ApiKey.LIST_TRANSACTIONS, m.ListTransactionsRequest, m.ListTransactionsResponse),
    )
}


class Refusal(enum.Enum):
    """What the broker does with a request of an API key or version it does not serve."""

    ANSWER_UNSUPPORTED_VERSION = "answer UNSUPPORTED_VERSION"  # ApiVersions only
    CLOSE_CONNECTION = "close the connection"


def refusal(api_key: int, version: int) -> Refusal | None:
    """None for a request we serve; otherwise how it is refused (see the module docstring)."""
    api = APIS.get(api_key)
    if api is not None and api.supports(version):
        return None
    if api_key == ApiKey.API_VERSIONS:
        return Refusal.ANSWER_UNSUPPORTED_VERSION
    return Refusal.CLOSE_CONNECTION


def describe_unserved(api_key: int, version: int, client_id: str | None) -> str:
    """One line naming an unserved request: API name and key, version, client, served range."""
    client = f"client id {client_id!r}" if client_id is not None else "unknown client id"
    api = APIS.get(api_key)
    if api is None:
        return f"API key {api_key} v{version} ({client}) is not an API this broker serves"
    return (
        f"{api.name} (key {api_key}) v{version} ({client}) is outside the versions this broker "
        f"serves (v{api.min_version}-{api.max_version})"
    )


def request_header_version(api_key: int, version: int) -> int:
    known = _REQUEST_HEADER_VERSIONS.get((api_key, version))
    if known is not None:
        return known
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and version == 0:
        header_version = 0
    else:
        api = APIS.get(api_key)
        flexible = api is not None and api.request.SCHEMA.is_flexible(version)
        header_version = 2 if flexible else 1
    _REQUEST_HEADER_VERSIONS[(api_key, version)] = header_version
    return header_version


def response_header_version(api_key: int, version: int) -> int:
    known = _RESPONSE_HEADER_VERSIONS.get((api_key, version))
    if known is not None:
        return known
    if api_key == ApiKey.API_VERSIONS:
        header_version = 0
    else:
        api = APIS.get(api_key)
        flexible = api is not None and api.response.SCHEMA.is_flexible(version)
        header_version = 1 if flexible else 0
    _RESPONSE_HEADER_VERSIONS[(api_key, version)] = header_version
    return header_version


# Header versions by (api key, version), filled as they are asked for: every request and response
# needs one, and working it out walks the schema.
_REQUEST_HEADER_VERSIONS: dict[tuple[int, int], int] = {}
_RESPONSE_HEADER_VERSIONS: dict[tuple[int, int], int] = {}


_SIZE = struct.Struct(">i")
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
# A response frame's size prefix and header: v0 is the correlation id, v1 adds an empty
# tagged-field section (one zero byte). Packed directly, not through the generic codec.
_SIZE_CORRELATION = struct.Struct(">ii")
_SIZE_CORRELATION_NO_TAGS = struct.Struct(">iiB")


@dataclass(slots=True)
class Request:
    header: Any  # RequestHeader
    body: Any  # the API's request message

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Message
) -> bytes:
    """A whole request frame, size prefix included."""
    out = bytearray(4)
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    encode_into(header, request_header_version(api_key, version), out)
    encode_into(body, version, out)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def peek_request_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api key, version, correlation id) of a request frame (without size prefix)."""
    if len(frame) < _KEY_VERSION_CORRELATION.size:
        raise DecodeError("RequestHeader", None, None, f"frame of {len(frame)} bytes is too short")
    return _KEY_VERSION_CORRELATION.unpack_from(frame, 0)


def peek_client_id(frame: bytes | bytearray | memoryview) -> str | None:
    """The client id of a request frame (without size prefix) whatever its API and version, or
    None where it cannot be read: request headers v1 and v2 both put it, a classic nullable
    string, right after the correlation id (only ControlledShutdown v0 has no client id)."""
    api_key, version, _ = peek_request_header(frame)
    if request_header_version(api_key, version) == 0 or len(frame) < 10:
        return None
    (length,) = struct.unpack_from(">h", frame, 8)
    if length < 0 or 10 + length > len(frame):
        return None
    try:
        return bytes(frame[10 : 10 + length]).decode()
    except UnicodeDecodeError:
        return None


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode a request frame (without the size prefix).

    Raises UnsupportedVersionError for an API key or version we do not serve, DecodeError for bytes
    that do not decode as the request they claim to be.
    """
    api_key, version, _ = peek_request_header(frame)
    decoders = _REQUEST_DECODERS.get((api_key, version))
    if decoders is None:
        decoders = _request_decoders(api_key, version)
    end = len(frame)
    try:
        header, pos = decoders[0](frame, 0, end)
        body, _ = decoders[1](frame, pos, end)
    except Exception:
        # Decoded again the slow way, which names the field that failed (DecodeError).
        header, pos = decode_from(RequestHeader, frame, request_header_version(api_key, version), 0)
        body, _ = decode_from(APIS[api_key].request, frame, version, pos)
    # Bytes after the body are ignored, as Kafka's brokers ignore them: librdkafka 2.16 sends
    # three after an all-topics Metadata v13 request, and refusing it breaks list_topics().
    return Request(header, body)


Decoder = Callable[[bytes | bytearray | memoryview, int, int], tuple[Any, int]]
# (api key, version) -> the compiled decoders of its request header and body: a request costs
# one lookup, not the schema walks and cache lookups of `decode_from` twice.
_REQUEST_DECODERS: dict[tuple[int, int], tuple[Decoder, Decoder]] = {}


def _request_decoders(api_key: int, version: int) -> tuple[Decoder, Decoder]:
    api = APIS.get(api_key)
    if api is None or not api.supports(version):
        raise UnsupportedVersionError(api_key, version)
    decoders = (
        compile_version(RequestHeader, request_header_version(api_key, version)).decode,
        compile_version(api.request, version).decode,
    )
    _REQUEST_DECODERS[(api_key, version)] = decoders
    return decoders


def encode_response(api_key: int, version: int, correlation_id: int, body: Message) -> bytes:
    """A whole response frame, size prefix included."""
    if response_header_version(api_key, version) == 0:
        out = bytearray(_SIZE_CORRELATION.pack(0, correlation_id))
    else:
        out = bytearray(_SIZE_CORRELATION_NO_TAGS.pack(0, correlation_id, 0))
    _encode_body(body, version, out)  # file slices are read into it (not a SegmentedBuffer)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_response_segments(
    api_key: int, version: int, correlation_id: int, body: Message
) -> SegmentedBuffer:
    """A response frame whose records may be file slices (a Fetch response served with sendfile):
    the bytes, with `slices` marking where each slice's bytes go. The size prefix counts them."""
    if response_header_version(api_key, version) == 0:
        out = SegmentedBuffer(_SIZE_CORRELATION.pack(0, correlation_id))
    else:
        out = SegmentedBuffer(_SIZE_CORRELATION_NO_TAGS.pack(0, correlation_id, 0))
    _encode_body(body, version, out)
    _SIZE.pack_into(out, 0, (out.total_size if out.slices else len(out)) - 4)
    return out


def _encode_body(body: Any, version: int, out: bytearray) -> None:
    encoder = _BODY_ENCODERS.get((type(body), version))
    if encoder is not None:
        mark = len(out)
        try:
            encoder(body, out)
        except Exception:
            del out[mark:]
            encode_into(body, version, out)  # raises the EncodeError naming the field
    elif hasattr(body, "encode_body"):
        body.encode_body(version, out)  # a body that encodes itself (`ProduceAnswer`)
    else:
        encode_into(body, version, out)  # compiles it, or names what cannot be encoded
        _BODY_ENCODERS[(type(body), version)] = compile_version(type(body), version).encode


# (message class, version) -> its compiled encoder, once one encoding succeeded.
_BODY_ENCODERS: dict[tuple[type, int], Callable[[Any, bytearray], None]] = {}


def decode_response(
    api_key: int, version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, Any]:
    """(correlation id, body) of a response frame (without the size prefix)."""
    api = APIS.get(api_key)
    if api is None or not api.supports(version):
        raise UnsupportedVersionError(api_key, version)
    header, pos = decode_from(ResponseHeader, frame, response_header_version(api_key, version), 0)
    body, pos = decode_from(api.response, frame, version, pos)
    if pos != len(frame):
        raise DecodeError(
            api.response.SCHEMA.name, version, None, f"{len(frame) - pos} bytes left after the body"
        )
    return header.correlation_id, body


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """The answer to an ApiVersions request of a version we do not serve: a v0 body with
    UNSUPPORTED_VERSION that lists only ApiVersions' own range, so the client retries lower."""
    from epochlog.protocol.errors import ErrorCode

    api = APIS[ApiKey.API_VERSIONS]
    body = m.ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[
            m.ApiVersionsResponse.ApiVersion(
                api_key=api.key, min_version=api.min_version, max_version=api.max_version
            )
        ],
    )
    return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body)
