"""Choosing a partition for a record, as Kafka's Java producer does.

Keyed records: `toPositive(murmur2(key)) % numPartitions`, with the Java client's `Utils.murmur2`
(seed 0x9747b28c, little-endian 4-byte blocks, 32-bit signed arithmetic). librdkafka's
`murmur2_random` partitioner computes the same thing, so a key lands on the same partition
whichever of the three clients wrote it. The hash runs over all partitions, available or not.

Records without a key are sticky (KIP-480): every such record for a topic goes to one partition,
chosen at random among the partitions that have a leader, until the batch for that partition is
closed (full, or drained to be sent); then the topic switches to a different random partition.
The accumulator reports closed batches through `on_batch_closed`. This keeps batches large at low
rates without skewing the load over time.
"""

from __future__ import annotations

import random as _random
import struct
from collections.abc import Callable, Sequence

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: the 32-bit MurmurHash2 of `data`, as a signed int like Java's."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    blocks = length // 4
    if blocks:
        for k in struct.unpack_from(f"<{blocks}I", data, 0):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's `Utils.toPositive`: clear the sign bit (not abs())."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for `key`."""
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """The sticky choice for records without a key; see the module docstring."""

    def __init__(self, random: Callable[[], float] = _random.random) -> None:
        self._random = random
        self._current: dict[str, int] = {}

    def partition(self, topic: str, available: Sequence[int], num_partitions: int) -> int:
        """The partition for the next keyless record of `topic`."""
        current = self._current.get(topic)
        if (
            current is not None
            and current < num_partitions
            and (not available or current in available)
        ):
            return current
        return self._choose(topic, current, available, num_partitions)

    def on_batch_closed(
        self, topic: str, partition: int, available: Sequence[int], num_partitions: int
    ) -> None:
        """The batch of `topic`-`partition` is full or being sent: move on if we were on it."""
        if self._current.get(topic) == partition:
            self._choose(topic, partition, available, num_partitions)

    def _choose(
        self, topic: str, previous: int | None, available: Sequence[int], num_partitions: int
    ) -> int:
        candidates = list(available) if available else list(range(num_partitions))
        if len(candidates) > 1 and previous in candidates:
            candidates.remove(previous)
        choice = candidates[int(self._random() * len(candidates)) % len(candidates)]
        self._current[topic] = choice
        return choice
