"""The exceptions the client raises.

Every error a caller can see is a `ClientError`. Errors that come from a broker carry Kafka's
`ErrorCode` (`KafkaError.code`), so callers branch on `err.code is ErrorCode.X` and on
`err.retriable`; the message names where it happened (topic, partition, API, node). Errors that
the client detects itself (bad config, a record too large to send, a connection that failed) have
their own classes below.
"""

from __future__ import annotations

from epochlog.protocol.errors import ErrorCode

# Errors after which the client's cluster view is known to be out of date: the partition moved,
# the topic is new or gone, or the leader's epoch changed. Kafka's clients refresh metadata at
# once on these (Java: InvalidMetadataException and its subclasses).
METADATA_INVALIDATING_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    }
)


class ClientError(Exception):
    """Base of every error `epochlog.client` raises."""

    retriable = False


class ConfigError(ClientError, ValueError):
    """A client config key that is unknown or has a malformed value; names the key."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"config {key!r}: {reason}")


class KafkaError(ClientError):
    """An error code a broker returned, with where it happened."""

    def __init__(
        self, code: ErrorCode | int, context: str = "", message: str | None = None
    ) -> None:
        self.code = ErrorCode.of(int(code))
        self.context = context
        self.broker_message = message
        text = f"{self.code.name} ({int(self.code)})"
        if context:
            text = f"{context}: {text}"
        if message:
            text += f": {message}"
        super().__init__(text)

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        return self.code.retriable

    @property
    def invalidates_metadata(self) -> bool:
        return self.code in METADATA_INVALIDATING_ERRORS


class ConnectionFailedError(ClientError):
    """A connection to a broker could not be set up or broke; the request was not answered."""

    retriable = True


class NodeNotReadyError(ConnectionFailedError):
    """No usable connection to a node right now (connecting failed, or it is backing off)."""


class RequestTimedOutError(ClientError):
    """No response within request.timeout.ms; the connection is closed (as Kafka's clients do)."""

    retriable = True


class IncompatibleBrokerError(ClientError):
    """The broker serves no version of an API that this side can speak (or not the API at all)."""

    def __init__(self, api_key: int, broker_range: tuple[int, int] | None, ours: tuple[int, int]):
        self.api_key = api_key
        self.broker_range = broker_range
        served = (
            "does not serve it"
            if broker_range is None
            else f"serves {broker_range[0]}-{broker_range[1]}"
        )
        super().__init__(f"API key {api_key}: we speak {ours[0]}-{ours[1]}, the broker {served}")


class MessageTooLargeError(ClientError):
    """A record bigger than max.request.size (or refused by the broker as MESSAGE_TOO_LARGE)."""


class DeliveryTimeoutError(ClientError):
    """A record was not acknowledged within delivery.timeout.ms."""


class ClientClosedError(ClientError):
    """The client was closed."""


class OffsetOutOfRangeError(ClientError):
    """A fetch position is outside the log and auto.offset.reset is `none`."""

    def __init__(self, positions: dict[tuple[str, int], int]) -> None:
        self.positions = positions
        where = ", ".join(f"{t}-{p} at {o}" for (t, p), o in sorted(positions.items()))
        super().__init__(f"fetch position out of range and auto.offset.reset=none: {where}")


class NoOffsetForPartitionError(ClientError):
    """A partition has no position and auto.offset.reset is `none`."""
