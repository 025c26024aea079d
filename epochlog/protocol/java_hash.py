"""Java's hash arithmetic where Kafka's placement depends on it: String.hashCode, Utils.abs,
and the replica fetcher a partition goes to. Shared by the group coordinator (which
__consumer_offsets partition a group lives on) and the replica fetchers."""

from __future__ import annotations

_INT32 = 1 << 32
_INT32_MIN = -(1 << 31)


def to_int32(value: int) -> int:
    """`value` wrapped as Java's int arithmetic wraps it."""
    value &= _INT32 - 1
    return value - _INT32 if value >= 1 << 31 else value


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit overflow)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & (_INT32 - 1)
    return to_int32(h)


def java_utils_abs(value: int) -> int:
    """Kafka's Utils.abs: Math.abs, except Integer.MIN_VALUE maps to 0."""
    return 0 if value == _INT32_MIN else abs(value)


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """The replica fetcher of a partition among `num_fetchers` per source broker (Kafka's
    AbstractFetcherManager.getFetcherId: Utils.abs(31 * topic.hashCode + partition) % N)."""
    return java_utils_abs(to_int32(31 * java_string_hash(topic) + partition)) % num_fetchers
