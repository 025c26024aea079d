"""The consumer protocol's Subscription and Assignment, byte for byte as Kafka's clients write them.

A consumer joining a group with protocol type "consumer" offers, for each assignor it knows, a
Subscription (the topics it wants, the partitions it owns, its generation and rack); the leader
answers each member with an Assignment. On the wire both are an int16 version followed by the
fields at that version (schemas in `messages/consumer_protocol.py`).

Written at version 3, the highest Kafka knows, as Kafka's Java client does
(`ConsumerProtocol.serializeSubscription` / `serializeAssignment`). Read as Kafka reads them: a
version above the highest known is read with the highest known layout ("new versions cannot
remove or reorder any of the existing fields"), bytes after the fields are ignored, a negative
version or bytes too short are a `DecodeError`. Owned and assigned partitions are grouped by topic
in the order given (the subscription sorts topics and partitions, as Java does).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from epochlog.protocol.codec import Message, decode_from, encode_into
from epochlog.protocol.errors import DecodeError
from epochlog.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

PROTOCOL_TYPE = "consumer"
HIGHEST_VERSION = 3
NO_GENERATION = -1

_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member asks for: topics, and (v1+) the partitions it owns, (v2+) the generation in
    which it owned them, (v3+) its rack."""

    topics: tuple[str, ...]
    owned_partitions: tuple[tuple[str, int], ...] = ()
    generation_id: int = NO_GENERATION
    rack_id: str | None = None
    user_data: bytes | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the leader gives a member."""

    partitions: tuple[tuple[str, int], ...]
    user_data: bytes | None = None


def _grouped(
    cls: type[Message], partitions: Iterable[tuple[str, int]], *, sort: bool
) -> list[Message]:
    items = sorted(partitions) if sort else list(partitions)
    groups: list[Message] = []
    for topic, partition in items:
        if not groups or groups[-1].topic != topic:
            groups.append(cls(topic=topic, partitions=[]))
        groups[-1].partitions.append(partition)
    return groups


def _flatten(groups: Iterable[Message]) -> tuple[tuple[str, int], ...]:
    return tuple((g.topic, p) for g in groups for p in g.partitions)


def _prefixed(message: Message, version: int) -> bytes:
    out = bytearray(_VERSION.pack(version))
    encode_into(message, version, out)
    return bytes(out)


def _read(cls: type[Message], data: bytes | bytearray | memoryview) -> tuple[Message, int]:
    name = cls.SCHEMA.name
    if len(data) < _VERSION.size:
        raise DecodeError(name, None, None, f"{len(data)} bytes, too short for a version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise DecodeError(name, version, None, "negative version")
    version = min(version, HIGHEST_VERSION)
    message, _ = decode_from(cls, data, version, _VERSION.size)
    return message, version


def encode_subscription(subscription: Subscription, version: int = HIGHEST_VERSION) -> bytes:
    data = ConsumerProtocolSubscription(
        topics=sorted(subscription.topics),
        user_data=subscription.user_data,
        owned_partitions=_grouped(
            ConsumerProtocolSubscription.TopicPartition, subscription.owned_partitions, sort=True
        ),
        generation_id=subscription.generation_id,
        rack_id=subscription.rack_id,
    )
    if version < 1:
        data.owned_partitions = []
    return _prefixed(data, version)


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    message, version = _read(ConsumerProtocolSubscription, data)
    return Subscription(
        topics=tuple(message.topics),
        owned_partitions=_flatten(message.owned_partitions) if version >= 1 else (),
        generation_id=message.generation_id if version >= 2 else NO_GENERATION,
        rack_id=(message.rack_id or None) if version >= 3 else None,
        user_data=None if message.user_data is None else bytes(message.user_data),
    )


def encode_assignment(assignment: Assignment, version: int = HIGHEST_VERSION) -> bytes:
    data = ConsumerProtocolAssignment(
        assigned_partitions=_grouped(
            ConsumerProtocolAssignment.TopicPartition, assignment.partitions, sort=False
        ),
        user_data=assignment.user_data,
    )
    return _prefixed(data, version)


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    message, _ = _read(ConsumerProtocolAssignment, data)
    return Assignment(
        partitions=_flatten(message.assigned_partitions),
        user_data=None if message.user_data is None else bytes(message.user_data),
    )
