"""Kafka's error codes, with names and retriability, and the exceptions of the codec.

The table is Kafka's (`Errors.java`); "retriable" follows whether Kafka's exception class descends
from RetriableException. A code this table does not know maps to UNKNOWN_SERVER_ERROR, as the Java
client does, so new codes must be gated by request version before they are sent.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """Kafka's error codes. `retriable` says whether a client may retry the same request."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129

    @property
    def retriable(self) -> bool:
        return self in _RETRIABLE

    @classmethod
    def of(cls, code: int) -> ErrorCode:
        """The named code for `code`; codes this table does not know are UNKNOWN_SERVER_ERROR."""
        # A dict lookup: calling the enum costs about a microsecond, and a replica fetcher asks
        # for every partition of every response.
        return _BY_CODE.get(code, cls.UNKNOWN_SERVER_ERROR)


_E = ErrorCode
_BY_CODE: dict[int, ErrorCode] = {e.value: e for e in ErrorCode}
_RETRIABLE = frozenset(
    {
        _E.CORRUPT_MESSAGE,
        _E.UNKNOWN_TOPIC_OR_PARTITION,
        _E.LEADER_NOT_AVAILABLE,
        _E.NOT_LEADER_OR_FOLLOWER,
        _E.REQUEST_TIMED_OUT,
        _E.REPLICA_NOT_AVAILABLE,
        _E.NETWORK_EXCEPTION,
        _E.COORDINATOR_LOAD_IN_PROGRESS,
        _E.COORDINATOR_NOT_AVAILABLE,
        _E.NOT_COORDINATOR,
        _E.NOT_ENOUGH_REPLICAS,
        _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        _E.NOT_CONTROLLER,
        _E.CONCURRENT_TRANSACTIONS,
        _E.KAFKA_STORAGE_ERROR,
        _E.FETCH_SESSION_ID_NOT_FOUND,
        _E.INVALID_FETCH_SESSION_EPOCH,
        _E.LISTENER_NOT_FOUND,
        _E.FENCED_LEADER_EPOCH,
        _E.UNKNOWN_LEADER_EPOCH,
        _E.OFFSET_NOT_AVAILABLE,
        _E.PREFERRED_LEADER_NOT_AVAILABLE,
        _E.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        _E.ELECTION_NOT_NEEDED,
        _E.UNSTABLE_OFFSET_COMMIT,
        _E.THROTTLING_QUOTA_EXCEEDED,
        _E.UNKNOWN_TOPIC_ID,
        _E.INCONSISTENT_TOPIC_ID,
        _E.FETCH_SESSION_TOPIC_ID_ERROR,
        _E.SHARE_SESSION_NOT_FOUND,
        _E.INVALID_SHARE_SESSION_EPOCH,
    }
)


class ProtocolError(Exception):
    """Base of every error the protocol layer raises."""


class DecodeError(ProtocolError):
    """Bytes that do not decode as the named message: truncated, corrupt or out of range.

    Names the API, version and the field where decoding failed, so a log line says exactly what
    was wrong with the frame.
    """

    def __init__(self, what: str, version: int | None, field: str | None, reason: str) -> None:
        self.what = what
        self.version = version
        self.field = field
        self.reason = reason
        where = what if version is None else f"{what} v{version}"
        if field:
            where += f", field {field}"
        super().__init__(f"cannot decode {where}: {reason}")


class EncodeError(ProtocolError):
    """A message that cannot be written at the requested version (value out of range, wrong type,
    or a field this version lacks set to a non-default value)."""

    def __init__(self, what: str, version: int | None, field: str | None, reason: str) -> None:
        self.what = what
        self.version = version
        self.field = field
        self.reason = reason
        where = what if version is None else f"{what} v{version}"
        if field:
            where += f", field {field}"
        super().__init__(f"cannot encode {where}: {reason}")


class UnsupportedVersionError(ProtocolError):
    """An API key or version we do not serve (the broker closes the connection, except for
    ApiVersions: see `protocol.api.refusal`)."""

    def __init__(self, api_key: int, version: int, reason: str = "") -> None:
        self.api_key = api_key
        self.version = version
        super().__init__(reason or f"unsupported API key {api_key} version {version}")


class CorruptRecordError(ProtocolError):
    """A record batch that fails its checks (CRC, framing, magic). Reported as CORRUPT_MESSAGE."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(ProtocolError):
    """A well-formed batch a broker must refuse (offsets, counts, control batch from a producer).
    Reported as INVALID_RECORD."""

    error_code = ErrorCode.INVALID_RECORD
