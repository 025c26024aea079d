"""Every API's error response encodes at every served version, with and without the request."""

from __future__ import annotations

import uuid

import pytest

from epochlog.broker.handlers import HANDLERS
from epochlog.broker.handlers.errors import error_response
from epochlog.broker.harness import leader_and_isr_request
from epochlog.protocol import messages as m
from epochlog.protocol.api import APIS, ApiKey, decode_response, encode_response
from epochlog.protocol.errors import ErrorCode

CASES = [
    (key, v)
    for key, api in sorted(APIS.items())
    for v in range(api.min_version, api.max_version + 1)
]


def sample_request(api_key: int):
    """A request body naming a topic or partition where the API has them."""
    if api_key == ApiKey.PRODUCE:
        P = m.ProduceRequest
        return P(
            topic_data=[
                P.TopicProduceData(name="t", partition_data=[P.PartitionProduceData(index=2)])
            ]
        )
    if api_key == ApiKey.FETCH:
        F = m.FetchRequest
        return F(topics=[F.FetchTopic(topic="t", partitions=[F.FetchPartition(partition=2)])])
    if api_key == ApiKey.LEADER_AND_ISR:
        return leader_and_isr_request(
            topic="t",
            topic_id=uuid.uuid4(),
            assignment={2: [1]},
            leader_epoch=0,
            controller_id=1,
            controller_epoch=1,
        )
    if api_key == ApiKey.STOP_REPLICA:
        S = m.StopReplicaRequest
        return S(
            topics=[S.StopReplicaTopicV1(name="t", partition_indexes=[2])],
            topic_states=[
                S.StopReplicaTopicState(
                    topic_name="t",
                    partition_states=[S.StopReplicaPartitionState(partition_index=2)],
                )
            ],
        )
    if api_key == ApiKey.CREATE_TOPICS:
        return m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(name="t")])
    if api_key == ApiKey.DELETE_TOPICS:
        D = m.DeleteTopicsRequest
        return D(topic_names=["t"], topics=[D.DeleteTopicState(name="t")])
    if api_key == ApiKey.LIST_OFFSETS:
        L = m.ListOffsetsRequest
        return L(
            topics=[
                L.ListOffsetsTopic(name="t", partitions=[L.ListOffsetsPartition(partition_index=2)])
            ]
        )
    if api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
        O = m.OffsetForLeaderEpochRequest  # noqa: E741
        return O(
            topics=[
                O.OffsetForLeaderTopic(
                    topic="t", partitions=[O.OffsetForLeaderPartition(partition=2)]
                )
            ]
        )
    if api_key == ApiKey.METADATA:
        return m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="t")])
    return APIS[api_key].request()


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_error_response_encodes_and_decodes(api_key, version):
    for body in (None, sample_request(api_key)):
        response = error_response(api_key, version, body, ErrorCode.UNKNOWN_SERVER_ERROR, "boom")
        frame = encode_response(api_key, version, 9, response)
        correlation, decoded = decode_response(api_key, version, frame[4:])
        assert correlation == 9
        assert decoded == APIS[api_key].response.decode(response.encode(version), version)


def test_every_api_has_a_handler():
    assert set(HANDLERS) == set(APIS)
