"""Consumers' subscriptions and assignments, read and written as Kafka's ConsumerProtocol does.

A member of a group with protocol type "consumer" sends a `ConsumerProtocolSubscription` as its
JoinGroup metadata and gets a `ConsumerProtocolAssignment` in its SyncGroup answer; the broker
hands both back in DescribeGroups (MemberMetadata, MemberAssignment). Each is an int16 version
followed by that version's fields (schemas in `messages/consumer_protocol.py`).

Reading follows Kafka's `ConsumerProtocol.deserializeSubscription/Assignment`: a negative version
is an error; a version above the highest known is read with the highest known layout (new
versions may only append fields, so the known prefix is still right); bytes after the fields
are ignored. An empty assignment (a member still between JoinGroup and SyncGroup, as
DescribeGroups shows it) is no partitions, as Kafka's admin reads it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from epochlog.protocol.codec import decode_from, encode_into
from epochlog.protocol.errors import DecodeError
from epochlog.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

CONSUMER_PROTOCOL_TYPE = "consumer"
_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class Assignment:
    """The partitions assigned to one consumer, by topic (partitions sorted), and user data."""

    partitions: dict[str, tuple[int, ...]]
    user_data: bytes | None = None

    def topic_partitions(self) -> list[tuple[str, int]]:
        return [(t, p) for t in sorted(self.partitions) for p in self.partitions[t]]


@dataclass(frozen=True, slots=True)
class Subscription:
    """A consumer's topics; the partitions it owns (v1+), its generation (v2+), rack (v3+)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: dict[str, tuple[int, ...]] | None = None
    generation_id: int = -1
    rack_id: str | None = None


def _read_version(what: str, data: bytes | bytearray | memoryview) -> int:
    if len(data) < _VERSION.size:
        raise DecodeError(what, None, None, f"{len(data)} bytes, too short for a version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise DecodeError(what, version, None, "negative version")
    return version


def _decode(cls: type, data: bytes | bytearray | memoryview) -> tuple[int, object]:
    """(the version written, the message read at the highest layout we know for it)."""
    schema = cls.SCHEMA  # type: ignore[attr-defined]
    written = _read_version(schema.name, data)
    version = min(written, max(schema.valid))
    message, _ = decode_from(cls, data, version, _VERSION.size)
    return written, message


def _by_topic(entries: Iterable[object]) -> dict[str, tuple[int, ...]]:
    out: dict[str, set[int]] = {}
    for entry in entries:
        out.setdefault(entry.topic, set()).update(entry.partitions)  # type: ignore[attr-defined]
    return {t: tuple(sorted(ps)) for t, ps in out.items()}


def decode_assignment(data: bytes | bytearray | memoryview | None) -> Assignment:
    """A member's assignment as DescribeGroups or SyncGroup carries it; empty bytes (or None)
    is no assignment. Raises DecodeError for bytes that are not a consumer assignment."""
    if not data:
        return Assignment({})
    _, message = _decode(ConsumerProtocolAssignment, data)
    return Assignment(
        _by_topic(message.assigned_partitions),  # type: ignore[attr-defined]
        message.user_data,  # type: ignore[attr-defined]
    )


def encode_assignment(
    partitions: Mapping[str, Iterable[int]], user_data: bytes | None = None, version: int = 3
) -> bytes:
    """An assignment's bytes; version 3 as Kafka's Java client writes it (every version has one
    layout)."""
    message = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=sorted(ps))
            for t, ps in sorted(partitions.items())
        ],
        user_data=user_data,
    )
    out = bytearray(_VERSION.pack(version))
    encode_into(message, version, out)
    return bytes(out)


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """A member's JoinGroup metadata under the consumer protocol."""
    written, message = _decode(ConsumerProtocolSubscription, data)
    owned = message.owned_partitions if written >= 1 else None  # type: ignore[attr-defined]
    return Subscription(
        tuple(message.topics),  # type: ignore[attr-defined]
        message.user_data,  # type: ignore[attr-defined]
        None if owned is None else _by_topic(owned),
        message.generation_id if written >= 2 else -1,  # type: ignore[attr-defined]
        message.rack_id if written >= 3 else None,  # type: ignore[attr-defined]
    )


def encode_subscription(subscription: Subscription, version: int = 3) -> bytes:
    """A subscription's bytes at `version` (fields the version lacks must be at their default)."""
    owned = subscription.owned_partitions or {}
    message = ConsumerProtocolSubscription(
        topics=list(subscription.topics),
        user_data=subscription.user_data,
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=list(ps))
            for t, ps in sorted(owned.items())
        ],
        generation_id=subscription.generation_id,
        rack_id=subscription.rack_id,
    )
    out = bytearray(_VERSION.pack(version))
    encode_into(message, version, out)
    return bytes(out)
