"""ProduceAnswer (the successful Produce answer, encoded by fixed layouts) gives the generic
schema codec's bytes at every Produce version."""

from __future__ import annotations

import pytest

from epochlog.protocol import messages as m
from epochlog.protocol.api import ApiKey, decode_response, encode_response
from epochlog.protocol.codec import encode_into
from epochlog.protocol.produce_answer import ProduceAnswer

R = m.ProduceResponse

TOPICS = [
    ("t", [(0, 41, -1, 0)]),
    ("x" * 200, [(p, 10_000_000_000 + p, 1_700_000_000_000, 7) for p in range(130)]),
    ("", []),
]


def _generic(topics: list, throttle_ms: int) -> object:
    return R(
        responses=[
            R.TopicProduceResponse(
                name=name,
                partition_responses=[
                    R.PartitionProduceResponse(
                        index=index,
                        base_offset=base,
                        log_append_time_ms=append_time,
                        log_start_offset=start,
                    )
                    for index, base, append_time, start in partitions
                ],
            )
            for name, partitions in topics
        ],
        throttle_time_ms=throttle_ms,
    )


@pytest.mark.parametrize("version", range(3, 12))
@pytest.mark.parametrize("throttle_ms", [0, 250])
def test_produce_answer_bytes_are_the_generic_codecs(version: int, throttle_ms: int) -> None:
    answer = ProduceAnswer(TOPICS)
    answer.throttle_time_ms = throttle_ms
    fast = bytearray()
    answer.encode_body(version, fast)
    generic = bytearray()
    encode_into(_generic(TOPICS, throttle_ms), version, generic)
    assert bytes(fast) == bytes(generic)


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_a_framed_produce_answer_decodes_as_a_produce_response(version: int) -> None:
    frame = encode_response(ApiKey.PRODUCE, version, 77, ProduceAnswer(TOPICS[:2]))
    correlation_id, body = decode_response(ApiKey.PRODUCE, version, frame[4:])
    assert correlation_id == 77
    assert [t.name for t in body.responses] == ["t", "x" * 200]
    assert body.responses[1].partition_responses[129].base_offset == 10_000_000_129


def test_a_version_outside_3_to_11_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="ProduceResponse has no version 2"):
        ProduceAnswer(TOPICS).encode_body(2, bytearray())
