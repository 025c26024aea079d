"""The sender's wire pieces, without sockets: the Produce request it builds from drained
batches, and how an answer is split into one result per batch."""

from __future__ import annotations

from epochlog.client.errors import ClientError, KafkaError
from epochlog.client.metadata import TopicPartition
from epochlog.client.producer_batch import ProducerBatch
from epochlog.client.sender import BatchResult, batch_results, produce_request
from epochlog.protocol import messages as m
from epochlog.protocol.compression import Compression
from epochlog.protocol.errors import ErrorCode

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
R = m.ProduceResponse


def closed_batch(tp: TopicPartition) -> ProducerBatch:
    b = ProducerBatch(tp, Compression.NONE, 0.0)
    b.append(1, None, b"v", (), object())
    b.close()
    return b


def response(*partitions: tuple[str, int, int, int]) -> m.ProduceResponse:
    by_topic: dict[str, list[object]] = {}
    for topic, index, code, base in partitions:
        by_topic.setdefault(topic, []).append(
            R.PartitionProduceResponse(index=index, error_code=code, base_offset=base)
        )
    topics = [R.TopicProduceResponse(name=t, partition_responses=p) for t, p in by_topic.items()]
    return R(responses=topics)


def test_a_produce_request_groups_batches_by_topic() -> None:
    batches = [closed_batch(A0), closed_batch(B0), closed_batch(A1)]
    request = produce_request(batches, acks=-1, timeout_ms=3000, transactional_id="tx")
    assert (request.acks, request.timeout_ms, request.transactional_id) == (-1, 3000, "tx")
    layout = {t.name: [p.index for p in t.partition_data] for t in request.topic_data}
    assert layout == {"a": [0, 1], "b": [0]}
    assert request.topic_data[0].partition_data[0].records == batches[0].data


def test_each_batch_gets_its_partitions_result_in_the_answer() -> None:
    batches = [closed_batch(A0), closed_batch(A1)]
    answer = response(("a", 1, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1), ("a", 0, 0, 42))
    ok, moved = batch_results(batches, answer, node=3)
    assert (ok.error, ok.base_offset, ok.exc) == (ErrorCode.NONE, 42, None)
    assert moved.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert isinstance(moved.exc, KafkaError) and "a-1" in str(moved.exc)


def test_a_partition_missing_from_the_answer_is_an_error_naming_the_node() -> None:
    (missing,) = batch_results([closed_batch(B0)], response(("a", 0, 0, 1)), node=3)
    assert missing.error is ErrorCode.UNKNOWN_SERVER_ERROR
    assert isinstance(missing.exc, ClientError) and "node 3" in str(missing.exc)


def test_with_acks_0_every_batch_succeeds_with_an_unknown_offset() -> None:
    results = batch_results([closed_batch(A0), closed_batch(B0)], None, node=1)
    assert results == [BatchResult(ErrorCode.NONE, -1, -1, None)] * 2
