"""Kafka's default partitioning: murmur2 of the key, sticky for records without one."""

from __future__ import annotations

import itertools

import pytest

from epochlog.client.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

# Kafka's UtilsTest.testMurmur2, plus vectors other Kafka clients check against the Java client.
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"1": -1993445489,
    b"12": 126087238,
    b"123": -267702483,
    b"1234": -1614185708,
    b"12345": -1188365604,
    b"kafka": -798503068,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_murmur2_matches_the_java_client(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_murmur2_of_empty_and_binary_keys_stays_a_signed_int32() -> None:
    for key in (b"", b"\x00", b"\xff" * 7, bytes(range(256))):
        h = murmur2(key)
        assert -(2**31) <= h < 2**31


def test_partition_is_to_positive_of_the_hash_modulo_the_count() -> None:
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF
    assert partition_for_key(b"21", 4) == (-973932308 & 0x7FFFFFFF) % 4
    for key, h in JAVA_VECTORS.items():
        assert partition_for_key(key, 7) == (h & 0x7FFFFFFF) % 7


def test_keyless_records_stick_to_one_partition_until_its_batch_closes() -> None:
    rng = itertools.cycle([0.1, 0.6, 0.3, 0.9]).__next__
    sp = StickyPartitioner(random=rng)
    first = sp.partition("t", [0, 1, 2, 3], 4)
    assert all(sp.partition("t", [0, 1, 2, 3], 4) == first for _ in range(10))
    sp.on_batch_closed("t", (first + 1) % 4, [0, 1, 2, 3], 4)  # another partition's batch
    assert sp.partition("t", [0, 1, 2, 3], 4) == first
    sp.on_batch_closed("t", first, [0, 1, 2, 3], 4)
    second = sp.partition("t", [0, 1, 2, 3], 4)
    assert second != first
    assert sp.partition("other", [0, 1], 2) in (0, 1)


def test_sticky_choice_is_among_partitions_with_a_leader() -> None:
    sp = StickyPartitioner()
    for _ in range(20):
        p = sp.partition("t", [2], 4)
        assert p == 2
        sp.on_batch_closed("t", p, [2], 4)
    sp2 = StickyPartitioner()
    assert sp2.partition("t", [], 3) in (0, 1, 2)  # none available: any partition


def test_a_sticky_partition_that_loses_its_leader_is_replaced() -> None:
    sp = StickyPartitioner(random=lambda: 0.0)
    assert sp.partition("t", [0, 1], 2) == 0
    assert sp.partition("t", [1], 2) == 1
